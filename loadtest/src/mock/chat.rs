//! `POST /v1/chat/completions` of the mock: the worker's answer shapes, with a fixed completion.

use std::convert::Infallible;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{Busy, MockState};

/// The fields of a chat request the mock acts on.
#[derive(Debug, Deserialize)]
struct Request {
    model: String,
    messages: Vec<Value>,
    #[serde(default)]
    max_tokens: Option<u32>,
    #[serde(default)]
    max_completion_tokens: Option<u32>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
}

#[derive(Debug, Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

const WORDS: [&str; 8] = [" The", " quick", " brown", " fox", " jumps", " over", " the", " dog"];

/// What one answer is: the same for both shapes.
struct Answer {
    id: String,
    created: u64,
    model: String,
    prompt_tokens: u32,
    tokens: u32,
    finish_reason: &'static str,
}

impl Answer {
    fn usage(&self, completion_tokens: u32) -> Value {
        json!({"prompt_tokens": self.prompt_tokens, "completion_tokens": completion_tokens,
               "total_tokens": self.prompt_tokens + completion_tokens})
    }

    fn timings(&self) -> Value {
        json!({"queue_ms": 0.0, "prompt_ms": 0.0, "generation_ms": 0.0, "prompt_n": self.prompt_tokens,
               "predicted_n": self.tokens, "predicted_per_second": 0.0})
    }

    fn chunk(&self, delta: Value, finish_reason: Option<&str>, include_usage: bool) -> Value {
        let mut chunk = json!({"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                               "system_fingerprint": null,
                               "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}]});
        if include_usage {
            chunk["usage"] = Value::Null;
        }
        chunk
    }
}

fn word(i: u32) -> &'static str {
    WORDS[usize::try_from(i).unwrap_or(0) % WORDS.len()]
}

pub(super) async fn create(State(state): State<MockState>, body: Bytes) -> Response {
    let request: Request = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            let error = json!({"error": {"message": format!("the request body is not a chat request: {e}"),
                                         "type": "invalid_request_error", "param": null, "code": "invalid_json"}});
            return (StatusCode::BAD_REQUEST, Json(error)).into_response();
        }
    };
    let busy = Busy::start(&state);
    let limit = request.max_completion_tokens.or(request.max_tokens).unwrap_or(u32::MAX);
    let tokens = state.settings.tokens.min(limit);
    // A token covers at least one byte, so a quarter of the messages' JSON stays below the bound the
    // gateway holds credit for.
    let prompt_tokens = u32::try_from(Value::from(request.messages).to_string().len() / 4 + 1).unwrap_or(u32::MAX);
    let answer = Answer {
        id: format!("chatcmpl-{}", uuid::Uuid::now_v7().simple()),
        created: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        model: request.model,
        prompt_tokens,
        tokens,
        finish_reason: if tokens == limit { "length" } else { "stop" },
    };
    if !request.stream {
        let text: String = (0..tokens).map(word).collect();
        let whole = json!({
            "id": answer.id, "object": "chat.completion", "created": answer.created, "model": answer.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": null},
                         "logprobs": null, "finish_reason": answer.finish_reason}],
            "usage": answer.usage(tokens), "system_fingerprint": null, "timings": answer.timings(),
        });
        drop(busy);
        return Json(whole).into_response();
    }
    let include_usage = request.stream_options.is_some_and(|o| o.include_usage);
    stream(&state, &answer, include_usage, busy)
}

/// The worker's chunk sequence: role, one chunk per token with the running usage, the finish chunk
/// with timings, the usage chunk when asked for, `[DONE]`.
fn stream(state: &MockState, answer: &Answer, include_usage: bool, busy: Busy) -> Response {
    let mut events: Vec<(bool, Value)> = vec![(false, answer.chunk(json!({"role": "assistant", "content": ""}), None, include_usage))];
    for i in 0..answer.tokens {
        let mut chunk = answer.chunk(json!({"content": word(i)}), None, include_usage);
        chunk["x_runaii_usage"] = answer.usage(i + 1);
        events.push((true, chunk));
    }
    let mut last = answer.chunk(json!({}), Some(answer.finish_reason), include_usage);
    last["timings"] = answer.timings();
    events.push((false, last));
    if include_usage {
        let mut usage = answer.chunk(json!({}), None, false);
        usage["choices"] = json!([]);
        usage["usage"] = answer.usage(answer.tokens);
        events.push((false, usage));
    }
    let delay = state.token_delay();
    let events = futures::stream::iter(events)
        .then(move |(is_token, chunk)| async move {
            if let (true, Some(delay)) = (is_token, delay) {
                tokio::time::sleep(delay).await;
            }
            Ok::<_, Infallible>(Event::default().data(chunk.to_string()))
        })
        .chain(futures::stream::once(async move {
            // The slot is free once the last event is out (or when the client leaves: the stream drops).
            drop(busy);
            Ok(Event::default().data("[DONE]"))
        }));
    Sse::new(events).into_response()
}
