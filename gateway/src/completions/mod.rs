//! Chat completions through the gateway: check, route, forward as sent, meter, record, answer.

mod sse;
mod stream;

use std::time::Instant;

use axum::http::{HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use runaii_wire::{ChatCompletionRequest, ErrorBody};
use serde_json::{json, Value};

use crate::auth::Caller;
use crate::billing::{json_with_cost, Ledger, Outcome};
use crate::db::models;
use crate::error::ApiError;
use crate::state::AppState;
use crate::structured;
use crate::upstream::{self, Upstream};

pub const ENDPOINT_CHAT: &str = "chat.completions";

/// # Errors
/// Any [`ApiError`]; after the model is known every outcome, refusals included, has a cost record.
pub async fn chat(state: &AppState, caller: Caller, mut body: Value) -> Result<Response, ApiError> {
    let request: ChatCompletionRequest =
        serde_json::from_value(body.clone()).map_err(|e| ApiError::InvalidJson(e.to_string()))?;
    structured::check_response_format(body.get("response_format"))?;
    let model = models::find_enabled(&state.db, &request.model).await?.ok_or(ApiError::ModelNotFound(request.model.clone()))?;
    if model.schema_in_prompt {
        if let Some(schema) = structured::json_schema_of(body.get("response_format")).cloned() {
            if let Some(messages) = body.get_mut("messages") {
                structured::add_schema_prompt(messages, &schema);
            }
        }
    }
    let ledger = Ledger {
        db: state.db.clone(),
        request_id: format!("chatcmpl-{}", uuid::Uuid::now_v7().simple()),
        caller,
        model,
        endpoint: ENDPOINT_CHAT,
        started: Instant::now(),
    };
    if request.stream {
        // The gateway always needs the usage to bill; the client gets the usage chunk only if it asked.
        body["stream_options"] = json!({"include_usage": true});
    }
    let upstream = match open(state, &ledger, &body).await {
        Ok(upstream) => upstream,
        Err(e) => return Err(reject(&ledger, e).await),
    };
    if request.stream {
        return Ok(stream::relay(ledger, upstream, request.include_usage()));
    }
    // The answer is metered and recorded even if the client goes away while it is generated.
    let task = tokio::spawn(async move { whole(ledger, upstream).await });
    task.await.map_err(|e| ApiError::Internal(format!("completion task failed: {e}")))?
}

/// Sends the request and turns a worker's error answer into the gateway's.
async fn open(state: &AppState, ledger: &Ledger, body: &Value) -> Result<Upstream, ApiError> {
    let upstream = upstream::send(state, &ledger.model.id, body, &ledger.request_id).await?;
    if upstream.response.status().is_success() {
        return Ok(upstream);
    }
    Err(worker_error(upstream.response).await)
}

async fn worker_error(response: reqwest::Response) -> ApiError {
    let status = response.status();
    let body: Option<ErrorBody> = response.json().await.ok();
    let Some(ErrorBody { error }) = body else {
        return ApiError::UpstreamFailed(format!("worker answered {status} without an error body"));
    };
    match error.code.as_deref() {
        Some("grammar_rejected" | "invalid_schema") => ApiError::UpstreamRejected(error.message),
        _ if status.is_client_error() && status != reqwest::StatusCode::NOT_FOUND => {
            ApiError::UpstreamInvalid { message: error.message, param: error.param, code: error.code }
        }
        _ => ApiError::UpstreamFailed(format!("worker answered {status}: {}", error.message)),
    }
}

/// Records a refusal (cost 0) and hands the error back.
async fn reject(ledger: &Ledger, error: ApiError) -> ApiError {
    let outcome = Outcome::Rejected { http_status: error.status().as_u16(), error_code: error.code() };
    match ledger.record(outcome).await {
        Ok(_) => error,
        Err(ledger_down) => ledger_down,
    }
}

async fn whole(ledger: Ledger, upstream: Upstream) -> Result<Response, ApiError> {
    let mut answer: Value = match upstream.response.json().await {
        Ok(answer) => answer,
        Err(e) => return Err(reject(&ledger, ApiError::UpstreamFailed(format!("unreadable answer: {e}"))).await),
    };
    let tokens = |k: &str| answer["usage"][k].as_u64().and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
    let (input_tokens, output_tokens) = (tokens("prompt_tokens"), tokens("completion_tokens"));
    let cost = ledger.record(Outcome::Succeeded { input_tokens, output_tokens }).await?;
    answer["id"] = json!(ledger.request_id);
    if let Some(obj) = answer.as_object_mut() {
        obj.remove("timings");
    }
    let mut response = json_response(json_with_cost(&mut answer, cost));
    with_request_id(&mut response, &ledger.request_id);
    Ok(response)
}

pub(crate) fn json_response(body: String) -> Response {
    ([(axum::http::header::CONTENT_TYPE, "application/json")], body).into_response()
}

pub(crate) fn with_request_id(response: &mut Response, request_id: &str) {
    if let Ok(v) = HeaderValue::from_str(request_id) {
        response.headers_mut().insert(HeaderName::from_static("x-request-id"), v);
    }
}
