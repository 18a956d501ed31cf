//! OpenAI messages → what chat templates render: role and text, plus the tool calls and results of a
//! tool conversation, in the shape the model's call format expects.

use runaii_wire::{ChatMessage, MessageContent};
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::template::TemplateMessage;
use crate::tools::{ToolFormat, ToolRequest};

pub(super) fn for_template(messages: &[ChatMessage], tools: Option<&ToolRequest>) -> Result<Vec<TemplateMessage>, ApiError> {
    if messages.is_empty() {
        return Err(ApiError::invalid("messages must hold at least one message", "messages"));
    }
    let format = tools.map_or(ToolFormat::Hermes, |t| t.format);
    let mut out = messages.iter().map(|m| convert(m, format)).collect::<Result<Vec<_>, _>>()?;
    match format {
        // Their templates render one call per assistant turn.
        ToolFormat::Llama3 | ToolFormat::Harmony => out = one_call_per_turn(out),
        // Their templates want ids of 9 letters and digits, the same in a call and its result.
        ToolFormat::Mistral | ToolFormat::MistralArgs => out.iter_mut().for_each(mistral_ids),
        ToolFormat::Hermes | ToolFormat::Generic => {}
    }
    if let Some(tools) = tools.filter(|t| t.format == ToolFormat::Generic) {
        // A template without tool support learns of the tools from the system message.
        let instructions = crate::tools::generic_instructions(tools);
        match out.first_mut().filter(|m| m.role == "system") {
            Some(system) => system.content = format!("{}\n\n{instructions}", system.content),
            None => out.insert(0, TemplateMessage { role: "system".into(), content: instructions, ..Default::default() }),
        }
    }
    Ok(out)
}

fn convert(message: &ChatMessage, format: ToolFormat) -> Result<TemplateMessage, ApiError> {
    let role = match message.role.as_str() {
        // `developer` replaces `system` for newer OpenAI models; templates only know `system`.
        "system" | "developer" => "system",
        "user" => "user",
        "assistant" => "assistant",
        "tool" => "tool",
        other => return Err(ApiError::invalid(format!("unknown message role `{other}`"), "messages")),
    };
    let content = text(message)?;
    let calls = message.tool_calls.as_deref().filter(|c| !c.is_empty()).map(calls_for_template).transpose()?;
    match (role, format) {
        ("assistant", ToolFormat::Generic) if calls.is_some() => {
            // The model made these calls in the generic format: show it the JSON it wrote.
            let calls: Vec<Value> = calls.unwrap_or_default().iter().map(|c| c["function"].clone()).collect();
            Ok(TemplateMessage { role: role.into(), content: json!({"tool_calls": calls}).to_string(), ..Default::default() })
        }
        ("tool", ToolFormat::Generic) => {
            // Templates without tool support may refuse a `tool` role: the result comes as user text.
            let id = message.tool_call_id.as_deref().unwrap_or("?");
            Ok(TemplateMessage { role: "user".into(), content: format!("Result of tool call {id}:\n{content}"), ..Default::default() })
        }
        _ => Ok(TemplateMessage {
            role: role.into(),
            content,
            tool_calls: calls,
            tool_call_id: message.tool_call_id.clone(),
            name: message.name.clone(),
        }),
    }
}

/// An assistant turn with several calls becomes one turn per call, each followed by its result.
fn one_call_per_turn(messages: Vec<TemplateMessage>) -> Vec<TemplateMessage> {
    let mut out = Vec::with_capacity(messages.len());
    let mut rest = messages.into_iter().peekable();
    while let Some(message) = rest.next() {
        let calls = message.tool_calls.clone().unwrap_or_default();
        if calls.len() < 2 {
            out.push(message);
            continue;
        }
        let mut results = Vec::new();
        while let Some(result) = rest.next_if(|m| m.role == "tool") {
            results.push(result);
        }
        for (i, call) in calls.into_iter().enumerate() {
            let content = if i == 0 { message.content.clone() } else { String::new() };
            let id = call["id"].as_str().map(str::to_owned);
            out.push(TemplateMessage { content, tool_calls: Some(vec![call]), ..message.clone() });
            if let Some(at) = results.iter().position(|r| r.tool_call_id.is_some() && r.tool_call_id == id) {
                out.push(results.remove(at));
            }
        }
        out.extend(results);
    }
    out
}

/// A call id as Mistral's templates take it: its last 9 letters and digits, zero-padded.
fn mistral_id(id: &str) -> String {
    let kept: Vec<char> = id.chars().filter(char::is_ascii_alphanumeric).collect();
    let last: String = kept[kept.len().saturating_sub(9)..].iter().collect();
    format!("{last:0>9}")
}

fn mistral_ids(message: &mut TemplateMessage) {
    if let Some(id) = &mut message.tool_call_id {
        *id = mistral_id(id);
    }
    for call in message.tool_calls.iter_mut().flatten() {
        if let Some(id) = call["id"].as_str().map(mistral_id) {
            call["id"] = Value::String(id);
        }
    }
}

fn text(message: &ChatMessage) -> Result<String, ApiError> {
    Ok(match &message.content {
        None => String::new(),
        Some(MessageContent::Text(text)) => text.clone(),
        Some(MessageContent::Parts(parts)) => {
            let mut text = String::new();
            for part in parts {
                match (part.kind.as_str(), &part.text) {
                    ("text", Some(t)) => text.push_str(t),
                    (kind, _) => {
                        return Err(ApiError::invalid(
                            format!("content part `{kind}` is not supported: this model reads text only"),
                            "messages",
                        ))
                    }
                }
            }
            text
        }
    })
}

/// An assistant's `tool_calls` with `arguments` parsed: templates render them as objects.
fn calls_for_template(calls: &[Value]) -> Result<Vec<Value>, ApiError> {
    calls
        .iter()
        .map(|call| {
            let function = &call["function"];
            let name = function["name"].as_str().ok_or_else(|| ApiError::invalid("a tool call needs function.name", "messages"))?;
            let arguments = match &function["arguments"] {
                Value::String(text) => serde_json::from_str(text)
                    .map_err(|_| ApiError::invalid(format!("the arguments of the call to `{name}` are not JSON"), "messages"))?,
                Value::Null => json!({}),
                other => other.clone(),
            };
            Ok(json!({"id": call["id"], "type": "function", "function": {"name": name, "arguments": arguments}}))
        })
        .collect()
}
