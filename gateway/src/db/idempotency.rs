//! `Idempotency-Key` rows: claimed when a request starts, completed with its stored answer.

use sqlx::PgPool;
use uuid::Uuid;

/// What a key already holds when a request tries to claim it.
#[derive(Debug, Clone)]
pub struct Existing {
    pub request_hash: Vec<u8>,
    pub state: String,
    pub http_status: Option<i32>,
    pub content_type: Option<String>,
    pub request_id: Option<String>,
    pub body: Option<Vec<u8>>,
}

/// Claims the key for a new run. A row older than `ttl_s` (or left `running` longer than `stale_s` by a
/// gateway that died) is taken over. `None` when claimed; otherwise the live row.
///
/// # Errors
/// Database errors.
pub async fn claim(
    db: &PgPool,
    tenant: Uuid,
    key: &str,
    request_hash: &[u8],
    ttl_s: i64,
    stale_s: i64,
) -> Result<Option<Existing>, sqlx::Error> {
    let claimed: Option<Uuid> = sqlx::query_scalar!(
        "INSERT INTO idempotency_keys (tenant_id, key, request_hash, state) VALUES ($1, $2, $3, 'running')
         ON CONFLICT (tenant_id, key) DO UPDATE
             SET request_hash = EXCLUDED.request_hash, state = 'running', http_status = NULL, content_type = NULL,
                 request_id = NULL, body = NULL, created_at = now()
             WHERE idempotency_keys.created_at < now() - make_interval(secs => $4)
                OR (idempotency_keys.state = 'running' AND idempotency_keys.created_at < now() - make_interval(secs => $5))
         RETURNING tenant_id",
        tenant,
        key,
        request_hash,
        ttl_s as f64,
        stale_s as f64,
    )
    .fetch_optional(db)
    .await?;
    if claimed.is_some() {
        return Ok(None);
    }
    sqlx::query_as!(
        Existing,
        "SELECT request_hash, state, http_status, content_type, request_id, body FROM idempotency_keys
         WHERE tenant_id = $1 AND key = $2",
        tenant,
        key,
    )
    .fetch_optional(db)
    .await
}

/// What a tenant keeps under its keys: how many, and the bytes of their stored answers.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    pub keys: i64,
    pub bytes: i64,
}

/// # Errors
/// Database errors.
pub async fn usage(db: &PgPool, tenant: Uuid) -> Result<Usage, sqlx::Error> {
    let row = sqlx::query_as!(Usage, "SELECT keys, bytes FROM idempotency_usage WHERE tenant_id = $1", tenant).fetch_optional(db).await?;
    Ok(row.unwrap_or_default())
}

/// Stores the answer of the run that holds the key.
///
/// # Errors
/// Database errors.
pub async fn complete(
    db: &PgPool,
    tenant: Uuid,
    key: &str,
    http_status: u16,
    content_type: &str,
    request_id: &str,
    body: &[u8],
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE idempotency_keys SET state = 'done', http_status = $3, content_type = $4, request_id = $5, body = $6
         WHERE tenant_id = $1 AND key = $2 AND state = 'running'",
        tenant,
        key,
        i32::from(http_status),
        content_type,
        request_id,
        body,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Gives the key up (the run failed in a way a retry may fix), so the next request with it runs.
///
/// # Errors
/// Database errors.
pub async fn release(db: &PgPool, tenant: Uuid, key: &str) -> Result<(), sqlx::Error> {
    sqlx::query!("DELETE FROM idempotency_keys WHERE tenant_id = $1 AND key = $2 AND state = 'running'", tenant, key).execute(db).await?;
    Ok(())
}

/// Deletes keys older than `ttl_s`.
///
/// # Errors
/// Database errors.
pub async fn expire(db: &PgPool, ttl_s: i64) -> Result<u64, sqlx::Error> {
    let done =
        sqlx::query!("DELETE FROM idempotency_keys WHERE created_at < now() - make_interval(secs => $1)", ttl_s as f64).execute(db).await?;
    Ok(done.rows_affected())
}
