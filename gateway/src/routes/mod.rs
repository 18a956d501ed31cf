//! HTTP routes. Handlers are thin: parse, call a service, answer.

mod account;
mod batches;
mod body;
mod chat;
mod files;
mod inference;
mod messages;
mod metrics;
mod models;
mod panic;
mod query;
mod responses;
mod stored_responses;

use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::routing::{get, post};
use axum::Router;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::compression::CompressionLayer;
use utoipa::OpenApi;

use crate::error::ApiError;
use crate::state::AppState;

/// The OpenAPI paths of the routes below (the admin API lists its own): keep the two lists together.
#[derive(OpenApi)]
#[openapi(paths(
    models::list,
    models::retrieve,
    chat::create,
    responses::create,
    stored_responses::retrieve,
    stored_responses::delete,
    stored_responses::input_items,
    stored_responses::cancel,
    messages::create,
    files::create,
    files::list,
    files::retrieve,
    files::content,
    files::delete,
    batches::create,
    batches::list,
    batches::retrieve,
    batches::cancel,
    account::get,
    health,
    metrics::scrape,
))]
pub struct PublicApi;

/// The public listener's routes; `service` holds routes other modules own (the OpenAPI document), mounted
/// under the same layers.
pub fn router(state: AppState, service: Router<AppState>) -> Router {
    let limit = state.settings.max_body_bytes;
    Router::new()
        .route("/v1/models", get(models::list))
        .route("/v1/models/{*id}", get(models::retrieve))
        .route("/v1/chat/completions", post(chat::create))
        .route("/v1/responses", post(responses::create))
        .route("/v1/responses/{id}", get(stored_responses::retrieve).delete(stored_responses::delete))
        .route("/v1/responses/{id}/input_items", get(stored_responses::input_items))
        .route("/v1/responses/{id}/cancel", post(stored_responses::cancel))
        .route("/v1/batches", post(batches::create).get(batches::list))
        .route("/v1/batches/{id}", get(batches::retrieve))
        .route("/v1/batches/{id}/cancel", post(batches::cancel))
        .route("/v1/account", get(account::get))
        .route("/v1/messages", post(messages::create))
        .merge(crate::admin::router())
        .route("/health", get(|| async { "ok" }))
        .route("/metrics", get(metrics::scrape))
        .merge(service)
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn_with_state(body::Window(state.settings.body_read_timeout_ms), body::read_in_time))
        .merge(files_router(&state))
        .fallback(|| async { ApiError::NoRoute })
        .layer(CatchPanicLayer::custom(panic::respond))
        .layer(middleware::from_fn(crate::request_id::stamp))
        .layer(middleware::from_fn(crate::metrics::track))
        .layer(runaii_telemetry::trace_requests())
        // gzip for clients that accept it (JSON, CSV, JSONL, pages); never event streams, which must flow.
        .layer(CompressionLayer::new().gzip(true))
        .with_state(state)
}

/// `/v1/files`, whose uploads are larger and slower than any other request: their own size limit (the
/// largest file and its form's few fields) and time to arrive.
fn files_router(state: &AppState) -> Router<AppState> {
    let files = &state.settings.files;
    let limit = usize::try_from(files.max_bytes).unwrap_or(usize::MAX).saturating_add(64 * 1024);
    Router::new()
        .route("/v1/files", post(files::create).get(files::list))
        .route("/v1/files/{id}", get(files::retrieve).delete(files::delete))
        .route("/v1/files/{id}/content", get(files::content))
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn_with_state(body::Window(files.upload_timeout_ms), body::read_in_time))
}

/// The private listener (`RUNAII_METRICS_ADDR`): `/metrics` without a token, and `/health`, for
/// Prometheus and probes on the cluster network. Never expose it through the public load balancer.
pub fn private_router(state: AppState) -> Router {
    Router::new()
        .route("/metrics", get(metrics::render))
        .route("/health", get(|| async { "ok" }))
        .fallback(|| async { ApiError::NoRoute })
        .with_state(state)
}

/// Liveness: the route is a closure in the router, so its documentation lives here.
#[utoipa::path(
    get,
    path = "/health",
    tag = "service",
    operation_id = "health",
    security(()),
    responses((status = 200, description = "`ok` while the process serves", body = String, content_type = "text/plain"))
)]
#[expect(dead_code, reason = "documents the router's `/health` closure; never called")]
fn health() {}
