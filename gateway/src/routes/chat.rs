//! `POST /v1/chat/completions`.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use crate::auth::Caller;
use crate::completions;
use crate::error::ApiError;
use crate::state::AppState;

pub(super) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = json_body(&state, body)?;
    completions::chat(&state, caller, body).await
}

/// The body as JSON, with the gateway's errors for a body too large or not JSON.
pub(super) fn json_body(state: &AppState, body: Result<Bytes, BytesRejection>) -> Result<serde_json::Value, ApiError> {
    let body = body.map_err(|r| match r.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge(state.settings.max_body_bytes),
        _ => ApiError::InvalidJson(r.body_text()),
    })?;
    serde_json::from_slice(&body).map_err(|e| ApiError::InvalidJson(e.to_string()))
}
