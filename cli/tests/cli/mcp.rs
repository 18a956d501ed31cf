//! The MCP tool loop with a real MCP server process (`cli/examples/mcp_fixture.rs`, which counts its
//! calls in a file). A forced tool choice makes the small model call it.

use std::path::{Path, PathBuf};

use crate::run::usage_lines;
use crate::stack::{closed_port_url, mcp_fixture, runaii, scratch_dir};
use runaii_testkit::MODEL;

/// An `--mcp` value starting the fixture with these arguments, and the file it logs calls to.
fn fixture(dir: &Path, extra: &str) -> (String, PathBuf) {
    let calls = dir.join("calls.log");
    (
        format!("{} --calls '{}' {extra}", mcp_fixture(), calls.display()),
        calls,
    )
}

fn calls(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn tool_lines<'a>(stderr: &'a str, tool: &str) -> Vec<&'a str> {
    stderr
        .lines()
        .filter(|l| l.starts_with(&format!("[tool] {tool}(")))
        .collect()
}

#[test]
fn calls_run_on_the_server_and_their_results_go_back_to_the_model() {
    let dir = scratch_dir("mcp-loop");
    let (mcp, log) = fixture(&dir, "--tools count");
    let run = runaii(&[
        "run",
        MODEL,
        "Count once, then say done.",
        "--mcp",
        &mcp,
        "--tool-choice",
        "count",
        "--max-tool-rounds",
        "3",
        "--max-tokens",
        "60",
        "-v",
    ])
    .run();
    // After the forced first call the model is free: it answers (0) or keeps calling until the limit (9).
    assert!(run.code == 0 || run.code == 9, "{}", run.stderr);
    let made = calls(&log);
    assert!(
        !made.is_empty() && made.iter().all(|c| c.starts_with("count {\"word\":")),
        "{made:?}"
    );
    let logged = tool_lines(&run.stderr, "count");
    assert_eq!(
        logged.len(),
        made.len(),
        "one [tool] line per call the server saw"
    );
    assert!(
        logged[0].contains(" -> 6 bytes"),
        "`call 1` is 6 bytes: {}",
        logged[0]
    );
    // Every round's results were sent back: one request more than there were rounds of calls.
    assert!(usage_lines(&run.stderr).len() >= 2, "{}", run.stderr);
    if run.code == 0 {
        assert!(!run.stdout.trim().is_empty());
    } else {
        assert!(run.stderr.contains("--max-tool-rounds 3"), "{}", run.stderr);
    }
}

#[test]
fn reaching_max_tool_rounds_is_an_error_not_a_silent_stop() {
    let dir = scratch_dir("mcp-rounds");
    let (mcp, log) = fixture(&dir, "");
    let run = runaii(&[
        "run",
        MODEL,
        "Count.",
        "--mcp",
        &mcp,
        "--tool-choice",
        "required",
        "--keep-tool-choice",
        "--max-tool-rounds",
        "2",
        "--max-tokens",
        "60",
    ])
    .run();
    assert_eq!(run.code, 9, "{}", run.stderr);
    assert!(
        run.stderr.contains("stopped at --max-tool-rounds 2"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.is_empty());
    // Two rounds ran (at least one call each); the third round's calls did not.
    let made = calls(&log);
    assert!(made.len() >= 2, "{made:?}");
    assert_eq!(
        tool_lines(&run.stderr, "count").len() + tool_lines(&run.stderr, "fail").len(),
        made.len()
    );
}

#[test]
fn a_failing_tool_is_the_models_to_handle() {
    let dir = scratch_dir("mcp-fail");
    let (mcp, log) = fixture(&dir, "");
    let run = runaii(&[
        "run",
        MODEL,
        "Try it.",
        "--mcp",
        &mcp,
        "--tool-choice",
        "fail",
        "--keep-tool-choice",
        "--max-tool-rounds",
        "2",
        "--max-tokens",
        "60",
    ])
    .run();
    // The tool's error went back as its result and the loop went on to its limit.
    assert_eq!(run.code, 9, "{}", run.stderr);
    let logged = tool_lines(&run.stderr, "fail");
    assert!(
        logged.len() >= 2,
        "two rounds of at least one call: {}",
        run.stderr
    );
    // `error: the disk is on fire` is 26 bytes.
    assert!(
        logged.iter().all(|l| l.ends_with("-> 26 bytes")),
        "{}",
        run.stderr
    );
    assert_eq!(calls(&log).len(), logged.len());
}

#[test]
fn two_servers_offering_one_tool_fail_at_start() {
    let dir = scratch_dir("mcp-duplicate");
    let (mcp, log) = fixture(&dir, "--tools count");
    let other = format!("{} --tools fail,count", mcp_fixture());
    // No request is made: the gateway's address is closed, which would exit 8.
    let run = runaii(&["run", MODEL, "x", "--mcp", &mcp, "--mcp", &other])
        .env("RUNAII_BASE_URL", &closed_port_url())
        .run();
    assert_eq!(run.code, 9, "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "tool `count` is offered by both --mcp #1 (mcp_fixture) and --mcp #2 (mcp_fixture)"
        ),
        "{}",
        run.stderr
    );
    assert!(calls(&log).is_empty());
}

#[test]
fn bad_server_commands_fail_before_any_request() {
    let unterminated = runaii(&[
        "run",
        MODEL,
        "x",
        "--mcp",
        &format!("{} --calls 'oops", mcp_fixture()),
    ])
    .env("RUNAII_BASE_URL", &closed_port_url())
    .run();
    assert_eq!(unterminated.code, 2, "{}", unterminated.stderr);
    assert!(
        unterminated.stderr.contains("unterminated single quote"),
        "{}",
        unterminated.stderr
    );

    let missing = runaii(&["run", MODEL, "x", "--mcp", "/nonexistent/mcp-server"])
        .env("RUNAII_BASE_URL", &closed_port_url())
        .run();
    assert_eq!(missing.code, 9, "{}", missing.stderr);
    assert!(
        missing.stderr.contains("cannot start"),
        "{}",
        missing.stderr
    );

    let (mcp, _) = fixture(&scratch_dir("mcp-choice"), "--tools count");
    let unknown_tool = runaii(&["run", MODEL, "x", "--mcp", &mcp, "--tool-choice", "weather"])
        .env("RUNAII_BASE_URL", &closed_port_url())
        .run();
    assert_eq!(unknown_tool.code, 2, "{}", unknown_tool.stderr);
}

#[test]
fn the_config_files_servers_start_too() {
    let dir = scratch_dir("mcp-config");
    let log = dir.join("calls.log");
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        format!("[mcp.servers.counter]\ncommand = {:?}\nargs = [\"--calls\", {:?}, \"--tools\", \"count\"]\n", mcp_fixture(), log.display().to_string()),
    )
    .unwrap();
    let run = runaii(&[
        "run",
        MODEL,
        "Count.",
        "--tool-choice",
        "count",
        "--keep-tool-choice",
        "--max-tool-rounds",
        "1",
        "--max-tokens",
        "60",
    ])
    .env("RUNAII_CONFIG", config.to_str().unwrap())
    .run();
    assert_eq!(run.code, 9, "{}", run.stderr);
    assert!(!calls(&log).is_empty());

    // And a flag's server offering the same tool is the same error as two flags.
    let (mcp, _) = fixture(&dir, "--tools count");
    let clash = runaii(&["run", MODEL, "x", "--mcp", &mcp])
        .env("RUNAII_CONFIG", config.to_str().unwrap())
        .env("RUNAII_BASE_URL", &closed_port_url())
        .run();
    assert_eq!(clash.code, 9, "{}", clash.stderr);
    assert!(
        clash
            .stderr
            .contains("offered by both counter and --mcp #1"),
        "{}",
        clash.stderr
    );
    let skipped = runaii(&["run", MODEL, "x", "--mcp", &mcp, "--no-config-mcp"])
        .env("RUNAII_CONFIG", config.to_str().unwrap())
        .env("RUNAII_BASE_URL", &closed_port_url())
        .run();
    assert_eq!(
        skipped.code, 8,
        "--no-config-mcp leaves only the flag's server, then the request fails: {}",
        skipped.stderr
    );
}
