//! The most a request can cost, held from the tenant's credit at admission.
//!
//! The gateway has no tokenizer, so the prompt's token count is bounded from above by what the worker's
//! chat template can render from the request (see `worker/src/completion/messages.rs`,
//! `worker/src/tools/format.rs`, `worker/src/template.rs`). The argument:
//!
//! 1. **Tokens ≤ bytes.** A token of a byte-level BPE (or of SentencePiece with byte fallback) covers at
//!    least one byte of the text it was cut from; a special token written in the text (`<|im_start|>`)
//!    covers several. The tokenizer adds at most a BOS token and a leading-space marker of its own.
//! 2. **Each value of the request is rendered at most once, raw or through `tojson`,** and `tojson` is the
//!    longer: it is serde_json's serialization (the raw text plus quotes and escapes), pretty-printed when
//!    a template asks for an indent (Llama 3.1 uses 4, the worker's generic tool prompt 2), with `'`, `<`,
//!    `>` and `&` each turned into a 6-byte `\u00XX` escape (minijinja's HTML-safe JSON). So every value is
//!    measured as its serialization at an indent of 4 — more whitespace than any smaller indent or
//!    minijinja's `{"k": v}` display of a map — plus 5 bytes per such character ([`rendered_bytes`]). A
//!    template that writes a value twice, or JSON at a wider indent, is outside this bound.
//! 3. **What the worker builds from the request is measured as it builds it:** tool-call `arguments` are
//!    parsed and written back as JSON (`1e15` becomes `1000000000000000.0`), a tool without `parameters`
//!    gets a default schema, and a template without tool support gets the tools as pretty JSON in a system
//!    message, with fixed instructions naming `tool_choice`'s function.
//! 4. **The template's own text is a constant per message, per tool call, per tool and per request** (role
//!    markers, `<tool_call>` and `<tool_response>` tags, a default system prompt, a tools header, the
//!    generation prompt): [`PER_MESSAGE`], [`PER_TOOL_CALL`], [`PER_TOOL`], [`TEMPLATE_ALLOWANCE`],
//!    [`TOOLS_ALLOWANCE`], each well above what common templates (ChatML, Hermes/Qwen, Llama 3) write.
//!
//! The schema prompt for `response_format` is added to the messages before the hold is computed, so it is
//! measured as message content. Neither side can exceed the model's context window, which the worker
//! enforces. Should a record still exceed its hold, the ledger records it with a shortfall (see
//! `db/costs.rs`) rather than dropping it.

use std::io;

use rust_decimal::Decimal;
use serde::Serialize;
use serde_json::{json, Value};

use crate::db::models::ModelRow;

/// Tokens a chat template adds once per request: a default system prompt, a BOS token, the generation
/// prompt.
const TEMPLATE_ALLOWANCE: usize = 256;
/// Tokens a template adds around one message: start and end markers, the role, newlines, tool-result tags
/// (`<tool_response>`), the generic format's "Result of tool call …:" line.
const PER_MESSAGE: usize = 32;
/// Tokens around one tool call an assistant made: `<tool_call>`, `{"name": …, "arguments": …}` keys.
const PER_TOOL_CALL: usize = 32;
/// Tokens around one tool definition: separators, the generic format's nesting in a list, and a default
/// `parameters` (`{"type":"object","properties":{}}`) when the tool has none.
const PER_TOOL: usize = 64;
/// Tokens added once when tools are offered: a template's tools header, or the generic format's
/// instructions and the system message that carries them.
const TOOLS_ALLOWANCE: usize = 512;

/// The worst-case token counts of a (final, as-sent) chat request: prompt (read once, however many
/// answers) and output (every answer's, `n` of them).
#[must_use]
pub fn worst_case_tokens(model: &ModelRow, body: &Value) -> (u32, u32) {
    let context = u32::try_from(model.context_length).unwrap_or(0);
    let prompt = u32::try_from(prompt_bound(body)).unwrap_or(u32::MAX).min(context);
    let asked = ["max_completion_tokens", "max_tokens"].iter().find_map(|k| body.get(*k).and_then(Value::as_u64));
    let output = asked.map_or(context, |n| u32::try_from(n).unwrap_or(u32::MAX).min(context));
    let choices = body.get("n").and_then(Value::as_u64).map_or(1, |n| u32::try_from(n).unwrap_or(u32::MAX).max(1));
    (prompt, output.saturating_mul(choices))
}

/// The cost of the worst case, at the model's prices. Which prompt tokens a worker will find cached is
/// not known before it runs, so every prompt token is held at the dearer of the input and cached-input
/// prices (the input price, unless ops set a cached price above it): an upper bound whatever the cache
/// holds.
#[must_use]
pub fn worst_case_cost(model: &ModelRow, body: &Value) -> Decimal {
    let (prompt, output) = worst_case_tokens(model, body);
    let cached = if model.cached_input_price_per_mtok > model.input_price_per_mtok { prompt } else { 0 };
    super::cost(model, super::Tokens::new(prompt, cached, output))
}

/// An upper bound on the prompt's tokens (before the context cap); see the module's argument.
fn prompt_bound(body: &Value) -> usize {
    let messages = body.get("messages").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let tools = body.get("tools").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let mut bound = TEMPLATE_ALLOWANCE;
    for message in messages {
        bound = bound.saturating_add(message_bound(message));
    }
    if !tools.is_empty() {
        // The generic format may insert a system message of its own for the instructions.
        bound = bound.saturating_add(TOOLS_ALLOWANCE + PER_MESSAGE);
        for tool in tools {
            bound = bound.saturating_add(PER_TOOL).saturating_add(rendered_bytes(&tool_as_rendered(tool)));
        }
        // `tool_choice` naming a function puts its name in the instructions (twice).
        let named = body.pointer("/tool_choice/function/name").map_or(0, rendered_bytes);
        bound = bound.saturating_add(named.saturating_mul(2));
    }
    bound
}

fn message_bound(message: &Value) -> usize {
    let content = match message.get("content") {
        Some(text @ Value::String(_)) => rendered_bytes(text),
        // Parts: the worker concatenates their text (it refuses other kinds).
        Some(Value::Array(parts)) => parts.iter().filter_map(|p| p.get("text")).map(rendered_bytes).fold(0, usize::saturating_add),
        _ => 0,
    };
    let calls = message.get("tool_calls").and_then(Value::as_array).map_or(0, |calls| {
        calls.iter().map(|c| PER_TOOL_CALL.saturating_add(rendered_bytes(&call_as_rendered(c)))).fold(0, usize::saturating_add)
    });
    let fields = ["tool_call_id", "name"].iter().filter_map(|k| message.get(*k)).map(rendered_bytes).fold(0, usize::saturating_add);
    PER_MESSAGE.saturating_add(content).saturating_add(calls).saturating_add(fields)
}

/// A call as the worker hands it to templates: `arguments` parsed from its JSON text into a value.
fn call_as_rendered(call: &Value) -> Value {
    let function = &call["function"];
    let arguments = match &function["arguments"] {
        Value::String(text) => serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.clone())),
        other => other.clone(),
    };
    json!({"id": call["id"], "type": "function", "function": {"name": function["name"], "arguments": arguments}})
}

/// A tool as the worker hands it to templates (and, as a subset, to the generic instructions).
fn tool_as_rendered(tool: &Value) -> Value {
    let function = &tool["function"];
    let parameters = function.get("parameters").cloned().unwrap_or_else(|| json!({"type": "object", "properties": {}}));
    json!({"type": "function", "function": {"name": function["name"], "description": function["description"], "parameters": parameters}})
}

/// Bytes of the longest rendering of `value` by a template: its JSON at an indent of 4, with 5 more bytes
/// for each character `tojson` writes as a 6-byte escape.
fn rendered_bytes(value: &Value) -> usize {
    let mut measure = Measure::default();
    let mut serializer = serde_json::Serializer::with_formatter(&mut measure, serde_json::ser::PrettyFormatter::with_indent(b"    "));
    if value.serialize(&mut serializer).is_err() {
        // A `Value` always serializes, and `Measure` never fails a write: unreachable, and then the largest
        // bound is the safe one.
        return usize::MAX;
    }
    measure.bytes.saturating_add(measure.escaped.saturating_mul(5))
}

/// Counts what is written instead of keeping it: a bound on a megabyte of tools allocates nothing.
#[derive(Default)]
struct Measure {
    bytes: usize,
    /// `'`, `<`, `>`, `&`: only inside strings in JSON, and 6 bytes each after `tojson`.
    escaped: usize,
}

impl io::Write for Measure {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.bytes += buf.len();
        self.escaped += buf.iter().filter(|b| matches!(b, b'\'' | b'<' | b'>' | b'&')).count();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(context_length: i32) -> ModelRow {
        ModelRow { context_length, ..crate::billing::pricing::tests::model("0.10", "0.30") }
    }

    #[test]
    fn bound_covers_the_messages_and_respects_the_context() {
        let body = json!({"messages": [{"role": "user", "content": "hello"}], "max_tokens": 50});
        let (prompt, output) = worst_case_tokens(&model(4096), &body);
        assert!(prompt as usize > "hello".len() + TEMPLATE_ALLOWANCE + PER_MESSAGE);
        assert_eq!(output, 50);
        let no_max = json!({"messages": [{"role": "user", "content": "x".repeat(10_000)}]});
        assert_eq!(worst_case_tokens(&model(4096), &no_max), (4096, 4096));
    }

    #[test]
    fn every_answer_of_n_is_held_and_the_prompt_once() {
        let one = json!({"messages": [{"role": "user", "content": "hello"}], "max_tokens": 50});
        let mut three = one.clone();
        three["n"] = json!(3);
        let (prompt_one, _) = worst_case_tokens(&model(4096), &one);
        assert_eq!(worst_case_tokens(&model(4096), &three), (prompt_one, 150));
        let m = model(4096);
        assert!(worst_case_cost(&m, &three) > worst_case_cost(&m, &one));
    }

    #[test]
    fn tojson_escapes_are_counted_six_bytes_each() {
        // minijinja's `tojson` writes `'` as `\u0027`: 800 of them render as 4,800 bytes.
        let quotes = Value::String("'".repeat(800));
        assert!(rendered_bytes(&quotes) >= 800 * 6);
        let tool = json!({"type": "function", "function": {"name": "f", "description": "'".repeat(800)}});
        let body = json!({"messages": [{"role": "user", "content": "hi"}], "tools": [tool], "max_tokens": 1});
        let (prompt, _) = worst_case_tokens(&model(1_000_000), &body);
        assert!(prompt as usize >= 800 * 6 + TOOLS_ALLOWANCE);
    }

    #[test]
    fn parsed_arguments_are_measured_as_written_back() {
        // "1e15" is 4 bytes in the request and 18 once parsed and serialized again.
        let arguments = format!("[{}]", vec!["1e15"; 100].join(","));
        let call = json!({"id": "c", "type": "function", "function": {"name": "f", "arguments": arguments}});
        let rendered = serde_json::to_string(&call_as_rendered(&call)).unwrap();
        assert!(rendered.contains("1000000000000000.0"), "{rendered}");
        let message = json!({"role": "assistant", "tool_calls": [call]});
        assert!(message_bound(&message) >= rendered.len());
    }

    #[test]
    fn every_message_pays_its_template_overhead() {
        let messages: Vec<Value> = (0..100).map(|_| json!({"role": "user"})).collect();
        let body = json!({"messages": messages, "max_tokens": 1});
        let (prompt, _) = worst_case_tokens(&model(1_000_000), &body);
        assert!(prompt as usize >= TEMPLATE_ALLOWANCE + 100 * PER_MESSAGE);
    }

    #[test]
    fn the_hold_bounds_any_cached_count_at_either_price_order() {
        let body = json!({"messages": [{"role": "user", "content": "x".repeat(300)}], "max_tokens": 20});
        let d = |s: &str| s.parse::<Decimal>().unwrap();
        for cached_price in ["0", "0.025", "0.10", "0.2", "5"] {
            let m = ModelRow { cached_input_price_per_mtok: d(cached_price), ..model(4096) };
            let (prompt, output) = worst_case_tokens(&m, &body);
            let hold = worst_case_cost(&m, &body);
            for cached in [0, 1, prompt / 2, prompt] {
                let cost = crate::billing::cost(&m, crate::billing::Tokens::new(prompt, cached, output));
                assert!(cost <= hold, "cached price {cached_price}, {cached} cached: cost {cost} above the hold {hold}");
            }
        }
    }
}
