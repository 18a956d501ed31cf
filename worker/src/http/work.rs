//! `GET /v1/requests/{id}/usage`: the work the engine did for a request a gateway cut (`crate::work_done`),
//! as a chat completion's `usage`, once the engine has let the request go.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::{ApiError, AppState};

/// How long a question waits for the engine to let the request go: one decode step, or one prompt chunk.
const WAIT: Duration = Duration::from_secs(5);

pub(super) async fn usage(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    match state.work.work_of(&id, WAIT).await {
        Some(usage) => Json(json!({"id": id, "usage": usage})).into_response(),
        None => ApiError::UnknownRequest.into_response(),
    }
}
