//! Files (`/v1/files`, OpenAI's Files API): a tenant uploads, lists, reads and deletes its own files,
//! never another tenant's. Descriptions live in Postgres (`db::files`), bytes in [`crate::file_store::Storage`].

pub mod batch_input;
mod upload;
pub mod writer;

use axum::body::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt as _;
use uuid::Uuid;

pub use upload::{upload, DEFAULT_EXPIRY_S};

use crate::db::files::{self as rows, FileRow};
use crate::error::ApiError;
use crate::file_store::StorageError;
use crate::state::AppState;

/// The most files one list answers.
pub const MAX_LIST: i64 = 10_000;

/// How to page through a tenant's files.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    pub purpose: Option<String>,
    /// A file id: list the files after it.
    pub after: Option<String>,
    pub ascending: bool,
    pub limit: i64,
}

/// One page of files, and whether more follow.
#[derive(Debug)]
pub struct Page {
    pub files: Vec<FileRow>,
    pub has_more: bool,
}

fn not_found(id: &str) -> ApiError {
    ApiError::NotFound(format!("file '{id}'"))
}

pub(crate) fn storage_error(e: StorageError) -> ApiError {
    match e {
        StorageError::Database(e) => ApiError::from(e),
        e @ StorageError::MissingPart { .. } => ApiError::Internal(e.to_string()),
        StorageError::Object(e) => {
            tracing::error!(error = %e, "file storage failed");
            ApiError::FileStorageUnavailable
        }
    }
}

/// The tenant's file `id`.
///
/// # Errors
/// 404 for an id the tenant does not have (another tenant's, a deleted or an expired one).
pub async fn get(state: &AppState, tenant: Uuid, id: &str) -> Result<FileRow, ApiError> {
    rows::get(&state.db, tenant, id).await?.ok_or_else(|| not_found(id))
}

/// A page of the tenant's files.
///
/// # Errors
/// 400 for an `after` the tenant does not have.
pub async fn list(state: &AppState, tenant: Uuid, query: &ListQuery) -> Result<Page, ApiError> {
    let after = match &query.after {
        Some(id) => Some(
            rows::get(&state.db, tenant, id)
                .await?
                .ok_or_else(|| ApiError::invalid(format!("after names no file of yours ('{id}')"), "after"))?,
        ),
        None => None,
    };
    let mut files =
        rows::list(&state.db, tenant, query.purpose.as_deref(), after.as_ref(), query.ascending, query.limit.saturating_add(1)).await?;
    let has_more = files.len() as i64 > query.limit;
    files.truncate(usize::try_from(query.limit).unwrap_or(usize::MAX));
    Ok(Page { files, has_more })
}

/// The tenant's file `id` and its bytes, read as they are sent. The first bytes are read before this
/// answers, so a store that does not answer is an error here, not a download cut after its headers.
///
/// # Errors
/// 404 as [`get`]; 503 `file_storage_unavailable`.
pub async fn content(
    state: &AppState,
    tenant: Uuid,
    id: &str,
) -> Result<(FileRow, BoxStream<'static, Result<Bytes, StorageError>>), ApiError> {
    let file = get(state, tenant, id).await?;
    let mut bytes = state.files.read(&file.id, file.parts);
    let first = bytes.next().await.transpose().map_err(storage_error)?;
    Ok((file, futures::stream::iter(first.map(Ok)).chain(bytes).boxed()))
}

/// Deletes the tenant's file `id` and its bytes.
///
/// # Errors
/// 404 as [`get`].
pub async fn delete(state: &AppState, tenant: Uuid, id: &str) -> Result<(), ApiError> {
    get(state, tenant, id).await?;
    if !discard(state, tenant, id).await? {
        return Err(not_found(id));
    }
    Ok(())
}

/// Deletes file `id` whatever its status (a refused upload's too), then its bytes; whether there was one.
/// Bytes storage cannot forget now (an object store down) are forgotten by a later sweep ([`expire`]):
/// the file is gone to every reader either way.
pub(crate) async fn discard(state: &AppState, tenant: Uuid, id: &str) -> Result<bool, ApiError> {
    let deleted = rows::delete(&state.db, tenant, id).await?;
    if deleted {
        forget(state, &[id.to_owned()]).await;
    }
    Ok(deleted)
}

/// Deletes the tenant's batch answers named `filenames`, then their bytes (as [`discard`]); how many.
///
/// # Errors
/// Database errors.
pub(crate) async fn discard_batch_output(state: &AppState, tenant: Uuid, filenames: &[String]) -> Result<usize, ApiError> {
    let ids = rows::delete_batch_output(&state.db, tenant, filenames).await?;
    forget(state, &ids).await;
    Ok(ids.len())
}

/// Forgets the bytes of deleted files `ids`; what fails stays in `file_deletions` for the next sweep.
async fn forget(state: &AppState, ids: &[String]) {
    if ids.is_empty() {
        return;
    }
    let done = match state.files.forget(ids).await {
        Ok(()) => rows::forgotten(&state.db, ids).await.map_err(StorageError::from),
        Err(e) => Err(e),
    };
    if let Err(e) = done {
        tracing::warn!(files = ids.len(), error = %e, "deleted files' bytes not forgotten yet; the sweep tries again");
    }
}

/// Deleted files the sweep forgets at a time.
const FORGET_BATCH: i64 = 1000;

/// Deletes the files past their expiry, and uploads abandoned longer than an upload may take (their
/// gateway died); then forgets the bytes of every deleted file storage still keeps. How many files it
/// deleted.
///
/// # Errors
/// Database errors.
pub async fn expire(state: &AppState) -> Result<usize, ApiError> {
    // An upload still running is younger than its timeout; a minute more covers clocks and the last part.
    let stale_s = state.settings.files.upload_timeout_ms as f64 / 1000.0 + 60.0;
    let expired = rows::expire(&state.db, stale_s).await?;
    forget(state, &expired).await;
    // Deletions of the last minute are left to whoever made them.
    let left = rows::to_forget(&state.db, 60.0, FORGET_BATCH).await?;
    forget(state, &left).await;
    Ok(expired.len())
}
