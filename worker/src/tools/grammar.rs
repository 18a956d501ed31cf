//! The grammar a tool request's answer must match, in llguidance's Lark dialect.
//!
//! - Hermes, `auto`: free text that never contains `<tool_call>`, or text up to the first `<tool_call>`
//!   followed by calls. The grammar is lazy in effect: nothing is constrained until the trigger appears.
//! - Hermes, `required` or a named tool: calls only, from the first token (eager).
//! - Generic: one JSON object (eager), `{"tool_calls": […]}` or, under `auto`, `{"response": …}`.
//! - With `response_format` as well: the answer is either calls or JSON matching that schema.
//!
//! Each call's JSON is `{"name": <const>, "arguments": <the tool's schema>}`, one branch per allowed tool,
//! so a call can only name an offered tool and its arguments must match that tool's schema.

use serde_json::{json, Value};

use super::format::{HERMES_CLOSE, HERMES_OPEN};
use super::{Choice, ToolFormat, ToolRequest};
use crate::constraint::compact_separators;

/// A schema for `%json`, held to compact separators.
fn compact(mut schema: Value) -> Value {
    compact_separators(&mut schema);
    schema
}

/// The schema of one call object, as the allowed tools permit.
fn call_schema(request: &ToolRequest) -> Value {
    let branches: Vec<Value> = request
        .tools
        .iter()
        .filter(|t| match &request.choice {
            Choice::Named(name) => &t.name == name,
            _ => true,
        })
        .map(|t| {
            json!({"type": "object", "properties": {"name": {"const": t.name}, "arguments": t.grammar_parameters},
                   "required": ["name", "arguments"], "additionalProperties": false})
        })
        .collect();
    if branches.len() == 1 {
        branches.into_iter().next().unwrap_or_default()
    } else {
        json!({"anyOf": branches})
    }
}

/// The Lark grammar for the answer; `None` when tool calls are not allowed (`tool_choice: none`), in which
/// case only `response_format`, if any, constrains it.
#[must_use]
pub fn lark(request: &ToolRequest, response_schema: Option<&Value>) -> Option<String> {
    if request.choice == Choice::None {
        return None;
    }
    let call = call_schema(request);
    let must_call = matches!(request.choice, Choice::Required | Choice::Named(_));
    let grammar = match request.format {
        ToolFormat::Generic => {
            let mut calls = json!({"type": "array", "items": call, "minItems": 1});
            if !request.parallel {
                calls["maxItems"] = json!(1);
            }
            let calls =
                json!({"type": "object", "properties": {"tool_calls": calls}, "required": ["tool_calls"], "additionalProperties": false});
            let answer = match (must_call, response_schema) {
                (true, _) => calls,
                (false, Some(schema)) => {
                    json!({"anyOf": [calls, {"type": "object", "properties": {"response": schema}, "required": ["response"], "additionalProperties": false}]})
                }
                (false, None) => {
                    json!({"anyOf": [calls, {"type": "object", "properties": {"response": {"type": "string"}}, "required": ["response"], "additionalProperties": false}]})
                }
            };
            format!("start: %json {}\n", compact(answer))
        }
        ToolFormat::Hermes => {
            let more = if request.parallel { format!("(\"\\n\" \"{HERMES_OPEN}\" call_body)*") } else { String::new() };
            let rules = format!(
                "calls_after_open: call_body {more}\ncall_body: \"\\n\" call_json \"\\n{HERMES_CLOSE}\"\ncall_json: %json {}\n",
                compact(call)
            );
            let start = match (must_call, response_schema) {
                (true, _) => format!("start: \"{HERMES_OPEN}\" calls_after_open\n"),
                (false, Some(schema)) => {
                    format!("start: answer_json | \"{HERMES_OPEN}\" calls_after_open\nanswer_json: %json {}\n", compact(schema.clone()))
                }
                // Free text without the trigger, or text ending at its first trigger, then calls.
                (false, None) => format!(
                    "start: FREE | PREFIX calls_after_open\nFREE: /(?s:.*)/ & ~/(?s:.*){open}(?s:.*)/\nPREFIX: /(?s:.*){open}/ & ~/(?s:.*){open}(?s:.+)/\n",
                    open = regex_escape(HERMES_OPEN)
                ),
            };
            format!("{start}{rules}")
        }
    };
    Some(grammar)
}

fn regex_escape(text: &str) -> String {
    text.chars().fold(String::new(), |mut out, c| {
        if "\\.+*?()|[]{}^$/-".contains(c) {
            out.push('\\');
        }
        out.push(c);
        out
    })
}
