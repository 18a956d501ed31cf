//! Relaying a worker's chunk stream to the client while metering it, in whichever dialect the client
//! speaks ([`Events`]: chat chunks, Responses events, Messages events).
//!
//! The relay runs in its own task, so it finishes its bookkeeping even when the client leaves. Who ended
//! the stream decides the bill (docs/finance.md, work not received in full):
//!
//! - the client left (before or after the first content chunk), or stopped reading for
//!   `client_write_timeout_ms`, or the stream ran past the longest a request may run: `cancelled`, billed
//!   for the work done — the prompt the worker read and every token it generated until it let the request
//!   go, as the worker tells it (`upstream::work_done`), never less than what the worker sent;
//! - the worker failed (an error chunk, a broken or silent connection): `failed`, billed for what the
//!   client received.
//!
//! The worker is released at once in every case. On a complete answer the cost record is committed before
//! the dialect's last events go out.

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
use crate::state::AppState;
use crate::upstream::Upstream;

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
    /// as recorded (`prompt_tokens_details.cached_tokens` included).
    fn complete(&mut self, usage_chunk: Value, cost: Decimal) -> Vec<Bytes>;
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
pub fn relay(state: &AppState, ledger: Ledger, upstream: Upstream, dialect: impl Events) -> Response {
    let state = state.clone();
    let (tx, rx) = mpsc::channel(64);
    let (completed, completion) = oneshot::channel();
    let request_id = ledger.request_id.clone();
    // In the request's span: the trace then covers the stream to its end and its cost record.
    let tasks = ledger.tasks.clone();
    tasks.spawn(
        async move {
            let complete = run(&state, ledger, upstream, dialect, tx).await;
            let _ = completed.send(complete);
        }
        .in_current_span(),
    );
    let mut response =
        ([(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")], Body::from_stream(ReceiverStream::new(rx)))
            .into_response();
    request_id::attach(&mut response, &request_id);
    response.extensions_mut().insert(Completion(std::sync::Arc::new(std::sync::Mutex::new(Some(completion)))));
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
}

/// How a stream was cut before its end, on the customer's side: billed for the work done.
enum Cut {
    /// The client left, or stopped reading.
    ClientGone,
    /// The stream ran for the longest a request may.
    TooLong,
}

/// The worker a stream came from, to ask what it did once the stream is cut.
struct Source<'a> {
    state: &'a AppState,
    worker: String,
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
async fn run(state: &AppState, ledger: Ledger, upstream: Upstream, mut dialect: impl Events, tx: Tx) -> bool {
    let source = Source { state, worker: upstream.worker.clone() };
    // The hold lives as long as the stream, and the stream no longer than a request may.
    let _renewal = ledger.keep_hold();
    let deadline = ledger.deadline();
    let (upstream_sent, limits) = (upstream.sent, upstream.limits);
    let mut first_token = true;
    let metrics = crate::metrics::global();
    let mut reader = SseReader::new(upstream.response.bytes_stream(), limits.worker_idle);
    let mut metered = Metered::default();
    // What the client has been given: the bill if it leaves.
    let mut delivered = Tokens::default();
    if !send_all(&tx, dialect.start(), limits.client_write).await {
        cut(&ledger, &source, reader, &metered, Cut::ClientGone, &mut dialect, &tx).await;
        return false;
    }
    loop {
        let next = tokio::select! {
            () = tx.closed() => None,
            () = tokio::time::sleep_until(deadline) => Some(None),
            next = reader.next_data() => Some(Some(next)),
        };
        let next = match next {
            Some(Some(next)) => next,
            Some(None) => return cut(&ledger, &source, reader, &metered, Cut::TooLong, &mut dialect, &tx).await,
            None => return cut(&ledger, &source, reader, &metered, Cut::ClientGone, &mut dialect, &tx).await,
        };
        let data = match next {
            Ok(Some(data)) if data != "[DONE]" => data,
            Ok(_) => return fail(&ledger, delivered, &mut dialect, &tx, "the worker ended the stream without usage").await,
            Err(e) => return fail(&ledger, delivered, &mut dialect, &tx, &e).await,
        };
        let Ok(mut chunk) = serde_json::from_str::<Value>(&data) else {
            return fail(&ledger, delivered, &mut dialect, &tx, "the worker sent a chunk that is not JSON").await;
        };
        if let Some(error) = chunk.get("error") {
            let message = error["message"].as_str().unwrap_or("the worker failed mid-answer").to_owned();
            return fail(&ledger, delivered, &mut dialect, &tx, &message).await;
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
                return cut(&ledger, &source, reader, &metered, Cut::ClientGone, &mut dialect, &tx).await;
            }
            delivered = metered.tokens;
            continue;
        }
        let upstream_time = upstream_sent.elapsed();
        let tokens = Tokens::of_usage(&chunk["usage"]);
        let (events, recorded) = match ledger.record_delivered(Outcome::Succeeded(tokens)).await {
            Ok(cost) => {
                tokens.write_usage(&mut chunk["usage"]);
                (dialect.complete(chunk, cost), true)
            }
            Err(e) => (dialect.error(&e), false),
        };
        metrics.overhead(ledger.endpoint, ledger.started.elapsed(), upstream_time);
        send_all(&tx, events, limits.client_write).await;
        return recorded;
    }
}

/// The stream was cut on the customer's side: the worker is let go, asked what it did, and the request
/// billed for that work (at least what the worker sent). A client still there is told why.
async fn cut<S>(
    ledger: &Ledger,
    source: &Source<'_>,
    reader: SseReader<S>,
    metered: &Metered,
    why: Cut,
    dialect: &mut impl Events,
    tx: &Tx,
) -> bool {
    // Dropping the reader closes the worker connection: the worker frees the slot and counts the work.
    drop(reader);
    let told = crate::upstream::work_done(source.state, &source.worker, &ledger.request_id).await;
    let tokens = told.map_or(metered.tokens, |usage| at_least(Tokens::of_usage(&usage), metered.tokens));
    let error = match why {
        Cut::ClientGone => None,
        Cut::TooLong => Some(ApiError::MaxDurationExceeded(u32::try_from(ledger.lifetime.max_request.as_secs()).unwrap_or(u32::MAX))),
    };
    let outcome = match &error {
        None => Outcome::Cancelled { tokens, http_status: 499, error_code: None },
        Some(error) => Outcome::Cancelled { tokens, http_status: error.status().as_u16(), error_code: error.code() },
    };
    if let Err(e) = ledger.record_delivered(outcome).await {
        tracing::error!(request_id = %ledger.request_id, error = %e, "cut stream not recorded");
    }
    if let Some(error) = error {
        tracing::info!(request_id = %ledger.request_id, "stream ended at the longest a request may run");
        send_all(tx, dialect.error(&error), CLIENT_ERROR_WAIT).await;
    }
    false
}

/// The larger of each count: the worker's tale of its work never bills less than the answer it sent.
fn at_least(told: Tokens, seen: Tokens) -> Tokens {
    Tokens::new(told.input.max(seen.input), told.cached.max(seen.cached), told.output.max(seen.output))
}

fn carries_answer(chunk: &Value) -> bool {
    let delta = &chunk["choices"][0]["delta"];
    delta["content"].as_str().is_some_and(|t| !t.is_empty()) || delta["tool_calls"].is_array()
}

/// The worker failed mid-stream (broke, went silent, or sent an error such as an answer that fails its
/// schema): the fault is ours, so the client gets a clean error and is billed only for what it received.
async fn fail(ledger: &Ledger, delivered: Tokens, dialect: &mut impl Events, tx: &Tx, why: &str) -> bool {
    tracing::warn!(request_id = %ledger.request_id, %why, "stream failed");
    let outcome = Outcome::Failed { tokens: delivered, http_status: 502, error_code: Some("upstream_error".into()) };
    if let Err(e) = ledger.record_delivered(outcome).await {
        tracing::error!(request_id = %ledger.request_id, error = %e, "failed stream not recorded");
    }
    send_all(tx, dialect.error(&ApiError::UpstreamFailed(why.to_owned())), CLIENT_ERROR_WAIT).await;
    false
}
