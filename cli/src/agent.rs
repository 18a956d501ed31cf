//! One turn of a conversation: ask the model; run the tool calls its answer makes on the MCP servers that
//! listed them; send the results back; ask again — until an answer without a call, or until
//! `--max-tool-rounds` rounds of calls, which is an error rather than a silent stop.

use serde_json::{json, Value};

use crate::completion::{self, Answer, ChatRequest, Message};
use crate::constraint::Constraint;
use crate::error::CliError;
use crate::http::Gateway;
use crate::mcp::Toolbox;
use crate::money::Spend;
use crate::output::Stdout;
use crate::spinner::Spinner;

/// How each request of a turn is made.
#[derive(Debug, Clone, Default)]
pub struct TurnOptions {
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
    pub seed: Option<i64>,
    pub constraint: Constraint,
    pub stream: bool,
    /// For the first request of the turn; later ones leave the model free (`auto`) to answer, as the
    /// OpenAI Agents SDK resets it, unless `keep_tool_choice`.
    pub tool_choice: Option<ToolChoice>,
    pub keep_tool_choice: bool,
    /// `parallel_tool_calls: false`: at most one call per answer.
    pub one_call_per_answer: bool,
    pub max_tool_rounds: u32,
    /// Each request's usage and cost on stderr.
    pub verbose: bool,
}

/// `--tool-choice`: `auto`, `required`, `none`, or a tool's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    Auto,
    Required,
    None,
    Named(String),
}

impl ToolChoice {
    #[must_use]
    pub fn parse(text: &str) -> Self {
        match text {
            "auto" => Self::Auto,
            "required" => Self::Required,
            "none" => Self::None,
            name => Self::Named(name.to_owned()),
        }
    }

    fn to_json(&self) -> Value {
        match self {
            Self::Auto => json!("auto"),
            Self::Required => json!("required"),
            Self::None => json!("none"),
            Self::Named(name) => json!({"type": "function", "function": {"name": name}}),
        }
    }
}

/// Runs one turn on `messages` (which must end with the user's message) and appends to it what the turn
/// adds: the model's calls, their results, and its answer. Every request's usage goes into `spend`, also
/// when the turn fails.
///
/// # Errors
/// The gateway's refusal or a transport failure, a cut answer, more rounds than allowed.
pub async fn turn(
    gateway: &Gateway,
    toolbox: &Toolbox,
    model: &str,
    messages: &mut Vec<Message>,
    options: &TurnOptions,
    spend: &mut Spend,
    stdout: &mut Stdout,
) -> Result<Answer, CliError> {
    let mut rounds = 0;
    loop {
        let choice = (rounds == 0 || options.keep_tool_choice).then_some(options.tool_choice.as_ref()).flatten();
        let request = ChatRequest {
            model,
            messages,
            max_tokens: options.max_tokens,
            temperature: options.temperature,
            seed: options.seed,
            stream: options.stream,
            stream_options: options.stream.then(|| json!({"include_usage": true})),
            response_format: options.constraint.response_format(),
            grammar: options.constraint.grammar(),
            tools: toolbox.definitions(),
            tool_choice: choice.filter(|_| !toolbox.is_empty()).map(ToolChoice::to_json),
            parallel_tool_calls: (options.one_call_per_answer && !toolbox.is_empty()).then_some(false),
        };
        let answer = ask(gateway, &request, options.stream, stdout).await?;
        if let Some(usage) = answer.usage {
            spend.add(usage.prompt_tokens, usage.completion_tokens, usage.cost);
            if options.verbose {
                let cost = usage.cost.map_or_else(|| "no cost given".to_owned(), |c| format!("cost {} USD", c.normalize()));
                eprintln!("[usage] {}: {} prompt + {} completion tokens, {cost}", answer.id, usage.prompt_tokens, usage.completion_tokens);
            }
        }
        // Kept even when cut: in a chat, the transcript holds what the user saw.
        messages.push(Message::assistant(&answer));
        if answer.was_cut() {
            let limit = options.max_tokens.map_or_else(|| answer.usage.map_or(0, |u| u.completion_tokens), u64::from);
            return Err(CliError::Cut { limit });
        }
        if answer.tool_calls.is_empty() {
            return Ok(answer);
        }
        if rounds == options.max_tool_rounds {
            return Err(CliError::ToolRounds(options.max_tool_rounds));
        }
        for call in &answer.tool_calls {
            let result = toolbox.call(&call.function.name, &call.function.arguments).await;
            eprintln!("[tool] {}({}) -> {} bytes", call.function.name, shown_arguments(&call.function.arguments), result.len());
            messages.push(Message::tool(&call.id, result));
        }
        rounds += 1;
    }
}

/// One request, with a spinner until the first token (or the whole answer).
async fn ask(gateway: &Gateway, request: &ChatRequest<'_>, stream: bool, stdout: &mut Stdout) -> Result<Answer, CliError> {
    let mut spinner = Spinner::start(&format!("waiting for {}", request.model));
    let answer = if stream {
        completion::streamed(gateway, request, &mut |text| {
            spinner.stop();
            stdout.write(text);
        })
        .await
    } else {
        completion::whole(gateway, request).await
    };
    spinner.stop();
    Ok(answer?)
}

/// The arguments on one line, compact, at most 200 characters.
fn shown_arguments(arguments: &str) -> String {
    let compact = serde_json::from_str::<Value>(arguments).map_or_else(|_| arguments.to_owned(), |v| v.to_string());
    if compact.chars().count() <= 200 {
        return compact;
    }
    let mut cut: String = compact.chars().take(199).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_choices() {
        assert_eq!(ToolChoice::parse("required").to_json(), json!("required"));
        assert_eq!(ToolChoice::parse("count").to_json(), json!({"type": "function", "function": {"name": "count"}}));
        assert_eq!(shown_arguments("{\n  \"city\": \"Paris\"\n}"), r#"{"city":"Paris"}"#);
        assert_eq!(shown_arguments(&"x".repeat(300)).chars().count(), 200);
    }
}
