//! OpenAI's chat completions: the worker's own dialect, so reading is checking and writing is passing
//! the worker's answer and chunks on, with the gateway's id and without the worker's timings.

use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use rust_decimal::Decimal;
use serde_json::{json, Value};

use super::stream::{data_event, json_event, Events};
use super::Dialect;
use crate::auth::Caller;
use crate::billing::json_with_cost;
use crate::error::ApiError;
use crate::state::AppState;

pub const ENDPOINT_CHAT: &str = "chat.completions";

#[derive(Debug)]
pub struct Chat {
    id: String,
}

impl Dialect for Chat {
    const ENDPOINT: &'static str = ENDPOINT_CHAT;
    type Events = ChatChunks;

    fn new_id() -> String {
        format!("chatcmpl-{}", uuid::Uuid::now_v7().simple())
    }

    async fn read(_: &AppState, _: &Caller, request: Value, id: String) -> Result<(Self, Value), ApiError> {
        if let Some(fields) = request.as_object() {
            super::parameters::check_chat(fields)?;
        }
        Ok((Self { id }, request))
    }

    fn events(self, include_usage: bool) -> ChatChunks {
        ChatChunks { include_usage }
    }

    async fn whole(self, mut answer: Value, cost: Decimal) -> String {
        answer["id"] = json!(self.id);
        if let Some(obj) = answer.as_object_mut() {
            obj.remove("timings");
        }
        json_with_cost(&answer, cost)
    }

    fn error(error: ApiError) -> Response {
        error.into_response()
    }
}

/// OpenAI chat chunks, passed through with the gateway's id; usage only when the client asked.
pub struct ChatChunks {
    include_usage: bool,
}

impl Events for ChatChunks {
    fn start(&mut self) -> Vec<Bytes> {
        Vec::new()
    }

    fn chunk(&mut self, mut chunk: Value) -> Vec<Bytes> {
        if let Some(c) = chunk.as_object_mut() {
            c.remove("timings");
            if !self.include_usage {
                c.remove("usage");
            }
        }
        vec![json_event(&chunk)]
    }

    async fn complete(&mut self, usage_chunk: Value, cost: Decimal) -> Vec<Bytes> {
        let mut events = Vec::new();
        if self.include_usage {
            events.push(data_event(&json_with_cost(&usage_chunk, cost)));
        }
        events.push(data_event("[DONE]"));
        events
    }

    fn error(&mut self, error: &ApiError) -> Vec<Bytes> {
        vec![json_event(&json!(error.body()))]
    }
}
