//! The MCP tool loop with a real MCP server process (`cli/examples/mcp_fixture.rs`, which logs its calls
//! to a file). A forced tool choice makes the small model call it; `--no-parallel-tool-calls` makes
//! each answer hold exactly one call, so rounds and calls can be counted.

use std::path::{Path, PathBuf};

use crate::run::usage_lines;
use crate::stack::{closed_port_url, mcp_fixture, runaii, scratch_dir};
use runaii_testkit::MODEL;

/// Room for one call in the generic format, which the small model pretty-prints.
const MAX_TOKENS: &str = "100";

/// An `--mcp` value starting the fixture with these arguments, and the file it logs calls to.
fn fixture(dir: &Path, extra: &str) -> (String, PathBuf) {
    let calls = dir.join("calls.log");
    (format!("{} --calls '{}' {extra}", mcp_fixture(), calls.display()), calls)
}

fn calls(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_owned).collect()
}

fn tool_lines<'a>(stderr: &'a str, tool: &str) -> Vec<&'a str> {
    stderr.lines().filter(|l| l.starts_with(&format!("[tool] {tool}("))).collect()
}

/// `runaii run` with the flags every loop test shares.
fn loop_run(prompt: &str, mcp: &str, extra: &[&str]) -> crate::stack::Run {
    let mut args =
        vec!["run", MODEL, prompt, "--mcp", mcp, "--no-parallel-tool-calls", "--max-tokens", MAX_TOKENS, "--temperature", "0", "-v"];
    args.extend_from_slice(extra);
    runaii(&args).run()
}

#[test]
fn calls_run_on_the_server_and_their_results_go_back_to_the_model() {
    let dir = scratch_dir("mcp-loop");
    let (mcp, log) = fixture(&dir, "--tools count");
    let run = loop_run("Count once, then say done.", &mcp, &["--tool-choice", "count", "--max-tool-rounds", "1"]);
    // After the forced first call the model is free: it answers (0), answers at length (4, cut), or calls
    // again, past the limit (9). Whichever, the loop itself ran.
    assert!(matches!(run.code, 0 | 4 | 9), "{}", run.stderr);
    let made = calls(&log);
    assert!(!made.is_empty() && made.iter().all(|c| c.starts_with("count {\"word\":")), "{made:?}");
    let logged = tool_lines(&run.stderr, "count");
    assert_eq!(logged.len(), made.len(), "one [tool] line per call the server saw");
    assert!(logged[0].ends_with(" -> 6 bytes"), "`call 1` is 6 bytes: {}", logged[0]);
    // Each round's result was sent back and the model asked again: one request more than rounds.
    assert_eq!(usage_lines(&run.stderr).len(), made.len() + 1, "{}", run.stderr);
    if run.code == 0 {
        assert!(!run.stdout.trim().is_empty());
    } else {
        assert!(run.code == 4 || run.stderr.contains("--max-tool-rounds 1"), "{}", run.stderr);
    }
}

#[test]
fn reaching_max_tool_rounds_is_an_error_not_a_silent_stop() {
    let dir = scratch_dir("mcp-rounds");
    let (mcp, log) = fixture(&dir, "--tools count");
    let run = loop_run("Count.", &mcp, &["--tool-choice", "required", "--keep-tool-choice", "--max-tool-rounds", "2"]);
    assert_eq!(run.code, 9, "{}", run.stderr);
    assert!(run.stderr.contains("stopped at --max-tool-rounds 2"), "{}", run.stderr);
    assert!(run.stdout.is_empty());
    // Two rounds ran; the third answer's call did not.
    assert_eq!(calls(&log).len(), 2);
    assert_eq!(tool_lines(&run.stderr, "count").len(), 2);
    assert_eq!(usage_lines(&run.stderr).len(), 3);
}

#[test]
fn a_failing_tool_is_the_models_to_handle() {
    let dir = scratch_dir("mcp-fail");
    let (mcp, log) = fixture(&dir, "");
    let run = loop_run("Try it.", &mcp, &["--tool-choice", "fail", "--keep-tool-choice", "--max-tool-rounds", "1"]);
    // The tool's error went back as its result (`error: the disk is on fire`, 26 bytes) and the model was
    // asked again, rather than the run stopping at the failure.
    assert_eq!(run.code, 9, "{}", run.stderr);
    let logged = tool_lines(&run.stderr, "fail");
    assert!(logged.len() == 1 && logged[0].ends_with("-> 26 bytes"), "{}", run.stderr);
    assert_eq!(usage_lines(&run.stderr).len(), 2, "{}", run.stderr);
    assert_eq!(calls(&log).len(), 1);
}

#[test]
fn two_servers_offering_one_tool_fail_at_start() {
    let dir = scratch_dir("mcp-duplicate");
    let (mcp, log) = fixture(&dir, "--tools count");
    let other = format!("{} --tools fail,count", mcp_fixture());
    // No request is made: the gateway's address is closed, which would exit 8.
    let run = runaii(&["run", MODEL, "x", "--mcp", &mcp, "--mcp", &other]).env("RUNAII_BASE_URL", &closed_port_url()).run();
    assert_eq!(run.code, 9, "{}", run.stderr);
    assert!(run.stderr.contains("tool `count` is offered by both --mcp #1 (mcp_fixture) and --mcp #2 (mcp_fixture)"), "{}", run.stderr);
    assert!(calls(&log).is_empty());
}

#[test]
fn bad_server_commands_fail_before_any_request() {
    let closed = closed_port_url();
    let unterminated =
        runaii(&["run", MODEL, "x", "--mcp", &format!("{} --calls 'oops", mcp_fixture())]).env("RUNAII_BASE_URL", &closed).run();
    assert_eq!(unterminated.code, 2, "{}", unterminated.stderr);
    assert!(unterminated.stderr.contains("unterminated single quote"), "{}", unterminated.stderr);

    let missing = runaii(&["run", MODEL, "x", "--mcp", "/nonexistent/mcp-server"]).env("RUNAII_BASE_URL", &closed).run();
    assert_eq!(missing.code, 9, "{}", missing.stderr);
    assert!(missing.stderr.contains("cannot start"), "{}", missing.stderr);

    let (mcp, _) = fixture(&scratch_dir("mcp-choice"), "--tools count");
    let unknown_tool = runaii(&["run", MODEL, "x", "--mcp", &mcp, "--tool-choice", "weather"]).env("RUNAII_BASE_URL", &closed).run();
    assert_eq!(unknown_tool.code, 2, "{}", unknown_tool.stderr);
}

#[test]
fn the_config_files_servers_start_too() {
    let dir = scratch_dir("mcp-config");
    let config = dir.join("config.toml");
    let toml = format!("[mcp.servers.counter]\ncommand = {:?}\nargs = [\"--tools\", \"count\"]\n", mcp_fixture());
    std::fs::write(&config, toml).unwrap();
    let config = config.to_str().unwrap();
    let closed = closed_port_url();
    // `--tool-choice count` passes only when a started server listed `count`; then the request fails (8).
    let run = runaii(&["run", MODEL, "x", "--tool-choice", "count"]).env("RUNAII_CONFIG", config).env("RUNAII_BASE_URL", &closed).run();
    assert_eq!(run.code, 8, "{}", run.stderr);
    let without = runaii(&["run", MODEL, "x", "--tool-choice", "count", "--no-config-mcp"])
        .env("RUNAII_CONFIG", config)
        .env("RUNAII_BASE_URL", &closed)
        .run();
    assert_eq!(without.code, 2, "no server, so no tool to choose: {}", without.stderr);

    // A flag's server offering the same tool is the same error as two flags.
    let (mcp, _) = fixture(&dir, "--tools count");
    let clash = runaii(&["run", MODEL, "x", "--mcp", &mcp]).env("RUNAII_CONFIG", config).env("RUNAII_BASE_URL", &closed).run();
    assert_eq!(clash.code, 9, "{}", clash.stderr);
    assert!(clash.stderr.contains("offered by both counter and --mcp #1"), "{}", clash.stderr);
}
