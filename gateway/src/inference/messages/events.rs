//! Streaming a message as Anthropic's events, in its order, each with an `event:` line:
//! `message_start` (with the prompt's usage), per block `content_block_start` / `content_block_delta`
//! (`text_delta`, `input_json_delta`) / `content_block_stop`, then `message_delta` (stop reason and
//! usage, with the exact cost) and `message_stop`.

use bytes::Bytes;
use rust_decimal::Decimal;
use serde_json::{json, Value};

use super::object::{stop_reason, tool_use_id, usage};
use crate::billing::{json_with_cost, Tokens};
use crate::error::ApiError;
use crate::inference::stream::Events;

pub struct MessageEvents {
    id: String,
    model: String,
    /// The prompt's counts as the worker last reported them (output 0: `message_start` announces none).
    prompt: Tokens,
    started: bool,
    /// The block being written: its index and whether it is text.
    open: Option<(usize, bool)>,
    next_index: usize,
    finish_reason: String,
    stop_sequence: Option<String>,
}

impl MessageEvents {
    pub fn new(id: String, model: String) -> Self {
        Self {
            id,
            model,
            prompt: Tokens::default(),
            started: false,
            open: None,
            next_index: 0,
            finish_reason: "stop".into(),
            stop_sequence: None,
        }
    }

    fn event(kind: &str, mut fields: Value) -> Bytes {
        fields["type"] = json!(kind);
        Bytes::from(format!("event: {kind}\ndata: {fields}\n\n"))
    }

    fn start_message(&mut self, events: &mut Vec<Bytes>) {
        if self.started {
            return;
        }
        self.started = true;
        let message = json!({"id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": [],
                             "stop_reason": null, "stop_sequence": null,
                             "usage": usage(&self.prompt)});
        events.push(Self::event("message_start", json!({"message": message})));
    }

    fn close_block(&mut self, events: &mut Vec<Bytes>) {
        if let Some((index, _)) = self.open.take() {
            events.push(Self::event("content_block_stop", json!({"index": index})));
        }
    }

    fn open_block(&mut self, events: &mut Vec<Bytes>, block: Value, text: bool) -> usize {
        self.close_block(events);
        let index = self.next_index;
        self.next_index += 1;
        events.push(Self::event("content_block_start", json!({"index": index, "content_block": block})));
        self.open = Some((index, text));
        index
    }
}

impl Events for MessageEvents {
    fn start(&mut self) -> Vec<Bytes> {
        // message_start waits for the first chunk that carries the prompt's token count.
        Vec::new()
    }

    fn metered(&mut self, tokens: Tokens) {
        self.prompt = Tokens::new(tokens.input, tokens.cached, 0);
    }

    fn chunk(&mut self, chunk: Value) -> Vec<Bytes> {
        let choice = &chunk["choices"][0];
        let delta = &choice["delta"];
        let text = delta["content"].as_str().filter(|t| !t.is_empty());
        let calls = delta["tool_calls"].as_array().filter(|c| !c.is_empty());
        if let Some(reason) = choice["finish_reason"].as_str() {
            self.finish_reason = reason.to_owned();
        }
        if let Some(stop) = choice["stop_sequence"].as_str() {
            self.stop_sequence = Some(stop.to_owned());
        }
        let mut events = Vec::new();
        if text.is_none() && calls.is_none() {
            return events;
        }
        self.start_message(&mut events);
        if let Some(text) = text {
            let index = match self.open {
                Some((index, true)) => index,
                _ => self.open_block(&mut events, json!({"type": "text", "text": ""}), true),
            };
            events.push(Self::event("content_block_delta", json!({"index": index, "delta": {"type": "text_delta", "text": text}})));
        }
        for call in calls.into_iter().flatten() {
            if let Some(id) = call["id"].as_str() {
                let block = json!({"type": "tool_use", "id": tool_use_id(id), "name": call["function"]["name"], "input": {}});
                self.open_block(&mut events, block, false);
            }
            let fragment = call["function"]["arguments"].as_str().unwrap_or_default();
            if let (Some((index, false)), false) = (self.open, fragment.is_empty()) {
                events.push(Self::event(
                    "content_block_delta",
                    json!({"index": index, "delta": {"type": "input_json_delta", "partial_json": fragment}}),
                ));
            }
        }
        events
    }

    async fn complete(&mut self, usage_chunk: Value, cost: Decimal) -> Vec<Bytes> {
        let tokens = Tokens::of_usage(&usage_chunk["usage"]);
        if !self.started {
            self.prompt = Tokens::new(tokens.input, tokens.cached, 0);
        }
        let mut events = Vec::new();
        self.start_message(&mut events);
        self.close_block(&mut events);
        let delta = json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason(&self.finish_reason, self.stop_sequence.as_deref()), "stop_sequence": self.stop_sequence},
            "usage": usage(&tokens),
        });
        let text = json_with_cost(&delta, cost);
        events.push(Bytes::from(format!("event: message_delta\ndata: {text}\n\n")));
        events.push(Self::event("message_stop", json!({})));
        events
    }

    fn error(&mut self, error: &ApiError) -> Vec<Bytes> {
        vec![Self::event("error", json!({"error": {"type": super::errors::kind(error.status().as_u16()), "message": error.to_string()}}))]
    }
}
