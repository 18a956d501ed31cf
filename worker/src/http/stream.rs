//! Streaming answers as OpenAI chat completion chunks over SSE.
//!
//! The rules the official SDKs depend on: `role` only in the first chunk, `object` on every chunk, a
//! `delta` on every choice, a final usage chunk with `choices: []` when asked for, then `data: [DONE]`.
//! A mid-stream failure is one chunk with a top-level `error` and no `[DONE]`.

use std::convert::Infallible;
use std::sync::Arc;

use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use runaii_wire::{ChatCompletionChunk, ChoiceLogprobs, ChunkChoice, Delta, FinishReason, TokenLogprob, Usage, UsageField};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tracing::Instrument as _;

use super::shape::{tool_call, ResponseMeta};
use super::ApiError;
use crate::completion::answer;
use crate::constraint::OutputValidator;
use crate::engine::{Event, Finished};
use crate::tools::parse::{Piece, Splitter};
use crate::tools::ToolRequest;

type Sender = mpsc::Sender<Result<SseEvent, Infallible>>;

pub(super) fn respond(
    writer: ChunkWriter,
    events: mpsc::UnboundedReceiver<Event>,
    validator: Option<Arc<OutputValidator>>,
    tools: Option<Arc<ToolRequest>>,
) -> Response {
    let (tx, rx) = mpsc::channel(64);
    let tools = tools.map(|t| ToolState { splitter: Splitter::new(t.format), request: t, calls: 0 });
    // In the request's span, which then lasts until the last chunk.
    tokio::spawn(relay(writer, events, validator, tools, tx).in_current_span());
    Sse::new(ReceiverStream::new(rx)).keep_alive(KeepAlive::default()).into_response()
}

/// How one stream's chunks are written.
pub(super) struct ChunkWriter {
    meta: ResponseMeta,
    include_usage: bool,
    prompt_tokens: u32,
    /// The request asked for log probabilities: each content chunk carries its tokens'.
    logprobs: bool,
}

impl ChunkWriter {
    pub(super) fn new(meta: ResponseMeta, include_usage: bool, prompt_tokens: u32, logprobs: bool) -> Self {
        Self { meta, include_usage, prompt_tokens, logprobs }
    }

    /// A content chunk, with its tokens' log probabilities when the request asked for them.
    fn content(&self, text: String, tokens: Vec<TokenLogprob>) -> ChatCompletionChunk {
        let mut chunk = self.chunk(Delta { content: Some(text), ..Delta::default() }, None);
        if self.logprobs {
            chunk.choices[0].logprobs = Some(ChoiceLogprobs { content: Some(tokens), refusal: None });
        }
        chunk
    }

    fn chunk(&self, delta: Delta, finish_reason: Option<FinishReason>) -> ChatCompletionChunk {
        self.base(vec![ChunkChoice { index: 0, delta, logprobs: None, finish_reason, stop_sequence: None }])
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
        last.choices[0].stop_sequence.clone_from(&done.stop_sequence);
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

/// A streamed tool request: its splitter, and how many calls went out.
struct ToolState {
    request: Arc<ToolRequest>,
    splitter: Splitter,
    calls: usize,
}

impl ToolState {
    /// Deltas for what the splitter yields: text as `content`; each call as one delta with its index, id
    /// and name (arguments empty), then one with its arguments.
    fn deltas(&mut self, pieces: Vec<Piece>) -> Vec<Delta> {
        let mut out = Vec::new();
        for piece in pieces {
            match piece {
                Piece::Content(text) => out.push(Delta { content: Some(text), ..Delta::default() }),
                Piece::Call(call) => {
                    let index = self.calls;
                    self.calls += 1;
                    let call = tool_call(call);
                    let head = json!({"index": index, "id": call.id, "type": "function", "function": {"name": call.function.name, "arguments": ""}});
                    let args = json!({"index": index, "function": {"arguments": call.function.arguments}});
                    out.push(Delta { tool_calls: Some(vec![head]), ..Delta::default() });
                    out.push(Delta { tool_calls: Some(vec![args]), ..Delta::default() });
                }
            }
        }
        out
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
    mut tools: Option<ToolState>,
    tx: Sender,
) {
    let role = Delta { role: Some("assistant".into()), content: Some(String::new()), tool_calls: None };
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
            Some(Event::Delta { text, logprobs, completion_tokens, cached_tokens }) => {
                if validator.is_some() || tools.is_some() {
                    content.push_str(&text);
                }
                // (A request with tools that may be called has no log probabilities: `completion::logprobs`.)
                let chunks = match &mut tools {
                    None => Ok(vec![writer.content(text, logprobs)]),
                    Some(state) => state
                        .splitter
                        .push(&state.request, &text)
                        .map(|pieces| state.deltas(pieces).into_iter().map(|d| writer.chunk(d, None)).collect()),
                };
                match chunks {
                    Ok(mut chunks) => {
                        // Every chunk carries the running usage, so a client that leaves is billed for what
                        // it got. Text held back (a call until it closes) sends nothing yet.
                        for chunk in &mut chunks {
                            chunk.running_usage = Some(Usage::new(writer.prompt_tokens, completion_tokens).with_cached(cached_tokens));
                        }
                        (chunks.iter().map(data).collect(), false)
                    }
                    Err(e) => (vec![data(&e.body())], true),
                }
            }
            Some(Event::Done(mut done)) => {
                let mut out = Vec::new();
                let mut failed = None;
                if let Some(state) = &mut tools {
                    let rest = if done.finish_reason == FinishReason::Stop {
                        state.splitter.finish(&state.request)
                    } else {
                        Ok(state.splitter.cut())
                    };
                    match rest {
                        Ok(pieces) => out.extend(state.deltas(pieces).into_iter().map(|d| {
                            let mut chunk = writer.chunk(d, None);
                            chunk.running_usage = Some(done.usage);
                            data(&chunk)
                        })),
                        Err(e) => failed = Some(e),
                    }
                }
                let text = std::mem::take(&mut content);
                let request = tools.as_ref().map(|state| &*state.request);
                let checked = match failed {
                    Some(e) => Err(e),
                    // The calls already went out as deltas; what is left is the ending and the schema check.
                    None => answer::conclude(text, done.finish_reason, request, validator.as_deref()).map(|ending| {
                        done.finish_reason = ending.finish_reason;
                    }),
                };
                match checked {
                    Ok(()) => {
                        out.extend(writer.finals(&done).iter().map(data));
                        out.push(SseEvent::default().data("[DONE]"));
                    }
                    Err(e) => out = vec![data(&e.body())],
                }
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
