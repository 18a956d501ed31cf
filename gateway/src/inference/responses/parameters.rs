//! Which Responses parameters runaii honours; every other one is refused by name (see
//! `inference::parameters`).

use serde_json::{Map, Value};

use crate::inference::parameters::{top_logprobs_in_range, Rule, TOP_LOGPROBS_RANGE};

fn absent(v: &Value) -> bool {
    v.is_null()
}

fn absent_or_false(v: &Value) -> bool {
    v.is_null() || *v == Value::Bool(false)
}

/// What `include` may name: the output text's log probabilities, nothing else.
pub const INCLUDE_LOGPROBS: &str = "message.output_text.logprobs";

fn logprobs_include_only(v: &Value) -> bool {
    v.is_null() || v.as_array().is_some_and(|items| items.iter().all(|i| i == INCLUDE_LOGPROBS))
}

fn standard_tier(v: &Value) -> bool {
    v.is_null() || matches!(v.as_str(), Some("auto" | "default"))
}

fn no_truncation(v: &Value) -> bool {
    v.is_null() || v == "disabled"
}

/// `reasoning.effort` becomes chat's `reasoning_effort`; a summary cannot be written.
fn effort_only(v: &Value) -> bool {
    v.is_null() || v.as_object().is_some_and(|r| r.iter().all(|(k, v)| k == "effort" || (k == "summary" && v.is_null())))
}

fn no_obfuscation(v: &Value) -> bool {
    v.is_null() || v.as_object().is_some_and(|o| o.iter().all(|(k, v)| k == "include_obfuscation" && absent_or_false(v)))
}

fn object_or_null(v: &Value) -> bool {
    v.is_null() || v.is_object()
}

/// Every documented `CreateResponse` parameter, with runaii's extensions (`seed`, `stop`).
pub const RESPONSES: &[(&str, Rule)] = &[
    ("model", Rule::Honoured),
    ("input", Rule::Honoured),
    ("instructions", Rule::Honoured),
    ("text", Rule::Only(object_or_null, "text must be an object: {\"format\": …}")),
    ("max_output_tokens", Rule::Honoured),
    ("temperature", Rule::Honoured),
    ("top_p", Rule::Honoured),
    ("stream", Rule::Honoured),
    ("stream_options", Rule::Only(no_obfuscation, "stream obfuscation is not offered: include_obfuscation must be false")),
    ("metadata", Rule::Honoured),
    ("parallel_tool_calls", Rule::Honoured),
    ("tools", Rule::Honoured),
    ("tool_choice", Rule::Honoured),
    ("previous_response_id", Rule::Honoured),
    ("store", Rule::Honoured),
    ("prompt_cache_key", Rule::Honoured),
    ("reasoning", Rule::Only(effort_only, "only reasoning.effort is honoured: summaries are not written")),
    ("top_logprobs", Rule::Checked(top_logprobs_in_range, TOP_LOGPROBS_RANGE)),
    ("include", Rule::Only(logprobs_include_only, "only `message.output_text.logprobs` can be included: no other output data is kept")),
    ("background", Rule::Honoured),
    ("truncation", Rule::Only(no_truncation, "the conversation is never truncated: truncation must be `disabled`")),
    ("service_tier", Rule::Only(standard_tier, "one service tier is offered: `auto` (or `default`)")),
    ("conversation", Rule::Only(absent, "conversations are not offered: continue with previous_response_id")),
    ("prompt", Rule::Only(absent, "prompt templates are not offered")),
    ("max_tool_calls", Rule::Only(absent, "max_tool_calls is not supported")),
    ("context_management", Rule::Only(absent, "context management is not offered")),
    (
        "prompt_cache_retention",
        Rule::Only(absent, "prompt cache retention cannot be chosen: cached prefixes live as long as the worker keeps them"),
    ),
    ("user", Rule::Identifier),
    ("safety_identifier", Rule::Identifier),
    ("seed", Rule::Honoured),
    ("stop", Rule::Honoured),
];

/// Refuses what `text` asks beyond its format: `verbosity` other than the default.
pub fn text_settings(text: Option<&Map<String, Value>>) -> Option<(&'static str, &'static str)> {
    let text = text?;
    for (key, value) in text {
        match key.as_str() {
            "format" => {}
            "verbosity" if value.is_null() || value == "medium" => {}
            "verbosity" => return Some(("text.verbosity", "verbosity cannot be steered on these models: only `medium` is accepted")),
            _ => return Some(("text", "text takes `format` and `verbosity` only")),
        }
    }
    None
}
