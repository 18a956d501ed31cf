//! Reading tool calls out of the model's text, whole or as it streams.

use serde_json::Value;

use super::format::{HERMES_CLOSE, HERMES_OPEN};
use super::{ToolFormat, ToolRequest};
use crate::error::ApiError;

/// One call read from the answer: the tool's name and its arguments as compact JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub name: String,
    pub arguments: String,
}

/// What the answer holds: text for the user, calls, or both (Hermes text before the first call).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    pub content: Option<String>,
    pub calls: Vec<Call>,
}

/// Parses a complete answer and checks every call against its tool.
///
/// # Errors
/// 500 when the answer does not parse or a call fails its tool's schema: the grammar should have made
/// that impossible, so it is the engine's fault, not the caller's.
pub fn parse(request: &ToolRequest, text: &str) -> Result<Parsed, ApiError> {
    let parsed = match request.format {
        ToolFormat::Hermes => hermes(text)?,
        ToolFormat::Generic => generic(text)?,
    };
    for call in &parsed.calls {
        check(request, call)?;
    }
    Ok(parsed)
}

fn broken(why: impl std::fmt::Display) -> ApiError {
    ApiError::Internal(format!("the model's tool call could not be read: {why}"))
}

/// One `{"name", "arguments"}` object as a [`Call`].
fn call_of(value: &Value) -> Result<Call, ApiError> {
    let name = value["name"].as_str().ok_or_else(|| broken("a call has no name"))?;
    let arguments = value.get("arguments").ok_or_else(|| broken("a call has no arguments"))?;
    Ok(Call { name: name.to_owned(), arguments: arguments.to_string() })
}

fn hermes(text: &str) -> Result<Parsed, ApiError> {
    let Some(first) = text.find(HERMES_OPEN) else {
        return Ok(Parsed { content: Some(text.to_owned()), calls: Vec::new() });
    };
    let before = text[..first].trim_end();
    let mut calls = Vec::new();
    for block in text[first..].split(HERMES_OPEN).filter(|b| !b.trim().is_empty()) {
        let body = block.split(HERMES_CLOSE).next().unwrap_or_default().trim();
        let value: Value = serde_json::from_str(body).map_err(broken)?;
        calls.push(call_of(&value)?);
    }
    Ok(Parsed { content: (!before.is_empty()).then(|| before.to_owned()), calls })
}

fn generic(text: &str) -> Result<Parsed, ApiError> {
    let value: Value = serde_json::from_str(text.trim()).map_err(broken)?;
    if let Some(calls) = value.get("tool_calls").and_then(Value::as_array) {
        let calls = calls.iter().map(call_of).collect::<Result<Vec<_>, _>>()?;
        return Ok(Parsed { content: None, calls });
    }
    match value.get("response") {
        Some(Value::String(s)) => Ok(Parsed { content: Some(s.clone()), calls: Vec::new() }),
        // With response_format the response is the JSON answer itself.
        Some(other) => Ok(Parsed { content: Some(other.to_string()), calls: Vec::new() }),
        None => Err(broken("neither tool_calls nor response")),
    }
}

fn check(request: &ToolRequest, call: &Call) -> Result<(), ApiError> {
    let tool = request.find(&call.name).ok_or_else(|| broken(format!("unknown tool `{}`", call.name)))?;
    let arguments: Value = serde_json::from_str(&call.arguments).map_err(broken)?;
    let validator = jsonschema::options().build(&tool.parameters).map_err(broken)?;
    if let Some(error) = validator.iter_errors(&arguments).next() {
        return Err(broken(format!("arguments of `{}` fail its schema: {error}", call.name)));
    }
    Ok(())
}

/// What a streamed answer yields as its text arrives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Text for the user.
    Content(String),
    /// A complete call.
    Call(Call),
}

/// Splits a streamed answer into user text and calls. Hermes text streams as it comes (holding back
/// only what could be the start of `<tool_call>`) and each call is yielded when its block closes; a
/// generic answer is one JSON object, yielded when it ends.
#[derive(Debug)]
pub struct Splitter {
    format: ToolFormat,
    pending: String,
    in_call: bool,
}

impl Splitter {
    #[must_use]
    pub fn new(format: ToolFormat) -> Self {
        Self { format, pending: String::new(), in_call: false }
    }

    /// Takes more text; returns what can be told to the client now.
    ///
    /// # Errors
    /// A call that does not parse (see [`parse`]).
    pub fn push(&mut self, request: &ToolRequest, text: &str) -> Result<Vec<Piece>, ApiError> {
        self.pending.push_str(text);
        if self.format == ToolFormat::Generic {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        loop {
            if self.in_call {
                let Some(end) = self.pending.find(HERMES_CLOSE) else { break };
                let body = self.pending[..end].trim().to_owned();
                self.pending.drain(..end + HERMES_CLOSE.len());
                let value: Value = serde_json::from_str(&body).map_err(broken)?;
                let call = call_of(&value)?;
                check(request, &call)?;
                out.push(Piece::Call(call));
                self.in_call = false;
                continue;
            }
            if let Some(start) = self.pending.find(HERMES_OPEN) {
                let before = self.pending[..start].to_owned();
                if !before.trim().is_empty() {
                    out.push(Piece::Content(before.trim_end().to_owned()));
                }
                self.pending.drain(..start + HERMES_OPEN.len());
                self.in_call = true;
                continue;
            }
            // Keep back a tail that could be the start of the trigger; the rest is text.
            let keep = (1..HERMES_OPEN.len()).rev().find(|&n| self.pending.ends_with(&HERMES_OPEN[..n])).unwrap_or(0);
            let cut = self.pending.len() - keep;
            if cut > 0 && self.pending.is_char_boundary(cut) {
                out.push(Piece::Content(self.pending[..cut].to_owned()));
                self.pending.drain(..cut);
            }
            break;
        }
        Ok(out)
    }

    /// The answer was cut (`max_tokens`): the text held back goes out as text, since a cut call is not a
    /// call (and a cut generic answer is not JSON).
    pub fn cut(&mut self) -> Vec<Piece> {
        let rest = std::mem::take(&mut self.pending);
        if rest.is_empty() || (self.in_call && self.format == ToolFormat::Hermes) {
            return Vec::new();
        }
        vec![Piece::Content(rest)]
    }

    /// The answer ended: whatever is left.
    ///
    /// # Errors
    /// A generic answer that does not parse.
    pub fn finish(&mut self, request: &ToolRequest) -> Result<Vec<Piece>, ApiError> {
        let rest = std::mem::take(&mut self.pending);
        if self.format == ToolFormat::Generic {
            let parsed = parse(request, &rest)?;
            let mut out: Vec<Piece> = parsed.content.into_iter().map(Piece::Content).collect();
            out.extend(parsed.calls.into_iter().map(Piece::Call));
            return Ok(out);
        }
        if self.in_call || rest.is_empty() {
            // A call cut by max_tokens is not a call.
            return Ok(Vec::new());
        }
        Ok(vec![Piece::Content(rest)])
    }
}
