//! A stand-in for a runaii worker, for measuring the gateway's own overhead: it speaks the part of the
//! worker's HTTP API the gateway uses (`GET /health`, `POST /v1/chat/completions` whole or streamed, with
//! `usage`, `timings` and the running `x_runaii_usage` on every chunk) and answers at once with a fixed
//! short completion.
//!
//! It exists only behind a process boundary, to benchmark client → gateway → mock against client →
//! mock. It is not a model and must never stand in for the worker in the worker's tests.
//!
//! The gateway finds it like any configured worker: `runaii-gateway upsert-model --id <model>
//! --worker-url http://<listen>` (it then probes `/health`, which must name the same model).

mod chat;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

#[derive(Debug, Clone, clap::Args)]
pub struct MockSettings {
    #[arg(long, default_value = "127.0.0.1:9090")]
    pub listen: SocketAddr,
    /// The model id `/health` reports; the gateway routes only that catalog model here.
    #[arg(long, default_value = "mock-model")]
    pub model: String,
    /// Completion tokens per answer (fewer when the request's max_tokens is lower).
    #[arg(long, default_value_t = 16)]
    pub tokens: u32,
    /// A pause before each streamed token, to make streams last (0: none).
    #[arg(long, default_value_t = 0)]
    pub token_delay_ms: u64,
    /// Slots reported by `/health` (the gateway's load measure: busy / slots).
    #[arg(long, default_value_t = 1024)]
    pub slots: u64,
    #[arg(long, default_value_t = 4096)]
    pub context_length: u64,
    /// Set TCP_NODELAY on accepted connections, as the real worker does. Off by default (axum's `serve`
    /// leaves Nagle's algorithm on), to show what that costs streamed chunks: docs/loadtest.md.
    #[arg(long)]
    pub tcp_nodelay: bool,
}

#[derive(Debug, Clone)]
pub struct MockState {
    pub settings: Arc<MockSettings>,
    busy: Arc<AtomicU64>,
}

impl MockState {
    #[must_use]
    pub fn new(settings: MockSettings) -> Self {
        Self { settings: Arc::new(settings), busy: Arc::new(AtomicU64::new(0)) }
    }

    fn token_delay(&self) -> Option<Duration> {
        (self.settings.token_delay_ms > 0).then(|| Duration::from_millis(self.settings.token_delay_ms))
    }
}

/// Counts a request as busy until dropped (for a stream: when it ends or its client leaves).
struct Busy(Arc<AtomicU64>);

impl Busy {
    fn start(state: &MockState) -> Self {
        state.busy.fetch_add(1, Ordering::Relaxed);
        Self(Arc::clone(&state.busy))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

pub fn router(state: MockState) -> Router {
    Router::new().route("/health", get(health)).route("/v1/chat/completions", post(chat::create)).with_state(state)
}

/// The fields of the worker's `/health` that the gateway's probe reads, and the rest for people.
async fn health(State(state): State<MockState>) -> Json<Value> {
    let s = &state.settings;
    Json(json!({
        "status": "ok",
        "model": s.model,
        "context_length": s.context_length,
        "slots": s.slots,
        "slots_busy": state.busy.load(Ordering::Relaxed),
        "queue_depth": 0,
        "queue_capacity": 0,
        "threads": 0,
        "chat_template": false,
        "supports_tools": false,
        "mock": true,
    }))
}
