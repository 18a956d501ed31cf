//! Only gateways may ask for inference: every `/v1` request must carry the gateway's signature over that
//! very request (`runaii_wire::signed_request`): its method, path, body and cache scope, made within the
//! last [`Settings::request_max_age_s`] and not seen before. Anything else that can reach a worker's port
//! (another pod, a scanner, whoever captured a request on the cluster network) gets a 401 and no tokens.
//! `/health` and `/metrics` stay open for probes and scrapes; they carry load figures, never prompts.
//!
//! The body is read here, within the body limit, because the signature covers it; the handler then reads
//! it from memory.
//!
//! [`Settings::request_max_age_s`]: crate::config::Settings::request_max_age_s

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use runaii_wire::cache_scope;
use runaii_wire::signed_request::{now_s, RequestFacts};

use super::{ApiError, AppState};

pub(super) async fn require_gateway(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let presented = parts.headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or("");
    // An opt-in for benchmarks that call a worker directly: the static bearer, as engines of another make
    // take it. Off by default; a captured bearer then calls this worker.
    if state.settings.accept_bearer && state.secrets.accepts_bearer(presented) {
        return next.run(Request::from_parts(parts, body)).await;
    }
    if !presented.starts_with(runaii_wire::signed_request::SCHEME) {
        return ApiError::Unauthorized.into_response();
    }
    let limit = state.settings.max_body_bytes;
    let Ok(bytes) = axum::body::to_bytes(body, limit).await else {
        return ApiError::PayloadTooLarge(limit).into_response();
    };
    let scope = parts.headers.get(cache_scope::HEADER).and_then(|v| v.to_str().ok());
    let facts = RequestFacts { method: parts.method.as_str(), path: parts.uri.path(), body: &bytes, scope };
    match state.requests.check(&state.secrets, presented, &facts, now_s()) {
        Ok(()) => next.run(Request::from_parts(parts, Body::from(bytes))).await,
        Err(refusal) => {
            tracing::info!(%refusal, "request refused: not a gateway's signed request");
            ApiError::Unauthorized.into_response()
        }
    }
}
