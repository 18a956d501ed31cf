//! Streaming answers as OpenAI chat completion chunks over SSE.
//!
//! The rules the official SDKs depend on: `role` only in the first chunk, `object` on every chunk, a
//! `delta` on every choice, a final usage chunk with `choices: []` when asked for, then `data: [DONE]`.
//! A mid-stream failure is one chunk with a top-level `error` and no `[DONE]`. A request of several
//! answers (`n`) streams each choice's chunks under its `index`, interleaved as they are decoded; the
//! usage chunk and `[DONE]` follow the last choice's end.

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
use crate::engine::{ChoiceEvent, Event, Finished};
use crate::tools::parse::{Piece, Splitter};
use crate::tools::ToolRequest;

type Sender = mpsc::Sender<Result<SseEvent, Infallible>>;

pub(super) fn respond(
    writer: ChunkWriter,
    choices: u32,
    events: mpsc::UnboundedReceiver<ChoiceEvent>,
    validator: Option<Arc<OutputValidator>>,
    tools: Option<Arc<ToolRequest>>,
) -> Response {
    let (tx, rx) = mpsc::channel(64);
    let answers = (0..choices)
        .map(|_| Answer {
            content: String::new(),
            tools: tools.clone().map(|t| ToolState { splitter: Splitter::new(t.format), request: t, calls: 0 }),
            completion_tokens: 0,
            finished: None,
        })
        .collect();
    // In the request's span, which then lasts until the last chunk.
    tokio::spawn(relay(writer, answers, events, validator, tx).in_current_span());
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

    /// A content chunk of choice `index`, with its tokens' log probabilities when the request asked.
    fn content(&self, index: u32, text: String, tokens: Vec<TokenLogprob>) -> ChatCompletionChunk {
        let mut chunk = self.chunk(index, Delta { content: Some(text), ..Delta::default() }, None);
        if self.logprobs {
            chunk.choices[0].logprobs = Some(ChoiceLogprobs { content: Some(tokens), refusal: None });
        }
        chunk
    }

    fn chunk(&self, index: u32, delta: Delta, finish_reason: Option<FinishReason>) -> ChatCompletionChunk {
        self.base(vec![ChunkChoice { index, delta, logprobs: None, finish_reason, stop_sequence: None }])
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

    /// The chunk that ends choice `index`.
    fn finish(&self, index: u32, done: &Finished) -> ChatCompletionChunk {
        let mut last = self.chunk(index, Delta::default(), Some(done.finish_reason));
        last.choices[0].stop_sequence.clone_from(&done.stop_sequence);
        last
    }

    /// The usage chunk, when the request asked for one.
    fn usage(&self, usage: Usage) -> Option<ChatCompletionChunk> {
        self.include_usage.then(|| {
            let mut chunk = self.base(Vec::new());
            chunk.usage = UsageField::Filled(usage);
            chunk
        })
    }
}

/// One choice of a streamed request: its text so far (for the schema check and the call reader), its
/// calls, its tokens, and how it ended.
struct Answer {
    content: String,
    tools: Option<ToolState>,
    completion_tokens: u32,
    finished: Option<Finished>,
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

/// Forwards engine events as chunks, each choice's under its index. Stops as soon as the client goes
/// away, which drops `events` and frees the request's sequences even while no token is flowing (a long
/// prefill). Every chunk carries the request's running usage: the prompt once, every choice's tokens.
async fn relay(
    writer: ChunkWriter,
    mut answers: Vec<Answer>,
    mut events: mpsc::UnboundedReceiver<ChoiceEvent>,
    validator: Option<Arc<OutputValidator>>,
    tx: Sender,
) {
    for index in 0..answers.len() {
        let role = Delta { role: Some("assistant".into()), content: Some(String::new()), tool_calls: None };
        if tx.send(Ok(data(&writer.chunk(u32::try_from(index).unwrap_or(u32::MAX), role, None)))).await.is_err() {
            return;
        }
    }
    let mut cached = 0;
    loop {
        let event = tokio::select! {
            () = tx.closed() => return,
            event = events.recv() => event,
        };
        let Some(ChoiceEvent { choice, event }) = event else {
            let _ = tx.send(Ok(data(&ApiError::Internal("the engine dropped a request".into()).body()))).await;
            return;
        };
        let Some(answer) = answers.get_mut(choice as usize) else { continue };
        let outcome = match event {
            Event::Delta { text, logprobs, completion_tokens, cached_tokens } => {
                answer.completion_tokens = completion_tokens;
                cached = cached_tokens.max(cached);
                delta_chunks(&writer, choice, answer, validator.is_some(), text, logprobs)
            }
            Event::Done(done) => {
                answer.completion_tokens = done.usage.completion_tokens;
                conclude(&writer, choice, answer, validator.as_deref(), done)
            }
            Event::Failed(failure) => Err(ApiError::from(failure)),
        };
        let mut chunks = match outcome {
            Ok(chunks) => chunks,
            Err(e) => {
                let _ = tx.send(Ok(data(&e.body()))).await;
                return;
            }
        };
        // Text held back (a call until it closes) sends nothing yet.
        let running = Usage::new(writer.prompt_tokens, answers.iter().map(|a| a.completion_tokens).sum()).with_cached(cached);
        for chunk in &mut chunks {
            chunk.running_usage = Some(running);
        }
        let complete = answers.iter().all(|a| a.finished.is_some());
        let mut usage = None;
        if complete {
            // The last finish chunk carries the request's timings; its usage follows.
            let finished: Vec<Finished> = answers.iter().filter_map(|a| a.finished.clone()).collect();
            let (total, timings) = Finished::totals(&finished);
            if let Some(last) = chunks.last_mut() {
                last.timings = Some(timings);
            }
            usage = Some(total);
        }
        let mut outgoing: Vec<SseEvent> = chunks.iter().map(data).collect();
        if let Some(usage) = usage {
            outgoing.extend(writer.usage(usage).as_ref().map(data));
            outgoing.push(SseEvent::default().data("[DONE]"));
        }
        for e in outgoing {
            if tx.send(Ok(e)).await.is_err() {
                return;
            }
        }
        if complete {
            return;
        }
    }
}

/// The chunks a choice's new text makes: content, or with tools what the call reader releases.
fn delta_chunks(
    writer: &ChunkWriter,
    choice: u32,
    answer: &mut Answer,
    validated: bool,
    text: String,
    logprobs: Vec<TokenLogprob>,
) -> Result<Vec<ChatCompletionChunk>, ApiError> {
    if validated || answer.tools.is_some() {
        answer.content.push_str(&text);
    }
    // (A request with tools that may be called has no log probabilities: `completion::logprobs`.)
    match &mut answer.tools {
        None => Ok(vec![writer.content(choice, text, logprobs)]),
        Some(state) => {
            let pieces = state.splitter.push(&state.request, &text)?;
            Ok(state.deltas(pieces).into_iter().map(|d| writer.chunk(choice, d, None)).collect())
        }
    }
}

/// A choice's end: the calls its reader still held, the ending and the schema check, then its finish
/// chunk. The choice is kept as finished.
fn conclude(
    writer: &ChunkWriter,
    choice: u32,
    answer: &mut Answer,
    validator: Option<&OutputValidator>,
    mut done: Finished,
) -> Result<Vec<ChatCompletionChunk>, ApiError> {
    let mut chunks = Vec::new();
    if let Some(state) = &mut answer.tools {
        let rest = if done.finish_reason == FinishReason::Stop { state.splitter.finish(&state.request)? } else { state.splitter.cut() };
        chunks.extend(state.deltas(rest).into_iter().map(|d| writer.chunk(choice, d, None)));
    }
    let text = std::mem::take(&mut answer.content);
    let request = answer.tools.as_ref().map(|state| &*state.request);
    // The calls already went out as deltas; what is left is the ending and the schema check.
    let ending = answer::conclude(text, done.finish_reason, request, validator)?;
    done.finish_reason = ending.finish_reason;
    chunks.push(writer.finish(choice, &done));
    answer.finished = Some(done);
    Ok(chunks)
}
