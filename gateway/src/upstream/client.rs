//! Sending one request to a worker of the model: the one whose cache most likely holds its prompt prefix
//! (`affinity.rs`) unless that one is full, else the least loaded; and once more elsewhere only when
//! the request cannot have started there (the connection was refused, or the worker said it is full).
//! Once a worker has the request, nothing is retried: tokens may have been generated, and the answer may
//! already be on its way to the client.
//!
//! Every request carries its tenant's cache scope (`runaii_wire::cache_scope`): a worker reuses a cached
//! prompt prefix only for the tenant that left it. Each request is signed for its body, scope and time
//! (`runaii_wire::signed_request`); an engine of another make gets the static bearer instead
//! (`Registry::authorization`).
//!
//! What a worker answers about the request itself (a 4xx, a 5xx such as a failed validation) is that
//! request's outcome: it never takes the worker out of rotation for everyone else. Only transport
//! failures and timeouts do. Worker addresses and their error text stay in the logs, under the request
//! id; the customer's error names neither.

use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use runaii_wire::cache_scope::{self, CacheScope};
use runaii_wire::signed_request::RequestFacts;
use serde_json::Value;
use tracing::field::Empty;
use tracing::Instrument as _;

use uuid::Uuid;

use super::affinity::Affinity;
use super::load::InFlight;
use crate::error::ApiError;
use crate::state::AppState;

/// A worker's answer: its status and the response to read (a body or an event stream).
#[derive(Debug)]
pub struct Upstream {
    pub response: reqwest::Response,
    pub worker: String,
    /// When the request went to this worker: the gateway's overhead is measured against it.
    pub sent: Instant,
    pub limits: Limits,
    /// Counts the request in the worker's load until the answer is read or dropped.
    pub in_flight: InFlight,
}

/// How long either end of an answer may keep it waiting.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The worker's silence once its answer has begun.
    pub worker_idle: Duration,
    /// A streaming client leaving the next chunk untaken.
    pub client_write: Duration,
}

/// Where a worker takes chat completions.
const CHAT_PATH: &str = "/v1/chat/completions";

/// Tries at most this many workers for one request.
const ATTEMPTS: usize = 2;

/// What one attempt came to.
enum Attempt {
    Answered(reqwest::Response),
    /// The request never reached the worker: safe to send elsewhere.
    NotDelivered(String),
    /// The worker had the request and then broke or went silent: not retried.
    Broken(String),
}

/// # Errors
/// [`ApiError::NoReadyWorker`] when none is ready, [`ApiError::WorkersBusy`] when every one tried was
/// full, [`ApiError::UpstreamFailed`] when the worker failed (the detail is logged, not sent).
pub async fn send(state: &AppState, tenant: Uuid, model: &str, body: &Value, request_id: &str) -> Result<Upstream, ApiError> {
    let (workers, choice) = Affinity::of(tenant, body).order(state.registry.ready(model).await);
    crate::metrics::global().routing.add(&[choice.label()], 1);
    if workers.is_empty() {
        return Err(ApiError::NoReadyWorker(model.to_owned()));
    }
    let timeout = Duration::from_millis(state.settings.workers.worker_headers_timeout_ms);
    let limits = Limits {
        worker_idle: Duration::from_millis(state.settings.workers.worker_idle_timeout_ms),
        client_write: Duration::from_millis(state.settings.client_write_timeout_ms),
    };
    let scope = CacheScope::of_tenant(&state.secrets, tenant.as_bytes());
    // Written once, signed per attempt: the signature covers these very bytes.
    let body = serde_json::to_vec(body).map_err(|e| ApiError::Internal(format!("request body not serialized: {e}")))?;
    let mut all_busy = true;
    let mut last_failure = String::new();
    for worker in workers.iter().take(ATTEMPTS) {
        let started = Instant::now();
        let in_flight = state.registry.start_request(&worker.url);
        match attempt(state, &worker.url, &body, request_id, &scope, timeout).await {
            Attempt::Answered(response) if response.status() == reqwest::StatusCode::SERVICE_UNAVAILABLE => {
                // A full queue is load, not failure, and nothing ran: try the next worker.
                tracing::info!(%request_id, worker = %worker.url, "worker at capacity; trying another");
            }
            Attempt::Answered(response) => return Ok(Upstream { response, worker: worker.url.clone(), sent: started, limits, in_flight }),
            Attempt::NotDelivered(detail) => {
                all_busy = false;
                tracing::warn!(%request_id, worker = %worker.url, %detail, "worker unreachable; trying another");
                state.registry.set_aside(&worker.url);
                last_failure = detail;
            }
            Attempt::Broken(detail) => {
                tracing::warn!(%request_id, worker = %worker.url, %detail, "worker failed with the request; not retried");
                state.registry.set_aside(&worker.url);
                return Err(ApiError::UpstreamFailed(detail));
            }
        }
    }
    // Workers whose queues are full are load, not failure: a 503 the SDKs retry after a pause.
    if all_busy {
        return Err(ApiError::WorkersBusy(model.to_owned()));
    }
    Err(ApiError::UpstreamFailed(last_failure))
}

async fn attempt(state: &AppState, url: &str, body: &[u8], request_id: &str, scope: &CacheScope, timeout: Duration) -> Attempt {
    // The worker's span continues this one: the trace goes on in its `traceparent` header.
    let span = tracing::info_span!(
        "worker request",
        otel.name = "POST /v1/chat/completions",
        otel.kind = "client",
        server.address = %url,
        http.response.status_code = Empty,
    );
    let mut headers = HeaderMap::new();
    runaii_telemetry::inject(&span, &mut headers);
    // The tenant's cache scope: the worker reuses only this tenant's cached prompt prefixes.
    if let Some(value) = scope.header_value().and_then(|v| HeaderValue::from_str(v).ok()) {
        headers.insert(cache_scope::HEADER, value);
    }
    let facts = RequestFacts { method: "POST", path: CHAT_PATH, body, scope: scope.header_value() };
    let request = state
        .http
        .post(format!("{url}{CHAT_PATH}"))
        .headers(headers)
        .header(AUTHORIZATION, state.registry.authorization(url, &facts))
        .header(CONTENT_TYPE, "application/json")
        .header("x-request-id", request_id)
        .body(body.to_vec())
        .send()
        .instrument(span.clone());
    // Until the response headers: a worker that accepted the request and then hangs is cut here. (A
    // non-streamed answer's headers come with its end, so this bounds its whole generation.)
    match tokio::time::timeout(timeout, request).await {
        Err(_) => Attempt::Broken(format!("no answer within {} ms", timeout.as_millis())),
        Ok(Err(e)) if e.is_connect() => Attempt::NotDelivered(format!("connect: {e}")),
        Ok(Err(e)) => Attempt::Broken(format!("transport: {e}")),
        Ok(Ok(response)) => {
            span.record("http.response.status_code", i64::from(response.status().as_u16()));
            Attempt::Answered(response)
        }
    }
}
