//! Sending one request to a worker of the model: the one whose cache most likely holds its prompt prefix
//! (`affinity.rs`) unless that one is full, else the least loaded; and once more elsewhere only when
//! the request cannot have started there (the connection was refused, or the worker said it is full).
//! Once a worker has the request, nothing is retried: tokens may have been generated, and the answer may
//! already be on its way to the client.
//!
//! Every request carries its tenant's cache scope (`runaii_wire::cache_scope`): a worker reuses a cached
//! prompt prefix only for the tenant that left it. Every request is signed (`runaii_wire::request_signature`):
//! the signature covers the time, a fresh nonce, the scope, the class and the body, so a request copied
//! off the network can be neither replayed nor edited. A worker configured in the catalog also gets the
//! static bearer token, for an engine of another make that cannot check a signature.
//!
//! What a worker answers about the request itself (a 4xx, a 5xx such as a failed validation) is that
//! request's outcome: it never takes the worker out of rotation for everyone else. Nor does a request
//! that outlives its deadline: a long answer or a deep queue is load, not a fault, and it is that
//! request's 504. Only faults of the worker's own do (a refused connection, a reset, an answer that is
//! not HTTP). Worker addresses and their error text stay in the logs, under the request id; the
//! customer's error names neither.
//!
//! The deadline follows the work (`pace.rs`): a whole answer's headers come with its end, so its wait is
//! the base headers timeout plus `max_tokens` at the model's speed; a stream's is the base alone.

use std::time::{Duration, Instant};

use reqwest::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use runaii_wire::cache_scope::CacheScope;
use runaii_wire::priority::Priority;
use runaii_wire::worker_auth::WorkerSecrets;
use serde_json::Value;
use tracing::field::Empty;
use tracing::Instrument as _;

use uuid::Uuid;

use super::affinity::Affinity;
use super::load::InFlight;
use super::receipt::Receipt;
use super::registry::Registry;
use crate::config::Settings;
use crate::error::ApiError;

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
    /// Where to ask what the request consumed, should it be cut or its client leave.
    pub receipt: Receipt,
}

/// A request that got no answer: why, and for a request the worker had when its deadline passed, where
/// to ask what it consumed.
#[derive(Debug)]
pub struct Unanswered {
    pub error: ApiError,
    pub receipt: Option<Receipt>,
}

impl From<ApiError> for Unanswered {
    fn from(error: ApiError) -> Self {
        Self { error, receipt: None }
    }
}

/// How long either end of an answer may keep it waiting.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The worker's silence once its answer has begun.
    pub worker_idle: Duration,
    /// A streaming client leaving the next chunk untaken.
    pub client_write: Duration,
    /// When the request must end, however it is going (`--max-request-s` from its send), and that limit.
    pub ends: Instant,
    pub max_request_s: u32,
}

/// What the gateway asks of a worker, besides the body.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    pub tenant: Uuid,
    pub model: &'a str,
    pub request_id: &'a str,
    /// The most tokens the answer may have: with the model's speed, how long a whole answer may take.
    pub max_tokens: u32,
    pub stream: bool,
    pub priority: Priority,
}

/// The worker's route, as signed and as sent.
const CHAT_PATH: &str = "/v1/chat/completions";

/// Tries at most this many workers for one request.
const ATTEMPTS: usize = 2;

/// What one attempt came to.
enum Attempt {
    Answered(reqwest::Response),
    /// The request never reached the worker: safe to send elsewhere.
    NotDelivered(String),
    /// The worker had the request and then broke: not retried, and the worker is set aside.
    Broken(String),
    /// The answer did not begin within the request's deadline: not retried, and not the worker's fault.
    TimedOut(Duration),
}

/// What sending a request to a worker takes of the gateway: which workers are ready, the client that
/// reaches them, the secrets that sign what it sends, and the limits that time an answer.
#[derive(Clone, Copy)]
pub struct Fleet<'a> {
    pub registry: &'a Registry,
    pub http: &'a reqwest::Client,
    pub secrets: &'a WorkerSecrets,
    pub settings: &'a Settings,
}

/// # Errors
/// [`ApiError::NoReadyWorker`] when none is ready, [`ApiError::WorkersBusy`] when every one tried was
/// full, [`ApiError::UpstreamFailed`] when the worker failed (the detail is logged, not sent),
/// [`ApiError::UpstreamTimeout`] when the answer did not begin within the request's deadline.
pub async fn send(fleet: Fleet<'_>, ask: &Ask<'_>, body: &Value) -> Result<Upstream, Unanswered> {
    let Ask { tenant, model, request_id, .. } = *ask;
    let (workers, choice) = Affinity::of(tenant, body).order(fleet.registry.ready(model).await);
    crate::metrics::global().routing.add(&[choice.label()], 1);
    if workers.is_empty() {
        return Err(ApiError::NoReadyWorker(model.to_owned()).into());
    }
    let timeout = deadline(fleet, ask);
    let max_request_s = fleet.settings.limits.max_request_s;
    let limits = Limits {
        worker_idle: Duration::from_millis(fleet.settings.workers.worker_idle_timeout_ms),
        client_write: Duration::from_millis(fleet.settings.client_write_timeout_ms),
        ends: Instant::now() + Duration::from_secs(u64::from(max_request_s)),
        max_request_s,
    };
    let scope = CacheScope::of_tenant(fleet.secrets, tenant.as_bytes());
    // Serialized once: the signature covers these exact bytes, whichever worker they go to.
    let body = serde_json::to_vec(body).map_err(|e| ApiError::Internal(format!("cannot serialize the worker request: {e}")))?;
    let receipt_at = |url: &str| Receipt {
        http: fleet.http.clone(),
        secrets: fleet.secrets.clone(),
        url: url.to_owned(),
        scope: scope.clone(),
        request_id: request_id.to_owned(),
    };
    let mut all_busy = true;
    let mut last_failure = String::new();
    for worker in workers.iter().take(ATTEMPTS) {
        let started = Instant::now();
        let in_flight = fleet.registry.start_request(&worker.url);
        match attempt(fleet, &worker.url, &body, ask, &scope, timeout).await {
            Attempt::Answered(response) if response.status() == reqwest::StatusCode::SERVICE_UNAVAILABLE => {
                // A full queue is load, not failure, and nothing ran: try the next worker.
                tracing::info!(%request_id, worker = %worker.url, "worker at capacity; trying another");
            }
            Attempt::Answered(response) => {
                let receipt = receipt_at(&worker.url);
                return Ok(Upstream { response, worker: worker.url.clone(), sent: started, limits, in_flight, receipt });
            }
            Attempt::NotDelivered(detail) => {
                all_busy = false;
                tracing::warn!(%request_id, worker = %worker.url, %detail, "worker unreachable; trying another");
                fleet.registry.set_aside(&worker.url);
                last_failure = detail;
            }
            Attempt::Broken(detail) => {
                tracing::warn!(%request_id, worker = %worker.url, %detail, "worker failed with the request; not retried");
                fleet.registry.set_aside(&worker.url);
                return Err(ApiError::UpstreamFailed(detail).into());
            }
            Attempt::TimedOut(after) => {
                tracing::warn!(%request_id, worker = %worker.url, after_ms = after.as_millis(), "no answer within the request's deadline");
                return Err(Unanswered { error: ApiError::UpstreamTimeout(after.as_millis()), receipt: Some(receipt_at(&worker.url)) });
            }
        }
    }
    // Workers whose queues are full are load, not failure: a 503 the SDKs retry after a pause.
    if all_busy {
        return Err(ApiError::WorkersBusy(model.to_owned()).into());
    }
    Err(ApiError::UpstreamFailed(last_failure).into())
}

/// How long the worker may take to begin its answer: the base headers timeout, and for a whole answer
/// the generation of `max_tokens` at the model's speed besides; never past the longest a request may run.
fn deadline(fleet: Fleet<'_>, ask: &Ask<'_>) -> Duration {
    let workers = &fleet.settings.workers;
    let base = Duration::from_millis(workers.worker_headers_timeout_ms);
    let longest = Duration::from_secs(u64::from(fleet.settings.limits.max_request_s));
    if ask.stream {
        return base.min(longest);
    }
    fleet.registry.pace().whole_answer_within(ask.model, base, ask.max_tokens, workers.worker_min_tokens_per_second).min(longest)
}

async fn attempt(fleet: Fleet<'_>, url: &str, body: &[u8], ask: &Ask<'_>, scope: &CacheScope, timeout: Duration) -> Attempt {
    // The worker's span continues this one: the trace goes on in its `traceparent` header.
    let span = tracing::info_span!(
        "worker request",
        otel.name = "POST /v1/chat/completions",
        otel.kind = "client",
        server.address = %url,
        http.response.status_code = Empty,
    );
    let mut headers = super::signed::headers(fleet.secrets, "POST", CHAT_PATH, scope, ask.priority, body);
    runaii_telemetry::inject(&span, &mut headers);
    if let Some(bearer) = fleet.registry.configured_bearer(url).and_then(|b| HeaderValue::from_str(&b).ok()) {
        headers.insert(AUTHORIZATION, bearer);
    }
    let request = fleet
        .http
        .post(format!("{url}{CHAT_PATH}"))
        .headers(headers)
        .header(CONTENT_TYPE, "application/json")
        .header("x-request-id", ask.request_id)
        .body(body.to_vec())
        .send()
        .instrument(span.clone());
    // Until the response headers. (A non-streamed answer's headers come with its end, so this bounds its
    // whole generation.) Past it the request ends; the worker frees its sequence when the connection
    // closes.
    match tokio::time::timeout(timeout, request).await {
        Err(_) => Attempt::TimedOut(timeout),
        Ok(Err(e)) if e.is_connect() => Attempt::NotDelivered(format!("connect: {e}")),
        Ok(Err(e)) => Attempt::Broken(format!("transport: {e}")),
        Ok(Ok(response)) => {
            span.record("http.response.status_code", i64::from(response.status().as_u16()));
            Attempt::Answered(response)
        }
    }
}
