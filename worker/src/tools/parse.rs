//! Reading tool calls out of the model's text, whole or as it streams, in each call format.

use serde_json::Value;

use super::format::{harmony, HERMES_CLOSE, HERMES_OPEN, MISTRAL_ARGS, MISTRAL_CALLS};
use super::{Choice, ToolFormat, ToolRequest};
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

impl Parsed {
    fn text(text: &str) -> Self {
        Self { content: Some(text.to_owned()), calls: Vec::new() }
    }
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
        ToolFormat::Llama3 => llama3(request, text)?,
        ToolFormat::Mistral => mistral(text)?,
        ToolFormat::MistralArgs => mistral_args(text)?,
        ToolFormat::Harmony => harmony_answer(text)?,
    };
    if request.choice == Choice::None {
        // Nothing could be called (the answer is only read for its structure): a call is not an answer.
        return Ok(Parsed { calls: Vec::new(), ..parsed });
    }
    for call in &parsed.calls {
        check(request, call)?;
    }
    Ok(parsed)
}

fn broken(why: impl std::fmt::Display) -> ApiError {
    ApiError::Internal(format!("the model's tool call could not be read: {why}"))
}

/// One `{"name", <arguments_key>}` object as a [`Call`].
fn call_of(value: &Value, arguments_key: &str) -> Result<Call, ApiError> {
    let name = value["name"].as_str().ok_or_else(|| broken("a call has no name"))?;
    let arguments = value.get(arguments_key).ok_or_else(|| broken("a call has no arguments"))?;
    Ok(Call { name: name.to_owned(), arguments: arguments.to_string() })
}

fn json(text: &str) -> Result<Value, ApiError> {
    serde_json::from_str(text.trim()).map_err(broken)
}

fn hermes(text: &str) -> Result<Parsed, ApiError> {
    let Some(first) = text.find(HERMES_OPEN) else {
        return Ok(Parsed::text(text));
    };
    let before = text[..first].trim_end();
    let mut calls = Vec::new();
    for block in text[first..].split(HERMES_OPEN).filter(|b| !b.trim().is_empty()) {
        let body = block.split(HERMES_CLOSE).next().unwrap_or_default();
        calls.push(call_of(&json(body)?, "arguments")?);
    }
    Ok(Parsed { content: (!before.is_empty()).then(|| before.to_owned()), calls })
}

fn generic(text: &str) -> Result<Parsed, ApiError> {
    let value = json(text)?;
    if let Some(calls) = value.get("tool_calls").and_then(Value::as_array) {
        let calls = calls.iter().map(|c| call_of(c, "arguments")).collect::<Result<Vec<_>, _>>()?;
        return Ok(Parsed { content: None, calls });
    }
    match value.get("response") {
        Some(Value::String(s)) => Ok(Parsed::text(s)),
        // With response_format the response is the JSON answer itself.
        Some(other) => Ok(Parsed::text(&other.to_string())),
        None => Err(broken("neither tool_calls nor response")),
    }
}

/// Llama 3: an answer that is exactly `{"name": <an offered tool>, "parameters": {…}}` is a call;
/// anything else (text, or the JSON answer a schema asked for) is the answer.
fn llama3(request: &ToolRequest, text: &str) -> Result<Parsed, ApiError> {
    if !text.trim_start().starts_with('{') {
        return Ok(Parsed::text(text));
    }
    let value = json(text)?;
    let is_call = value.as_object().is_some_and(|o| {
        o.len() == 2 && o.get("name").and_then(Value::as_str).is_some_and(|n| request.find(n).is_some()) && o.contains_key("parameters")
    });
    if is_call {
        return Ok(Parsed { content: None, calls: vec![call_of(&value, "parameters")?] });
    }
    Ok(Parsed::text(text))
}

/// Mistral: `[TOOL_CALLS]` and a JSON array of calls (each may carry the model's own `id`, which the
/// answer does not keep: calls get ids of the API's form).
fn mistral(text: &str) -> Result<Parsed, ApiError> {
    let Some(rest) = text.trim_start().strip_prefix(MISTRAL_CALLS) else {
        return Ok(Parsed::text(text));
    };
    let calls = json(rest)?;
    let calls = calls.as_array().ok_or_else(|| broken("the calls are not an array"))?;
    Ok(Parsed { content: None, calls: calls.iter().map(|c| call_of(c, "arguments")).collect::<Result<_, _>>()? })
}

/// Mistral's later templates: `[TOOL_CALLS]name[ARGS]{…}` per call (`[CALL_ID]id` may sit before
/// `[ARGS]`).
fn mistral_args(text: &str) -> Result<Parsed, ApiError> {
    let text_start = text.trim_start();
    if !text_start.starts_with(MISTRAL_CALLS) {
        return Ok(Parsed::text(text));
    }
    let mut calls = Vec::new();
    for block in text_start.split(MISTRAL_CALLS).filter(|b| !b.trim().is_empty()) {
        let (head, arguments) = block.split_once(MISTRAL_ARGS).ok_or_else(|| broken("a call has no [ARGS]"))?;
        let name = head.split("[CALL_ID]").next().unwrap_or_default().trim();
        calls.push(Call { name: name.to_owned(), arguments: json(arguments)?.to_string() });
    }
    Ok(Parsed { content: None, calls })
}

/// One Harmony message: its header (channel, recipient) and its body.
struct Message<'a> {
    channel: &'a str,
    recipient: Option<&'a str>,
    body: &'a str,
}

/// The messages of a Harmony answer, read after the generation prompt's `<|start|>assistant`. A message
/// ends at `<|end|>`, `<|call|>` or `<|return|>` (the last two also end generation, so they may be absent).
fn harmony_messages(text: &str) -> Result<Vec<Message<'_>>, ApiError> {
    let mut messages = Vec::new();
    for chunk in text.split(harmony::START).filter(|c| !c.trim().is_empty()) {
        let chunk = chunk.strip_prefix("assistant").unwrap_or(chunk);
        let (header, body) = chunk.split_once(harmony::MESSAGE).ok_or_else(|| broken("a message has no <|message|>"))?;
        let body = before_any(body, &[harmony::END, harmony::CALL, harmony::RETURN]);
        // The recipient is written in the role (` to=functions.x<|channel|>commentary json`) or after the
        // channel (`<|channel|>commentary to=functions.x <|constrain|>json`).
        let recipient = header.split_once(" to=").map(|(_, r)| r.split([' ', '<']).next().unwrap_or_default());
        let channel = header.split_once(harmony::CHANNEL).map_or("", |(_, c)| c.split([' ', '<']).next().unwrap_or_default());
        messages.push(Message { channel, recipient, body });
    }
    Ok(messages)
}

/// Harmony: the final channel is the answer, a message to `functions.NAME` a call; the analysis channel is
/// the model's thinking and is not part of the answer. Text without channels is the answer as written.
fn harmony_answer(text: &str) -> Result<Parsed, ApiError> {
    if !text.contains(harmony::CHANNEL) {
        return Ok(Parsed::text(text));
    }
    let mut parsed = Parsed::default();
    for message in harmony_messages(text)? {
        match message.recipient.and_then(|r| r.strip_prefix("functions.")) {
            Some(name) => parsed.calls.push(Call { name: name.to_owned(), arguments: json(message.body)?.to_string() }),
            None if message.channel == "final" => parsed.content = Some(message.body.to_owned()),
            None => {}
        }
    }
    Ok(parsed)
}

/// What a cut Harmony answer wrote in its final channel, if it got there (text without channels is the
/// answer as written).
#[must_use]
pub fn cut_final(text: &str) -> Option<String> {
    if !text.contains(harmony::CHANNEL) {
        return Some(text.to_owned());
    }
    let (_, rest) = text.split_once(harmony::FINAL)?;
    Some(before_any(rest, &FINAL_ENDS).to_owned())
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

/// Where a streamed answer stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Not known yet whether it is text or calls (Llama 3, Mistral: what it starts with tells).
    Undecided,
    /// Text for the user, sent as it comes (holding back only what could open a Hermes call).
    Text,
    /// Calls (or, in Harmony, not yet the final channel): kept until the answer ends.
    Held,
    /// Hermes: inside a `<tool_call>` block.
    InCall,
}

/// Splits a streamed answer into user text and calls. Hermes text streams as it comes and each call is
/// yielded when its block closes; Llama 3 and Mistral answers are text or calls from their first
/// characters, text streamed and calls yielded at the end; Harmony's final channel streams once its
/// header is written; a generic answer is one JSON object, yielded when it ends.
#[derive(Debug)]
pub struct Splitter {
    format: ToolFormat,
    pending: String,
    mode: Mode,
    /// Harmony: the whole answer so far, and up to where its final channel has gone out (once it opened).
    whole: String,
    final_sent: Option<usize>,
}

impl Splitter {
    #[must_use]
    pub fn new(format: ToolFormat) -> Self {
        let mode = match format {
            ToolFormat::Hermes => Mode::Text,
            ToolFormat::Generic => Mode::Held,
            ToolFormat::Llama3 | ToolFormat::Mistral | ToolFormat::MistralArgs | ToolFormat::Harmony => Mode::Undecided,
        };
        Self { format, pending: String::new(), mode, whole: String::new(), final_sent: None }
    }

    /// Takes more text; returns what can be told to the client now.
    ///
    /// # Errors
    /// A call that does not parse (see [`parse`]).
    pub fn push(&mut self, request: &ToolRequest, text: &str) -> Result<Vec<Piece>, ApiError> {
        match self.format {
            ToolFormat::Hermes => self.push_hermes(request, text),
            ToolFormat::Harmony => Ok(self.push_harmony(text)),
            ToolFormat::Generic => {
                self.pending.push_str(text);
                Ok(Vec::new())
            }
            ToolFormat::Llama3 | ToolFormat::Mistral | ToolFormat::MistralArgs => Ok(self.push_opened(text)),
        }
    }

    fn push_hermes(&mut self, request: &ToolRequest, text: &str) -> Result<Vec<Piece>, ApiError> {
        self.pending.push_str(text);
        let mut out = Vec::new();
        loop {
            if self.mode == Mode::InCall {
                let Some(end) = self.pending.find(HERMES_CLOSE) else { break };
                let call = call_of(&json(&self.pending[..end])?, "arguments")?;
                self.pending.drain(..end + HERMES_CLOSE.len());
                check(request, &call)?;
                out.push(Piece::Call(call));
                self.mode = Mode::Text;
                continue;
            }
            if let Some(start) = self.pending.find(HERMES_OPEN) {
                let before = self.pending[..start].to_owned();
                if !before.trim().is_empty() {
                    out.push(Piece::Content(before.trim_end().to_owned()));
                }
                self.pending.drain(..start + HERMES_OPEN.len());
                self.mode = Mode::InCall;
                continue;
            }
            out.extend(self.release_all_but(HERMES_OPEN));
            break;
        }
        Ok(out)
    }

    /// Text, except a tail that could be the start of `marker`.
    fn release_all_but(&mut self, marker: &str) -> Option<Piece> {
        let cut = self.pending.len() - started(&self.pending, marker);
        (cut > 0 && self.pending.is_char_boundary(cut)).then(|| Piece::Content(self.pending.drain(..cut).collect()))
    }

    /// Llama 3 and Mistral: calls open the answer (`{`, `[TOOL_CALLS]`); anything else is text.
    fn push_opened(&mut self, text: &str) -> Vec<Piece> {
        self.pending.push_str(text);
        if self.mode == Mode::Undecided {
            let opener = if self.format == ToolFormat::Llama3 { "{" } else { MISTRAL_CALLS };
            let start = self.pending.trim_start();
            if start.starts_with(opener) {
                self.mode = Mode::Held;
            } else if start.is_empty() || opener.starts_with(start) {
                return Vec::new();
            } else {
                self.mode = Mode::Text;
            }
        }
        if self.mode == Mode::Text && !self.pending.is_empty() {
            return vec![Piece::Content(std::mem::take(&mut self.pending))];
        }
        Vec::new()
    }

    /// Harmony: nothing goes out until the final channel opens; from then on its text does, holding back
    /// a tail that could start the marker that ends it.
    fn push_harmony(&mut self, text: &str) -> Vec<Piece> {
        self.whole.push_str(text);
        if self.mode == Mode::Undecided {
            // Channels open with `<|channel|>`, or with the recipient in the role (` to=…`); anything else
            // is text written without them, sent as it comes.
            let opens = [harmony::CHANNEL, " to="];
            if opens.iter().any(|o| self.whole.starts_with(o)) {
                self.mode = Mode::Held;
            } else if opens.iter().any(|o| o.starts_with(self.whole.as_str())) {
                return Vec::new();
            } else {
                self.mode = Mode::Text;
            }
        }
        if self.mode == Mode::Text {
            let from = self.final_sent.unwrap_or(0);
            self.final_sent = Some(self.whole.len());
            let text = &self.whole[from..];
            return if text.is_empty() { Vec::new() } else { vec![Piece::Content(text.to_owned())] };
        }
        let from = match self.final_sent {
            Some(from) => from,
            None => {
                let Some(at) = self.whole.find(harmony::FINAL) else { return Vec::new() };
                at + harmony::FINAL.len()
            }
        };
        let body = &self.whole[from..];
        let until = match FINAL_ENDS.iter().filter_map(|m| body.find(m)).min() {
            // The final message ended: nothing after it is part of the answer.
            Some(end) => from + end,
            None => self.whole.len() - FINAL_ENDS.iter().map(|m| started(body, m)).max().unwrap_or(0),
        };
        self.final_sent = Some(until);
        if until <= from {
            return Vec::new();
        }
        vec![Piece::Content(self.whole[from..until].to_owned())]
    }

    /// Harmony: the final channel's text not sent yet, up to the marker that ends it.
    fn final_rest(&self) -> Option<Piece> {
        let rest = &self.whole[self.final_sent?..];
        let rest = before_any(rest, &FINAL_ENDS);
        (!rest.is_empty()).then(|| Piece::Content(rest.to_owned()))
    }

    /// The answer was cut (`max_tokens`): the text held back goes out as text, since a cut call is not a
    /// call (and a cut generic answer is not JSON).
    pub fn cut(&mut self) -> Vec<Piece> {
        if self.format == ToolFormat::Harmony {
            return self.final_rest().into_iter().collect();
        }
        let rest = std::mem::take(&mut self.pending);
        let is_call = self.mode == Mode::InCall || (self.mode == Mode::Held && self.format != ToolFormat::Generic);
        if rest.is_empty() || is_call {
            return Vec::new();
        }
        vec![Piece::Content(rest)]
    }

    /// The answer ended: whatever is left.
    ///
    /// # Errors
    /// An answer held for the end that does not parse.
    pub fn finish(&mut self, request: &ToolRequest) -> Result<Vec<Piece>, ApiError> {
        if self.format == ToolFormat::Harmony {
            if self.final_sent.is_some() {
                return Ok(self.final_rest().into_iter().collect());
            }
            return Ok(pieces(parse(request, &self.whole)?));
        }
        let rest = std::mem::take(&mut self.pending);
        match self.mode {
            // A call cut by max_tokens is not a call.
            Mode::InCall => Ok(Vec::new()),
            Mode::Held => Ok(pieces(parse(request, &rest)?)),
            Mode::Text | Mode::Undecided => Ok((!rest.is_empty()).then_some(Piece::Content(rest)).into_iter().collect()),
        }
    }
}

/// What ends a Harmony final message.
const FINAL_ENDS: [&str; 2] = [harmony::END, harmony::RETURN];

/// `text` up to the first of `ends`.
fn before_any<'a>(text: &'a str, ends: &[&str]) -> &'a str {
    ends.iter().fold(text, |t, end| t.split(end).next().unwrap_or(t))
}

/// How many of `text`'s last bytes could be the start of `marker` (a proper prefix of it).
fn started(text: &str, marker: &str) -> usize {
    (1..marker.len()).rev().find(|&n| text.ends_with(&marker[..n])).unwrap_or(0)
}

fn pieces(parsed: Parsed) -> Vec<Piece> {
    let mut out: Vec<Piece> = parsed.content.into_iter().map(Piece::Content).collect();
    out.extend(parsed.calls.into_iter().map(Piece::Call));
    out
}
