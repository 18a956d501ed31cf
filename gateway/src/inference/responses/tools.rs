//! Function tools on the Responses dialect, translated onto chat's tool machinery (the worker's grammar
//! and call parsing): flat `tools` and `tool_choice` become chat's nested ones, `function_call` and
//! `function_call_output` input items become an assistant turn's `tool_calls` and `tool` messages, and
//! the answer's calls become `function_call` output items.

use serde_json::{json, Map, Value};

use crate::error::ApiError;

fn invalid(message: impl Into<String>, param: &'static str) -> ApiError {
    ApiError::InvalidRequest { message: message.into(), param: Some(param), code: "invalid_request" }
}

/// `tools: [{type: "function", name, description?, parameters?, strict?}]` → chat's
/// `[{type: "function", function: {…}}]`. Built-in tools (web search, files, …) are refused by name.
///
/// # Errors
/// 400 on `tools` for a tool that is not a function or has no name.
pub fn chat_tools(tools: &[Value]) -> Result<Vec<Value>, ApiError> {
    tools
        .iter()
        .enumerate()
        .map(|(i, tool)| {
            match tool.get("type").and_then(Value::as_str) {
                Some("function") => {}
                Some(other) => {
                    return Err(invalid(format!("tools[{i}]: `{other}` tools are not offered; define a function tool"), "tools"))
                }
                None => return Err(invalid(format!("tools[{i}]: `type` is required (\"function\")"), "tools")),
            }
            let name =
                tool.get("name").filter(|n| n.is_string()).ok_or_else(|| invalid(format!("tools[{i}]: `name` is required"), "tools"))?;
            let mut function = Map::new();
            function.insert("name".into(), name.clone());
            for key in ["description", "parameters", "strict"] {
                if let Some(v) = tool.get(key).filter(|v| !v.is_null()) {
                    function.insert(key.into(), v.clone());
                }
            }
            Ok(json!({"type": "function", "function": function}))
        })
        .collect()
}

/// `tool_choice` → chat's: the strings as they are, `{"type": "function", "name"}` nested.
///
/// # Errors
/// 400 on `tool_choice` for a shape chat has no equivalent of (`allowed_tools`, built-in tools).
pub fn chat_tool_choice(choice: &Value) -> Result<Value, ApiError> {
    match choice {
        Value::String(s) if matches!(s.as_str(), "auto" | "none" | "required") => Ok(choice.clone()),
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("function") => {
            let name = o
                .get("name")
                .filter(|n| n.is_string())
                .ok_or_else(|| invalid("tool_choice: a function choice needs its `name`", "tool_choice"))?;
            Ok(json!({"type": "function", "function": {"name": name}}))
        }
        _ => Err(invalid("tool_choice must be auto, none, required or {\"type\": \"function\", \"name\": …}", "tool_choice")),
    }
}

/// A `function_call` input item (a call the model made earlier) as a chat tool call.
///
/// # Errors
/// 400 on `input` for an item without `call_id`, `name` or `arguments`.
pub fn chat_call(item: &Value) -> Result<Value, ApiError> {
    let field =
        |key: &str| item.get(key).and_then(Value::as_str).ok_or_else(|| invalid(format!("a function_call item needs `{key}`"), "input"));
    Ok(json!({"id": field("call_id")?, "type": "function", "function": {"name": field("name")?, "arguments": field("arguments")?}}))
}

/// A `function_call_output` input item as chat's `tool` message.
///
/// # Errors
/// 400 on `input` for an item without `call_id` or a text `output`.
pub fn chat_tool_result(item: &Value) -> Result<Value, ApiError> {
    let call_id =
        item.get("call_id").and_then(Value::as_str).ok_or_else(|| invalid("a function_call_output item needs `call_id`", "input"))?;
    let output = match item.get("output") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            for part in parts {
                match part.get("text").and_then(Value::as_str) {
                    Some(t) if part.get("type").and_then(Value::as_str) == Some("input_text") => text.push_str(t),
                    _ => return Err(invalid("a function_call_output's output must be text (a string or input_text parts)", "input")),
                }
            }
            text
        }
        _ => return Err(invalid("a function_call_output item needs `output`", "input")),
    };
    Ok(json!({"role": "tool", "tool_call_id": call_id, "content": output}))
}

/// A chat tool call of the answer as a `function_call` output item.
#[must_use]
pub fn function_call_item(call: &Value, status: &str) -> Value {
    let call_id = call["id"].as_str().unwrap_or_default();
    json!({
        "id": format!("fc_{}", call_id.trim_start_matches("call_")),
        "type": "function_call",
        "status": status,
        "call_id": call_id,
        "name": call["function"]["name"],
        "arguments": call["function"]["arguments"].as_str().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_tools_and_choices_nest_as_chat_takes_them() {
        let tools =
            chat_tools(&[json!({"type": "function", "name": "get_weather", "parameters": {"type": "object"}, "strict": true})]).unwrap();
        assert_eq!(
            tools[0],
            json!({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}, "strict": true}})
        );
        assert_eq!(chat_tools(&[json!({"type": "web_search"})]).unwrap_err().body().error.param.as_deref(), Some("tools"));
        assert_eq!(
            chat_tool_choice(&json!({"type": "function", "name": "f"})).unwrap(),
            json!({"type": "function", "function": {"name": "f"}})
        );
        assert_eq!(chat_tool_choice(&json!("required")).unwrap(), json!("required"));
        assert!(chat_tool_choice(&json!({"type": "allowed_tools"})).is_err());
    }

    #[test]
    fn calls_and_results_round_trip() {
        let call = chat_call(&json!({"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"})).unwrap();
        assert_eq!(call["function"]["name"], "f");
        let item = function_call_item(&call, "completed");
        assert_eq!((item["call_id"].as_str(), item["id"].as_str()), (Some("call_1"), Some("fc_1")));
        let result = chat_tool_result(&json!({"type": "function_call_output", "call_id": "call_1", "output": "21C"})).unwrap();
        assert_eq!(result, json!({"role": "tool", "tool_call_id": "call_1", "content": "21C"}));
    }
}
