//! `runaii chat MODEL`: an interactive conversation. Every turn sends the transcript so far (tool rounds
//! included) and streams the answer; `/reset` and `/model NAME` clear the transcript, `/cost` shows the
//! session's running total. Lines are edited with history (saved across sessions when stdin is a
//! terminal); Ctrl-C stops the answer being written, Ctrl-D ends the session.

use std::io::IsTerminal as _;
use std::path::PathBuf;

use rustyline::error::ReadlineError;

use super::{start_tools, turn_options, Context};
use crate::agent;
use crate::args::ChatArgs;
use crate::completion::Message;
use crate::constraint::Constraint;
use crate::error::CliError;
use crate::money::Spend;
use crate::output::Stdout;

const HELP: &str = "/reset        forget the conversation (the system message stays)
/model NAME   switch model (and forget the conversation)
/cost         what this session has cost so far
/help         this list
/exit         leave (or Ctrl-D)";

/// What a line asks for.
#[derive(Debug, PartialEq, Eq)]
enum Line<'a> {
    Empty,
    Say(&'a str),
    Reset,
    Model(&'a str),
    Cost,
    Help,
    Exit,
    Unknown(&'a str),
}

fn parse(line: &str) -> Line<'_> {
    let line = line.trim();
    let Some(command) = line.strip_prefix('/') else {
        return if line.is_empty() { Line::Empty } else { Line::Say(line) };
    };
    let (name, rest) = command.split_once(char::is_whitespace).map_or((command, ""), |(n, r)| (n, r.trim()));
    match (name, rest) {
        ("reset", "") => Line::Reset,
        ("model", model) if !model.is_empty() => Line::Model(model),
        ("cost", "") => Line::Cost,
        ("help", "") => Line::Help,
        ("exit" | "quit", "") => Line::Exit,
        _ => Line::Unknown(line),
    }
}

/// # Errors
/// Tools that do not start, a line editor that cannot read the terminal. A failed turn is reported and
/// the conversation goes on.
pub async fn chat(context: &Context, args: ChatArgs) -> Result<(), CliError> {
    let toolbox = start_tools(context, &args.tools).await?;
    let interactive = std::io::stdin().is_terminal();
    let mut editor = rustyline::DefaultEditor::new().map_err(|e| CliError::Usage(format!("cannot read lines: {e}")))?;
    let history = interactive.then(history_file).flatten();
    if let Some(path) = &history {
        let _ = editor.load_history(path);
    }
    if interactive {
        eprintln!("runaii chat with {} at {} — /help for commands, Ctrl-D to leave", args.model, context.gateway.base());
    }

    let options = turn_options(context, &args.generation, &args.tools, Constraint::None, true);
    let start = || args.system.as_deref().map(Message::system).into_iter().collect::<Vec<_>>();
    let mut model = args.model.clone();
    let mut messages = start();
    let mut spend = Spend::default();
    let mut stdout = Stdout::default();
    loop {
        let line = tokio::task::block_in_place(|| editor.readline(&format!("{model}> ")));
        let line = match line {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => {
                toolbox.shutdown().await;
                return Err(CliError::Usage(format!("cannot read lines: {e}")));
            }
        };
        if interactive && !line.trim().is_empty() {
            let _ = editor.add_history_entry(line.as_str());
        }
        match parse(&line) {
            Line::Empty => {}
            Line::Help => eprintln!("{HELP}"),
            Line::Exit => break,
            Line::Cost => eprintln!("session: {spend}"),
            Line::Unknown(text) => eprintln!("unknown command {text:?}; /help lists them"),
            Line::Reset => {
                messages = start();
                eprintln!("(conversation cleared)");
            }
            Line::Model(name) => {
                name.clone_into(&mut model);
                messages = start();
                eprintln!("(model {model}; conversation cleared)");
            }
            Line::Say(text) => {
                let kept = messages.len();
                messages.push(Message::user(text));
                let turn = agent::turn(&context.gateway, &toolbox, &model, &mut messages, &options, &mut spend, &mut stdout);
                let outcome = tokio::select! {
                    outcome = turn => outcome.map(drop),
                    _ = tokio::signal::ctrl_c() => Err(CliError::Usage("interrupted".into())),
                };
                stdout.end_line();
                match outcome {
                    Ok(()) => {}
                    // A cut answer is what the user saw: it stays in the transcript.
                    Err(e @ CliError::Cut { .. }) => eprintln!("runaii: {e}"),
                    Err(e) => {
                        // Any other failed turn is not part of the conversation: the next one starts where
                        // this one did.
                        messages.truncate(kept);
                        eprintln!("runaii: {e}");
                    }
                }
            }
        }
    }
    if let Some(path) = &history {
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = editor.save_history(path);
    }
    toolbox.shutdown().await;
    if context.verbose || spend.requests > 0 {
        eprintln!("session: {spend}");
    }
    Ok(())
}

/// `$XDG_STATE_HOME/runaii/chat_history`, or `~/.local/state/runaii/chat_history`.
fn history_file() -> Option<PathBuf> {
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".local/state")))?;
    Some(state.join("runaii").join("chat_history"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_commands() {
        assert_eq!(parse("  hello there "), Line::Say("hello there"));
        assert_eq!(parse(""), Line::Empty);
        assert_eq!(parse("/reset"), Line::Reset);
        assert_eq!(parse("/model  smollm2-135m-instruct "), Line::Model("smollm2-135m-instruct"));
        assert_eq!(parse("/model"), Line::Unknown("/model"));
        assert_eq!(parse("/cost"), Line::Cost);
        assert_eq!(parse("/quit"), Line::Exit);
        assert_eq!(parse("/reset now"), Line::Unknown("/reset now"));
    }
}
