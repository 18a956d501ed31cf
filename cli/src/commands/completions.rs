//! `runaii completions SHELL`: a completion script on stdout.

use clap::CommandFactory as _;

use crate::args::Cli;

pub fn print(shell: clap_complete::Shell) {
    clap_complete::generate(shell, &mut Cli::command(), "runaii", &mut std::io::stdout());
}
