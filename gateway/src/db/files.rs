//! Files' descriptions, always read and written under the tenant that owns them: another tenant's id
//! finds nothing. A file past its `expires_at` is gone to every reader, and deleted by the sweep. The
//! bytes of files kept in the database are here too (`file_parts`); `file_store` decides where they go.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

/// A file as readers see it.
#[derive(Debug, Clone)]
pub struct FileRow {
    pub id: String,
    pub filename: String,
    pub purpose: String,
    pub bytes: i64,
    pub parts: i32,
    pub lines: Option<i32>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// Starts a file: `uploading`, no bytes, listed to nobody until [`finish`].
///
/// # Errors
/// Database errors.
pub async fn begin(db: &PgPool, tenant: Uuid, id: &str, filename: &str) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO files (id, tenant_id, filename, purpose, status, expires_at)
         VALUES ($1, $2, $3, '', 'uploading', now() + interval '30 days')",
        id,
        tenant,
        filename,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Counts `bytes` more for the tenant's uploading file `id` and takes the next part number, unless the
/// tenant's files would then take more than `max_stored_bytes`: then the bytes the tenant's files take.
/// A batch's answers (`batch_output`) are not counted: the tenant paid for them.
/// One tenant's reservations are serialized, so concurrent uploads never pass the quota together.
///
/// # Errors
/// Database errors.
pub async fn reserve(db: &PgPool, tenant: Uuid, id: &str, bytes: i64, max_stored_bytes: i64) -> Result<Result<i32, i64>, sqlx::Error> {
    let mut tx = db.begin().await?;
    sqlx::query!("SELECT pg_advisory_xact_lock(hashtextextended('files:' || $1::uuid::text, 0))", tenant).execute(&mut *tx).await?;
    let used = sqlx::query_scalar!(
        r#"SELECT COALESCE(sum(bytes), 0)::int8 AS "used!" FROM files
           WHERE tenant_id = $1 AND expires_at > now() AND purpose <> 'batch_output'"#,
        tenant
    )
    .fetch_one(&mut *tx)
    .await?;
    if used.saturating_add(bytes) > max_stored_bytes {
        return Ok(Err(used));
    }
    let seq = sqlx::query_scalar!(
        "UPDATE files SET bytes = bytes + $3, parts = parts + 1 WHERE id = $1 AND tenant_id = $2 AND status = 'uploading'
         RETURNING parts - 1",
        id,
        tenant,
        bytes,
    )
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Ok(seq.unwrap_or_default()))
}

/// Makes the uploading file `id` visible: `processed`, with its purpose and line count, kept for
/// `expires_in_s` after it was created.
///
/// # Errors
/// Database errors.
pub async fn finish(
    db: &PgPool,
    tenant: Uuid,
    id: &str,
    purpose: &str,
    lines: Option<i32>,
    expires_in_s: i64,
) -> Result<Option<FileRow>, sqlx::Error> {
    sqlx::query_as!(
        FileRow,
        "UPDATE files SET status = 'processed', purpose = $3, lines = $4, expires_at = created_at + make_interval(secs => $5)
         WHERE id = $1 AND tenant_id = $2 AND status = 'uploading'
         RETURNING id, filename, purpose, bytes, parts, lines, created_at, expires_at",
        id,
        tenant,
        purpose,
        lines,
        expires_in_s as f64,
    )
    .fetch_optional(db)
    .await
}

/// The tenant's processed file `id`, unless expired or another tenant's.
///
/// # Errors
/// Database errors.
pub async fn get(db: &PgPool, tenant: Uuid, id: &str) -> Result<Option<FileRow>, sqlx::Error> {
    sqlx::query_as!(
        FileRow,
        "SELECT id, filename, purpose, bytes, parts, lines, created_at, expires_at FROM files
         WHERE id = $1 AND tenant_id = $2 AND status = 'processed' AND expires_at > now()",
        id,
        tenant,
    )
    .fetch_optional(db)
    .await
}

/// One page of the tenant's processed files, newest first (or oldest, `ascending`), after the file
/// `after` when given, of `purpose` when given: at most `limit`.
///
/// # Errors
/// Database errors.
pub async fn list(
    db: &PgPool,
    tenant: Uuid,
    purpose: Option<&str>,
    after: Option<&FileRow>,
    ascending: bool,
    limit: i64,
) -> Result<Vec<FileRow>, sqlx::Error> {
    let (after_at, after_id) = after.map(|f| (f.created_at, f.id.clone())).unzip();
    sqlx::query_as!(
        FileRow,
        "SELECT id, filename, purpose, bytes, parts, lines, created_at, expires_at FROM files
         WHERE tenant_id = $1 AND status = 'processed' AND expires_at > now()
           AND ($2::text IS NULL OR purpose = $2)
           AND ($3::timestamptz IS NULL
                OR ($5 AND (created_at, id) > ($3, $4::text))
                OR (NOT $5 AND (created_at, id) < ($3, $4::text)))
         ORDER BY CASE WHEN $5 THEN created_at END ASC, CASE WHEN $5 THEN id END ASC,
                  CASE WHEN NOT $5 THEN created_at END DESC, CASE WHEN NOT $5 THEN id END DESC
         LIMIT $6",
        tenant,
        purpose,
        after_at,
        after_id,
        ascending,
        limit,
    )
    .fetch_all(db)
    .await
}

/// Deletes the tenant's file `id` (processed or still uploading) with the parts kept here, leaving its id
/// in `file_deletions`; whether there was one.
///
/// # Errors
/// Database errors.
pub async fn delete(db: &PgPool, tenant: Uuid, id: &str) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!("DELETE FROM files WHERE id = $1 AND tenant_id = $2", id, tenant).execute(db).await?;
    Ok(done.rows_affected() > 0)
}

/// Deletes the tenant's batch answers (`batch_output`) named `filenames`, leaving their ids in
/// `file_deletions`; their ids.
///
/// # Errors
/// Database errors.
pub async fn delete_batch_output(db: &PgPool, tenant: Uuid, filenames: &[String]) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar!(
        "DELETE FROM files WHERE tenant_id = $1 AND purpose = 'batch_output' AND filename = ANY($2) RETURNING id",
        tenant,
        filenames,
    )
    .fetch_all(db)
    .await
}

/// The most bytes the tenant's files may take: its own terms, or `default`.
///
/// # Errors
/// Database errors.
pub async fn max_stored_bytes(db: &PgPool, tenant: Uuid, default: i64) -> Result<i64, sqlx::Error> {
    let own =
        sqlx::query_scalar!("SELECT max_stored_bytes FROM file_storage_terms WHERE tenant_id = $1", tenant).fetch_optional(db).await?;
    Ok(own.unwrap_or(default))
}

/// Deletes the files past their expiry and the uploads abandoned for `stale_upload_s` (a gateway that
/// died mid-upload); their ids, for the storage to forget their bytes (they are in `file_deletions`).
///
/// # Errors
/// Database errors.
pub async fn expire(db: &PgPool, stale_upload_s: f64) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar!(
        "DELETE FROM files WHERE expires_at <= now()
            OR (status = 'uploading' AND created_at < now() - make_interval(secs => $1))
         RETURNING id",
        stale_upload_s,
    )
    .fetch_all(db)
    .await
}

/// Up to `limit` deleted files whose bytes storage has not forgotten, those deleted longest ago first,
/// leaving out those deleted in the last `grace_s` (their deleter is forgetting them now).
///
/// # Errors
/// Database errors.
pub async fn to_forget(db: &PgPool, grace_s: f64, limit: i64) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT file_id FROM file_deletions WHERE deleted_at < now() - make_interval(secs => $1) ORDER BY deleted_at LIMIT $2",
        grace_s,
        limit,
    )
    .fetch_all(db)
    .await
}

/// Storage has forgotten the bytes of files `ids`.
///
/// # Errors
/// Database errors.
pub async fn forgotten(db: &PgPool, ids: &[String]) -> Result<(), sqlx::Error> {
    sqlx::query!("DELETE FROM file_deletions WHERE file_id = ANY($1)", ids).execute(db).await?;
    Ok(())
}

/// Keeps one part of a file in the database.
///
/// # Errors
/// Database errors.
pub async fn put_part(db: &PgPool, id: &str, seq: i32, data: &[u8]) -> Result<(), sqlx::Error> {
    sqlx::query!("INSERT INTO file_parts (file_id, seq, data) VALUES ($1, $2, $3)", id, seq, data).execute(db).await?;
    Ok(())
}

/// One part of a file kept in the database.
///
/// # Errors
/// Database errors.
pub async fn part(db: &PgPool, id: &str, seq: i32) -> Result<Option<Vec<u8>>, sqlx::Error> {
    sqlx::query_scalar!("SELECT data FROM file_parts WHERE file_id = $1 AND seq = $2", id, seq).fetch_optional(db).await
}
