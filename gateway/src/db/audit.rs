//! The append-only audit log of admin changes (the database refuses updates and deletes).

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use sqlx::PgPool;

/// One admin change; `before` and `after` are snapshots of the target (null for a creation).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct AuditEntry {
    pub id: i64,
    pub at: DateTime<Utc>,
    pub actor: String,
    pub action: String,
    pub target_type: String,
    pub target_id: String,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

/// One change, in the transaction that makes it: the entry exists exactly when the change does.
#[derive(Debug, Clone)]
pub struct Change<'a> {
    pub actor: &'a str,
    pub action: &'a str,
    pub target_type: &'a str,
    pub target_id: String,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

/// # Errors
/// Database errors.
pub async fn append(tx: &mut sqlx::PgConnection, change: Change<'_>) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO audit_log (actor, action, target_type, target_id, before, after) VALUES ($1, $2, $3, $4, $5, $6)",
        change.actor,
        change.action,
        change.target_type,
        change.target_id,
        change.before,
        change.after,
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// Entries after `after_id`, oldest first, optionally for one target.
///
/// # Errors
/// Database errors.
pub async fn list(
    db: &PgPool,
    target_type: Option<&str>,
    target_id: Option<&str>,
    after_id: i64,
    limit: i64,
) -> Result<Vec<AuditEntry>, sqlx::Error> {
    sqlx::query_as!(
        AuditEntry,
        "SELECT id, at, actor, action, target_type, target_id, before, after FROM audit_log
         WHERE ($1::text IS NULL OR target_type = $1) AND ($2::text IS NULL OR target_id = $2) AND id > $3
         ORDER BY id LIMIT $4",
        target_type,
        target_id,
        after_id,
        limit,
    )
    .fetch_all(db)
    .await
}
