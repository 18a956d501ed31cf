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
    let body = body.map_err(|r| match r.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge(state.settings.max_body_bytes),
        _ => ApiError::InvalidJson(r.body_text()),
    })?;
    let body = serde_json::from_slice(&body).map_err(|e| ApiError::InvalidJson(e.to_string()))?;
    completions::chat(&state, caller, body).await
}
