//! What every inference route does around its dialect: the credential, the rate limit, the tenant's cap
//! on requests in flight, the body, the idempotency key, and the `x-ratelimit-*` headers on whatever the
//! answer is. Every error here is written in the route's dialect.

use std::marker::PhantomData;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::Value;

use crate::auth::Caller;
use crate::concurrency::Slot;
use crate::error::ApiError;
use crate::idempotency::{self, Begin};
use crate::inference::Dialect;
use crate::ratelimit::{self, Admission};
use crate::state::AppState;

/// The authenticated caller, or the dialect's 401: rejected before the body is read, so a client
/// without a valid key cannot make the gateway buffer its body.
pub(super) struct CallerOf<D>(Caller, PhantomData<D>);

impl<D: Dialect> FromRequestParts<AppState> for CallerOf<D> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        Caller::from_request_parts(parts, state).await.map(|caller| Self(caller, PhantomData)).map_err(D::error)
    }
}

/// Admits the request and runs it in dialect `D`.
pub(super) async fn serve<D: Dialect>(
    state: AppState,
    CallerOf(caller, _): CallerOf<D>,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let admission = match state.limiter.admit(caller.budgets()).await {
        Ok(admission) => admission,
        Err(e) => return D::error(e),
    };
    let mut response = match admission {
        Admission::Limited { retry_after_ms, by_tokens, by_tenant, .. } => {
            D::error(ApiError::RateLimited { retry_after_ms, by_tokens, by_tenant })
        }
        Admission::Allowed(_) | Admission::Unchecked(_) => match state.concurrency.acquire(caller.tenant_id, caller.max_concurrent).await {
            Ok(slot) => admitted::<D>(state, caller, slot, headers, body).await,
            Err(e) => D::error(e),
        },
    };
    ratelimit::apply(response.headers_mut(), &admission);
    response
}

async fn admitted<D: Dialect>(
    state: AppState,
    caller: Caller,
    slot: Slot,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let parsed = raw_body(&state, body).and_then(|raw| Ok((json(&raw)?, raw)));
    let (value, raw) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => return D::error(e),
    };
    match idempotency::begin(&state, caller.tenant_id, headers, D::ENDPOINT, &raw).await {
        Err(e) => D::error(e),
        Ok(Begin::Replay(stored)) => stored,
        Ok(Begin::Run(None)) => D::start(&state, caller, slot, value).await,
        Ok(Begin::Run(Some(claim))) => {
            let run_state = state.clone();
            idempotency::run_claimed(state, claim, D::error, async move { D::start(&run_state, caller, slot, value).await }).await
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
