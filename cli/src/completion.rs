//! One `POST /v1/chat/completions`, whole or streamed: the request the CLI sends and the answer it reads
//! back (text, tool calls, why it ended, usage with the exact cost). Only the fields the CLI uses are
//! typed; the CLI talks to any OpenAI-compatible gateway, so it shares no types with this one's crates.

use futures::StreamExt as _;
use runaii_sse::SseParser;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::http::{chain, ErrorDetail, Gateway, GatewayError, StatusError};
use crate::money;

/// One message of the transcript.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    pub role: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    fn new(role: &'static str, content: Option<String>) -> Self {
        Self { role, content, tool_calls: Vec::new(), tool_call_id: None }
    }

    #[must_use]
    pub fn system(text: &str) -> Self {
        Self::new("system", Some(text.to_owned()))
    }

    #[must_use]
    pub fn user(text: &str) -> Self {
        Self::new("user", Some(text.to_owned()))
    }

    /// The model's turn as it answered: its text (null when it only called tools) and its calls.
    #[must_use]
    pub fn assistant(answer: &Answer) -> Self {
        let content = (!answer.content.is_empty() || answer.tool_calls.is_empty()).then(|| answer.content.clone());
        Self { tool_calls: answer.tool_calls.clone(), ..Self::new("assistant", content) }
    }

    #[must_use]
    pub fn tool(call_id: &str, result: String) -> Self {
        Self { tool_call_id: Some(call_id.to_owned()), ..Self::new("tool", Some(result)) }
    }
}

/// A call the model made; `arguments` is a JSON text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    #[serde(rename = "type", default = "function")]
    pub kind: String,
    pub function: FunctionCall,
}

fn function() -> String {
    "function".into()
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCall {
    pub name: String,
    #[serde(default)]
    pub arguments: String,
}

/// The request body. `response_format` and `grammar` (llama.cpp's extension, which runaii forwards) are
/// exclusive; the caller makes sure.
#[derive(Debug, Serialize)]
pub struct ChatRequest<'a> {
    pub model: &'a str,
    pub messages: &'a [Message],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    pub stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_format: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grammar: Option<&'a str>,
    #[serde(skip_serializing_if = "<[Value]>::is_empty")]
    pub tools: &'a [Value],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
    /// runaii's extension: the exact charge, as the ledger recorded it.
    #[serde(default, deserialize_with = "money::exact")]
    pub cost: Option<Decimal>,
}

/// A finished answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    /// The gateway's request id (`chatcmpl-…`), which names the cost record.
    pub id: String,
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    /// `stop`, `length`, `tool_calls`; `None` if the gateway sent none.
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
}

impl Answer {
    #[must_use]
    pub fn was_cut(&self) -> bool {
        self.finish_reason.as_deref() == Some("length")
    }
}

#[derive(Deserialize)]
struct Completion {
    #[serde(default)]
    id: String,
    choices: Vec<Choice>,
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Choice {
    message: Reply,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Reply {
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCall>>,
}

/// Sends `request` and waits for the whole answer.
///
/// # Errors
/// The gateway's refusal, a transport failure, an answer without a choice.
pub async fn whole(gateway: &Gateway, request: &ChatRequest<'_>) -> Result<Answer, GatewayError> {
    let completion: Completion = gateway.post("/v1/chat/completions", request, crate::http::Auth::Key).await?;
    let choice = completion.choices.into_iter().next().ok_or_else(|| GatewayError::Protocol("the answer has no choices".into()))?;
    Ok(Answer {
        id: completion.id,
        content: choice.message.content.unwrap_or_default(),
        tool_calls: choice.message.tool_calls.unwrap_or_default(),
        finish_reason: choice.finish_reason,
        usage: completion.usage,
    })
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    id: String,
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    usage: Option<Usage>,
    error: Option<ErrorDetail>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    delta: Delta,
    finish_reason: Option<String>,
}

#[derive(Default, Deserialize)]
struct Delta {
    content: Option<String>,
    tool_calls: Option<Vec<CallDelta>>,
}

/// A call's id and name come in its first delta, its arguments in pieces after.
#[derive(Deserialize)]
struct CallDelta {
    #[serde(default)]
    index: usize,
    id: Option<String>,
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

/// Sends `request` as a stream (with usage asked for) and hands each piece of text to `on_text` as it
/// arrives.
///
/// # Errors
/// As [`whole`], an error event in the stream, or a stream that ends before `[DONE]`.
pub async fn streamed(gateway: &Gateway, request: &ChatRequest<'_>, on_text: &mut dyn FnMut(&str)) -> Result<Answer, GatewayError> {
    let response = gateway.post_raw("/v1/chat/completions", request).await?;
    let mut bytes = response.bytes_stream();
    let mut parser = SseParser::default();
    let mut answer = Answer::default();
    while let Some(piece) = bytes.next().await {
        let piece = piece.map_err(|e| GatewayError::Transport(chain(&e)))?;
        for data in parser.push(&piece) {
            if data.trim() == "[DONE]" {
                return Ok(answer);
            }
            let chunk: Chunk = serde_json::from_str(&data).map_err(|e| GatewayError::Protocol(format!("{e}: {data}")))?;
            apply(&mut answer, chunk, on_text)?;
        }
    }
    Err(GatewayError::Transport("the stream ended before [DONE]".into()))
}

fn apply(answer: &mut Answer, chunk: Chunk, on_text: &mut dyn FnMut(&str)) -> Result<(), GatewayError> {
    if let Some(error) = chunk.error {
        return Err(GatewayError::Status(StatusError { status: 502, code: error.code, param: error.param, message: error.message }));
    }
    if answer.id.is_empty() {
        answer.id = chunk.id;
    }
    if chunk.usage.is_some() {
        answer.usage = chunk.usage;
    }
    for choice in chunk.choices {
        if let Some(text) = choice.delta.content.filter(|t| !t.is_empty()) {
            on_text(&text);
            answer.content.push_str(&text);
        }
        for call in choice.delta.tool_calls.unwrap_or_default() {
            while answer.tool_calls.len() <= call.index {
                answer.tool_calls.push(ToolCall {
                    id: String::new(),
                    kind: function(),
                    function: FunctionCall { name: String::new(), arguments: String::new() },
                });
            }
            let slot = &mut answer.tool_calls[call.index];
            if let Some(id) = call.id {
                slot.id = id;
            }
            if let Some(f) = call.function {
                slot.function.name.push_str(&f.name.unwrap_or_default());
                slot.function.arguments.push_str(&f.arguments.unwrap_or_default());
            }
        }
        if choice.finish_reason.is_some() {
            answer.finish_reason = choice.finish_reason;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(chunks: &[&str]) -> (Answer, String) {
        let mut answer = Answer::default();
        let mut printed = String::new();
        for c in chunks {
            let chunk: Chunk = serde_json::from_str(c).unwrap();
            apply(&mut answer, chunk, &mut |t| printed.push_str(t)).unwrap();
        }
        (answer, printed)
    }

    #[test]
    fn chunks_add_up_to_the_answer() {
        let (answer, printed) = run(&[
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}"#,
            r#"{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"{\"a\""},"finish_reason":null}],"usage":null}"#,
            r#"{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":":1}"},"finish_reason":"length"}],"usage":null}"#,
            r#"{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7,"cost":0.0000015}}"#,
        ]);
        assert_eq!((answer.id.as_str(), answer.content.as_str(), printed.as_str()), ("chatcmpl-1", r#"{"a":1}"#, r#"{"a":1}"#));
        assert!(answer.was_cut());
        assert_eq!(answer.usage.and_then(|u| u.cost).map(|c| c.to_string()).as_deref(), Some("0.0000015"));
    }

    #[test]
    fn tool_calls_are_assembled_from_their_deltas() {
        let (answer, printed) = run(&[
            r#"{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"count","arguments":""}}]},"finish_reason":null}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"n\":"}}]},"finish_reason":null}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]},"finish_reason":"tool_calls"}]}"#,
        ]);
        assert!(printed.is_empty());
        assert_eq!(answer.tool_calls.len(), 1);
        assert_eq!((answer.tool_calls[0].id.as_str(), answer.tool_calls[0].function.name.as_str()), ("call_1", "count"));
        assert_eq!(answer.tool_calls[0].function.arguments, r#"{"n":1}"#);
        let message = serde_json::to_value(Message::assistant(&answer)).unwrap_or_default();
        assert!(message.get("content").is_none() && message["tool_calls"][0]["type"] == "function", "{message}");
    }

    #[test]
    fn an_error_event_fails_the_stream() {
        let mut answer = Answer::default();
        let chunk: Chunk =
            serde_json::from_str(r#"{"error":{"message":"worker died","type":"server_error","param":null,"code":"upstream_error"}}"#)
                .unwrap();
        assert!(matches!(apply(&mut answer, chunk, &mut |_| {}), Err(GatewayError::Status(s)) if s.status == 502));
    }
}
