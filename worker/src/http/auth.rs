//! Only gateways may ask for inference: every `/v1` request must carry a gateway's signature over the
//! request (`runaii_wire::request_signature`), made within the last few seconds and never seen before.
//! Anything else that can reach a worker's port (another pod, a scanner, a customer who learned an
//! internal address, someone who copied a request off the network) gets a 401 and no tokens. The static
//! bearer token is accepted only when the worker was started with `--accept-bearer` (benchmark tools
//! that call a worker directly). `/health` and `/metrics` stay open for probes and scrapes; they carry
//! load figures, never prompts.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use runaii_wire::request_signature::{self, Signed};
use runaii_wire::{announcement, cache_scope, priority};

use super::{ApiError, AppState};

pub(super) async fn require_gateway(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if state.settings.accept_bearer {
        let presented = request.headers().get(AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or("");
        if state.secrets.accepts_bearer(presented) {
            return next.run(request).await;
        }
    }
    let (parts, body) = request.into_parts();
    // The signature covers the body, so it is read here, within the same limit the handler applies.
    let body = match axum::body::to_bytes(body, state.settings.max_body_bytes).await {
        Ok(body) => body,
        Err(_) => return ApiError::PayloadTooLarge(state.settings.max_body_bytes).into_response(),
    };
    let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
    let signed = Signed {
        method: parts.method.as_str(),
        path: parts.uri.path_and_query().map_or("/", |p| p.as_str()),
        scope: header(cache_scope::HEADER).unwrap_or(""),
        priority: header(priority::HEADER).unwrap_or(""),
        body: &body,
    };
    let now = announcement::now_ms();
    let verdict = request_signature::verify(&state.secrets, header(request_signature::HEADER), &signed, now)
        .and_then(|accepted| state.replays.admit(accepted, now));
    if let Err(refused) = verdict {
        tracing::warn!(reason = %refused, path = signed.path, "request refused: not signed by a gateway");
        return ApiError::Unauthorized.into_response();
    }
    next.run(Request::from_parts(parts, Body::from(body))).await
}
