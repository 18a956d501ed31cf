//! Relaying a worker's chunk stream to the client while metering it.
//!
//! The relay runs in its own task, so it finishes its bookkeeping even when the client leaves: a client
//! that disconnects is billed for the tokens delivered until then (the worker reports a running count on
//! every chunk), and the worker is released at once. On a complete answer the cost record is committed
//! before the usage chunk and `[DONE]` go out.

use std::convert::Infallible;

use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::sse::SseReader;
use super::with_request_id;
use crate::billing::{json_with_cost, Ledger, Outcome};
use crate::error::ApiError;
use crate::upstream::Upstream;

/// The worker's running usage on each chunk; stripped before the chunk reaches the client.
pub const RUNNING_USAGE: &str = "x_runaii_usage";

type Tx = mpsc::Sender<Result<Bytes, Infallible>>;

pub(super) fn relay(ledger: Ledger, upstream: Upstream, include_usage: bool) -> Response {
    let (tx, rx) = mpsc::channel(64);
    let request_id = ledger.request_id.clone();
    tokio::spawn(run(ledger, upstream, include_usage, tx));
    let mut response = (
        [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")],
        Body::from_stream(ReceiverStream::new(rx)),
    )
        .into_response();
    with_request_id(&mut response, &request_id);
    response
}

fn event(data: &str) -> Result<Bytes, Infallible> {
    Ok(Bytes::from(format!("data: {data}\n\n")))
}

#[derive(Default)]
struct Metered {
    input_tokens: u32,
    output_tokens: u32,
}

impl Metered {
    fn take_running(&mut self, chunk: &mut Value) {
        if let Some(usage) = chunk.as_object_mut().and_then(|c| c.remove(RUNNING_USAGE)) {
            let n = |k: &str| usage[k].as_u64().and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
            self.input_tokens = n("prompt_tokens");
            self.output_tokens = self.output_tokens.max(n("completion_tokens"));
        }
    }
}

async fn run(ledger: Ledger, upstream: Upstream, include_usage: bool, tx: Tx) {
    let mut reader = SseReader::new(upstream.response.bytes_stream());
    let mut metered = Metered::default();
    loop {
        let next = tokio::select! {
            () = tx.closed() => {
                // Dropping the reader closes the worker connection, which frees its slot.
                drop(reader);
                let outcome = Outcome::Cancelled { input_tokens: metered.input_tokens, output_tokens: metered.output_tokens };
                if let Err(e) = ledger.record(outcome).await {
                    tracing::error!(request_id = %ledger.request_id, error = %e, "cancelled stream not recorded");
                }
                return;
            }
            next = reader.next_data() => next,
        };
        let data = match next {
            Ok(Some(data)) => data,
            Ok(None) => return fail(&ledger, &metered, &tx, "the worker ended the stream early").await,
            Err(e) => return fail(&ledger, &metered, &tx, &format!("the worker connection broke: {e}")).await,
        };
        if data == "[DONE]" {
            return fail(&ledger, &metered, &tx, "the worker ended the stream without usage").await;
        }
        let Ok(mut chunk) = serde_json::from_str::<Value>(&data) else {
            return fail(&ledger, &metered, &tx, "the worker sent a chunk that is not JSON").await;
        };
        if chunk.get("error").is_some() {
            record_failure(&ledger, &metered, "upstream_error").await;
            let _ = tx.send(event(&data)).await;
            return;
        }
        metered.take_running(&mut chunk);
        chunk["id"] = json!(ledger.request_id);
        let is_usage_chunk = chunk["choices"].as_array().is_some_and(Vec::is_empty) && chunk["usage"].is_object();
        if is_usage_chunk {
            let n = |k: &str| chunk["usage"][k].as_u64().and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
            let outcome = Outcome::Succeeded { input_tokens: n("prompt_tokens"), output_tokens: n("completion_tokens") };
            match ledger.record(outcome).await {
                Ok(cost) => {
                    if include_usage {
                        let _ = tx.send(event(&json_with_cost(&mut chunk, cost))).await;
                    }
                    let _ = tx.send(event("[DONE]")).await;
                }
                Err(e) => {
                    let _ = tx.send(event(&json!(e.body()).to_string())).await;
                }
            }
            return;
        }
        if !include_usage {
            if let Some(c) = chunk.as_object_mut() {
                c.remove("usage");
            }
        }
        if let Some(c) = chunk.as_object_mut() {
            c.remove("timings");
        }
        if tx.send(event(&chunk.to_string())).await.is_err() {
            // The client left; the next loop turn records the cancellation.
            continue;
        }
    }
}

async fn record_failure(ledger: &Ledger, metered: &Metered, code: &str) {
    let outcome = Outcome::Failed {
        input_tokens: metered.input_tokens,
        output_tokens: metered.output_tokens,
        http_status: 502,
        error_code: Some(code.to_owned()),
    };
    if let Err(e) = ledger.record(outcome).await {
        tracing::error!(request_id = %ledger.request_id, error = %e, "failed stream not recorded");
    }
}

/// The worker failed mid-stream: the client gets a clean error chunk and is billed for what it received.
async fn fail(ledger: &Ledger, metered: &Metered, tx: &Tx, why: &str) {
    tracing::warn!(request_id = %ledger.request_id, %why, "stream failed");
    record_failure(ledger, metered, "upstream_error").await;
    let _ = tx.send(event(&json!(ApiError::UpstreamFailed(why.to_owned()).body()).to_string())).await;
}
