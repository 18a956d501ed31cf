//! Stored responses, always read and written under the tenant that owns them: another tenant's id finds
//! nothing. A row past its `expires_at` is gone to every reader, and deleted by the sweep.

use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

/// A stored response, as reads need it.
#[derive(Debug, Clone)]
pub struct Stored {
    pub id: String,
    pub status: String,
    pub background: bool,
    pub input_items: Value,
    pub conversation: Value,
    pub response: String,
}

/// One response to keep (or to update, for the same id).
#[derive(Debug, Clone)]
pub struct NewStored<'a> {
    pub id: &'a str,
    pub tenant: Uuid,
    pub previous_response_id: Option<&'a str>,
    pub status: &'a str,
    pub background: bool,
    pub input_items: &'a Value,
    pub conversation: &'a Value,
    pub response: &'a str,
    pub retention_hours: i32,
}

/// Writes a response (again, for an id already kept: its status, conversation and answer change, unless
/// it was cancelled meanwhile: a cancelled response stays cancelled).
///
/// # Errors
/// Database errors.
pub async fn put(db: &PgPool, row: &NewStored<'_>) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO stored_responses (id, tenant_id, previous_response_id, status, background, input_items, conversation, response, bytes, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8,
                 octet_length($6::jsonb::text) + octet_length($7::jsonb::text) + octet_length($8),
                 now() + make_interval(hours => $9))
         ON CONFLICT (id) DO UPDATE
             SET status = EXCLUDED.status, conversation = EXCLUDED.conversation, response = EXCLUDED.response,
                 bytes = EXCLUDED.bytes
             WHERE stored_responses.tenant_id = EXCLUDED.tenant_id AND stored_responses.status <> 'cancelled'",
        row.id,
        row.tenant,
        row.previous_response_id,
        row.status,
        row.background,
        row.input_items,
        row.conversation,
        row.response,
        row.retention_hours,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// The tenant's response `id`, unless expired or another tenant's.
///
/// # Errors
/// Database errors.
pub async fn get(db: &PgPool, tenant: Uuid, id: &str) -> Result<Option<Stored>, sqlx::Error> {
    sqlx::query_as!(
        Stored,
        "SELECT id, status, background, input_items, conversation, response FROM stored_responses
         WHERE id = $1 AND tenant_id = $2 AND expires_at > now()",
        id,
        tenant,
    )
    .fetch_optional(db)
    .await
}

/// Moves the tenant's response `id` from one of the statuses `from` to `status`, with its answer as it
/// now stands; whether it was in one of them.
///
/// # Errors
/// Database errors.
pub async fn advance(db: &PgPool, tenant: Uuid, id: &str, from: &[&str], status: &str, response: &str) -> Result<bool, sqlx::Error> {
    let from: Vec<String> = from.iter().map(|s| (*s).to_owned()).collect();
    let done = sqlx::query!(
        "UPDATE stored_responses SET status = $3, response = $4, bytes = bytes - octet_length(response) + octet_length($4)
         WHERE id = $1 AND tenant_id = $2 AND status = ANY($5)",
        id,
        tenant,
        status,
        response,
        &from,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() > 0)
}

/// The status of the tenant's response `id`, if it is kept.
///
/// # Errors
/// Database errors.
pub async fn status(db: &PgPool, tenant: Uuid, id: &str) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar!("SELECT status FROM stored_responses WHERE id = $1 AND tenant_id = $2", id, tenant).fetch_optional(db).await
}

/// Deletes the tenant's response `id`; whether there was one.
///
/// # Errors
/// Database errors.
pub async fn delete(db: &PgPool, tenant: Uuid, id: &str) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!("DELETE FROM stored_responses WHERE id = $1 AND tenant_id = $2 AND expires_at > now()", id, tenant)
        .execute(db)
        .await?;
    Ok(done.rows_affected() > 0)
}

/// The tenant's storage terms: retention in hours and the most bytes its responses may take, each its
/// own or `defaults`.
///
/// # Errors
/// Database errors.
pub async fn terms(db: &PgPool, tenant: Uuid, defaults: (i32, i64)) -> Result<(i32, i64), sqlx::Error> {
    let own = sqlx::query!("SELECT retention_hours, max_stored_bytes FROM response_storage_terms WHERE tenant_id = $1", tenant)
        .fetch_optional(db)
        .await?;
    Ok(own.map_or(defaults, |t| (t.retention_hours.unwrap_or(defaults.0), t.max_stored_bytes.unwrap_or(defaults.1))))
}

/// What the tenant's live responses take, in bytes.
///
/// # Errors
/// Database errors.
pub async fn stored_bytes(db: &PgPool, tenant: Uuid) -> Result<i64, sqlx::Error> {
    let bytes = sqlx::query_scalar!(
        r#"SELECT COALESCE(sum(bytes), 0)::int8 AS "bytes!" FROM stored_responses WHERE tenant_id = $1 AND expires_at > now()"#,
        tenant
    )
    .fetch_one(db)
    .await?;
    Ok(bytes)
}

/// Deletes the responses past their retention; how many.
///
/// # Errors
/// Database errors.
pub async fn expire(db: &PgPool) -> Result<u64, sqlx::Error> {
    let done = sqlx::query!("DELETE FROM stored_responses WHERE expires_at <= now()").execute(db).await?;
    Ok(done.rows_affected())
}
