//! API key rows.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct KeyRow {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub secret_hash: Vec<u8>,
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// # Errors
/// Database errors.
pub async fn find(db: &PgPool, public_id: &str) -> Result<Option<KeyRow>, sqlx::Error> {
    sqlx::query_as("SELECT id, tenant_id, secret_hash, expires_at, revoked_at FROM api_keys WHERE public_id = $1")
        .bind(public_id)
        .fetch_optional(db)
        .await
}

/// # Errors
/// Database errors.
pub async fn insert(
    db: &PgPool,
    tenant_id: Uuid,
    public_id: &str,
    secret_hash: &[u8; 32],
    name: &str,
    expires_at: Option<DateTime<Utc>>,
) -> Result<Uuid, sqlx::Error> {
    let id = Uuid::now_v7();
    sqlx::query("INSERT INTO api_keys (id, tenant_id, public_id, secret_hash, name, expires_at) VALUES ($1, $2, $3, $4, $5, $6)")
        .bind(id)
        .bind(tenant_id)
        .bind(public_id)
        .bind(&secret_hash[..])
        .bind(name)
        .bind(expires_at)
        .execute(db)
        .await?;
    Ok(id)
}

/// # Errors
/// Database errors.
pub async fn revoke(db: &PgPool, key_id: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL")
        .bind(key_id)
        .execute(db)
        .await?;
    Ok(())
}
