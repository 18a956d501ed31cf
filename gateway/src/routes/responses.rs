//! `POST /v1/responses`.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::Response;

use super::chat::json_body;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::responses;
use crate::state::AppState;

pub(super) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = json_body(&state, body)?;
    responses::create(&state, caller, body).await
}
