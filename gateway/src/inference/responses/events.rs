//! Streaming a Response: the event sequence the SDK's stream helper expects (`response.created` first,
//! each item, and a message's text part, announced before any delta, a complete `response.completed`
//! last), each event with an `event:` line and a `sequence_number`. No `[DONE]`. A background
//! response's `response.created` (status `queued`) was written when it was queued (`background.rs`), so
//! its run starts at `response.in_progress`, numbered 1.
//!
//! Text arrives as `response.output_text.delta`s of the message item; each tool call as its own
//! `function_call` item (`output_item.added` with empty `arguments`), then
//! `response.function_call_arguments.delta`s and `.done`, then `output_item.done`.

use bytes::Bytes;
use rust_decimal::Decimal;
use serde_json::{json, Value};

use super::object::{event_logprobs, output_text, Answer, Shell};
use super::store::Keeper;
use super::tools::function_call_item;
use crate::billing::json_with_cost;
use crate::error::ApiError;
use crate::inference::stream::Events;

/// One streamed tool call: its place in `output`, and the call as chat writes it (arguments gathered).
struct StreamedCall {
    output_index: usize,
    call: Value,
}

pub struct ResponseEvents {
    shell: Shell,
    keeper: Option<Keeper>,
    sequence: u64,
    text: String,
    /// The text's tokens with their log probabilities (chat's entries), when the request asked for them.
    logprobs: Vec<Value>,
    /// The message item's place in `output`, once announced.
    message_index: Option<usize>,
    /// The calls, by their chat `index`.
    calls: Vec<StreamedCall>,
    /// Items announced so far: the next item's `output_index`.
    items: usize,
    cut: bool,
}

impl ResponseEvents {
    pub fn new(shell: Shell, keeper: Option<Keeper>) -> Self {
        Self {
            sequence: u64::from(shell.background()),
            shell,
            keeper,
            text: String::new(),
            logprobs: Vec::new(),
            message_index: None,
            calls: Vec::new(),
            items: 0,
            cut: false,
        }
    }

    /// One event; `body` is serialized text so the cost can keep its exact digits.
    fn event(&mut self, kind: &str, mut fields: Value) -> Bytes {
        fields["type"] = json!(kind);
        fields["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        Bytes::from(format!("event: {kind}\ndata: {fields}\n\n"))
    }

    fn part_fields(&self, index: usize) -> Value {
        json!({"item_id": self.shell.message_id, "output_index": index, "content_index": 0})
    }

    /// Announces the message item and its text part, once; its `output_index`.
    fn announce_message(&mut self, events: &mut Vec<Bytes>) -> usize {
        if let Some(index) = self.message_index {
            return index;
        }
        let index = self.items;
        self.items += 1;
        self.message_index = Some(index);
        let item = self.shell.message("", &[], "in_progress");
        let mut part = self.part_fields(index);
        part["part"] = output_text("", &[]);
        events.push(self.event("response.output_item.added", json!({"output_index": index, "item": item})));
        events.push(self.event("response.content_part.added", part));
        index
    }

    /// A chat tool-call delta: the call's item announced on its first delta (its id and name come then),
    /// its argument fragments as they come.
    fn call_delta(&mut self, delta: &Value, events: &mut Vec<Bytes>) {
        let position = delta["index"].as_u64().and_then(|i| usize::try_from(i).ok()).unwrap_or(self.calls.len());
        if position >= self.calls.len() {
            let output_index = self.items;
            self.items += 1;
            let call = json!({"id": delta["id"], "type": "function", "function": {"name": delta["function"]["name"], "arguments": ""}});
            let item = function_call_item(&call, "in_progress");
            events.push(self.event("response.output_item.added", json!({"output_index": output_index, "item": item})));
            self.calls.push(StreamedCall { output_index, call });
        }
        let Some(fragment) = delta["function"]["arguments"].as_str().filter(|f| !f.is_empty()) else { return };
        let last = self.calls.len().saturating_sub(1);
        let Some(streamed) = self.calls.get_mut(position.min(last)) else { return };
        let arguments = format!("{}{fragment}", streamed.call["function"]["arguments"].as_str().unwrap_or_default());
        streamed.call["function"]["arguments"] = json!(arguments);
        let (output_index, item_id) = (streamed.output_index, function_call_item(&streamed.call, "in_progress")["id"].clone());
        events.push(
            self.event(
                "response.function_call_arguments.delta",
                json!({"item_id": item_id, "output_index": output_index, "delta": fragment}),
            ),
        );
    }

    fn close_message(&mut self, index: usize, status: &str, events: &mut Vec<Bytes>) {
        // The entries are taken while the events are written (`event` borrows `self`), then put back for
        // the final Response.
        let (text, logprobs) = (self.text.clone(), std::mem::take(&mut self.logprobs));
        let mut done = self.part_fields(index);
        done["text"] = json!(text);
        done["logprobs"] = event_logprobs(&logprobs);
        events.push(self.event("response.output_text.done", done));
        let mut part = self.part_fields(index);
        part["part"] = output_text(&text, &logprobs);
        events.push(self.event("response.content_part.done", part));
        let item = self.shell.message(&text, &logprobs, status);
        self.logprobs = logprobs;
        events.push(self.event("response.output_item.done", json!({"output_index": index, "item": item})));
    }

    fn close_calls(&mut self, status: &str, events: &mut Vec<Bytes>) {
        let closed: Vec<(usize, Value)> = self.calls.iter().map(|c| (c.output_index, function_call_item(&c.call, status))).collect();
        for (output_index, item) in closed {
            events.push(self.event(
                "response.function_call_arguments.done",
                json!({"item_id": item["id"], "output_index": output_index, "name": item["name"], "arguments": item["arguments"]}),
            ));
            events.push(self.event("response.output_item.done", json!({"output_index": output_index, "item": item})));
        }
    }
}

/// An event carrying a whole Response (`response.created`, `.completed`, `.incomplete`, `.failed`),
/// written around the Response's own text so that its cost keeps its exact digits.
pub fn response_event(kind: &str, sequence: u64, response: &str) -> Bytes {
    Bytes::from(format!("event: {kind}\ndata: {{\"type\":\"{kind}\",\"sequence_number\":{sequence},\"response\":{response}}}\n\n"))
}

impl Events for ResponseEvents {
    fn start(&mut self) -> Vec<Bytes> {
        let response = self.shell.response(None);
        let mut events = Vec::with_capacity(2);
        if !self.shell.background() {
            events.push(self.event("response.created", json!({"response": response})));
        }
        events.push(self.event("response.in_progress", json!({"response": response})));
        events
    }

    fn chunk(&mut self, chunk: Value) -> Vec<Bytes> {
        let choice = &chunk["choices"][0];
        if choice["finish_reason"] == "length" {
            self.cut = true;
        }
        let mut events = Vec::new();
        for call in choice["delta"]["tool_calls"].as_array().into_iter().flatten() {
            self.call_delta(call, &mut events);
        }
        let delta = choice["delta"]["content"].as_str().unwrap_or_default();
        let tokens = choice["logprobs"]["content"].as_array().map_or(&[][..], Vec::as_slice);
        // A delta with no text may still end a token that began in the last one (a stop sequence cut it).
        if !delta.is_empty() || !tokens.is_empty() {
            let delta = delta.to_owned();
            self.text.push_str(&delta);
            self.logprobs.extend_from_slice(tokens);
            let index = self.announce_message(&mut events);
            let mut fields = self.part_fields(index);
            fields["delta"] = json!(delta);
            fields["logprobs"] = event_logprobs(tokens);
            events.push(self.event("response.output_text.delta", fields));
        }
        events
    }

    async fn complete(&mut self, usage_chunk: Value, cost: Decimal) -> Vec<Bytes> {
        let mut events = Vec::new();
        let status = if self.cut { "incomplete" } else { "completed" };
        // An answer with neither text nor calls is still one (empty) message.
        if self.calls.is_empty() {
            self.announce_message(&mut events);
        }
        if let Some(index) = self.message_index {
            self.close_message(index, status, &mut events);
        }
        self.close_calls(status, &mut events);
        let calls: Vec<Value> = self.calls.iter().map(|c| c.call.clone()).collect();
        let answer = Answer { text: &self.text, logprobs: &self.logprobs, calls: &calls, cut: self.cut, usage: &usage_chunk["usage"] };
        let response = self.shell.response(Some(answer));
        let response_text = json_with_cost(&response, cost);
        if let Some(keeper) = &self.keeper {
            keeper.keep(&self.shell.id, status, &response["output"], &response_text).await;
        }
        let kind = if self.cut { "response.incomplete" } else { "response.completed" };
        events.push(response_event(kind, self.sequence, &response_text));
        self.sequence += 1;
        events
    }

    fn error(&mut self, error: &ApiError) -> Vec<Bytes> {
        let body = error.body().error;
        vec![self.event("error", json!({"code": body.code, "message": body.message, "param": body.param}))]
    }
}
