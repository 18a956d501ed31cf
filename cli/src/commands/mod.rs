//! One module per subcommand; this one resolves the connection and the tools they share.

mod batch;
mod chat;
mod completions;
mod keys;
mod models;
mod run;
mod usage;

use crate::agent::{ToolChoice, TurnOptions};
use crate::args::{Cli, Command, Generation, ToolArgs};
use crate::config;
use crate::constraint::Constraint;
use crate::error::CliError;
use crate::http::Gateway;
use crate::mcp::{ServerSpec, Toolbox};

/// What every subcommand gets.
#[derive(Debug)]
pub struct Context {
    pub gateway: Gateway,
    /// The config file's `[mcp.servers]`.
    pub config_servers: Vec<ServerSpec>,
    pub verbose: bool,
}

/// # Errors
/// Whatever the subcommand fails with.
pub async fn dispatch(cli: Cli) -> Result<(), CliError> {
    if let Command::Completions { shell } = cli.command {
        completions::print(shell);
        return Ok(());
    }
    let resolved = config::resolve(&cli.connection)?;
    let context = Context {
        gateway: Gateway::new(resolved.base_url, resolved.api_key, resolved.admin_token)?,
        config_servers: resolved.mcp_servers,
        verbose: cli.verbose,
    };
    match cli.command {
        Command::Run(args) => run::run(&context, args).await,
        Command::Chat(args) => chat::chat(&context, args).await,
        Command::Models(args) => models::list(&context, &args).await,
        Command::Usage(args) => usage::show(&context, &args).await,
        Command::Keys(args) => keys::manage(&context, args).await,
        Command::Batch(args) => batch::run(&context, &args).await,
        Command::Completions { .. } => Ok(()),
    }
}

/// Starts the MCP servers of the flags (and of the config file, unless `--no-config-mcp`), before any
/// request; checks that a named `--tool-choice` is one of their tools.
///
/// # Errors
/// Bad quoting, a server that does not start, a duplicate tool name, a tool choice without tools.
async fn start_tools(context: &Context, tools: &ToolArgs) -> Result<Toolbox, CliError> {
    let mut specs = if tools.no_config_mcp { Vec::new() } else { context.config_servers.clone() };
    for (i, spec) in tools.mcp.iter().enumerate() {
        specs.push(config::flag_server(i + 1, spec)?);
    }
    let choice = tools.tool_choice.as_deref().map(ToolChoice::parse);
    if specs.is_empty() {
        if choice.is_some() {
            return Err(CliError::Usage("--tool-choice needs tools: add --mcp 'command args' or [mcp.servers] in the config".into()));
        }
        return Ok(Toolbox::default());
    }
    let toolbox = Toolbox::start(specs).await?;
    if let Some(ToolChoice::Named(name)) = &choice {
        if !toolbox.definitions().iter().any(|d| d["function"]["name"] == name.as_str()) {
            toolbox.shutdown().await;
            return Err(CliError::Usage(format!("--tool-choice {name}: no MCP server offers a tool of that name")));
        }
    }
    Ok(toolbox)
}

fn turn_options(context: &Context, generation: &Generation, tools: &ToolArgs, constraint: Constraint, stream: bool) -> TurnOptions {
    TurnOptions {
        max_tokens: generation.max_tokens,
        temperature: generation.temperature,
        seed: generation.seed,
        constraint,
        stream,
        tool_choice: tools.tool_choice.as_deref().map(ToolChoice::parse),
        keep_tool_choice: tools.keep_tool_choice,
        one_call_per_answer: tools.no_parallel_tool_calls,
        max_tool_rounds: tools.max_tool_rounds,
        verbose: context.verbose,
    }
}
