//! Tool calling: which tools a request offers and how the model must call them.
//!
//! The chat template decides the call format ([`ToolFormat`]): Hermes `<tool_call>` blocks (Qwen and
//! others), Llama 3's `{"name", "parameters"}`, Mistral's `[TOOL_CALLS]`, Harmony's channels (gpt-oss),
//! and generic JSON (`{"tool_calls": […]}` or `{"response": …}`) for templates without tool support. The
//! answer is constrained by a grammar built from the tools' schemas (see [`grammar`]), so every call
//! names an offered tool and its arguments match that tool's schema; [`parse`] then turns the text into
//! `tool_calls` and checks the arguments once more.

mod format;
pub mod grammar;
pub mod markers;
pub mod parse;

use serde_json::Value;

pub use format::{generic_instructions, ToolFormat};

use crate::error::ApiError;

/// One offered function.
#[derive(Debug, Clone)]
pub struct Tool {
    pub name: String,
    pub description: Option<String>,
    pub parameters: Value,
    /// `parameters` as the grammar enforces it (`constraint::embedded_for_grammar`): objects closed, so a
    /// call's arguments hold only keys the tool declares.
    pub grammar_parameters: Value,
}

/// What `tool_choice` allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// The model may answer in text or call tools.
    Auto,
    /// The model must call at least one tool.
    Required,
    /// Tools are described but may not be called.
    None,
    /// The model must call this tool.
    Named(String),
}

/// The tools of one request, checked.
#[derive(Debug, Clone)]
pub struct ToolRequest {
    pub tools: Vec<Tool>,
    pub choice: Choice,
    pub parallel: bool,
    pub format: ToolFormat,
}

const MAX_TOOLS: usize = 128;

impl ToolRequest {
    /// Whether the grammar holds every answer to JSON from its first token (calls, or the
    /// `response_format` schema given as `response_schema`), rather than letting it start as free text.
    #[must_use]
    pub fn answers_in_json(&self, response_schema: bool) -> bool {
        match (&self.format, &self.choice) {
            (_, Choice::None) => response_schema,
            (ToolFormat::Generic, _) | (_, Choice::Required | Choice::Named(_)) => true,
            (_, Choice::Auto) => response_schema,
        }
    }

    /// No tool to call, but the answer read in `format`'s structure: a model that writes channels
    /// (Harmony) answers in its final channel whether or not it was offered tools.
    #[must_use]
    pub fn reading(format: ToolFormat) -> Self {
        Self { tools: Vec::new(), choice: Choice::None, parallel: false, format }
    }

    /// `None` when the request offers no tools.
    ///
    /// # Errors
    /// 400 for malformed tools or a `tool_choice` naming an unknown tool.
    pub fn from_request(
        tools: Option<&[Value]>,
        tool_choice: Option<&Value>,
        parallel: Option<bool>,
        format: ToolFormat,
    ) -> Result<Option<Self>, ApiError> {
        let tools = match tools {
            None | Some([]) => {
                return match tool_choice {
                    None => Ok(None),
                    Some(Value::String(s)) if s == "none" || s == "auto" => Ok(None),
                    Some(_) => Err(ApiError::invalid("tool_choice needs tools", "tool_choice")),
                };
            }
            Some(tools) => tools,
        };
        if tools.len() > MAX_TOOLS {
            return Err(ApiError::invalid(format!("at most {MAX_TOOLS} tools are allowed"), "tools"));
        }
        let tools = tools.iter().enumerate().map(|(i, t)| tool(i, t)).collect::<Result<Vec<_>, _>>()?;
        for (i, t) in tools.iter().enumerate() {
            if tools[..i].iter().any(|o| o.name == t.name) {
                return Err(ApiError::invalid(format!("tool name `{}` appears twice", t.name), "tools"));
            }
        }
        let choice = choice(tool_choice, &tools)?;
        Ok(Some(Self { tools, choice, parallel: parallel.unwrap_or(true), format }))
    }

    /// The tools as OpenAI writes them, for templates that render tool definitions.
    #[must_use]
    pub fn openai_json(&self) -> Vec<Value> {
        self.tools
            .iter()
            .map(|t| {
                let mut function = serde_json::json!({"name": t.name, "parameters": t.parameters});
                if let Some(d) = &t.description {
                    function["description"] = Value::String(d.clone());
                }
                serde_json::json!({"type": "function", "function": function})
            })
            .collect()
    }

    #[must_use]
    pub fn find(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }
}

fn tool(index: usize, value: &Value) -> Result<Tool, ApiError> {
    let bad = |why: &str| ApiError::invalid(format!("tools[{index}]: {why}"), "tools");
    if value["type"] != "function" {
        return Err(bad("only `function` tools are supported"));
    }
    let function = value.get("function").and_then(Value::as_object).ok_or_else(|| bad("`function` is missing"))?;
    let name = function.get("name").and_then(Value::as_str).ok_or_else(|| bad("`function.name` is missing"))?;
    let well_formed = !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !well_formed {
        return Err(bad("`function.name` must be 1 to 64 of a-z, A-Z, 0-9, `_` and `-`"));
    }
    let parameters = function.get("parameters").cloned().unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
    if !parameters.is_object() {
        return Err(bad("`function.parameters` must be a JSON Schema object"));
    }
    // Only the size limits apply here; the gateway checks minimums against the model's context.
    if let Err(e) = runaii_wire::schema_budget::check(&parameters, u64::MAX) {
        return Err(bad(&format!("`function.parameters` is over budget: {e}")));
    }
    if let Err(e) = jsonschema::options().build(&parameters) {
        return Err(bad(&format!("`function.parameters` is not a valid JSON Schema: {e}")));
    }
    let grammar_parameters = crate::constraint::embedded_for_grammar(&parameters)
        .map_err(|refusal| bad(&format!("`function.parameters` cannot be enforced exactly: {refusal}")))?;
    let description = function.get("description").and_then(Value::as_str).map(str::to_owned);
    Ok(Tool { name: name.to_owned(), description, parameters, grammar_parameters })
}

fn choice(value: Option<&Value>, tools: &[Tool]) -> Result<Choice, ApiError> {
    let bad = || {
        ApiError::invalid(
            "tool_choice must be auto, required, none or {\"type\": \"function\", \"function\": {\"name\": …}}",
            "tool_choice",
        )
    };
    match value {
        None => Ok(Choice::Auto),
        Some(Value::String(s)) => match s.as_str() {
            "auto" => Ok(Choice::Auto),
            "required" => Ok(Choice::Required),
            "none" => Ok(Choice::None),
            _ => Err(bad()),
        },
        // `type` can only be `function`; a client that leaves it out still names its tool.
        Some(obj) if obj["type"] == "function" || (obj.get("type").is_none() && obj.get("function").is_some()) => {
            let name = obj["function"]["name"].as_str().ok_or_else(bad)?;
            if tools.iter().any(|t| t.name == name) {
                Ok(Choice::Named(name.to_owned()))
            } else {
                Err(ApiError::invalid(format!("tool_choice names `{name}`, which is not in tools"), "tool_choice"))
            }
        }
        Some(_) => Err(bad()),
    }
}

#[cfg(test)]
mod tests;
