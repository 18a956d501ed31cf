//! Only gateways may ask for inference: every `/v1` request must carry the bearer token derived from the
//! fleet's worker secret. Anything else that can reach a worker's port (another pod, a scanner, a
//! customer who learned an internal address) gets a 401 and no tokens. `/health` and `/metrics` stay
//! open for probes and scrapes; they carry load figures, never prompts.

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{ApiError, AppState};

pub(super) async fn require_gateway(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let presented = request.headers().get(AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or("");
    if state.secrets.accepts_bearer(presented) {
        next.run(request).await
    } else {
        ApiError::Unauthorized.into_response()
    }
}
