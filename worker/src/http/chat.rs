//! `POST /v1/chat/completions`.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use runaii_wire::cache_scope::{self, CacheScope};
use runaii_wire::priority::{self, Priority};
use runaii_wire::{AssistantMessage, ChatCompletion, ChatCompletionRequest, Choice, ChoiceLogprobs};
use tracing::Instrument as _;

use super::shape::{tool_call, ResponseMeta};
use super::{stream, ApiError, AppState};
use crate::completion::{self, answer};
use crate::engine::{ChoiceEvent, Event, Finished};
use crate::tools::ToolRequest;

pub(super) async fn create(State(state): State<AppState>, headers: HeaderMap, body: Result<Bytes, BytesRejection>) -> Response {
    let outcome = handle(&state, &headers, body).await;
    state.metrics.record_outcome(outcome.as_ref().err());
    outcome.unwrap_or_else(IntoResponse::into_response)
}

/// The request's cache scope: the gateway's header, or none for a direct caller. A header that is not a
/// scope is refused rather than read as none, so a gateway bug cannot silently share caches.
pub(super) fn cache_scope(headers: &HeaderMap) -> Result<CacheScope, ApiError> {
    let Some(value) = headers.get(cache_scope::HEADER) else { return Ok(CacheScope::default()) };
    value.to_str().ok().and_then(CacheScope::parse).ok_or_else(|| ApiError::InvalidRequest {
        message: format!("malformed {} header", cache_scope::HEADER),
        param: None,
        code: "invalid_header",
    })
}

/// The request's admission class: the gateway's header, or online. An unknown class is refused.
fn priority(headers: &HeaderMap) -> Result<Priority, ApiError> {
    let Some(value) = headers.get(priority::HEADER) else { return Ok(Priority::Online) };
    value.to_str().ok().and_then(Priority::parse).ok_or_else(|| ApiError::InvalidRequest {
        message: format!("malformed {} header: `online` or `batch`", priority::HEADER),
        param: None,
        code: "invalid_header",
    })
}

async fn handle(state: &AppState, headers: &HeaderMap, body: Result<Bytes, BytesRejection>) -> Result<Response, ApiError> {
    let scope = cache_scope(headers)?;
    let priority = priority(headers)?;
    let body = body.map_err(|rejection| match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge(state.settings.max_body_bytes),
        _ => ApiError::InvalidJson(rejection.body_text()),
    })?;
    let request: ChatCompletionRequest = serde_json::from_slice(&body).map_err(|e| ApiError::InvalidJson(e.to_string()))?;
    let (loaded, template) = state.ready()?;
    let prepared = completion::prepare(&request, loaded, template, &scope, &state.settings.model_id, state.settings.default_max_tokens)
        .instrument(tracing::info_span!("prepare"))
        .await;
    let prepared = prepared.inspect_err(|e| state.metrics.record_refusal(e))?;
    if let Some(compiled) = &prepared.constraint {
        state.metrics.record_compile(compiled.compile_time());
    }
    let validator = prepared.validator();
    let tools = prepared.tools.clone();
    let logprobs = prepared.logprobs.is_some();
    let choices = prepared.choices;
    let prepared_prompt_tokens = u32::try_from(prepared.prompt.len()).unwrap_or(u32::MAX);
    // The gateway's request id files what this request consumes, for a gateway that cuts it.
    let request_id = headers.get("x-request-id").and_then(|v| v.to_str().ok());
    let receipt = request_id.and_then(|id| state.receipts.open(&scope, id));
    let events = prepared.submit(loaded, scope, priority, receipt)?;
    let meta = ResponseMeta::new(&request.model);
    // From the queue to the last token; a stream's relay task carries it to the stream's end.
    let generation = tracing::info_span!("generate", prompt_tokens = i64::from(prepared_prompt_tokens), stream = request.stream);
    if request.stream {
        let include_usage = request.include_usage();
        let writer = stream::ChunkWriter::new(meta, include_usage, prepared_prompt_tokens, logprobs);
        return Ok(generation.in_scope(|| stream::respond(writer, choices, events, validator, tools)));
    }
    collect(meta, choices, events, validator, tools, logprobs).instrument(generation).await.map(|c| Json(c).into_response())
}

/// Waits for the whole answer: every choice's. If the client goes away this future is dropped, which
/// closes the event channel and frees the request's sequences. `logprobs`: the request asked for them.
async fn collect(
    meta: ResponseMeta,
    choices: u32,
    mut events: tokio::sync::mpsc::UnboundedReceiver<ChoiceEvent>,
    validator: Option<std::sync::Arc<crate::constraint::OutputValidator>>,
    tools: Option<std::sync::Arc<ToolRequest>>,
    logprobs: bool,
) -> Result<ChatCompletion, ApiError> {
    let mut answers: Vec<Gathered> = (0..choices).map(|_| Gathered::default()).collect();
    let mut open = answers.len();
    while open > 0 {
        let Some(ChoiceEvent { choice, event }) = events.recv().await else {
            return Err(ApiError::Internal("the engine dropped a request without an answer".into()));
        };
        let Some(answer) = answers.get_mut(choice as usize) else { continue };
        match event {
            Event::Delta { text, logprobs, .. } => {
                answer.content.push_str(&text);
                answer.tokens.extend(logprobs);
            }
            Event::Failed(failure) => return Err(failure.into()),
            Event::Done(done) => {
                if answer.done.replace(done).is_none() {
                    open -= 1;
                }
            }
        }
    }
    let mut written = Vec::with_capacity(answers.len());
    let mut finished = Vec::with_capacity(answers.len());
    for (index, answer) in (0..).zip(answers) {
        let Gathered { content, tokens, done: Some(done) } = answer else { continue };
        let ending = answer::conclude(content, done.finish_reason, tools.as_deref(), validator.as_deref())?;
        let calls = (!ending.calls.is_empty()).then(|| ending.calls.into_iter().map(tool_call).collect());
        let message = AssistantMessage { role: "assistant".into(), content: ending.content, refusal: None, tool_calls: calls };
        let logprobs = logprobs.then_some(ChoiceLogprobs { content: Some(tokens), refusal: None });
        written.push(Choice { index, message, logprobs, finish_reason: ending.finish_reason, stop_sequence: done.stop_sequence.clone() });
        finished.push(done);
    }
    let (usage, timings) = Finished::totals(&finished);
    Ok(ChatCompletion {
        id: meta.id,
        object: "chat.completion".into(),
        created: meta.created,
        model: meta.model,
        choices: written,
        usage,
        system_fingerprint: None,
        timings: Some(timings),
    })
}

/// One choice's answer as it arrives.
#[derive(Default)]
struct Gathered {
    content: String,
    tokens: Vec<runaii_wire::TokenLogprob>,
    done: Option<Finished>,
}
