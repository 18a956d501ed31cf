//! OpenAPI schemas of fields the wire types keep as raw JSON (`serde_json::Value`) because the worker
//! checks them itself: their documented shape, for the gateway's OpenAPI document.

use serde_json::{json, Value};
use utoipa::openapi::schema::{Object, Schema};
use utoipa::openapi::RefOr;

/// A JSON Schema literal as a utoipa schema. The literals below are fixed and covered by a test, so the
/// free-form fallback never shows in a document.
fn literal(schema: Value) -> RefOr<Schema> {
    serde_json::from_value(schema).unwrap_or_else(|_| RefOr::T(Schema::Object(Object::new())))
}

fn tools_json() -> Value {
    json!({
        "type": ["array", "null"],
        "description": "Functions the model may call; up to 128, names unique.",
        "items": {
            "type": "object",
            "required": ["type", "function"],
            "properties": {
                "type": {"type": "string", "enum": ["function"]},
                "function": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string"},
                        "description": {"type": "string"},
                        "parameters": {"type": "object", "description": "A JSON Schema for the arguments."},
                        "strict": {"type": ["boolean", "null"]}
                    }
                }
            }
        }
    })
}

fn tool_choice_json() -> Value {
    json!({
        "description": "`auto` (the default with tools), `required`, `none`, or one named function.",
        "oneOf": [
            {"type": "string", "enum": ["auto", "required", "none"]},
            {
                "type": "object",
                "required": ["type", "function"],
                "properties": {
                    "type": {"type": "string", "enum": ["function"]},
                    "function": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}
                }
            },
            {"type": "null"}
        ]
    })
}

/// `tools` on a chat request.
#[must_use]
pub fn tools() -> RefOr<Schema> {
    literal(tools_json())
}

/// `tool_choice` on a chat request.
#[must_use]
pub fn tool_choice() -> RefOr<Schema> {
    literal(tool_choice_json())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_convert_without_loss() {
        for (literal_json, schema) in [(tools_json(), tools()), (tool_choice_json(), tool_choice())] {
            let back = serde_json::to_value(schema).unwrap_or_default();
            assert_eq!(back, literal_json);
        }
    }
}
