//! SQL, and nothing else. Every statement is a literal that sqlx's macros (`query!`, `query_as!`,
//! `query_scalar!`) check at compile time against the migrated schema, offline from the committed
//! `.sqlx/` (`scripts/sqlx-prepare.sh` regenerates it); every value is bound.

pub mod admin_tokens;
pub mod audit;
pub mod batches;
pub mod costs;
pub mod credits;
pub mod files;
pub mod idempotency;
pub mod keys;
pub mod leases;
pub mod models;
pub mod notify;
pub mod outcomes;
pub mod replicas;
pub mod reports;
pub mod responses;
pub mod tenants;
pub mod usage;

use std::time::Duration;

use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;

/// The migrations in `migrations/`, embedded at build time.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

/// # Errors
/// When the database cannot be reached.
pub async fn connect(args: &crate::config::DbArgs) -> Result<PgPool, sqlx::Error> {
    PgPoolOptions::new()
        .max_connections(args.db_max_connections)
        // Fail fast when Postgres is down: the gateway answers 503 rather than hanging.
        .acquire_timeout(Duration::from_secs(2))
        .connect(args.database_url.expose())
        .await
}
