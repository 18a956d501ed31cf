//! The Batch API (`/v1/batches`, OpenAI's): a tenant submits a file of requests (`files`), each line
//! runs once, at the model's batch price and after online requests at the worker, outside the key's
//! online rate limits, and the answers come back as files. The life cycle: `validating` (the input read
//! into lines, each checked), `in_progress` (lines claimed in turns by tenant by every replica's
//! [`runner`]), `finalizing` (the output and error files written), then `completed`, `expired` (its
//! window passed: the lines not begun expire, the finished ones are delivered) or `cancelled`; `failed`
//! when validation refused the input.

mod output;
pub mod runner;
mod validate;

use serde::Deserialize;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::auth::Caller;
use crate::db::batches::{self as rows, BatchRow, NewBatch, Pick};
use crate::error::ApiError;
use crate::files::batch_input::ENDPOINTS;
use crate::state::AppState;

/// The one completion window offered, OpenAI's.
pub const WINDOW: &str = "24h";
const WINDOW_S: f64 = 24.0 * 3600.0;
/// The most batches one list answers.
pub const MAX_LIST: i64 = 100;

/// `POST /v1/batches`.
#[derive(Debug, Deserialize)]
pub struct NewBatchRequest {
    pub input_file_id: String,
    pub endpoint: String,
    pub completion_window: String,
    #[serde(default)]
    pub metadata: Option<Value>,
    /// Fields OpenAI's API has that this one does not honour: refused by name.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// A fresh id for one try of a line: the answer's id in its endpoint's dialect, and its cost record's key.
fn new_request_id(endpoint: &str) -> String {
    use crate::inference::Dialect as _;
    if endpoint == "/v1/responses" {
        crate::inference::responses::Responses::new_id()
    } else {
        crate::inference::chat::Chat::new_id()
    }
}

fn not_found(id: &str) -> ApiError {
    ApiError::NotFound(format!("batch '{id}'"))
}

/// Creates a batch of the caller's file: `validating`, run by the runners from there.
///
/// # Errors
/// 400 naming the field: an endpoint a batch does not run, a window other than 24h, bad metadata, an
/// unknown field, a file the tenant does not have or that is not a batch input.
pub async fn create(state: &AppState, caller: &Caller, request: &NewBatchRequest) -> Result<BatchRow, ApiError> {
    if let Some(name) = request.other.keys().next() {
        return Err(ApiError::UnsupportedParameter {
            name: name.clone(),
            why: "a batch takes input_file_id, endpoint, completion_window and metadata",
            code: "unsupported_parameter",
        });
    }
    if !ENDPOINTS.contains(&request.endpoint.as_str()) {
        return Err(ApiError::invalid(format!("endpoint must be one of {}", ENDPOINTS.join(", ")), "endpoint"));
    }
    if request.completion_window != WINDOW {
        return Err(ApiError::invalid(format!("completion_window must be {WINDOW}"), "completion_window"));
    }
    crate::inference::metadata::check_openai(request.metadata.as_ref(), "invalid_request_error")?;
    let file = crate::db::files::get(&state.db, caller.tenant_id, &request.input_file_id)
        .await?
        .ok_or_else(|| ApiError::invalid(format!("input_file_id names no file of yours ('{}')", request.input_file_id), "input_file_id"))?;
    if file.purpose != "batch" {
        return Err(ApiError::invalid(format!("the file's purpose is '{}'; a batch input's is 'batch'", file.purpose), "input_file_id"));
    }
    let id = format!("batch_{}", Uuid::now_v7().simple());
    let metadata = request.metadata.as_ref().filter(|m| !m.is_null());
    rows::insert(
        &state.db,
        &NewBatch {
            id: &id,
            tenant: caller.tenant_id,
            api_key_id: caller.key_id,
            endpoint: &request.endpoint,
            input_file_id: &request.input_file_id,
            completion_window: WINDOW,
            metadata,
            window_s: WINDOW_S,
        },
    )
    .await?;
    state.batches_wake.notify_one();
    get(state, caller.tenant_id, &id).await
}

/// The tenant's batch `id`.
///
/// # Errors
/// 404 for a batch the tenant does not have.
pub async fn get(state: &AppState, tenant: Uuid, id: &str) -> Result<BatchRow, ApiError> {
    rows::get(&state.db, Some(tenant), id).await?.ok_or_else(|| not_found(id))
}

/// A page of the tenant's batches, newest first, and whether more follow.
///
/// # Errors
/// 400 for an `after` the tenant does not have.
pub async fn list(state: &AppState, tenant: Uuid, after: Option<&str>, limit: i64) -> Result<(Vec<BatchRow>, bool), ApiError> {
    let after = match after {
        Some(id) => Some(
            rows::get(&state.db, Some(tenant), id)
                .await?
                .ok_or_else(|| ApiError::invalid(format!("after names no batch of yours ('{id}')"), "after"))?,
        ),
        None => None,
    };
    let after = after.as_ref().map(|b| (b.created_at, b.id.as_str()));
    let mut batches = rows::select(&state.db, Pick::Page { tenant, after, limit: limit.saturating_add(1) }).await?;
    let has_more = batches.len() as i64 > limit;
    batches.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    Ok((batches, has_more))
}

/// Cancels the tenant's batch `id`: lines not begun are cancelled at once, lines running finish, then
/// the finished lines are delivered and it is `cancelled`. A batch already ending or ended is answered
/// as it stands.
///
/// # Errors
/// 404 for a batch the tenant does not have.
pub async fn cancel(state: &AppState, tenant: Uuid, id: &str) -> Result<BatchRow, ApiError> {
    get(state, tenant, id).await?;
    if rows::cancel(&state.db, tenant, id).await? {
        state.batches_wake.notify_one();
    }
    get(state, tenant, id).await
}
