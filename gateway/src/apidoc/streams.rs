//! The `text/event-stream` answers. Before OpenAPI 3.2's `itemSchema`, a stream's `schema` describes
//! one event, `{event?, data}`, with `data` JSON text whose schema is its `contentSchema` (what
//! Schemathesis validates each event against). utoipa has no `contentSchema`, so the three event
//! schemas are JSON Schema literals put into the document as it is serialized; the types below only
//! hold their places.

use serde_json::{json, Value};
use utoipa::ToSchema;

/// Replaced by `chat_event` in the served document.
#[derive(ToSchema)]
#[schema(value_type = Object)]
pub struct ChatCompletionsSse(pub String);

/// Replaced by `responses_event` in the served document.
#[derive(ToSchema)]
#[schema(value_type = Object)]
pub struct ResponsesSse(pub String);

/// Replaced by `messages_event` in the served document.
#[derive(ToSchema)]
#[schema(value_type = Object)]
pub struct MessagesSse(pub String);

/// Puts the event schemas in place of the placeholders of a serialized document.
pub fn describe(doc: &mut Value) {
    let Some(schemas) = doc.pointer_mut("/components/schemas").and_then(Value::as_object_mut) else {
        return;
    };
    for (name, schema) in [("ChatCompletionsSse", chat_event()), ("ResponsesSse", responses_event()), ("MessagesSse", messages_event())] {
        if let Some(slot) = schemas.get_mut(name) {
            *slot = schema;
        }
    }
}

/// `data` as JSON text matching the component `name`.
fn json_data(name: &str) -> Value {
    json!({"type": "string", "contentMediaType": "application/json", "contentSchema": {"$ref": format!("#/components/schemas/{name}")}})
}

fn chat_event() -> Value {
    json!({
        "type": "object",
        "description": "One server-sent event of a chat completion stream. No `event:` lines: each `data` is a \
            `chat.completion.chunk` (the first delta carries `role`, the last choice chunk `finish_reason`; with \
            `stream_options.include_usage` every chunk has `usage: null` and a last chunk with `choices: []` carries \
            `usage` with `cost`), then `data: [DONE]`. A failure mid-stream is one `data` holding an error in \
            OpenAI's shape instead of the rest.",
        "required": ["data"],
        "properties": {
            "data": {
                "anyOf": [
                    {"type": "string", "enum": ["[DONE]"]},
                    {"type": "string", "contentMediaType": "application/json",
                     "contentSchema": {"oneOf": [{"$ref": "#/components/schemas/ChatCompletionChunk"}, {"$ref": "#/components/schemas/ErrorBody"}]}}
                ]
            }
        }
    })
}

fn responses_event() -> Value {
    json!({
        "type": "object",
        "description": "One server-sent event of a Responses stream: `event` names it and `data` (schema \
            `ResponseStreamEvent`) repeats the name in `type`, with a `sequence_number`. In order: \
            `response.created`, `response.in_progress`, `response.output_item.added`, `response.content_part.added`, \
            `response.output_text.delta`…, `response.output_text.done`, `response.content_part.done`, \
            `response.output_item.done`, then `response.completed` (or `response.incomplete`) with the whole \
            Response, `usage` with `cost`. No `[DONE]`. A failure mid-stream is one `error` event.",
        "required": ["event", "data"],
        "properties": {
            "event": {"$ref": "#/components/schemas/ResponseStreamEventType"},
            "data": json_data("ResponseStreamEvent")
        }
    })
}

fn messages_event() -> Value {
    json!({
        "type": "object",
        "description": "One server-sent event of a Messages stream, in Anthropic's order: `message_start`, per \
            content block `content_block_start`, `content_block_delta`…, `content_block_stop`, then \
            `message_delta` (stop reason, `usage` with `cost`) and `message_stop`. `data` (schema \
            `MessageStreamEvent`) repeats the name in `type`. A failure mid-stream is one `error` event in \
            Anthropic's error shape.",
        "required": ["event", "data"],
        "properties": {
            "event": {"$ref": "#/components/schemas/MessageStreamEventType"},
            "data": json_data("MessageStreamEvent")
        }
    })
}
