//! Chat completions through the gateway: check, route, forward as sent, meter, record, answer. The
//! Responses API reuses every step through [`prepare`], [`open`] and [`finish_whole`].

mod sse;
pub mod stream;

use std::sync::Arc;
use std::time::Instant;

use axum::http::{HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use runaii_wire::{ChatCompletionRequest, ErrorBody};
use rust_decimal::Decimal;
use serde_json::{json, Value};
use tracing::Instrument as _;

use crate::auth::Caller;
use crate::billing::{json_with_cost, worst_case_cost, Ledger, Outcome};
use crate::db::credits;
use crate::db::models::{self, ModelRow};
use crate::error::ApiError;
use crate::state::AppState;
use crate::structured;
use crate::upstream::{self, Upstream};

pub const ENDPOINT_CHAT: &str = "chat.completions";

/// A checked chat request, ready to send, with the ledger that will record it.
#[derive(Debug)]
pub struct Prepared {
    pub ledger: Ledger,
    pub body: Value,
    pub stream: bool,
    pub include_usage: bool,
}

/// # Errors
/// Any [`ApiError`]; after the model is known every outcome, refusals included, has a cost record.
pub async fn chat(state: &AppState, caller: Caller, body: Value) -> Result<Response, ApiError> {
    let request_id = format!("chatcmpl-{}", uuid::Uuid::now_v7().simple());
    let prepared = prepare(state, caller, body, ENDPOINT_CHAT, request_id).await?;
    if prepared.stream {
        let include_usage = prepared.include_usage;
        let (ledger, upstream) = open(state, prepared).await?;
        return Ok(stream::relay(ledger, upstream, stream::ChatChunks { include_usage }));
    }
    let (ledger, mut answer, cost) = finish_whole(state, prepared).await?;
    answer["id"] = json!(ledger.request_id);
    if let Some(obj) = answer.as_object_mut() {
        obj.remove("timings");
    }
    let mut response = json_response(json_with_cost(&answer, cost));
    with_request_id(&mut response, &ledger.request_id);
    Ok(response)
}

/// Checks a chat request body, resolves its model and adds the schema prompt.
///
/// # Errors
/// 400 for a malformed body or `response_format`, 404 for an unknown model.
pub async fn prepare(
    state: &AppState,
    caller: Caller,
    mut body: Value,
    endpoint: &'static str,
    request_id: String,
) -> Result<Prepared, ApiError> {
    let request: ChatCompletionRequest = serde_json::from_value(body.clone()).map_err(|e| ApiError::InvalidJson(e.to_string()))?;
    let model = models::find_visible(&state.db, &request.model, Some(caller.tenant_id))
        .await?
        .ok_or(ApiError::ModelNotFound(request.model.clone()))?;
    if let Err((error, reason)) = structured::check_request_schemas(&body, model.context_length) {
        crate::metrics::global().schema_refusals.add(&[reason], 1);
        return Err(error);
    }
    if model.schema_in_prompt {
        if let Some(schema) = structured::json_schema_of(body.get("response_format")).cloned() {
            if let Some(messages) = body.get_mut("messages") {
                structured::add_schema_prompt(messages, &schema);
            }
        }
    }
    if request.stream {
        // The gateway always needs the usage to bill; the client gets it only if it asked.
        body["stream_options"] = json!({"include_usage": true});
    }
    hold_worst_case(state, &caller, &model, &body, &request_id).await?;
    // From here every outcome has a cost record under this id: whatever answer goes out names it.
    crate::request_id::assign(&request_id);
    let ledger = Ledger {
        db: state.db.clone(),
        request_id,
        caller,
        model,
        endpoint,
        started: crate::metrics::arrived(),
        limiter: Arc::clone(&state.limiter),
        tasks: state.tasks.clone(),
    };
    Ok(Prepared { ledger, body, stream: request.stream, include_usage: request.include_usage() })
}

/// Holds the request's worst-case cost from the tenant's credit; the ledger settles it when the request
/// ends. From here on every outcome is recorded, which releases the hold.
///
/// # Errors
/// 402 `insufficient_credits` when the tenant cannot cover the worst case; nothing is charged.
async fn hold_worst_case(state: &AppState, caller: &Caller, model: &ModelRow, body: &Value, request_id: &str) -> Result<(), ApiError> {
    let worst = worst_case_cost(model, body);
    if credits::hold(&state.db, caller.tenant_id, request_id, worst, state.replica_id).await? {
        return Ok(());
    }
    let available = credits::balance(&state.db, caller.tenant_id).await?.map_or(Decimal::ZERO, |b| b.available());
    Err(ApiError::InsufficientCredits { needed: worst.normalize().to_string(), available: available.normalize().to_string() })
}

/// Sends the request; a refusal is recorded at zero cost and returned as the gateway's error.
///
/// # Errors
/// The worker's refusal or failure, or no ready worker.
pub async fn open(state: &AppState, prepared: Prepared) -> Result<(Ledger, Upstream), ApiError> {
    let Prepared { ledger, body, .. } = prepared;
    let sent = upstream::send(state, &ledger.model.id, &body, &ledger.request_id).await;
    let error = match sent {
        Ok(upstream) if upstream.response.status().is_success() => return Ok((ledger, upstream)),
        Ok(upstream) => worker_error(upstream).await,
        Err(e) => e,
    };
    Err(reject(&ledger, error).await)
}

/// Runs a non-streamed request to its end and records it. The work runs in its own task: if the client
/// goes away meanwhile, the answer is still metered and recorded.
///
/// # Errors
/// As [`open`], or 503 when the cost record cannot be written (the answer is then not served).
pub async fn finish_whole(state: &AppState, prepared: Prepared) -> Result<(Ledger, Value, Decimal), ApiError> {
    let state = state.clone();
    let task = state.tasks.clone().spawn(
        async move {
            let sent = Instant::now();
            let (ledger, upstream) = open(&state, prepared).await?;
            let answer: Value = match upstream.json().await {
                Ok(answer) => answer,
                Err(e) => return Err(reject(&ledger, ApiError::UpstreamFailed(format!("unreadable answer: {e}"))).await),
            };
            let upstream_time = sent.elapsed();
            let cost = ledger.record(Outcome::succeeded(&answer["usage"])).await?;
            let metrics = crate::metrics::global();
            metrics.worker_timings(&ledger.model.id, &answer["timings"]);
            metrics.overhead(ledger.endpoint, ledger.started.elapsed(), upstream_time);
            Ok((ledger, answer, cost))
        }
        .in_current_span(),
    );
    task.await.map_err(|e| ApiError::Internal(format!("completion task failed: {e}")))?
}

async fn worker_error(upstream: Upstream) -> ApiError {
    let status = upstream.response.status();
    let body: Option<ErrorBody> = upstream.json().await.ok();
    let Some(ErrorBody { error }) = body else {
        return ApiError::UpstreamFailed(format!("worker answered {status} without an error body"));
    };
    match error.code.as_deref() {
        Some(code @ ("grammar_rejected" | "invalid_schema")) => {
            crate::metrics::global().schema_refusals.add(&[code], 1);
            ApiError::UpstreamRejected(error.message)
        }
        // The worker refused the gateway's own credential: a fleet misconfiguration, not the customer's fault.
        _ if status == reqwest::StatusCode::UNAUTHORIZED => {
            tracing::error!("a worker refused the gateway's credential: do they share the worker secret?");
            ApiError::UpstreamFailed(format!("worker answered {status}: {}", error.message))
        }
        _ if status.is_client_error() && status != reqwest::StatusCode::NOT_FOUND => {
            ApiError::UpstreamInvalid { message: error.message, param: error.param, code: error.code }
        }
        _ => ApiError::UpstreamFailed(format!("worker answered {status}: {}", error.message)),
    }
}

/// Records a request that ended before any token (cost 0) and hands the error back: `failed` when the
/// worker broke, `rejected` when the request was refused.
async fn reject(ledger: &Ledger, error: ApiError) -> ApiError {
    let (http_status, error_code) = (error.status().as_u16(), error.code());
    let outcome = match error {
        ApiError::UpstreamFailed(_) => Outcome::Failed { input_tokens: 0, output_tokens: 0, http_status, error_code },
        _ => Outcome::Rejected { http_status, error_code },
    };
    match ledger.record(outcome).await {
        Ok(_) => error,
        Err(ledger_down) => ledger_down,
    }
}

pub(crate) fn json_response(body: String) -> Response {
    ([(axum::http::header::CONTENT_TYPE, "application/json")], body).into_response()
}

pub(crate) fn with_request_id(response: &mut Response, request_id: &str) {
    if let Ok(v) = HeaderValue::from_str(request_id) {
        response.headers_mut().insert(HeaderName::from_static("x-request-id"), v);
    }
}
