//! An Anthropic Messages request → the chat request the worker runs.
//!
//! | Messages | chat completions |
//! |---|---|
//! | `system` (text or text blocks) | a `system` message |
//! | `text` blocks | message text |
//! | assistant `tool_use` blocks | assistant `tool_calls` (input → arguments JSON) |
//! | user `tool_result` blocks | `tool` messages with `tool_call_id`, before the user's text |
//! | `tools[].input_schema` | `tools[].function.parameters` |
//! | `tool_choice` auto / any / none / `{"type":"tool","name"}` | auto / required / none / named; `disable_parallel_tool_use` → `parallel_tool_calls: false` |
//! | `stop_sequences` | `stop` |
//! | `output_config.format` (or `output_format`) `{"type":"json_schema","schema"}` | `response_format` json_schema |

use serde_json::{json, Map, Value};

use crate::error::ApiError;

fn invalid(message: impl Into<String>, param: &'static str) -> ApiError {
    ApiError::InvalidRequest { message: message.into(), param: Some(param), code: "invalid_request_error" }
}

/// # Errors
/// 400 for a malformed request or content the models cannot read (images, documents).
pub fn to_chat(request: &Value) -> Result<Value, ApiError> {
    let obj = request.as_object().ok_or_else(|| ApiError::InvalidJson("the body must be a JSON object".into()))?;
    let model = obj.get("model").and_then(Value::as_str).ok_or_else(|| invalid("model: Field required", "model"))?;
    let max_tokens = obj.get("max_tokens").and_then(Value::as_u64).ok_or_else(|| invalid("max_tokens: Field required", "max_tokens"))?;
    if max_tokens == 0 {
        return Err(invalid("max_tokens: must be at least 1", "max_tokens"));
    }
    crate::inference::metadata::check_anthropic(obj.get("metadata"))?;
    let mut chat = Map::new();
    chat.insert("model".into(), json!(model));
    chat.insert("max_tokens".into(), json!(max_tokens));
    let mut messages = Vec::new();
    if let Some(system) = obj.get("system").filter(|s| !s.is_null()) {
        messages.push(json!({"role": "system", "content": text_of(system, "system")?}));
    }
    let turns = obj.get("messages").and_then(Value::as_array).ok_or_else(|| invalid("messages: Field required", "messages"))?;
    for turn in turns {
        messages.extend(turn_messages(turn)?);
    }
    chat.insert("messages".into(), Value::Array(messages));
    if let Some(tools) = obj.get("tools").and_then(Value::as_array).filter(|t| !t.is_empty()) {
        chat.insert("tools".into(), Value::Array(tools.iter().map(tool).collect::<Result<_, _>>()?));
    }
    if let Some(choice) = obj.get("tool_choice").filter(|c| !c.is_null()) {
        let (choice, parallel) = tool_choice(choice)?;
        chat.insert("tool_choice".into(), choice);
        if let Some(parallel) = parallel {
            chat.insert("parallel_tool_calls".into(), json!(parallel));
        }
    }
    if let Some(stops) = obj.get("stop_sequences").filter(|s| !s.is_null()) {
        chat.insert("stop".into(), stops.clone());
    }
    for key in ["temperature", "top_p", "top_k"] {
        if let Some(v) = obj.get(key).filter(|v| !v.is_null()) {
            chat.insert(key.into(), v.clone());
        }
    }
    let format = obj.get("output_config").and_then(|c| c.get("format")).or_else(|| obj.get("output_format")).filter(|f| !f.is_null());
    if let Some(format) = format {
        if format["type"] != "json_schema" || !format["schema"].is_object() {
            return Err(invalid("output_config.format must be {\"type\": \"json_schema\", \"schema\": {…}}", "output_config"));
        }
        chat.insert(
            "response_format".into(),
            json!({"type": "json_schema", "json_schema": {"name": "output", "strict": true, "schema": format["schema"]}}),
        );
    }
    if obj.get("stream").and_then(Value::as_bool) == Some(true) {
        chat.insert("stream".into(), json!(true));
    }
    Ok(Value::Object(chat))
}

/// Text from a string or an array of text blocks.
fn text_of(value: &Value, param: &'static str) -> Result<String, ApiError> {
    match value {
        Value::String(text) => Ok(text.clone()),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| match (b["type"].as_str(), b["text"].as_str()) {
                (Some("text"), Some(text)) => Ok(text.to_owned()),
                (kind, _) => {
                    Err(invalid(format!("content block `{}` is not supported here: the models read text", kind.unwrap_or("?")), param))
                }
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|parts| parts.join("")),
        _ => Err(invalid("content must be a string or an array of blocks", param)),
    }
}

/// One Anthropic turn as chat messages (a user turn with tool results becomes `tool` messages first).
fn turn_messages(turn: &Value) -> Result<Vec<Value>, ApiError> {
    let role = turn["role"].as_str().ok_or_else(|| invalid("messages: each message needs a role", "messages"))?;
    if role != "user" && role != "assistant" {
        return Err(invalid(format!("messages: role `{role}` is not user or assistant"), "messages"));
    }
    let blocks = match &turn["content"] {
        Value::String(text) => return Ok(vec![json!({"role": role, "content": text})]),
        Value::Array(blocks) => blocks,
        _ => return Err(invalid("messages: content must be a string or an array of blocks", "messages")),
    };
    let mut out = Vec::new();
    let mut text = String::new();
    let mut calls = Vec::new();
    for block in blocks {
        match block["type"].as_str() {
            Some("text") => text.push_str(block["text"].as_str().unwrap_or_default()),
            Some("tool_use") if role == "assistant" => {
                let id = block["id"].as_str().ok_or_else(|| invalid("tool_use blocks need an id", "messages"))?;
                let name = block["name"].as_str().ok_or_else(|| invalid("tool_use blocks need a name", "messages"))?;
                calls.push(json!({"id": id, "type": "function", "function": {"name": name, "arguments": block["input"].to_string()}}));
            }
            Some("tool_result") if role == "user" => {
                let id = block["tool_use_id"].as_str().ok_or_else(|| invalid("tool_result blocks need a tool_use_id", "messages"))?;
                let content = match block.get("content") {
                    None | Some(Value::Null) => String::new(),
                    Some(c) => text_of(c, "messages")?,
                };
                let content = if block["is_error"] == true { format!("Error: {content}") } else { content };
                out.push(json!({"role": "tool", "tool_call_id": id, "content": content}));
            }
            Some(kind) => return Err(invalid(format!("messages: `{kind}` blocks are not supported in a {role} message"), "messages")),
            None => return Err(invalid("messages: each block needs a type", "messages")),
        }
    }
    if !calls.is_empty() {
        out.push(json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }, "tool_calls": calls}));
    } else if !text.is_empty() || out.is_empty() {
        out.push(json!({"role": role, "content": text}));
    }
    Ok(out)
}

fn tool(tool: &Value) -> Result<Value, ApiError> {
    let name = tool["name"].as_str().ok_or_else(|| invalid("tools: each tool needs a name", "tools"))?;
    if tool.get("type").and_then(Value::as_str).is_some_and(|t| t != "custom") {
        return Err(invalid(format!("tools: server tool `{name}` is not supported; define it with input_schema"), "tools"));
    }
    let schema = tool.get("input_schema").cloned().ok_or_else(|| invalid(format!("tools: `{name}` needs input_schema"), "tools"))?;
    let mut function = json!({"name": name, "parameters": schema});
    if let Some(d) = tool["description"].as_str() {
        function["description"] = json!(d);
    }
    Ok(json!({"type": "function", "function": function}))
}

fn tool_choice(choice: &Value) -> Result<(Value, Option<bool>), ApiError> {
    let parallel = choice["disable_parallel_tool_use"].as_bool().map(|disable| !disable);
    let mapped = match choice["type"].as_str() {
        Some("auto") => json!("auto"),
        Some("any") => json!("required"),
        Some("none") => json!("none"),
        Some("tool") => {
            let name = choice["name"].as_str().ok_or_else(|| invalid("tool_choice: type tool needs a name", "tool_choice"))?;
            json!({"type": "function", "function": {"name": name}})
        }
        _ => return Err(invalid("tool_choice: type must be auto, any, none or tool", "tool_choice")),
    };
    Ok((mapped, parallel))
}
