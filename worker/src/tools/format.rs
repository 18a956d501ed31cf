//! The call format a chat template speaks, and how tools reach a template that does not speak one.

use serde_json::{json, Value};

use super::{Choice, ToolRequest};

/// How the model writes a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolFormat {
    /// `<tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>`, one block per call (Hermes; Qwen 2 and
    /// later, Hermes 2/3, and other templates that write these tags). The template renders the tools.
    Hermes,
    /// Llama 3.1 to 3.3: the whole answer is one call, `{"name": …, "parameters": {…}}`.
    Llama3,
    /// Mistral (Nemo, Small 3.1, and the v3 tokenizer's models): `[TOOL_CALLS][{"name": …, "arguments":
    /// {…}, "id": …}, …]`, the calls as one JSON array after the marker.
    Mistral,
    /// Mistral's later templates (Small 3.2, Ministral, Magistral): `[TOOL_CALLS]name[ARGS]{…}` per call.
    MistralArgs,
    /// Harmony (gpt-oss): channels, `<|channel|>analysis<|message|>…<|end|><|start|>assistant` to think,
    /// `<|channel|>final<|message|>…` to answer, `<|channel|>commentary to=functions.NAME
    /// <|constrain|>json<|message|>{…}<|call|>` to call.
    Harmony,
    /// The template has no tool support: the tools are described in a system message and the answer is one
    /// JSON object, `{"tool_calls": [{"name": …, "arguments": {…}}]}` or `{"response": "…"}`.
    Generic,
}

/// The trigger that opens a Hermes call, and what closes it.
pub const HERMES_OPEN: &str = "<tool_call>";
pub const HERMES_CLOSE: &str = "</tool_call>";
/// What opens Mistral's calls, and (later templates) what separates a call's name from its arguments.
pub const MISTRAL_CALLS: &str = "[TOOL_CALLS]";
pub const MISTRAL_ARGS: &str = "[ARGS]";
/// Harmony's markers (special tokens in gpt-oss's vocabulary).
pub mod harmony {
    pub const CHANNEL: &str = "<|channel|>";
    pub const MESSAGE: &str = "<|message|>";
    pub const CONSTRAIN: &str = "<|constrain|>";
    pub const START: &str = "<|start|>";
    pub const END: &str = "<|end|>";
    pub const CALL: &str = "<|call|>";
    pub const RETURN: &str = "<|return|>";
    /// What opens a final answer, and what the recipient of a call is written after.
    pub const FINAL: &str = "<|channel|>final<|message|>";
    pub const TO_FUNCTIONS: &str = " to=functions.";
}

impl ToolFormat {
    /// From the template's source: the format whose own markers the template writes.
    #[must_use]
    pub fn detect(template_source: &str) -> Self {
        let has = |s: &str| template_source.contains(s);
        if has(harmony::CHANNEL) && has("functions.") {
            Self::Harmony
        } else if has(MISTRAL_CALLS) && has(MISTRAL_ARGS) {
            Self::MistralArgs
        } else if has(MISTRAL_CALLS) {
            Self::Mistral
        } else if has("<|start_header_id|>") && has("\"parameters\": ") && has("tools") {
            Self::Llama3
        } else if has(HERMES_OPEN) && has("tools") {
            Self::Hermes
        } else {
            Self::Generic
        }
    }

    /// The format's name, as `/health` reports it.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Hermes => "hermes",
            Self::Llama3 => "llama3",
            Self::Mistral => "mistral",
            Self::MistralArgs => "mistral_args",
            Self::Harmony => "harmony",
            Self::Generic => "generic",
        }
    }

    /// Whether the template renders the tools itself (every format but the generic one).
    #[must_use]
    pub fn renders_tools(self) -> bool {
        self != Self::Generic
    }

    /// The markers the model writes as special tokens in its own vocabulary: they are kept in the answer's
    /// text (a control token is otherwise written as nothing) so that the answer can be read.
    #[must_use]
    pub fn markers(self) -> &'static [&'static str] {
        match self {
            Self::Hermes => &[HERMES_OPEN, HERMES_CLOSE],
            Self::Mistral => &[MISTRAL_CALLS],
            Self::MistralArgs => &[MISTRAL_CALLS, MISTRAL_ARGS],
            Self::Harmony => {
                &[harmony::CHANNEL, harmony::MESSAGE, harmony::CONSTRAIN, harmony::START, harmony::END, harmony::CALL, harmony::RETURN]
            }
            Self::Llama3 | Self::Generic => &[],
        }
    }
}

/// The system text that describes the tools to a model whose template cannot (generic format).
#[must_use]
pub fn generic_instructions(request: &ToolRequest) -> String {
    let tools: Vec<Value> = request
        .tools
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description.clone().unwrap_or_default(), "parameters": t.parameters}))
        .collect();
    let tools = serde_json::to_string_pretty(&tools).unwrap_or_default();
    let how = match &request.choice {
        Choice::None => "Answer the user directly; do not call any tool.".to_owned(),
        Choice::Auto => "Respond with one JSON object: either {\"tool_calls\": [{\"name\": <tool name>, \"arguments\": <arguments object>}]} to call tools, or {\"response\": <your answer>} to answer the user.".to_owned(),
        Choice::Required => "Respond with one JSON object that calls tools: {\"tool_calls\": [{\"name\": <tool name>, \"arguments\": <arguments object>}]}.".to_owned(),
        Choice::Named(name) => format!("Respond with one JSON object that calls the tool `{name}`: {{\"tool_calls\": [{{\"name\": \"{name}\", \"arguments\": <arguments object>}}]}}."),
    };
    format!("You can use these tools:\n{tools}\n\n{how}")
}
