//! Sending one request to a worker of the model: least loaded first, and once more elsewhere when the
//! chosen worker fails before answering (connection refused, 5xx). Once a worker has answered, nothing
//! is retried: the answer may already be on its way to the client.

use reqwest::header::HeaderMap;
use serde_json::Value;
use tracing::field::Empty;
use tracing::Instrument as _;

use crate::error::ApiError;
use crate::state::AppState;

/// A worker's answer: its status and the response to read (a body or an event stream).
#[derive(Debug)]
pub struct Upstream {
    pub response: reqwest::Response,
    pub worker: String,
    /// When the request went to this worker: the gateway's overhead is measured against it.
    pub sent: std::time::Instant,
}

/// Tries at most this many workers for one request.
const ATTEMPTS: usize = 2;

/// # Errors
/// [`ApiError::NoReadyWorker`] when none is ready, [`ApiError::UpstreamFailed`] when every attempt failed.
pub async fn send(state: &AppState, model: &str, body: &Value, request_id: &str) -> Result<Upstream, ApiError> {
    let workers = state.registry.ready(model).await;
    if workers.is_empty() {
        return Err(ApiError::NoReadyWorker(model.to_owned()));
    }
    let mut last_error = String::new();
    let mut all_busy = true;
    for worker in workers.iter().take(ATTEMPTS) {
        let started = std::time::Instant::now();
        // The worker's span continues this one: the trace goes on in its `traceparent` header.
        let span = tracing::info_span!(
            "worker request",
            otel.name = "POST /v1/chat/completions",
            otel.kind = "client",
            server.address = %worker.url,
            http.response.status_code = Empty,
        );
        let mut trace_headers = HeaderMap::new();
        runaii_telemetry::inject(&span, &mut trace_headers);
        let sent = state
            .http
            .post(format!("{}/v1/chat/completions", worker.url))
            .headers(trace_headers)
            .header("x-request-id", request_id)
            .json(body)
            .send()
            .instrument(span.clone())
            .await;
        if let Ok(response) = &sent {
            span.record("http.response.status_code", i64::from(response.status().as_u16()));
        }
        match sent {
            Ok(response) if !response.status().is_server_error() => {
                return Ok(Upstream { response, worker: worker.url.clone(), sent: started });
            }
            Ok(response) => {
                last_error = format!("worker {} answered {}", worker.url, response.status());
                all_busy &= response.status() == reqwest::StatusCode::SERVICE_UNAVAILABLE;
                // A 503 from a busy worker is load, not a failure: try the next without marking it down.
                if response.status() != reqwest::StatusCode::SERVICE_UNAVAILABLE {
                    state.registry.mark_down(&worker.url);
                }
            }
            Err(e) => {
                all_busy = false;
                last_error = format!("worker {} unreachable: {e}", worker.url);
                state.registry.mark_down(&worker.url);
            }
        }
        tracing::warn!(%request_id, error = %last_error, "worker failed before answering; trying another");
    }
    // Workers whose queues are full are load, not failure: a 503 the SDKs retry after a pause.
    if all_busy {
        return Err(ApiError::WorkersBusy(model.to_owned()));
    }
    Err(ApiError::UpstreamFailed(last_error))
}
