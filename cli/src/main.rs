//! `runaii`: the command line for a runaii gateway. Parse the command line, run the subcommand, and turn
//! its failure into the exit status `docs/cli.md` lists ([`error::code`]).

mod agent;
mod args;
mod commands;
mod completion;
mod config;
mod constraint;
mod error;
mod http;
mod mcp;
mod money;
mod output;
mod quoting;
mod spinner;

use std::process::ExitCode;

use clap::Parser as _;

#[tokio::main]
async fn main() -> ExitCode {
    // clap prints usage errors itself and exits with 2, like every usage error here.
    let cli = args::Cli::parse();
    match commands::dispatch(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("runaii: {e}");
            e.exit()
        }
    }
}
