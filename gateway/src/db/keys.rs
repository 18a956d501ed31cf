//! API key rows. The secret's hash is read only to authenticate and is never serialized.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

#[derive(Debug, Clone)]
pub struct KeyRow {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub secret_hash: Vec<u8>,
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub rpm_limit: Option<i32>,
    pub tpm_limit: Option<i32>,
    /// The tenant's caps, read with the key (a change to them evicts the tenant's keys from the cache).
    pub tenant_rpm_limit: Option<i32>,
    pub tenant_tpm_limit: Option<i32>,
    pub monthly_spend_cap: Option<Decimal>,
    /// The key's tenant's cap on requests in flight.
    pub tenant_max_concurrent: i32,
}

/// The key `id`'s row, as [`find`] reads it.
///
/// # Errors
/// Database errors.
pub async fn find_by_id(db: &PgPool, id: Uuid) -> Result<Option<KeyRow>, sqlx::Error> {
    sqlx::query_as!(
        KeyRow,
        r#"SELECT k.id, k.tenant_id, k.secret_hash, k.expires_at, k.revoked_at, k.rpm_limit, k.tpm_limit,
                  t.rpm_limit AS tenant_rpm_limit, t.tpm_limit AS tenant_tpm_limit, t.monthly_spend_cap,
                  t.max_concurrent_requests AS "tenant_max_concurrent!"
           FROM api_keys k JOIN tenants t ON t.id = k.tenant_id WHERE k.id = $1"#,
        id,
    )
    .fetch_optional(db)
    .await
}

/// The key with what authentication needs of its tenant.
///
/// # Errors
/// Database errors.
pub async fn find(db: &PgPool, public_id: &str) -> Result<Option<KeyRow>, sqlx::Error> {
    sqlx::query_as!(
        KeyRow,
        r#"SELECT k.id, k.tenant_id, k.secret_hash, k.expires_at, k.revoked_at, k.rpm_limit, k.tpm_limit,
                  t.rpm_limit AS tenant_rpm_limit, t.tpm_limit AS tenant_tpm_limit, t.monthly_spend_cap,
                  t.max_concurrent_requests AS "tenant_max_concurrent!"
           FROM api_keys k JOIN tenants t ON t.id = k.tenant_id WHERE k.public_id = $1"#,
        public_id,
    )
    .fetch_optional(db)
    .await
}

// Each statement below that returns a `KeyInfo` names its columns itself: the macros need the whole
// statement as one literal. (Not in the doc comment, which is the API document's description.)
/// A key as admins see it: everything but the secret's hash.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct KeyInfo {
    pub id: Uuid,
    pub tenant_id: Uuid,
    /// The `rk-<public_id>-…` prefix, enough to recognise a key without revealing it.
    pub public_id: String,
    pub name: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub rpm_limit: Option<i32>,
    pub tpm_limit: Option<i32>,
    /// The key it was created with (a customer's console session), whose expiry and limits bound it.
    pub parent_key_id: Option<Uuid>,
}

/// # Errors
/// Database errors.
pub async fn list(db: &PgPool, tenant_id: Uuid) -> Result<Vec<KeyInfo>, sqlx::Error> {
    sqlx::query_as!(
        KeyInfo,
        "SELECT id, tenant_id, public_id, name, created_at, expires_at, revoked_at, rpm_limit, tpm_limit, parent_key_id
         FROM api_keys WHERE tenant_id = $1 ORDER BY created_at",
        tenant_id,
    )
    .fetch_all(db)
    .await
}

/// # Errors
/// Database errors.
pub async fn info(tx: &mut sqlx::PgConnection, key_id: Uuid) -> Result<Option<KeyInfo>, sqlx::Error> {
    sqlx::query_as!(
        KeyInfo,
        "SELECT id, tenant_id, public_id, name, created_at, expires_at, revoked_at, rpm_limit, tpm_limit, parent_key_id
         FROM api_keys WHERE id = $1 FOR UPDATE",
        key_id,
    )
    .fetch_optional(tx)
    .await
}

/// How many keys the tenant has, revoked ones included.
///
/// # Errors
/// Database errors.
pub async fn count(tx: &mut sqlx::PgConnection, tenant_id: Uuid) -> Result<i64, sqlx::Error> {
    Ok(sqlx::query_scalar!("SELECT count(*) FROM api_keys WHERE tenant_id = $1", tenant_id).fetch_one(tx).await?.unwrap_or(0))
}

/// What is stored for a new key.
#[derive(Debug, Clone, Default)]
pub struct NewKey<'a> {
    pub name: &'a str,
    pub expires_at: Option<DateTime<Utc>>,
    pub rpm_limit: Option<i32>,
    pub tpm_limit: Option<i32>,
    pub parent_key_id: Option<Uuid>,
}

/// # Errors
/// Database errors.
pub async fn insert(
    tx: &mut sqlx::PgConnection,
    tenant_id: Uuid,
    public_id: &str,
    secret_hash: &[u8; 32],
    key: &NewKey<'_>,
) -> Result<KeyInfo, sqlx::Error> {
    sqlx::query_as!(
        KeyInfo,
        "INSERT INTO api_keys (id, tenant_id, public_id, secret_hash, name, expires_at, rpm_limit, tpm_limit, parent_key_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
         RETURNING id, tenant_id, public_id, name, created_at, expires_at, revoked_at, rpm_limit, tpm_limit, parent_key_id",
        Uuid::now_v7(),
        tenant_id,
        public_id,
        &secret_hash[..],
        key.name,
        key.expires_at,
        key.rpm_limit,
        key.tpm_limit,
        key.parent_key_id,
    )
    .fetch_one(tx)
    .await
}

/// Sets a key's expiry and limits (`None` leaves a field alone; use [`revoke`] to revoke).
///
/// # Errors
/// Database errors.
pub async fn update(
    tx: &mut sqlx::PgConnection,
    key_id: Uuid,
    expires_at: Option<Option<DateTime<Utc>>>,
    rpm_limit: Option<Option<i32>>,
    tpm_limit: Option<Option<i32>>,
) -> Result<Option<KeyInfo>, sqlx::Error> {
    sqlx::query_as!(
        KeyInfo,
        "UPDATE api_keys SET expires_at = CASE WHEN $2 THEN $3 ELSE expires_at END,
             rpm_limit = CASE WHEN $4 THEN $5 ELSE rpm_limit END, tpm_limit = CASE WHEN $6 THEN $7 ELSE tpm_limit END
         WHERE id = $1
         RETURNING id, tenant_id, public_id, name, created_at, expires_at, revoked_at, rpm_limit, tpm_limit, parent_key_id",
        key_id,
        expires_at.is_some(),
        expires_at.flatten(),
        rpm_limit.is_some(),
        rpm_limit.flatten(),
        tpm_limit.is_some(),
        tpm_limit.flatten(),
    )
    .fetch_optional(tx)
    .await
}

/// Revokes a key (idempotent: the first revocation time is kept).
///
/// # Errors
/// Database errors.
pub async fn revoke(tx: &mut sqlx::PgConnection, key_id: Uuid) -> Result<Option<KeyInfo>, sqlx::Error> {
    sqlx::query_as!(
        KeyInfo,
        "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1
         RETURNING id, tenant_id, public_id, name, created_at, expires_at, revoked_at, rpm_limit, tpm_limit, parent_key_id",
        key_id,
    )
    .fetch_optional(tx)
    .await
}

/// The keys minted from `key_id`, however deep (the key itself excluded), not revoked yet, locked for
/// their revocation.
///
/// # Errors
/// Database errors.
pub async fn minted_from(tx: &mut sqlx::PgConnection, key_id: Uuid) -> Result<Vec<KeyInfo>, sqlx::Error> {
    sqlx::query_as!(
        KeyInfo,
        r#"WITH RECURSIVE minted (id) AS (
               SELECT id FROM api_keys WHERE parent_key_id = $1
               UNION SELECT k.id FROM api_keys k JOIN minted m ON k.parent_key_id = m.id)
           SELECT id, tenant_id, public_id, name, created_at, expires_at, revoked_at, rpm_limit, tpm_limit, parent_key_id
           FROM api_keys WHERE id IN (SELECT id FROM minted) AND revoked_at IS NULL ORDER BY created_at FOR UPDATE"#,
        key_id,
    )
    .fetch_all(tx)
    .await
}

/// The public ids of a tenant's keys, to tell every replica's cache that they changed.
///
/// # Errors
/// Database errors.
pub async fn public_ids(tx: &mut sqlx::PgConnection, tenant_id: Uuid) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar!("SELECT public_id FROM api_keys WHERE tenant_id = $1", tenant_id).fetch_all(tx).await
}
