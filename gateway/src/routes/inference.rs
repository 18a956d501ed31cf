//! What every inference route does around its dialect: the rate limit, the body, the idempotency key,
//! and the `x-ratelimit-*` headers on whatever the answer is.

use std::future::Future;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::auth::Caller;
use crate::error::ApiError;
use crate::idempotency::{self, Begin};
use crate::ratelimit::{self, Admission};
use crate::state::AppState;

/// Admits the request and runs `work` on its JSON body.
pub(super) async fn serve<F, Fut>(
    state: AppState,
    caller: Caller,
    headers: &HeaderMap,
    endpoint: &'static str,
    body: Result<Bytes, BytesRejection>,
    work: F,
) -> Response
where
    F: FnOnce(AppState, Caller, Value) -> Fut + Send + 'static,
    Fut: Future<Output = Result<Response, ApiError>> + Send + 'static,
{
    let admission = match state.limiter.admit(caller.key_id, caller.limits).await {
        Ok(admission) => admission,
        Err(e) => return e.into_response(),
    };
    let mut response = match admission {
        Admission::Limited { retry_after_ms, by_tokens, .. } => ApiError::RateLimited { retry_after_ms, by_tokens }.into_response(),
        Admission::Allowed(_) | Admission::Unchecked(_) => admitted(state, caller, headers, endpoint, body, work).await,
    };
    ratelimit::apply(response.headers_mut(), &admission);
    response
}

async fn admitted<F, Fut>(
    state: AppState,
    caller: Caller,
    headers: &HeaderMap,
    endpoint: &'static str,
    body: Result<Bytes, BytesRejection>,
    work: F,
) -> Response
where
    F: FnOnce(AppState, Caller, Value) -> Fut + Send + 'static,
    Fut: Future<Output = Result<Response, ApiError>> + Send + 'static,
{
    let parsed = raw_body(&state, body).and_then(|raw| Ok((json(&raw)?, raw)));
    let (value, raw) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => return e.into_response(),
    };
    match idempotency::begin(&state, caller.tenant_id, headers, endpoint, &raw).await {
        Err(e) => e.into_response(),
        Ok(Begin::Replay(stored)) => stored,
        Ok(Begin::Run(None)) => work(state, caller, value).await.into_response(),
        Ok(Begin::Run(Some(claim))) => {
            let run_state = state.clone();
            idempotency::run_claimed(state, claim, async move { work(run_state, caller, value).await.into_response() }).await
        }
    }
}

/// The body, with the gateway's error for one too large.
fn raw_body(state: &AppState, body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|r| crate::extract::body_error(&r, state.settings.max_body_bytes))
}

fn json(raw: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(raw).map_err(|e| ApiError::InvalidJson(e.to_string()))
}
