//! OpenAI messages → the plain role/content pairs chat templates render.

use runaii_wire::{ChatMessage, MessageContent};

use crate::http::ApiError;
use crate::template::TemplateMessage;

pub(super) fn for_template(messages: &[ChatMessage]) -> Result<Vec<TemplateMessage>, ApiError> {
    if messages.is_empty() {
        return Err(ApiError::invalid("messages must hold at least one message", "messages"));
    }
    messages.iter().map(convert).collect()
}

fn convert(message: &ChatMessage) -> Result<TemplateMessage, ApiError> {
    let role = match message.role.as_str() {
        // `developer` replaces `system` for newer OpenAI models; templates only know `system`.
        "system" | "developer" => "system",
        "user" => "user",
        "assistant" => "assistant",
        "tool" => "tool",
        other => return Err(ApiError::invalid(format!("unknown message role `{other}`"), "messages")),
    };
    let content = match &message.content {
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
    };
    Ok(TemplateMessage { role: role.to_owned(), content })
}
