//! `POST /v1/messages` (Anthropic).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;

use super::inference;
use crate::auth::Caller;
use crate::messages::{self, ENDPOINT_MESSAGES};
use crate::state::AppState;

pub(super) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    inference::serve(state, caller, &headers, ENDPOINT_MESSAGES, body, |state, caller, body| async move {
        messages::create(&state, caller, body).await
    })
    .await
}
