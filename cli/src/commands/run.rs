//! `runaii run MODEL PROMPT`: one answer on stdout — for a schema the JSON alone, newline-terminated,
//! printed only once it validates — and an exit status that says whether it is valid.

use std::io::Read as _;

use super::{start_tools, turn_options, Context};
use crate::agent;
use crate::args::RunArgs;
use crate::completion::Message;
use crate::constraint::Constraint;
use crate::error::CliError;
use crate::money::Spend;
use crate::output::Stdout;

/// # Errors
/// See [`CliError`]: each failure has its exit status.
pub async fn run(context: &Context, args: RunArgs) -> Result<(), CliError> {
    // Everything that can be wrong with the command line is found before any request.
    let constraint = Constraint::from_flags(args.json_schema.as_deref(), args.grammar.as_deref())?;
    let prompt = prompt(args.prompt)?;
    let toolbox = start_tools(context, &args.tools).await?;

    let mut messages = Vec::new();
    if let Some(system) = &args.system {
        messages.push(Message::system(system));
    }
    messages.push(Message::user(&prompt));
    let options = turn_options(context, &args.generation, &args.tools, constraint, args.stream);
    let mut spend = Spend::default();
    let mut stdout = Stdout::default();
    let answer = agent::turn(&context.gateway, &toolbox, &args.model, &mut messages, &options, &mut spend, &mut stdout).await;
    toolbox.shutdown().await;
    if args.stream {
        stdout.end_line();
    }
    if context.verbose && spend.requests > 1 {
        eprintln!("[usage] total: {spend}");
    }
    let answer = answer?;
    let text = options.constraint.check(&answer.content)?;
    if !args.stream {
        stdout.line(text);
    }
    Ok(())
}

/// The prompt, or stdin's whole text for `-`.
fn prompt(arg: String) -> Result<String, CliError> {
    if arg != "-" {
        return Ok(arg);
    }
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text).map_err(CliError::io("reading the prompt from stdin"))?;
    if text.trim().is_empty() {
        return Err(CliError::Usage("the prompt on stdin is empty".into()));
    }
    Ok(text)
}
