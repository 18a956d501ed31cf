//! A chat completion → an Anthropic message: text and `tool_use` blocks, `stop_reason`, usage.

use serde_json::{json, Value};

use crate::billing::Tokens;

/// Anthropic's `stop_reason` for a chat `finish_reason` (and the stop sequence that ended the answer).
#[must_use]
pub fn stop_reason(finish_reason: &str, stop_sequence: Option<&str>) -> &'static str {
    match (finish_reason, stop_sequence) {
        ("tool_calls", _) => "tool_use",
        ("length", _) => "max_tokens",
        (_, Some(_)) => "stop_sequence",
        _ => "end_turn",
    }
}

/// Tool-use ids in Anthropic's style; the worker's `call_…` ids carry the same uniqueness.
#[must_use]
pub fn tool_use_id(call_id: &str) -> String {
    format!("toolu_{}", call_id.trim_start_matches("call_"))
}

/// A `tool_use` block from an OpenAI tool call (its arguments parsed into `input`).
#[must_use]
pub fn tool_use(call: &Value) -> Value {
    let arguments = call["function"]["arguments"].as_str().unwrap_or("{}");
    let input: Value = serde_json::from_str(arguments).unwrap_or_else(|_| json!({}));
    json!({"type": "tool_use", "id": tool_use_id(call["id"].as_str().unwrap_or_default()), "name": call["function"]["name"], "input": input})
}

/// The whole message for a non-streamed answer; `usage.cost` is added by the caller, exact.
#[must_use]
pub fn message(id: &str, model: &str, answer: &Value) -> Value {
    let choice = &answer["choices"][0];
    let mut content = Vec::new();
    if let Some(text) = choice["message"]["content"].as_str().filter(|t| !t.is_empty()) {
        content.push(json!({"type": "text", "text": text}));
    }
    for call in choice["message"]["tool_calls"].as_array().into_iter().flatten() {
        content.push(tool_use(call));
    }
    let stop_sequence = choice["stop_sequence"].as_str();
    json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(choice["finish_reason"].as_str().unwrap_or("stop"), stop_sequence),
        "stop_sequence": stop_sequence,
        "usage": usage(&Tokens::of_usage(&answer["usage"])),
    })
}

/// Anthropic's usage for these counts: `input_tokens` are the prompt tokens computed afresh, without those
/// read from the cache (`cache_read_input_tokens`); nothing is written to a cache on request
/// (`cache_creation_input_tokens` 0: prefixes are kept without `cache_control`, at no extra price).
#[must_use]
pub fn usage(tokens: &Tokens) -> Value {
    json!({
        "input_tokens": tokens.uncached(),
        "output_tokens": tokens.output,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": tokens.cached,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_tokens_leave_out_the_cache_reads() {
        let answer = json!({"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}],
                            "usage": {"prompt_tokens": 120, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 96}}});
        let m = message("msg_1", "m", &answer);
        assert_eq!(
            m["usage"],
            json!({"input_tokens": 24, "output_tokens": 7, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 96})
        );
    }
}
