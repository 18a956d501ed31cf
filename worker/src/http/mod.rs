//! The worker's OpenAI-compatible HTTP surface.

mod auth;
mod chat;
mod health;
mod metrics;
mod shape;
mod stream;
mod usage;

use std::sync::{Arc, OnceLock};

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;

pub use metrics::HttpMetrics;

use runaii_wire::request_signature::ReplayGuard;
use runaii_wire::worker_auth::WorkerSecrets;

use crate::config::Settings;
use crate::engine::receipt::Receipts;
use crate::engine::Loaded;
use crate::error::ApiError;
use crate::template::ChatTemplate;

/// Shared by every handler. `loaded` and `template` are empty while the model loads (the template is set
/// first).
#[derive(Debug, Clone)]
pub struct AppState {
    pub settings: Arc<Settings>,
    pub loaded: Arc<OnceLock<Arc<Loaded>>>,
    /// The model's chat template (or `--chat-template-file`), read once the model is up.
    pub template: Arc<OnceLock<ChatTemplate>>,
    pub metrics: Arc<HttpMetrics>,
    /// Who may ask for inference: the gateways, proven by a signature under the fleet's secret.
    pub secrets: WorkerSecrets,
    /// The signatures already accepted within their window: each is good once.
    pub replays: Arc<ReplayGuard>,
    /// What each recent request consumed, by cache scope and request id.
    pub receipts: Arc<Receipts>,
}

impl AppState {
    /// # Errors
    /// [`ApiError::Loading`] until the model is up.
    pub fn ready(&self) -> Result<(&Arc<Loaded>, &ChatTemplate), ApiError> {
        self.loaded.get().zip(self.template.get()).ok_or(ApiError::Loading)
    }
}

pub fn router(state: AppState) -> Router {
    let limit = state.settings.max_body_bytes;
    let inference = Router::new()
        .route("/v1/chat/completions", post(chat::create))
        .route("/v1/requests/{id}/usage", get(usage::read))
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), auth::require_gateway));
    Router::new()
        .merge(inference)
        .route("/health", get(health::health))
        .route("/metrics", get(metrics::render))
        .fallback(|| async { ApiError::NoRoute })
        .layer(DefaultBodyLimit::max(limit))
        .layer(runaii_telemetry::trace_requests())
        .with_state(state)
}
