//! `GET /v1/requests/{id}/usage`: what a request of the caller's cache scope consumed so far, and whether
//! it has ended (then the counts are final). A gateway asks when it cut the request or its client left,
//! to bill the work done. Signed like every `/v1` route; a request of another scope is not found.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::{ApiError, AppState};

pub(super) async fn read(State(state): State<AppState>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    let scope = match super::chat::cache_scope(&headers) {
        Ok(scope) => scope,
        Err(e) => return e.into_response(),
    };
    match state.receipts.read(&scope, &id) {
        Some(consumed) => Json(consumed).into_response(),
        None => ApiError::UnknownRequest(id).into_response(),
    }
}
