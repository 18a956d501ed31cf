//! The Response object, in the shape the spec requires and the SDKs read.

use serde_json::{json, Value};

use super::tools::function_call_item;

/// What the model answered: its text, its tokens' log probabilities (chat's entries, when asked for),
/// its tool calls (chat's shape), whether the token limit cut it, and the usage as recorded.
#[derive(Debug, Clone, Copy)]
pub struct Answer<'a> {
    pub text: &'a str,
    pub logprobs: &'a [Value],
    pub calls: &'a [Value],
    pub cut: bool,
    pub usage: &'a Value,
}

/// The fields of a Response that do not depend on the answer.
#[derive(Debug, Clone)]
pub struct Shell {
    pub id: String,
    pub message_id: String,
    pub created_at: i64,
    pub model: String,
    pub request: Value,
    /// Whether the response is stored (`store`, true unless the request says false).
    pub store: bool,
}

impl Shell {
    pub fn new(id: String, request: Value) -> Self {
        Self {
            message_id: format!("msg_{}", uuid::Uuid::now_v7().simple()),
            id,
            created_at: chrono::Utc::now().timestamp(),
            model: request["model"].as_str().unwrap_or_default().to_owned(),
            store: request.get("store").and_then(serde_json::Value::as_bool).unwrap_or(true),
            request,
        }
    }

    /// Whether the response runs in the background (`background: true`).
    pub fn background(&self) -> bool {
        self.request.get("background").and_then(Value::as_bool) == Some(true)
    }

    /// The output message item.
    pub fn message(&self, text: &str, logprobs: &[Value], status: &str) -> Value {
        json!({
            "id": self.message_id,
            "type": "message",
            "status": status,
            "role": "assistant",
            "content": if status == "in_progress" { json!([]) } else { json!([output_text(text, logprobs)]) },
        })
    }

    /// The output items: the message (when there is text, or nothing else), then one `function_call` per
    /// call.
    pub fn output(&self, answer: &Answer<'_>, status: &str) -> Value {
        let mut items = Vec::new();
        if !answer.text.is_empty() || answer.calls.is_empty() {
            items.push(self.message(answer.text, answer.logprobs, status));
        }
        items.extend(answer.calls.iter().map(|call| function_call_item(call, status)));
        Value::Array(items)
    }

    /// The whole Response. `answer` is `None` while in progress.
    pub fn response(&self, answer: Option<Answer<'_>>) -> Value {
        let request = &self.request;
        let or = |key: &str, default: Value| request.get(key).filter(|v| !v.is_null()).cloned().unwrap_or(default);
        let (status, output, usage, incomplete, completed_at) = match answer {
            None => ("in_progress", json!([]), Value::Null, Value::Null, Value::Null),
            Some(answer) => {
                let status = if answer.cut { "incomplete" } else { "completed" };
                let incomplete = if answer.cut { json!({"reason": "max_output_tokens"}) } else { Value::Null };
                (status, self.output(&answer, status), responses_usage(answer.usage), incomplete, json!(chrono::Utc::now().timestamp()))
            }
        };
        json!({
            "id": self.id,
            "object": "response",
            "background": or("background", json!(false)),
            "created_at": self.created_at,
            "status": status,
            "completed_at": completed_at,
            "error": null,
            "incomplete_details": incomplete,
            "instructions": or("instructions", Value::Null),
            "max_output_tokens": or("max_output_tokens", Value::Null),
            "model": self.model,
            "output": output,
            "parallel_tool_calls": or("parallel_tool_calls", json!(true)),
            "previous_response_id": or("previous_response_id", Value::Null),
            "reasoning": {"effort": null, "summary": null},
            "store": self.store,
            "temperature": or("temperature", json!(1.0)),
            "text": {"format": request.get("text").and_then(|t| t.get("format")).cloned().unwrap_or(json!({"type": "text"}))},
            "tool_choice": or("tool_choice", json!("auto")),
            "tools": or("tools", json!([])),
            "top_p": or("top_p", json!(1.0)),
            "top_logprobs": or("top_logprobs", Value::Null),
            "truncation": "disabled",
            "usage": usage,
            "user": or("user", Value::Null),
            "metadata": or("metadata", json!({})),
        })
    }
}

/// An `output_text` part. `logprobs` are chat's token entries (`{token, logprob, bytes, top_logprobs}`),
/// which are the Responses part's shape too.
pub fn output_text(text: &str, logprobs: &[Value]) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs})
}

/// Chat's token entries as a Responses text event carries them: `{token, logprob, top_logprobs:
/// [{token, logprob}]}` (the events' shape has no `bytes`).
pub fn event_logprobs(entries: &[Value]) -> Value {
    let token = |e: &Value| json!({"token": e["token"], "logprob": e["logprob"]});
    Value::Array(
        entries
            .iter()
            .map(|e| {
                let top: Vec<Value> = e["top_logprobs"].as_array().map_or(&[][..], Vec::as_slice).iter().map(token).collect();
                let mut entry = token(e);
                entry["top_logprobs"] = Value::Array(top);
                entry
            })
            .collect(),
    )
}

/// Chat usage → Responses usage (`input_tokens` counts the cached ones too, as OpenAI's does). `cost` is
/// added by the caller when serializing.
fn responses_usage(chat: &Value) -> Value {
    let n = |k: &str| chat[k].as_u64().unwrap_or(0);
    let cached = chat["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap_or(0);
    json!({
        "input_tokens": n("prompt_tokens"),
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
        "output_tokens": n("completion_tokens"),
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": n("prompt_tokens") + n("completion_tokens"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_carry_the_entries_without_bytes() {
        let entry = json!({"token": "Hi", "logprob": -0.25, "bytes": [72, 105], "top_logprobs": [{"token": "Hi", "logprob": -0.25, "bytes": [72, 105]}]});
        assert_eq!(
            event_logprobs(std::slice::from_ref(&entry)),
            json!([{"token": "Hi", "logprob": -0.25, "top_logprobs": [{"token": "Hi", "logprob": -0.25}]}])
        );
        assert_eq!(output_text("Hi", std::slice::from_ref(&entry))["logprobs"], json!([entry]), "the part keeps chat's entries whole");
    }

    #[test]
    fn cached_tokens_are_part_of_the_input_tokens() {
        let chat =
            json!({"prompt_tokens": 120, "completion_tokens": 7, "total_tokens": 127, "prompt_tokens_details": {"cached_tokens": 96}});
        let usage = responses_usage(&chat);
        assert_eq!(usage["input_tokens"], 120);
        assert_eq!(usage["input_tokens_details"], json!({"cached_tokens": 96, "cache_write_tokens": 0}));
        assert_eq!(usage["total_tokens"], 127);
        assert_eq!(responses_usage(&json!({"prompt_tokens": 3, "completion_tokens": 1}))["input_tokens_details"]["cached_tokens"], 0);
    }
}
