//! The grammar a tool request's answer must match, in llguidance's Lark dialect, one per call format.
//!
//! - `required` or a named tool: calls only, from the first token (eager). Harmony may think first, in
//!   its analysis channel, unless `reasoning_effort` is `none`.
//! - `auto`: text for the user or calls. Hermes text may come before its first `<tool_call>` (the grammar is
//!   lazy in effect: nothing is constrained until the trigger appears); Llama 3's and Mistral's calls are
//!   the whole answer; Harmony answers in its final channel or calls.
//! - Generic: one JSON object (eager), `{"tool_calls": […]}` or, under `auto`, `{"response": …}`.
//! - With `response_format` as well: the answer is either calls or JSON matching that schema.
//!
//! Each call's JSON names one allowed tool and holds arguments matching that tool's schema, so a call can
//! only name an offered tool. Markers that are control tokens in the model's vocabulary are asked for by
//! token ([`Markers`]).

use serde_json::{json, Value};

use super::format::{harmony, HERMES_CLOSE, HERMES_OPEN, MISTRAL_ARGS, MISTRAL_CALLS};
use super::markers::{literal, regex_escape, Markers};
use super::{Choice, Tool, ToolFormat, ToolRequest};
use crate::constraint::compact_separators;

/// A schema for `%json`, held to compact separators.
fn compact(mut schema: Value) -> Value {
    compact_separators(&mut schema);
    schema
}

/// The tools a call may name.
fn callable(request: &ToolRequest) -> impl Iterator<Item = &Tool> {
    request.tools.iter().filter(|t| match &request.choice {
        Choice::Named(name) => &t.name == name,
        _ => true,
    })
}

/// The schema of one call object, `{"name": …, <arguments_key>: …}`, as the allowed tools permit.
fn call_schema(request: &ToolRequest, arguments_key: &str, extra: Option<(&str, Value)>) -> Value {
    let branches: Vec<Value> = callable(request)
        .map(|t| {
            let mut call = json!({"type": "object", "properties": {"name": {"const": t.name}, arguments_key: t.grammar_parameters},
                   "required": ["name", arguments_key], "additionalProperties": false});
            if let Some((key, schema)) = &extra {
                call["properties"][*key] = schema.clone();
            }
            call
        })
        .collect();
    if branches.len() == 1 {
        branches.into_iter().next().unwrap_or_default()
    } else {
        json!({"anyOf": branches})
    }
}

/// The array of call objects `call`: at least one, exactly one without `parallel_tool_calls`.
fn calls_array(request: &ToolRequest, call: Value) -> Value {
    let mut calls = json!({"type": "array", "items": call, "minItems": 1});
    if !request.parallel {
        calls["maxItems"] = json!(1);
    }
    calls
}

/// Lark rules `call_<i>: <body>` for each allowed tool (`body` gets the tool and its arguments' schema)
/// and `call`, any one of them: for formats that name the tool outside the call's JSON.
fn call_per_tool(request: &ToolRequest, body: impl Fn(&Tool, Value) -> String) -> String {
    let mut rules = String::new();
    let names: Vec<String> = callable(request)
        .enumerate()
        .map(|(i, tool)| {
            rules.push_str(&format!("call_{i}: {}\n", body(tool, compact(tool.grammar_parameters.clone()))));
            format!("call_{i}")
        })
        .collect();
    rules.push_str(&format!("call: {}\n", names.join(" | ")));
    rules
}

/// The Lark grammar for the answer; `None` when tool calls are not allowed (`tool_choice: none`), in which
/// case only `response_format`, if any, constrains it. `think`: Harmony may write its analysis channel
/// before it answers.
#[must_use]
pub fn lark(request: &ToolRequest, response_schema: Option<&Value>, markers: &Markers, think: bool) -> Option<String> {
    if request.choice == Choice::None {
        return None;
    }
    let must_call = matches!(request.choice, Choice::Required | Choice::Named(_));
    let answer = response_schema.map(|schema| format!("answer_json: %json {}\n", compact(schema.clone())));
    // `start` for a request that may answer instead of calling: JSON if a schema is asked, else `free`.
    let either = |calls: &str, free: &str| match &answer {
        Some(answer) => format!("start: answer_json | {calls}\n{answer}"),
        None => format!("start: FREE | {calls}\nFREE: {free}\n"),
    };
    let grammar = match request.format {
        ToolFormat::Generic => generic(request, must_call, response_schema),
        ToolFormat::Hermes => {
            let more = if request.parallel { format!("(\"\\n\" \"{HERMES_OPEN}\" call_body)*") } else { String::new() };
            let rules = format!(
                "calls_after_open: call_body {more}\ncall_body: \"\\n\" call_json \"\\n{HERMES_CLOSE}\"\ncall_json: %json {}\n",
                compact(call_schema(request, "arguments", None))
            );
            let start = match (must_call, &answer) {
                (true, _) => format!("start: \"{HERMES_OPEN}\" calls_after_open\n"),
                (false, Some(answer)) => format!("start: answer_json | \"{HERMES_OPEN}\" calls_after_open\n{answer}"),
                // Free text without the trigger, or text ending at its first trigger, then calls.
                (false, None) => format!(
                    "start: FREE | PREFIX calls_after_open\nFREE: /(?s:.*)/ & ~/(?s:.*){open}(?s:.*)/\nPREFIX: /(?s:.*){open}/ & ~/(?s:.*){open}(?s:.+)/\n",
                    open = regex_escape(HERMES_OPEN)
                ),
            };
            format!("{start}{rules}")
        }
        ToolFormat::Llama3 => {
            // One JSON object either way: a call, or (under `auto`, with a schema) the answer; without a schema
            // a text answer is anything that does not open a JSON object.
            let call = call_schema(request, "parameters", None);
            match (must_call, response_schema) {
                (true, _) => format!("start: %json {}\n", compact(call)),
                (false, Some(schema)) => format!("start: %json {}\n", compact(json!({"anyOf": [call, schema]}))),
                (false, None) => {
                    format!("start: FREE | call_json\nFREE: /([^{{ \\t\\r\\n](?s:.*))?/\ncall_json: %json {}\n", compact(call))
                }
            }
        }
        ToolFormat::Mistral => {
            let id = json!({"type": "string", "pattern": "^[a-zA-Z0-9]{9}$"});
            let calls = calls_array(request, call_schema(request, "arguments", Some(("id", id))));
            let rules = format!("calls: {} calls_json\ncalls_json: %json {}\n", markers.atom(MISTRAL_CALLS), compact(calls));
            let start =
                if must_call { "start: calls\n".to_owned() } else { either("calls", &markers.text_not_starting_with(MISTRAL_CALLS)) };
            format!("{start}{rules}")
        }
        ToolFormat::MistralArgs => {
            let (open, args) = (markers.atom(MISTRAL_CALLS), markers.atom(MISTRAL_ARGS));
            let mut rules = call_per_tool(request, |tool, arguments| format!("{open} {} {args} %json {arguments}", literal(&tool.name)));
            let more = if request.parallel { "call*" } else { "" };
            rules.push_str(&format!("calls: call {more}\n"));
            let start =
                if must_call { "start: calls\n".to_owned() } else { either("calls", &markers.text_not_starting_with(MISTRAL_CALLS)) };
            format!("{start}{rules}")
        }
        ToolFormat::Harmony => harmony_grammar(request, must_call, answer.as_deref(), markers, think),
    };
    Some(grammar)
}

fn generic(request: &ToolRequest, must_call: bool, response_schema: Option<&Value>) -> String {
    let calls = calls_array(request, call_schema(request, "arguments", None));
    let calls = json!({"type": "object", "properties": {"tool_calls": calls}, "required": ["tool_calls"], "additionalProperties": false});
    let response = response_schema.cloned().unwrap_or_else(|| json!({"type": "string"}));
    let answer = if must_call {
        calls
    } else {
        json!({"anyOf": [calls, {"type": "object", "properties": {"response": response}, "required": ["response"], "additionalProperties": false}]})
    };
    format!("start: %json {}\n", compact(answer))
}

/// Harmony, after the generation prompt's `<|start|>assistant`: optionally the analysis channel and a new
/// assistant message, then one call (`<|call|>` ends the turn) or, under `auto`, the final channel.
fn harmony_grammar(request: &ToolRequest, must_call: bool, answer: Option<&str>, markers: &Markers, think: bool) -> String {
    let (channel, message) = (markers.atom(harmony::CHANNEL), markers.atom(harmony::MESSAGE));
    let (constrain, end) = (markers.atom(harmony::CONSTRAIN), markers.atom(harmony::CALL));
    let mut rules = call_per_tool(request, |tool, arguments| {
        let recipient = literal(&format!("commentary{}{} ", harmony::TO_FUNCTIONS, tool.name));
        format!("{channel} {recipient} {constrain} \"json\" {message} %json {arguments} {end}")
    });
    let reply = match (must_call, answer) {
        (true, _) => "call".to_owned(),
        (false, Some(answer)) => {
            rules.push_str(&format!("final: {channel} \"final\" {message} answer_json\n{answer}"));
            "call | final".to_owned()
        }
        (false, None) => {
            rules.push_str(&format!("final: {channel} \"final\" {message} FREE\nFREE: /(?s:.*)/\n"));
            "call | final".to_owned()
        }
    };
    if !think {
        return format!("start: {reply}\n{rules}");
    }
    rules.push_str(&format!(
        "analysis: {channel} \"analysis\" {message} thought {} \"assistant\"\n{}",
        markers.atom(harmony::START),
        markers.text_through("thought", harmony::END)
    ));
    format!("start: analysis? ({reply})\n{rules}")
}
