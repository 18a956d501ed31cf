//! The Batch API's objects, as OpenAI shapes them, with the batch's exact cost beside its usage.

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::db::batches::BatchRow;

/// A batch.
#[derive(Serialize, ToSchema)]
pub struct BatchObject {
    #[schema(example = "batch_0190b7a8c6f07d3e8a1b2c3d4e5f6a7b")]
    pub id: String,
    #[schema(pattern = "^batch$")]
    pub object: &'static str,
    /// `/v1/chat/completions` or `/v1/responses`.
    pub endpoint: String,
    /// Why validation failed: `{"object": "list", "data": [{"code", "message", "param", "line"}]}`.
    #[schema(value_type = Option<Object>)]
    pub errors: Option<Value>,
    pub input_file_id: String,
    #[schema(example = "24h")]
    pub completion_window: String,
    /// `validating`, `failed`, `in_progress`, `finalizing`, `completed`, `expired`, `cancelling`, `cancelled`.
    pub status: String,
    /// The 2xx answers, one line per request in input order (once the batch has ended).
    pub output_file_id: Option<String>,
    /// The error answers and the requests never run (expired, cancelled).
    pub error_file_id: Option<String>,
    pub created_at: i64,
    pub in_progress_at: Option<i64>,
    pub expires_at: i64,
    pub finalizing_at: Option<i64>,
    pub completed_at: Option<i64>,
    pub failed_at: Option<i64>,
    pub expired_at: Option<i64>,
    pub cancelling_at: Option<i64>,
    pub cancelled_at: Option<i64>,
    pub request_counts: RequestCounts,
    /// The tokens of the lines run so far, and their exact cost at the batch price.
    pub usage: BatchUsage,
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
}

#[derive(Serialize, ToSchema)]
pub struct RequestCounts {
    pub total: i64,
    pub completed: i64,
    pub failed: i64,
}

#[derive(Serialize, ToSchema)]
pub struct BatchUsage {
    pub input_tokens: i64,
    pub input_tokens_details: CachedTokens,
    pub output_tokens: i64,
    pub output_tokens_details: ReasoningTokens,
    pub total_tokens: i64,
    /// USD, exact: the sum of the lines' cost records.
    #[schema(value_type = String, example = "0.0000215")]
    pub cost: String,
}

#[derive(Serialize, ToSchema)]
pub struct CachedTokens {
    pub cached_tokens: i64,
}

#[derive(Serialize, ToSchema)]
pub struct ReasoningTokens {
    pub reasoning_tokens: i64,
}

impl From<BatchRow> for BatchObject {
    fn from(b: BatchRow) -> Self {
        let at = |t: Option<chrono::DateTime<chrono::Utc>>| t.map(|t| t.timestamp());
        Self {
            object: "batch",
            errors: b.errors,
            request_counts: RequestCounts { total: b.total, completed: b.completed, failed: b.failed },
            usage: BatchUsage {
                input_tokens: b.input_tokens,
                input_tokens_details: CachedTokens { cached_tokens: b.cached_tokens },
                output_tokens: b.output_tokens,
                output_tokens_details: ReasoningTokens { reasoning_tokens: 0 },
                total_tokens: b.input_tokens + b.output_tokens,
                cost: b.cost.normalize().to_string(),
            },
            created_at: b.created_at.timestamp(),
            in_progress_at: at(b.in_progress_at),
            expires_at: b.expires_at.timestamp(),
            finalizing_at: at(b.finalizing_at),
            completed_at: at(b.completed_at),
            failed_at: at(b.failed_at),
            expired_at: at(b.expired_at),
            cancelling_at: at(b.cancelling_at),
            cancelled_at: at(b.cancelled_at),
            id: b.id,
            endpoint: b.endpoint,
            input_file_id: b.input_file_id,
            completion_window: b.completion_window,
            status: b.status,
            output_file_id: b.output_file_id,
            error_file_id: b.error_file_id,
            metadata: b.metadata,
        }
    }
}

/// A page of the tenant's batches.
#[derive(Serialize, ToSchema)]
pub struct BatchList {
    #[schema(pattern = "^list$")]
    pub object: &'static str,
    pub data: Vec<BatchObject>,
    pub first_id: Option<String>,
    pub last_id: Option<String>,
    pub has_more: bool,
}

/// What `POST /v1/batches` takes.
#[derive(ToSchema)]
#[expect(dead_code, reason = "documents the request body; never built")]
pub struct CreateBatch {
    /// A file of purpose `batch` (`POST /v1/files`).
    input_file_id: String,
    /// `/v1/chat/completions` or `/v1/responses`: every line's `url`.
    endpoint: String,
    /// `24h`.
    completion_window: String,
    /// At most 16 string pairs.
    #[schema(value_type = Option<Object>)]
    metadata: Option<Value>,
}
