//! A Responses request → the chat request the worker runs, exactly as the structured-outputs table says:
//!
//! | `text.format` | `response_format` |
//! |---|---|
//! | `{"type":"text"}` | none |
//! | `{"type":"json_object"}` | `{"type":"json_object"}` |
//! | `{"type":"json_schema","name","schema","strict"?,"description"?}` | `{"type":"json_schema","json_schema":{…same…}}` |

use serde_json::{json, Map, Value};

use super::parameters::{text_settings, INCLUDE_LOGPROBS, RESPONSES};
use super::tools;
use crate::error::ApiError;
use crate::inference::parameters;
use crate::structured;

fn invalid(message: impl Into<String>, param: &'static str) -> ApiError {
    ApiError::InvalidRequest { message: message.into(), param: Some(param), code: "invalid_request" }
}

/// The chat request for a Responses request. (A `previous_response_id` is resolved by the dialect, which
/// puts the stored conversation into `input` first.)
///
/// # Errors
/// 400 for what the gateway does not run: a parameter it does not honour (named), a `text.format` that is
/// not text, json_object or a valid json_schema, a tool that is not a function, an input item it cannot
/// read.
pub fn to_chat(request: &Value) -> Result<Value, ApiError> {
    let Some(obj) = request.as_object() else { return Err(ApiError::InvalidJson("the body must be a JSON object".into())) };
    parameters::check(obj, RESPONSES)?;
    if let Some((param, why)) = text_settings(obj.get("text").and_then(Value::as_object)) {
        return Err(ApiError::UnsupportedParameter { name: param.to_owned(), why, code: "unsupported_parameter" });
    }
    if obj.get("previous_response_id").is_some_and(|p| !(p.is_null() || p.is_string())) {
        return Err(invalid("`previous_response_id` must be a response id", "previous_response_id"));
    }
    if obj.get("store").is_some_and(|s| !(s.is_null() || s.is_boolean())) {
        return Err(invalid("`store` must be a boolean", "store"));
    }
    echoed_settings(obj)?;
    let model = obj.get("model").and_then(Value::as_str).ok_or_else(|| invalid("`model` is required", "model"))?;
    let mut chat = Map::new();
    chat.insert("model".into(), json!(model));
    chat.insert("messages".into(), Value::Array(messages(obj)?));
    if let Some(format) = response_format(obj.get("text").and_then(|t| t.get("format")))? {
        chat.insert("response_format".into(), format);
    }
    chat_tools(obj, &mut chat)?;
    if let Some(max) = obj.get("max_output_tokens").filter(|v| !v.is_null()) {
        chat.insert("max_completion_tokens".into(), max.clone());
    }
    // `prompt_cache_key` only steers routing (see `upstream/affinity.rs`).
    for key in ["temperature", "top_p", "seed", "stop", "prompt_cache_key"] {
        if let Some(v) = obj.get(key).filter(|v| !v.is_null()) {
            chat.insert(key.into(), v.clone());
        }
    }
    if let Some(effort) = obj.get("reasoning").and_then(|r| r.get("effort")).filter(|v| !v.is_null()) {
        chat.insert("reasoning_effort".into(), effort.clone());
    }
    logprobs(obj, &mut chat)?;
    if obj.get("stream").and_then(Value::as_bool) == Some(true) {
        chat.insert("stream".into(), json!(true));
    }
    Ok(Value::Object(chat))
}

/// `include: ["message.output_text.logprobs"]` and `top_logprobs` → chat's `logprobs` and
/// `top_logprobs`. Alternatives without the include would be ignored, so they are refused.
fn logprobs(obj: &Map<String, Value>, chat: &mut Map<String, Value>) -> Result<(), ApiError> {
    let included = obj.get("include").and_then(Value::as_array).is_some_and(|items| items.iter().any(|i| i == INCLUDE_LOGPROBS));
    let top = obj.get("top_logprobs").and_then(Value::as_u64).unwrap_or(0);
    if !included {
        if top > 0 {
            return Err(invalid(format!("top_logprobs needs include: [\"{INCLUDE_LOGPROBS}\"]"), "top_logprobs"));
        }
        return Ok(());
    }
    chat.insert("logprobs".into(), json!(true));
    chat.insert("top_logprobs".into(), json!(top));
    Ok(())
}

/// `tools`, `tool_choice` and `parallel_tool_calls`, as chat takes them (the worker then constrains and
/// reads the calls exactly as on chat).
fn chat_tools(obj: &Map<String, Value>, chat: &mut Map<String, Value>) -> Result<(), ApiError> {
    let tools = match obj.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(tools)) => tools::chat_tools(tools)?,
        Some(_) => return Err(invalid("`tools` must be a list of function tools", "tools")),
    };
    let choice = obj.get("tool_choice").filter(|c| !c.is_null());
    if tools.is_empty() {
        if choice.is_some_and(|c| !(c == "auto" || c == "none")) {
            return Err(invalid("tool_choice needs tools", "tool_choice"));
        }
        return Ok(());
    }
    chat.insert("tools".into(), Value::Array(tools));
    if let Some(choice) = choice {
        chat.insert("tool_choice".into(), tools::chat_tool_choice(choice)?);
    }
    if let Some(parallel) = obj.get("parallel_tool_calls").filter(|v| !v.is_null()) {
        chat.insert("parallel_tool_calls".into(), parallel.clone());
    }
    Ok(())
}

/// Settings the Response repeats back as sent: of the wrong type they would be echoed into a Response
/// that breaks its own schema (`instructions` as a number, say), so they are refused instead.
fn echoed_settings(obj: &Map<String, Value>) -> Result<(), ApiError> {
    let wrong = |key: &str, is_kind: fn(&Value) -> bool| obj.get(key).is_some_and(|v| !v.is_null() && !is_kind(v));
    if wrong("instructions", Value::is_string) {
        return Err(invalid("`instructions` must be a string or null", "instructions"));
    }
    if wrong("parallel_tool_calls", Value::is_boolean) {
        return Err(invalid("`parallel_tool_calls` must be a boolean or null", "parallel_tool_calls"));
    }
    crate::inference::metadata::check_openai(obj.get("metadata"), "invalid_request")?;
    Ok(())
}

fn messages(obj: &Map<String, Value>) -> Result<Vec<Value>, ApiError> {
    let mut out = Vec::new();
    if let Some(instructions) = obj.get("instructions").and_then(Value::as_str) {
        out.push(json!({"role": "system", "content": instructions}));
    }
    match obj.get("input") {
        Some(Value::String(text)) => out.push(json!({"role": "user", "content": text})),
        Some(Value::Array(items)) => {
            for item in items {
                match item.get("type").and_then(Value::as_str) {
                    Some("function_call") => {
                        let call = tools::chat_call(item)?;
                        // Calls in a row are one assistant turn, as chat writes them.
                        match out.last_mut().and_then(|m| m.get_mut("tool_calls")).and_then(Value::as_array_mut) {
                            Some(calls) => calls.push(call),
                            None => out.push(json!({"role": "assistant", "content": null, "tool_calls": [call]})),
                        }
                    }
                    Some("function_call_output") => out.push(tools::chat_tool_result(item)?),
                    _ => out.push(message(item)?),
                }
            }
        }
        _ => return Err(invalid("`input` is required: a string or a list of messages", "input")),
    }
    Ok(out)
}

fn message(item: &Value) -> Result<Value, ApiError> {
    let kind = item.get("type").and_then(Value::as_str).unwrap_or("message");
    if kind != "message" {
        return Err(invalid(format!("input items of type `{kind}` are not supported"), "input"));
    }
    let role = item.get("role").and_then(Value::as_str).ok_or_else(|| invalid("each input message needs a `role`", "input"))?;
    let content = match item.get("content") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            for part in parts {
                match (part.get("type").and_then(Value::as_str), part.get("text").and_then(Value::as_str)) {
                    (Some("input_text" | "output_text" | "text"), Some(t)) => text.push_str(t),
                    (other, _) => {
                        return Err(invalid(format!("content part `{}` is not supported: text only", other.unwrap_or("?")), "input"))
                    }
                }
            }
            text
        }
        _ => return Err(invalid("each input message needs `content`", "input")),
    };
    Ok(json!({"role": role, "content": content}))
}

/// `text.format` as the seed contract names its problems: `param: "text.format"`, code `invalid_request`.
fn response_format(format: Option<&Value>) -> Result<Option<Value>, ApiError> {
    let Some(format) = format.filter(|f| !f.is_null()) else { return Ok(None) };
    let bad = |why: &str| invalid(format!("invalid text.format: {why}"), "text.format");
    match format.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(json!({"type": "json_object"}))),
        Some("json_schema") => {
            structured::check_named_schema(format, "").map_err(|why| bad(&why))?;
            let mut spec = Map::new();
            for key in ["name", "schema", "strict", "description"] {
                if let Some(v) = format.get(key).filter(|v| !v.is_null()) {
                    spec.insert(key.into(), v.clone());
                }
            }
            Ok(Some(json!({"type": "json_schema", "json_schema": spec})))
        }
        _ => Err(bad("it must be text, json_object, or json_schema with a name and a schema")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn translates_the_seed_table() {
        let req = json!({
            "model": "m",
            "instructions": "Be exact.",
            "input": "Invoice #A-1024",
            "max_output_tokens": 64,
            "text": {"format": {"type": "json_schema", "name": "invoice", "strict": true, "schema": {"type": "object"}}}
        });
        let chat = to_chat(&req).unwrap();
        assert_eq!(chat["messages"][0], json!({"role": "system", "content": "Be exact."}));
        assert_eq!(chat["messages"][1], json!({"role": "user", "content": "Invoice #A-1024"}));
        assert_eq!(
            chat["response_format"],
            json!({"type": "json_schema", "json_schema": {"name": "invoice", "schema": {"type": "object"}, "strict": true}})
        );
        assert_eq!(chat["max_completion_tokens"], 64);
        let text_only = to_chat(&json!({"model": "m", "input": "x", "text": {"format": {"type": "text"}}})).unwrap();
        assert!(text_only.get("response_format").is_none());
        let object = to_chat(&json!({"model": "m", "input": "x", "text": {"format": {"type": "json_object"}}})).unwrap();
        assert_eq!(object["response_format"], json!({"type": "json_object"}));
    }

    #[test]
    fn the_logprobs_include_asks_chat_for_logprobs() {
        let include = json!(["message.output_text.logprobs"]);
        let chat = to_chat(&json!({"model": "m", "input": "x", "include": include, "top_logprobs": 3})).unwrap();
        assert_eq!((&chat["logprobs"], &chat["top_logprobs"]), (&json!(true), &json!(3)));
        let alone = to_chat(&json!({"model": "m", "input": "x", "include": include})).unwrap();
        assert_eq!((&alone["logprobs"], &alone["top_logprobs"]), (&json!(true), &json!(0)));
        for nothing in [json!({"model": "m", "input": "x", "include": []}), json!({"model": "m", "input": "x", "top_logprobs": 0})] {
            let chat = to_chat(&nothing).unwrap();
            assert!(chat.get("logprobs").is_none() && chat.get("top_logprobs").is_none(), "{nothing}");
        }
    }

    #[test]
    fn refuses_what_it_cannot_honour() {
        for (req, param) in [
            (json!({"model": "m", "input": "x", "text": {"format": {"type": "yaml"}}}), "text.format"),
            (json!({"model": "m", "input": "x", "text": {"format": {"type": "json_schema", "schema": {}}}}), "text.format"),
            (json!({"model": "m", "input": "x", "previous_response_id": 5}), "previous_response_id"),
            (json!({"model": "m", "input": "x", "store": "yes"}), "store"),
            (json!({"model": "m"}), "input"),
            (json!({"model": "m", "input": "x", "instructions": 5}), "instructions"),
            (json!({"model": "m", "input": "x", "parallel_tool_calls": "yes"}), "parallel_tool_calls"),
            (json!({"model": "m", "input": "x", "metadata": "x"}), "metadata"),
            (json!({"model": "m", "input": "x", "include": ["reasoning.encrypted_content"]}), "include"),
            (json!({"model": "m", "input": "x", "top_logprobs": 2}), "top_logprobs"),
            (json!({"model": "m", "input": "x", "include": ["message.output_text.logprobs"], "top_logprobs": 21}), "top_logprobs"),
            (json!({"model": "m", "input": "x", "text": {"verbosity": "high"}}), "text.verbosity"),
            (json!({"model": "m", "input": "x", "truncation": "auto"}), "truncation"),
            (json!({"model": "m", "input": "x", "conversation": "conv_1"}), "conversation"),
            (json!({"model": "m", "input": "x", "unheard_of": 1}), "unheard_of"),
        ] {
            let err = to_chat(&req).unwrap_err();
            assert_eq!(err.status(), 400);
            assert_eq!(err.body().error.param.as_deref(), Some(param), "{req}");
        }
        // Every text.format problem is named as the seed contract names it.
        for format in [
            json!({"type": "yaml"}),
            json!({"type": "json_schema", "name": "bad name", "schema": {"type": "object"}}),
            json!({"type": "json_schema", "name": "n", "schema": [1]}),
            json!({"type": "json_schema", "name": "n", "schema": {"type": 5}}),
        ] {
            let err = to_chat(&json!({"model": "m", "input": "x", "text": {"format": format}})).unwrap_err();
            assert_eq!(
                (err.code().as_deref(), err.body().error.param.as_deref()),
                (Some("invalid_request"), Some("text.format")),
                "{format}"
            );
        }
    }
}
