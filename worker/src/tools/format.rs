//! The call format a chat template speaks, and how tools reach a template that does not speak one.

use serde_json::{json, Value};

use super::{Choice, ToolRequest};

/// How the model writes a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolFormat {
    /// `<tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>`, one block per call (Hermes; Qwen 2 and
    /// later, Hermes 2/3, and other templates that write these tags). The template renders the tools.
    Hermes,
    /// The template has no tool support: the tools are described in a system message and the answer is one
    /// JSON object, `{"tool_calls": [{"name": …, "arguments": {…}}]}` or `{"response": "…"}`.
    Generic,
}

/// The trigger that opens a Hermes call, and what closes it.
pub const HERMES_OPEN: &str = "<tool_call>";
pub const HERMES_CLOSE: &str = "</tool_call>";

impl ToolFormat {
    /// From the template's source: templates that write Hermes tags and render `tools` get Hermes.
    #[must_use]
    pub fn detect(template_source: &str) -> Self {
        if template_source.contains(HERMES_OPEN) && template_source.contains("tools") {
            Self::Hermes
        } else {
            Self::Generic
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
