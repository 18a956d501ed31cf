//! How a finished answer ends, decided in one place for whole and streamed answers: whether it is tool
//! calls or text, and whether a complete text answer holds to the requested schema.

use runaii_wire::FinishReason;

use crate::constraint::OutputValidator;
use crate::error::ApiError;
use crate::tools::parse::{self, Call};
use crate::tools::{ToolFormat, ToolRequest};

/// A finished answer as the client sees it.
#[derive(Debug)]
pub struct Ending {
    /// `tool_calls` when the answer is calls; otherwise the engine's reason.
    pub finish_reason: FinishReason,
    /// The text for the user: the whole answer, or with tools what surrounds the calls (generic format:
    /// the `response` inside the JSON).
    pub content: Option<String>,
    pub calls: Vec<Call>,
}

/// Reads the engine's text once it has stopped.
///
/// # Errors
/// 500 when a call does not parse or fails its tool's schema, or a complete text answer fails the
/// requested schema: the grammar should have made either impossible.
pub fn conclude(
    text: String,
    finish_reason: FinishReason,
    tools: Option<&ToolRequest>,
    validator: Option<&OutputValidator>,
) -> Result<Ending, ApiError> {
    let mut ending = Ending { finish_reason, content: Some(text), calls: Vec::new() };
    // A cut answer is reported as cut, as written (Harmony: what its final channel wrote, never its
    // thinking): only a complete one is read for calls.
    if finish_reason != FinishReason::Stop && tools.is_some_and(|t| t.format == ToolFormat::Harmony) {
        ending.content = parse::cut_final(ending.content.as_deref().unwrap_or_default());
    }
    if let (Some(tools), FinishReason::Stop) = (tools, finish_reason) {
        let parsed = parse::parse(tools, ending.content.as_deref().unwrap_or_default())?;
        if !parsed.calls.is_empty() {
            ending.finish_reason = FinishReason::ToolCalls;
        }
        ending.content = parsed.content;
        ending.calls = parsed.calls;
    }
    // Only a complete text answer is held to the schema (calls are held to their tools' schemas above).
    if let (Some(validator), FinishReason::Stop) = (validator, ending.finish_reason) {
        validator.check(ending.content.as_deref().unwrap_or_default())?;
    }
    Ok(ending)
}
