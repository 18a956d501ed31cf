//! The `messages`, `responses` and `chat` targets: arbitrary JSON as a request body of
//! `/v1/messages`, `/v1/responses` or `/v1/chat/completions`, through the dialect's translation into a
//! chat request and then [`chat_pipeline`].

use serde_json::Value;

use super::{assert_refusal, chat_pipeline, with_json};

/// Checks `data` as a `/v1/messages` body. A refusal is a 400; a translation keeps the model and
/// `max_tokens` (at least 1), gives every turn at least one message, carries every tool, streams only
/// when asked, and uses only the roles and fields a chat request has.
pub fn messages(data: &[u8]) {
    with_json(data, |request| match runaii_gateway::inference::messages::translate::to_chat(request) {
        Err(error) => assert_refusal(&error),
        Ok(chat) => {
            assert_eq!(chat["model"], request["model"]);
            assert!(request["model"].is_string());
            assert!(chat["max_tokens"].as_u64().is_some_and(|n| n >= 1) && chat["max_tokens"] == request["max_tokens"]);
            let turns = request["messages"].as_array().map_or(0, Vec::len);
            let system = usize::from(request.get("system").is_some_and(|s| !s.is_null()));
            let messages = chat["messages"].as_array().map_or(&[][..], Vec::as_slice);
            assert!(messages.len() >= turns + system, "{turns} turns and {system} system became {} messages", messages.len());
            for message in messages {
                check_chat_message(message);
            }
            let tools = request["tools"].as_array().map_or(0, Vec::len);
            assert_eq!(chat["tools"].as_array().map_or(0, Vec::len), tools, "tools lost or invented");
            assert_streams_as_asked(request, &chat);
            chat_pipeline(chat);
        }
    });
}

/// Checks `data` as a `/v1/responses` body. A refusal is a 400; a translation keeps the model, makes
/// one message of `instructions` and one per input item (calls in a row share one assistant turn), each
/// a chat message, carries every tool, maps `text.format` as the table in `responses::translate` says,
/// and streams only when asked.
pub fn responses(data: &[u8]) {
    with_json(data, |request| match runaii_gateway::inference::responses::translate::to_chat(request) {
        Err(error) => assert_refusal(&error),
        Ok(chat) => {
            assert_eq!(chat["model"], request["model"]);
            assert!(request["model"].is_string());
            let instructions = usize::from(request["instructions"].is_string());
            let inputs = request["input"].as_array().map_or(1, Vec::len);
            let messages = chat["messages"].as_array().map_or(&[][..], Vec::as_slice);
            let calls = request["input"].as_array().map_or(0, |items| items.iter().filter(|i| i["type"] == "function_call").count());
            let expected = instructions + inputs;
            assert!(
                messages.len() <= expected && messages.len() + calls >= expected,
                "instructions and {inputs} input items became {} messages",
                messages.len()
            );
            for message in messages {
                let calls = message["tool_calls"].as_array().is_some_and(|c| !c.is_empty());
                assert!(message["role"].is_string() && (message["content"].is_string() || calls), "{message}");
            }
            let tools = request["tools"].as_array().map_or(0, Vec::len);
            assert_eq!(chat["tools"].as_array().map_or(0, Vec::len), tools, "tools lost or invented");
            let format = request["text"]["format"]["type"].as_str();
            let constrained = matches!(format, Some("json_object" | "json_schema"));
            assert_eq!(chat.get("response_format").is_some(), constrained, "text.format {format:?}");
            if let Some(max) = request.get("max_output_tokens").filter(|v| !v.is_null()) {
                assert_eq!(&chat["max_completion_tokens"], max);
            }
            assert_streams_as_asked(request, &chat);
            chat_pipeline(chat);
        }
    });
}

/// Checks `data` as a `/v1/chat/completions` body: it goes through [`chat_pipeline`] as sent.
pub fn chat(data: &[u8]) {
    with_json(data, |request| chat_pipeline(request.clone()));
}

/// A message of the chat dialect: a known role, text content (or none beside tool calls), and a call
/// id on tool results.
fn check_chat_message(message: &Value) {
    let role = message["role"].as_str();
    assert!(matches!(role, Some("system" | "user" | "assistant" | "tool")), "role {role:?}");
    let calls = message["tool_calls"].as_array();
    assert!(message["content"].is_string() || (message["content"].is_null() && calls.is_some_and(|c| !c.is_empty())), "{message}");
    if let Some(calls) = calls {
        assert_eq!(role, Some("assistant"));
        assert!(
            calls.iter().all(|c| c["id"].is_string() && c["function"]["name"].is_string() && c["function"]["arguments"].is_string()),
            "{message}"
        );
    }
    if role == Some("tool") {
        assert!(message["tool_call_id"].is_string(), "{message}");
    }
}

fn assert_streams_as_asked(request: &Value, chat: &Value) {
    assert_eq!(chat["stream"] == true, request["stream"] == true, "stream changed");
}
