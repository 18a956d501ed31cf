//! Streaming a Response: the event sequence the SDK's stream helper expects (`response.created` first,
//! the item and part announced before any delta, a complete `response.completed` last), each event with
//! an `event:` line and a `sequence_number`. No `[DONE]`.

use bytes::Bytes;
use rust_decimal::Decimal;
use serde_json::{json, Value};

use super::object::{output_text, Shell};
use crate::billing::json_with_cost;
use crate::error::ApiError;
use crate::inference::stream::Events;

pub struct ResponseEvents {
    shell: Shell,
    sequence: u64,
    text: String,
    announced: bool,
    cut: bool,
}

impl ResponseEvents {
    pub fn new(shell: Shell) -> Self {
        Self { shell, sequence: 0, text: String::new(), announced: false, cut: false }
    }

    /// One event; `body` is serialized text so the cost can keep its exact digits.
    fn event(&mut self, kind: &str, mut fields: Value) -> Bytes {
        fields["type"] = json!(kind);
        fields["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        Bytes::from(format!("event: {kind}\ndata: {fields}\n\n"))
    }

    fn part_fields(&self) -> Value {
        json!({"item_id": self.shell.message_id, "output_index": 0, "content_index": 0})
    }

    fn announce(&mut self) -> Vec<Bytes> {
        if self.announced {
            return Vec::new();
        }
        self.announced = true;
        let item = self.shell.message("", "in_progress");
        let mut part = self.part_fields();
        part["part"] = output_text("");
        vec![
            self.event("response.output_item.added", json!({"output_index": 0, "item": item})),
            self.event("response.content_part.added", part),
        ]
    }
}

impl Events for ResponseEvents {
    fn start(&mut self) -> Vec<Bytes> {
        let response = self.shell.response(None);
        vec![
            self.event("response.created", json!({"response": response})),
            self.event("response.in_progress", json!({"response": response})),
        ]
    }

    fn chunk(&mut self, chunk: Value) -> Vec<Bytes> {
        let choice = &chunk["choices"][0];
        if choice["finish_reason"] == "length" {
            self.cut = true;
        }
        let Some(delta) = choice["delta"]["content"].as_str().filter(|d| !d.is_empty()) else {
            return Vec::new();
        };
        let delta = delta.to_owned();
        self.text.push_str(&delta);
        let mut events = self.announce();
        let mut fields = self.part_fields();
        fields["delta"] = json!(delta);
        fields["logprobs"] = json!([]);
        events.push(self.event("response.output_text.delta", fields));
        events
    }

    fn complete(&mut self, usage_chunk: Value, cost: Decimal) -> Vec<Bytes> {
        let mut events = self.announce();
        let text = self.text.clone();
        let mut done = self.part_fields();
        done["text"] = json!(text);
        done["logprobs"] = json!([]);
        events.push(self.event("response.output_text.done", done));
        let mut part = self.part_fields();
        part["part"] = output_text(&text);
        events.push(self.event("response.content_part.done", part));
        let status = if self.cut { "incomplete" } else { "completed" };
        let item = self.shell.message(&text, status);
        events.push(self.event("response.output_item.done", json!({"output_index": 0, "item": item})));
        let response = self.shell.response(Some((&text, self.cut, &usage_chunk["usage"])));
        let response_text = json_with_cost(&response, cost);
        let kind = if self.cut { "response.incomplete" } else { "response.completed" };
        let sequence = self.sequence;
        self.sequence += 1;
        events.push(Bytes::from(format!(
            "event: {kind}\ndata: {{\"type\":\"{kind}\",\"sequence_number\":{sequence},\"response\":{response_text}}}\n\n"
        )));
        events
    }

    fn error(&mut self, error: &ApiError) -> Vec<Bytes> {
        let body = error.body().error;
        vec![self.event("error", json!({"code": body.code, "message": body.message, "param": body.param}))]
    }
}
