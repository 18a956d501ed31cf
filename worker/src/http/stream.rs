//! Streaming answers as OpenAI chat completion chunks over SSE.
//!
//! The rules the official SDKs depend on: `role` only in the first chunk, `object` on every chunk, a
//! `delta` on every choice, a final usage chunk with `choices: []` when asked for, then `data: [DONE]`.
//! A mid-stream failure is one chunk with a top-level `error` and no `[DONE]`.

use std::convert::Infallible;
use std::sync::Arc;

use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use runaii_wire::{ChatCompletionChunk, ChunkChoice, Delta, FinishReason, Usage, UsageField};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::chat::ResponseMeta;
use super::ApiError;
use crate::constraint::OutputValidator;
use crate::engine::{Event, Finished};

type Sender = mpsc::Sender<Result<SseEvent, Infallible>>;

pub(super) fn respond(
    meta: ResponseMeta,
    events: mpsc::UnboundedReceiver<Event>,
    validator: Option<Arc<OutputValidator>>,
    include_usage: bool,
    prompt_tokens: u32,
) -> Response {
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(relay(ChunkWriter { meta, include_usage, prompt_tokens }, events, validator, tx));
    Sse::new(ReceiverStream::new(rx)).keep_alive(KeepAlive::default()).into_response()
}

struct ChunkWriter {
    meta: ResponseMeta,
    include_usage: bool,
    prompt_tokens: u32,
}

impl ChunkWriter {
    fn chunk(&self, delta: Delta, finish_reason: Option<FinishReason>) -> ChatCompletionChunk {
        self.base(vec![ChunkChoice { index: 0, delta, logprobs: None, finish_reason }])
    }

    fn base(&self, choices: Vec<ChunkChoice>) -> ChatCompletionChunk {
        ChatCompletionChunk {
            id: self.meta.id.clone(),
            object: "chat.completion.chunk".into(),
            created: self.meta.created,
            model: self.meta.model.clone(),
            system_fingerprint: None,
            choices,
            usage: if self.include_usage { UsageField::Null(None) } else { UsageField::Absent },
            timings: None,
            running_usage: None,
        }
    }

    fn finals(&self, done: &Finished) -> Vec<ChatCompletionChunk> {
        let mut last = self.chunk(Delta::default(), Some(done.finish_reason));
        last.timings = Some(done.timings);
        let mut chunks = vec![last];
        if self.include_usage {
            let mut usage = self.base(Vec::new());
            usage.usage = UsageField::Filled(done.usage);
            chunks.push(usage);
        }
        chunks
    }
}

fn data<T: serde::Serialize>(value: &T) -> SseEvent {
    SseEvent::default().data(serde_json::to_string(value).unwrap_or_else(|_| "{}".into()))
}

/// Forwards engine events as chunks. Stops as soon as the client goes away, which drops `events` and
/// frees the request's slot in the engine even while no token is flowing (a long prefill).
async fn relay(
    writer: ChunkWriter,
    mut events: mpsc::UnboundedReceiver<Event>,
    validator: Option<Arc<OutputValidator>>,
    tx: Sender,
) {
    let role = Delta { role: Some("assistant".into()), content: Some(String::new()) };
    if tx.send(Ok(data(&writer.chunk(role, None)))).await.is_err() {
        return;
    }
    let mut content = String::new();
    loop {
        let event = tokio::select! {
            () = tx.closed() => return,
            event = events.recv() => event,
        };
        let (outgoing, ended) = match event {
            Some(Event::Delta { text, completion_tokens }) => {
                if validator.is_some() {
                    content.push_str(&text);
                }
                let mut chunk = writer.chunk(Delta { role: None, content: Some(text) }, None);
                chunk.running_usage = Some(Usage::new(writer.prompt_tokens, completion_tokens));
                (vec![data(&chunk)], false)
            }
            Some(Event::Done(done)) => {
                let checked = match (&validator, done.finish_reason) {
                    (Some(v), FinishReason::Stop) => v.check(&content).map_err(ApiError::from),
                    _ => Ok(()),
                };
                let out = match checked {
                    Ok(()) => {
                        let mut out: Vec<SseEvent> = writer.finals(&done).iter().map(data).collect();
                        out.push(SseEvent::default().data("[DONE]"));
                        out
                    }
                    Err(e) => vec![data(&e.body())],
                };
                (out, true)
            }
            Some(Event::Failed(failure)) => (vec![data(&ApiError::from(failure).body())], true),
            None => (vec![data(&ApiError::Internal("the engine dropped a request".into()).body())], true),
        };
        for e in outgoing {
            if tx.send(Ok(e)).await.is_err() {
                return;
            }
        }
        if ended {
            return;
        }
    }
}
