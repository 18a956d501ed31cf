//! `GET /health`: 503 while the model loads, 200 with what this replica serves once it is ready.

use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::AppState;

pub(super) async fn health(State(state): State<AppState>) -> Response {
    let Ok((loaded, template)) = state.ready() else {
        return (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"status": "loading", "model": state.settings.model_id}))).into_response();
    };
    let settings = &loaded.settings;
    Json(json!({
        "status": "ok",
        "model": state.settings.model_id,
        "context_length": settings.ctx_per_slot,
        "slots": settings.slots,
        "slots_busy": loaded.stats.active_slots.load(Ordering::Relaxed),
        "queue_depth": loaded.queue_depth(),
        "queue_capacity": loaded.jobs.capacity(),
        "threads": settings.threads,
        "chat_template": template.from_model,
        "supports_tools": template.supports_tools,
        "tool_format": template.tool_format.name(),
    }))
    .into_response()
}
