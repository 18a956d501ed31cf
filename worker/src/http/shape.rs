//! What the whole answer (`chat.rs`) and the streamed one (`stream.rs`) both write into what they send:
//! the answer's identity, and tool calls in OpenAI's shape. Kept apart so neither imports the other.

use std::time::{SystemTime, UNIX_EPOCH};

use runaii_wire::{FunctionCall, ToolCall};

use crate::tools::parse::Call;

/// A call as OpenAI answers it, with a fresh id.
pub(super) fn tool_call(call: Call) -> ToolCall {
    ToolCall {
        id: format!("call_{}", uuid::Uuid::now_v7().simple()),
        kind: "function".into(),
        function: FunctionCall { name: call.name, arguments: call.arguments },
    }
}

/// Identity shared by every chunk or the single body of one answer.
#[derive(Debug, Clone)]
pub(super) struct ResponseMeta {
    pub id: String,
    pub created: i64,
    pub model: String,
}

impl ResponseMeta {
    pub(super) fn new(model: &str) -> Self {
        let created = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        Self {
            id: format!("chatcmpl-{}", uuid::Uuid::now_v7().simple()),
            created: i64::try_from(created).unwrap_or(0),
            model: model.to_owned(),
        }
    }
}
