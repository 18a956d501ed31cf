//! Relaying a worker's chunk stream to the client while metering it, in whichever dialect the client
//! speaks ([`Events`]: chat chunks, Responses events, Messages events).
//!
//! The relay runs in its own task, so it finishes its bookkeeping even when the client leaves: the worker
//! is released at once, and a client that disconnects is billed for the work done for it — the prompt
//! tokens the worker read and the tokens it generated, as the worker reports once the request has ended
//! there (`upstream::Receipt`; the running count on the chunks when it cannot tell). A client that stops
//! reading is cut after `client_write_timeout_ms` and billed the same way. A worker silent for
//! `worker_idle_timeout_ms`, or one that fails, fails the stream: the provider's fault, billed only for
//! the tokens the client received. A stream still running `--max-request-s` after it was sent is ended
//! with an error event and billed for the work done, so no request outlives its credit hold. On a
//! complete answer the cost record is committed before the dialect's last events go out.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use rust_decimal::Decimal;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tracing::Instrument as _;

use super::sse::SseReader;
use crate::billing::{Ledger, Outcome, Tokens};
use crate::error::ApiError;
use crate::request_id;
use crate::upstream::{Receipt, Upstream};

/// The worker's running usage on each chunk; stripped before the chunk reaches the client.
pub const RUNNING_USAGE: &str = "x_runaii_usage";

type Tx = mpsc::Sender<Result<Bytes, Infallible>>;

/// How a client dialect writes a stream. Each method returns the SSE events to send, in order.
pub trait Events: Send + 'static {
    /// Before the first chunk.
    fn start(&mut self) -> Vec<Bytes>;
    /// The running token counts, told before each chunk that carries them (for dialects that announce
    /// the prompt's size up front).
    fn metered(&mut self, _tokens: Tokens) {}
    /// A content chunk from the worker (running usage already stripped, id already set).
    fn chunk(&mut self, chunk: Value) -> Vec<Bytes>;
    /// The worker's final usage chunk, after the cost record is committed; its `usage` holds the counts
    /// as recorded (`prompt_tokens_details.cached_tokens` included). A dialect that keeps its answers (the
    /// Responses store) keeps it here, before the last events go out.
    fn complete(&mut self, usage_chunk: Value, cost: Decimal) -> impl std::future::Future<Output = Vec<Bytes>> + Send;
    /// The stream failed; the client gets one clean error.
    fn error(&mut self, error: &ApiError) -> Vec<Bytes>;
}

/// How long the one error event of a failed stream waits for a client that is not reading.
const CLIENT_ERROR_WAIT: Duration = Duration::from_secs(5);

/// One SSE event with only a `data` line.
#[must_use]
pub fn data_event(data: &str) -> Bytes {
    Bytes::from(format!("data: {data}\n\n"))
}

/// One SSE event whose `data` is `value` as JSON, written straight into the event (no string of it first).
#[must_use]
pub fn json_event(value: &Value) -> Bytes {
    let mut event = b"data: ".to_vec();
    // Writing a `Value` into memory cannot fail: its keys are strings.
    let _ = serde_json::to_writer(&mut event, value);
    event.extend_from_slice(b"\n\n");
    Bytes::from(event)
}

/// Whether a stream's answer was complete and recorded `succeeded`, known when its relay ends: attached
/// to the streamed response, for whoever keeps the answer (an `Idempotency-Key`'s store).
/// (Response extensions must be `Clone`; the receiver is taken out once, by the one who keeps the answer.)
#[derive(Debug, Clone)]
pub struct Completion(std::sync::Arc<std::sync::Mutex<Option<oneshot::Receiver<bool>>>>);

impl Completion {
    /// Completion as `receiver` will tell it.
    #[must_use]
    pub fn new(receiver: oneshot::Receiver<bool>) -> Self {
        Self(std::sync::Arc::new(std::sync::Mutex::new(Some(receiver))))
    }

    /// Whether the stream completed, once its relay ends; `false` if the relay was lost or this was
    /// asked before.
    pub async fn completed(&self) -> bool {
        let receiver = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        match receiver {
            Some(receiver) => receiver.await.unwrap_or(false),
            None => false,
        }
    }
}

/// Answers with the dialect's events as the worker's chunks arrive; the relay runs in its own task.
pub fn relay(ledger: Ledger, upstream: Upstream, dialect: impl Events) -> Response {
    let (tx, rx) = mpsc::channel(64);
    let (completed, completion) = oneshot::channel();
    let request_id = ledger.request_id.clone();
    // In the request's span: the trace then covers the stream to its end and its cost record.
    let tasks = ledger.tasks.clone();
    tasks.spawn(
        async move {
            let complete = run(ledger, upstream, dialect, tx).await;
            let _ = completed.send(complete);
        }
        .in_current_span(),
    );
    let mut response =
        ([(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")], Body::from_stream(ReceiverStream::new(rx)))
            .into_response();
    request_id::attach(&mut response, &request_id);
    response.extensions_mut().insert(Completion::new(completion));
    response
}

#[derive(Default)]
struct Metered {
    tokens: Tokens,
}

impl Metered {
    fn take_running(&mut self, chunk: &mut Value) {
        if let Some(usage) = chunk.as_object_mut().and_then(|c| c.remove(RUNNING_USAGE)) {
            let running = Tokens::of_usage(&usage);
            self.tokens = Tokens::new(running.input, running.cached, self.tokens.output.max(running.output));
        }
    }

    fn failed(&self) -> Outcome {
        Outcome::Failed { tokens: self.tokens, http_status: 502, error_code: Some("upstream_error".into()) }
    }
}

/// Sends the events in order. `false` when the client left, or took none of them for `within`: a client
/// that stops reading holds the worker's slot and the relay's buffers, so it is cut.
async fn send_all(tx: &Tx, events: Vec<Bytes>, within: Duration) -> bool {
    for e in events {
        match tokio::time::timeout(within, tx.send(Ok(e))).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return false,
            Err(_) => {
                tracing::info!(waited_ms = within.as_millis(), "the client stopped reading; its stream is cut");
                return false;
            }
        }
    }
    true
}

/// Relays the stream to its end; `true` when the answer was complete and recorded `succeeded`.
async fn run(ledger: Ledger, upstream: Upstream, mut dialect: impl Events, tx: Tx) -> bool {
    let (upstream_sent, limits, receipt) = (upstream.sent, upstream.limits, upstream.receipt.clone());
    let mut first_token = true;
    let metrics = crate::metrics::global();
    let mut reader = SseReader::new(upstream.response.bytes_stream(), limits.worker_idle);
    let mut metered = Metered::default();
    // What the client has been given: the bill if it leaves.
    let mut delivered = Tokens::default();
    if !send_all(&tx, dialect.start(), limits.client_write).await {
        cancelled(&ledger, reader, &receipt, delivered).await;
        return false;
    }
    let ends = tokio::time::Instant::from_std(limits.ends);
    loop {
        let next = tokio::select! {
            () = tx.closed() => None,
            () = tokio::time::sleep_until(ends) => return past_time_limit(&ledger, reader, &receipt, &metered, &mut dialect, &tx, limits.max_request_s).await,
            next = reader.next_data() => Some(next),
        };
        let Some(next) = next else {
            cancelled(&ledger, reader, &receipt, delivered).await;
            return false;
        };
        let data = match next {
            Ok(Some(data)) if data != "[DONE]" => data,
            Ok(_) => return fail(&ledger, &metered, &mut dialect, &tx, "the worker ended the stream without usage").await,
            Err(e) => return fail(&ledger, &metered, &mut dialect, &tx, &e).await,
        };
        let Ok(mut chunk) = serde_json::from_str::<Value>(&data) else {
            return fail(&ledger, &metered, &mut dialect, &tx, "the worker sent a chunk that is not JSON").await;
        };
        if let Some(error) = chunk.get("error") {
            let message = error["message"].as_str().unwrap_or("the worker failed mid-answer").to_owned();
            return fail(&ledger, &metered, &mut dialect, &tx, &message).await;
        }
        metered.take_running(&mut chunk);
        dialect.metered(metered.tokens);
        chunk["id"] = json!(ledger.request_id);
        let is_usage_chunk = chunk["choices"].as_array().is_some_and(Vec::is_empty) && chunk["usage"].is_object();
        if chunk.get("timings").is_some_and(Value::is_object) {
            metrics.worker_timings(&ledger.model.id, &chunk["timings"]);
        }
        if !is_usage_chunk {
            // The worker's first chunk only names the role, before any decoding: the first token is
            // the first chunk with text or a tool call.
            if first_token && carries_answer(&chunk) {
                first_token = false;
                metrics.ttft.observe(&[&ledger.model.id], ledger.started.elapsed());
            }
            if !send_all(&tx, dialect.chunk(chunk), limits.client_write).await {
                cancelled(&ledger, reader, &receipt, delivered).await;
                return false;
            }
            delivered = metered.tokens;
            continue;
        }
        let upstream_time = upstream_sent.elapsed();
        let tokens = Tokens::of_usage(&chunk["usage"]);
        let (events, recorded) = match ledger.record_delivered(Outcome::Succeeded(tokens)).await {
            Ok(cost) => {
                tokens.write_usage(&mut chunk["usage"]);
                (dialect.complete(chunk, cost).await, true)
            }
            Err(e) => (dialect.error(&e), false),
        };
        metrics.overhead(ledger.endpoint, ledger.started.elapsed(), upstream_time);
        send_all(&tx, events, limits.client_write).await;
        return recorded;
    }
}

/// The client left or stopped reading: it is billed for the work done for it.
async fn cancelled<S>(ledger: &Ledger, reader: SseReader<S>, receipt: &Receipt, delivered: Tokens) {
    // Dropping the reader closes the worker connection, freeing its slot.
    drop(reader);
    let tokens = super::worker::work_done(receipt, delivered).await;
    if let Err(e) = ledger.record_delivered(Outcome::Cancelled(tokens)).await {
        tracing::error!(request_id = %ledger.request_id, error = %e, "cancelled stream not recorded");
    }
}

/// The stream ran past the longest a request may run: the worker is released, the client gets one clean
/// error, and the work done (the worker's running count) is billed.
async fn past_time_limit<S>(
    ledger: &Ledger,
    reader: SseReader<S>,
    receipt: &Receipt,
    metered: &Metered,
    dialect: &mut impl Events,
    tx: &Tx,
    max_s: u32,
) -> bool {
    drop(reader);
    let error = ApiError::RequestTimeLimit(max_s);
    tracing::warn!(request_id = %ledger.request_id, max_s, "stream ran past the request time limit; ended");
    let tokens = super::worker::work_done(receipt, metered.tokens).await;
    let outcome = Outcome::Failed { tokens, http_status: error.status().as_u16(), error_code: error.code() };
    if let Err(e) = ledger.record_delivered(outcome).await {
        tracing::error!(request_id = %ledger.request_id, error = %e, "stream past its time limit not recorded");
    }
    send_all(tx, dialect.error(&error), CLIENT_ERROR_WAIT).await;
    false
}

fn carries_answer(chunk: &Value) -> bool {
    let delta = &chunk["choices"][0]["delta"];
    delta["content"].as_str().is_some_and(|t| !t.is_empty()) || delta["tool_calls"].is_array()
}

/// The worker failed mid-stream: the client gets a clean error and is billed for what it received.
async fn fail(ledger: &Ledger, metered: &Metered, dialect: &mut impl Events, tx: &Tx, why: &str) -> bool {
    tracing::warn!(request_id = %ledger.request_id, %why, "stream failed");
    if let Err(e) = ledger.record_delivered(metered.failed()).await {
        tracing::error!(request_id = %ledger.request_id, error = %e, "failed stream not recorded");
    }
    send_all(tx, dialect.error(&ApiError::UpstreamFailed(why.to_owned())), CLIENT_ERROR_WAIT).await;
    false
}
