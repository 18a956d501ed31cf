//! Changes to the books and the catalog: tenants, API keys, credit grants, model access, catalog models.
//!
//! Each operation validates its input, runs in one transaction and appends its audit row in that same
//! transaction, so a change and its record exist together or not at all. The admin API (`crate::admin`)
//! and the command line (`main.rs`) are thin callers: they decide who may act, then call one of these;
//! neither opens a transaction or writes an audit row itself.

pub mod access;
pub mod admin_tokens;
pub mod catalog;
pub mod credits;
mod error;
pub mod keys;
pub mod tenants;

use serde::Serialize;
use serde_json::Value;

use crate::db::audit::{self, Change};

pub use error::OpError;

/// Who makes a change, as the audit log names them: an admin token's subject, or [`Actor::CLI`].
#[derive(Debug, Clone, Copy)]
pub struct Actor<'a>(pub &'a str);

impl Actor<'static> {
    /// The command line, run by whoever holds the database's credentials on a host.
    pub const CLI: Self = Actor("cli");
}

/// One audit row, in the change's transaction.
async fn audit(
    tx: &mut sqlx::PgConnection,
    actor: Actor<'_>,
    action: &str,
    target: (&str, String),
    before: Option<Value>,
    after: Option<Value>,
) -> Result<(), OpError> {
    let (target_type, target_id) = target;
    audit::append(tx, Change { actor: actor.0, action, target_type, target_id, before, after }).await?;
    Ok(())
}

/// A row as the audit log keeps it.
fn snapshot<T: Serialize>(row: &T) -> Option<Value> {
    serde_json::to_value(row).ok()
}
