//! Revoked staff tokens (`revoked_admin_tokens`), by `jti`.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;

/// A revocation as the admin API shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Revocation {
    pub jti: String,
    pub revoked_at: DateTime<Utc>,
    /// When the row is forgotten: no token with this `jti` can be accepted after it anyway.
    pub kept_until: DateTime<Utc>,
    pub actor: String,
}

/// Records a revocation; revoking again keeps the first one. `None` when it was already there.
///
/// # Errors
/// Database errors.
pub async fn insert(
    tx: &mut sqlx::PgConnection,
    jti: &str,
    kept_until: DateTime<Utc>,
    actor: &str,
) -> Result<Option<Revocation>, sqlx::Error> {
    sqlx::query_as!(
        Revocation,
        "INSERT INTO revoked_admin_tokens (jti, kept_until, actor) VALUES ($1, $2, $3) ON CONFLICT (jti) DO NOTHING
         RETURNING jti, revoked_at, kept_until, actor",
        jti,
        kept_until,
        actor,
    )
    .fetch_optional(tx)
    .await
}

/// # Errors
/// Database errors.
pub async fn find(tx: &mut sqlx::PgConnection, jti: &str) -> Result<Option<Revocation>, sqlx::Error> {
    sqlx::query_as!(Revocation, "SELECT jti, revoked_at, kept_until, actor FROM revoked_admin_tokens WHERE jti = $1", jti)
        .fetch_optional(tx)
        .await
}

/// The `jti`s revoked and still kept.
///
/// # Errors
/// Database errors.
pub async fn live(db: &PgPool) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar!("SELECT jti FROM revoked_admin_tokens WHERE kept_until > now()").fetch_all(db).await
}

/// Forgets revocations past their `kept_until`.
///
/// # Errors
/// Database errors.
pub async fn expire(db: &PgPool) -> Result<u64, sqlx::Error> {
    Ok(sqlx::query!("DELETE FROM revoked_admin_tokens WHERE kept_until <= now()").execute(db).await?.rows_affected())
}
