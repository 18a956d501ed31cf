//! A Responses request → the chat request the worker runs, exactly as the structured-outputs table says:
//!
//! | `text.format` | `response_format` |
//! |---|---|
//! | `{"type":"text"}` | none |
//! | `{"type":"json_object"}` | `{"type":"json_object"}` |
//! | `{"type":"json_schema","name","schema","strict"?,"description"?}` | `{"type":"json_schema","json_schema":{…same…}}` |

use serde_json::{json, Map, Value};

use crate::error::ApiError;

fn invalid(message: impl Into<String>, param: &'static str) -> ApiError {
    ApiError::InvalidRequest { message: message.into(), param: Some(param), code: "invalid_request" }
}

/// # Errors
/// 400 for what the gateway does not run: a stored previous response, tools, an unknown `text.format`.
pub fn to_chat(request: &Value) -> Result<Value, ApiError> {
    let Some(obj) = request.as_object() else { return Err(ApiError::InvalidJson("the body must be a JSON object".into())) };
    if let Some(previous) = obj.get("previous_response_id").and_then(Value::as_str) {
        // Responses are not stored, so there is nothing to continue from; refusing beats ignoring it.
        return Err(ApiError::PreviousResponseNotFound(previous.to_owned()));
    }
    if obj.get("tools").and_then(Value::as_array).is_some_and(|t| !t.is_empty()) {
        return Err(invalid("tools are not supported on /v1/responses yet", "tools"));
    }
    echoed_settings(obj)?;
    let model = obj.get("model").and_then(Value::as_str).ok_or_else(|| invalid("`model` is required", "model"))?;
    let mut chat = Map::new();
    chat.insert("model".into(), json!(model));
    chat.insert("messages".into(), Value::Array(messages(obj)?));
    if let Some(format) = response_format(obj.get("text").and_then(|t| t.get("format")))? {
        chat.insert("response_format".into(), format);
    }
    if let Some(max) = obj.get("max_output_tokens").filter(|v| !v.is_null()) {
        chat.insert("max_completion_tokens".into(), max.clone());
    }
    // `prompt_cache_key` only steers routing (see `upstream/affinity.rs`).
    for key in ["temperature", "top_p", "seed", "stop", "prompt_cache_key"] {
        if let Some(v) = obj.get(key).filter(|v| !v.is_null()) {
            chat.insert(key.into(), v.clone());
        }
    }
    if obj.get("stream").and_then(Value::as_bool) == Some(true) {
        chat.insert("stream".into(), json!(true));
    }
    Ok(Value::Object(chat))
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
                out.push(message(item)?);
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

fn response_format(format: Option<&Value>) -> Result<Option<Value>, ApiError> {
    let Some(format) = format else { return Ok(None) };
    let bad = || invalid("text.format must be text, json_object, or json_schema with a name and a schema", "text.format");
    match format.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(json!({"type": "json_object"}))),
        Some("json_schema") => {
            let name = format.get("name").filter(|n| n.is_string()).ok_or_else(bad)?;
            let schema = format.get("schema").ok_or_else(bad)?;
            let mut spec = Map::new();
            spec.insert("name".into(), name.clone());
            spec.insert("schema".into(), schema.clone());
            for key in ["strict", "description"] {
                if let Some(v) = format.get(key).filter(|v| !v.is_null()) {
                    spec.insert(key.into(), v.clone());
                }
            }
            Ok(Some(json!({"type": "json_schema", "json_schema": spec})))
        }
        _ => Err(bad()),
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
    fn refuses_what_it_cannot_honour() {
        for (req, param) in [
            (json!({"model": "m", "input": "x", "text": {"format": {"type": "yaml"}}}), "text.format"),
            (json!({"model": "m", "input": "x", "text": {"format": {"type": "json_schema", "schema": {}}}}), "text.format"),
            (json!({"model": "m", "input": "x", "previous_response_id": "resp_1"}), "previous_response_id"),
            (json!({"model": "m"}), "input"),
            (json!({"model": "m", "input": "x", "instructions": 5}), "instructions"),
            (json!({"model": "m", "input": "x", "parallel_tool_calls": "yes"}), "parallel_tool_calls"),
            (json!({"model": "m", "input": "x", "metadata": "x"}), "metadata"),
        ] {
            let err = to_chat(&req).unwrap_err();
            assert_eq!(err.status(), 400);
            assert_eq!(err.body().error.param.as_deref(), Some(param), "{req}");
        }
        let err = to_chat(&json!({"model": "m", "input": "x", "text": {"format": {"type": "yaml"}}})).unwrap_err();
        assert_eq!(err.code().as_deref(), Some("invalid_request"));
    }
}
