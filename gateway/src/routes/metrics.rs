//! `GET /metrics` on the public listener: staff only. The exposition names every model (private ones
//! included) and sums revenue, so an anonymous caller, or a customer with an API key, gets a 401. Prometheus
//! scrapes the private listener (`RUNAII_METRICS_ADDR`) instead, or sends an admin JWT.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use crate::auth::staff::{Claims, Role};
use crate::error::ApiError;
use crate::state::AppState;

#[utoipa::path(
    get,
    path = "/metrics",
    tag = "service",
    operation_id = "metrics",
    summary = "Prometheus metrics",
    description = "Role: ops or finance, with a token not confined to a tenant (the exposition names private models \
and sums revenue). Prometheus text exposition (version 0.0.4): requests, tokens, exact cost, latencies, gateway \
overhead, schema refusals, worker load; see docs/operations.md. The same text is served without a token on the \
private listener `RUNAII_METRICS_ADDR`, when one is configured.",
    security(("admin_jwt" = [])),
    responses(
        (status = 200, description = "Prometheus text exposition", body = String, content_type = "text/plain"),
        crate::apidoc::errors::AdminErrors,
    )
)]
pub(super) async fn scrape(State(state): State<AppState>, claims: Claims) -> Result<Response, ApiError> {
    if claims.require_unconfined(Role::Ops).is_err() {
        claims.require_unconfined(Role::Finance)?;
    }
    Ok(render(State(state)).await)
}

/// The exposition with the worker registry's view as this replica has it; also the private listener's
/// `/metrics`.
pub(super) async fn render(State(state): State<AppState>) -> Response {
    let text = crate::metrics::exposition(&state.registry.all_ready().await);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}
