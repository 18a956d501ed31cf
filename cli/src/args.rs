//! The command line: subcommands, their flags, and the variables that stand in for flags.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(name = "runaii", version, about = "Structured output, chat and MCP tools against a runaii gateway", max_term_width = 100)]
pub struct Cli {
    #[command(flatten)]
    pub connection: Connection,
    /// Each request's usage and exact cost on stderr (and the total, for several).
    #[arg(short, long, global = true)]
    pub verbose: bool,
    #[command(subcommand)]
    pub command: Command,
}

/// Where the gateway is and how to authenticate; see `docs/cli.md` for the order they are looked up in.
#[derive(Debug, Clone, Default, Args)]
pub struct Connection {
    /// The gateway's address (`--help` shows an example and the default).
    #[arg(
        long,
        env = "RUNAII_BASE_URL",
        global = true,
        help = "The gateway, e.g. https://api.runaii.cloud (with or without /v1) [default: http://127.0.0.1:8080]"
    )]
    pub base_url: Option<String>,
    /// An API key (rk-…)
    #[arg(long, env = "RUNAII_API_KEY", hide_env_values = true, global = true)]
    pub api_key: Option<String>,
    /// An admin API token (a JWT), for `keys` and the recent requests of `usage`
    #[arg(long, env = "RUNAII_ADMIN_TOKEN", hide_env_values = true, global = true)]
    pub admin_token: Option<String>,
    /// The config file [default: ~/.config/runaii/config.toml]
    #[arg(long, env = "RUNAII_CONFIG", global = true)]
    pub config: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// One answer on stdout (for a schema, the JSON alone); the exit status says whether it is valid
    Run(RunArgs),
    /// An interactive conversation: /reset, /model NAME, /cost, /help, /exit
    Chat(ChatArgs),
    /// The catalog: readiness, context length, prices
    Models(ListArgs),
    /// Balance, this month's use, and recent requests (those need an admin token)
    Usage(UsageArgs),
    /// List, create or revoke the tenant's API keys (needs an admin token)
    Keys(KeysArgs),
    /// Submit a batch input (JSON Lines), follow it with a progress bar, and write its answers
    Batch(BatchArgs),
    /// A completion script for a shell: `runaii completions bash > ~/.local/share/bash-completion/completions/runaii`
    Completions { shell: clap_complete::Shell },
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// A model id (`runaii models` lists them)
    pub model: String,
    /// The prompt; `-` reads it from stdin
    pub prompt: String,
    /// A system message
    #[arg(long)]
    pub system: Option<String>,
    /// The answer must match this JSON Schema: a file, or inline JSON starting with `{`
    #[arg(long, value_name = "FILE|JSON", conflicts_with = "grammar")]
    pub json_schema: Option<String>,
    /// The answer must match this GBNF grammar (llama.cpp's format)
    #[arg(long, value_name = "FILE.gbnf")]
    pub grammar: Option<PathBuf>,
    /// Print tokens as they arrive (a cut or invalid answer may then leave partial text on stdout)
    #[arg(long)]
    pub stream: bool,
    #[command(flatten)]
    pub generation: Generation,
    #[command(flatten)]
    pub tools: ToolArgs,
}

#[derive(Debug, Args)]
pub struct ChatArgs {
    /// A model id to start with (`/model NAME` switches)
    pub model: String,
    /// A system message, kept across /reset
    #[arg(long)]
    pub system: Option<String>,
    #[command(flatten)]
    pub generation: Generation,
    #[command(flatten)]
    pub tools: ToolArgs,
}

#[derive(Debug, Clone, Args)]
pub struct Generation {
    /// The most tokens an answer may have; an answer that reaches it is an error ("cut at max_tokens N")
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tokens: Option<u32>,
    /// Sampling temperature, 0 to 2
    #[arg(long)]
    pub temperature: Option<f32>,
    /// With a seed, the same request samples the same tokens
    #[arg(long)]
    pub seed: Option<i64>,
}

#[derive(Debug, Clone, Args)]
pub struct ToolArgs {
    /// Start a stdio MCP server and give its tools to the model: 'command args' with shell quoting (repeatable)
    #[arg(long, value_name = "COMMAND")]
    pub mcp: Vec<String>,
    /// Do not start the config file's [mcp.servers]
    #[arg(long)]
    pub no_config_mcp: bool,
    /// Stop with an error when the model still calls tools after this many rounds
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tool_rounds: u32,
    /// auto, required, none, or a tool's name: for the first request of a turn (later ones are auto)
    #[arg(long, value_name = "CHOICE")]
    pub tool_choice: Option<String>,
    /// Send --tool-choice on every request of a turn, not only the first
    #[arg(long, requires = "tool_choice")]
    pub keep_tool_choice: bool,
    /// At most one call per answer (`parallel_tool_calls: false`)
    #[arg(long)]
    pub no_parallel_tool_calls: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// text for people, json for scripts
    #[arg(long, value_enum, default_value_t)]
    pub output: OutputFormat,
}

#[derive(Debug, Args)]
pub struct UsageArgs {
    #[command(flatten)]
    pub list: ListArgs,
    /// How many recent requests to show (with an admin token holding the finance role)
    #[arg(long, default_value_t = 10)]
    pub recent: usize,
    /// How far back "recent" goes, in hours
    #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(u32).range(1..=8784))]
    pub since_hours: u32,
}

#[derive(Debug, Args)]
pub struct BatchArgs {
    /// The batch input: one request per line, `{"custom_id", "method": "POST", "url", "body"}`
    pub file: PathBuf,
    /// The endpoint every line calls: /v1/chat/completions or /v1/responses
    #[arg(long, default_value = "/v1/chat/completions")]
    pub endpoint: String,
    /// Where the answers go [default: FILE with the extension .output.jsonl]
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Where the error answers and the lines never run go [default: FILE with the extension .errors.jsonl]
    #[arg(long, value_name = "FILE")]
    pub errors: Option<PathBuf>,
    /// Print the batch's id once it is submitted, and exit without waiting
    #[arg(long)]
    pub no_wait: bool,
    /// How often to ask how the batch is doing, in seconds
    #[arg(long, default_value_t = 1.0)]
    pub poll_seconds: f64,
}

#[derive(Debug, Args)]
pub struct KeysArgs {
    #[command(subcommand)]
    pub action: Option<KeysAction>,
    /// The tenant's id [default: the API key's tenant, from /v1/account]
    #[arg(long, global = true)]
    pub tenant: Option<String>,
    /// text for people, json for scripts
    #[arg(long, value_enum, default_value_t, global = true)]
    pub output: OutputFormat,
}

#[derive(Debug, Subcommand)]
pub enum KeysAction {
    /// The tenant's keys, without secrets (the default)
    List,
    /// A new key; its secret is printed once, on stdout
    Create {
        /// A label
        #[arg(long, default_value = "")]
        name: String,
        /// RFC 3339, e.g. 2027-01-01T00:00:00Z
        #[arg(long)]
        expires_at: Option<String>,
        /// Requests per minute
        #[arg(long)]
        rpm_limit: Option<u32>,
        /// Tokens per minute
        #[arg(long)]
        tpm_limit: Option<u32>,
    },
    /// Revoke a key by its id (from `runaii keys`)
    Revoke { id: String },
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory as _;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn a_schema_and_a_grammar_are_refused_together() {
        let both = Cli::try_parse_from(["runaii", "run", "m", "p", "--json-schema", "{}", "--grammar", "g.gbnf"]);
        assert!(both.is_err_and(|e| e.kind() == clap::error::ErrorKind::ArgumentConflict));
    }
}
