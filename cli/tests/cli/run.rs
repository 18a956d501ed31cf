//! `runaii run`: the answer alone on stdout, and one exit status per outcome.

use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::stack::{closed_port_url, db, runaii, runtime, scratch_dir};
use runaii_testkit::{invoice_schema, MODEL};

/// `[usage] <request id>: <p> prompt + <c> completion tokens, cost <x> USD` lines of `-v`.
pub fn usage_lines(stderr: &str) -> Vec<(String, u64, u64, Decimal)> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("[usage] "))
        .filter(|l| !l.starts_with("total"))
        .map(|l| {
            let (id, rest) = l.split_once(": ").unwrap();
            let words: Vec<&str> = rest.split_whitespace().collect();
            let cost = words[words.iter().position(|w| *w == "cost").unwrap() + 1].parse().unwrap();
            (id.to_owned(), words[0].parse().unwrap(), words[3].parse().unwrap(), cost)
        })
        .collect()
}

pub fn recorded_cost(request_id: &str) -> Decimal {
    let pool = db();
    runtime().block_on(sqlx::query_scalar("SELECT cost FROM cost_records WHERE request_id = $1").bind(request_id).fetch_one(&pool)).unwrap()
}

#[test]
fn a_schema_answer_is_the_json_alone_valid_and_its_cost_is_the_ledgers() {
    let schema = invoice_schema().to_string();
    let run = runaii(&[
        "run",
        MODEL,
        "Invoice #A-1024, due 2026-11-01, total 420.00 USD.",
        "--system",
        "Extract the invoice fields.",
        "--json-schema",
        &schema,
        "--temperature",
        "0",
        "--max-tokens",
        "120",
        "-v",
    ])
    .run();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.ends_with('\n') && run.stdout.trim_end().lines().count() == 1, "the JSON alone, on one line: {:?}", run.stdout);
    let answer: Value = serde_json::from_str(&run.stdout).unwrap();
    assert!(jsonschema::is_valid(&invoice_schema(), &answer), "{answer}");
    // The cost told on stderr is exactly what the ledger recorded for that request.
    let usage = usage_lines(&run.stderr);
    assert_eq!(usage.len(), 1, "{}", run.stderr);
    let (request_id, prompt_tokens, _, cost) = &usage[0];
    assert!(*prompt_tokens > 0);
    assert_eq!(*cost, recorded_cost(request_id));
}

#[test]
fn a_schema_from_a_file_streams_and_still_validates() {
    let dir = scratch_dir("schema-file");
    let path = dir.join("flag.json");
    let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": false});
    std::fs::write(&path, schema.to_string()).unwrap();
    let run = runaii(&["run", MODEL, "Is water wet?", "--json-schema", path.to_str().unwrap(), "--stream", "--max-tokens", "40"]).run();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.ends_with('\n'));
    assert!(jsonschema::is_valid(&schema, &serde_json::from_str(&run.stdout).unwrap()));
}

#[test]
fn the_prompt_comes_from_stdin_with_a_dash() {
    let long_prompt = "Invoice #A-1024 from ACME Corporation, 12 Long Street, Springfield. ".repeat(12);
    let schema =
        json!({"type": "object", "properties": {"total": {"type": "integer"}}, "required": ["total"], "additionalProperties": false});
    let run = runaii(&["run", MODEL, "-", "--json-schema", &schema.to_string(), "--max-tokens", "40", "-v"]).stdin(&long_prompt).run();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(jsonschema::is_valid(&schema, &serde_json::from_str(&run.stdout).unwrap()));
    // Twelve repetitions of a 17-token sentence reached the model.
    let (_, prompt_tokens, _, _) = usage_lines(&run.stderr)[0].clone();
    assert!(prompt_tokens > 150, "prompt_tokens {prompt_tokens}: stdin was not the prompt");

    let empty = runaii(&["run", MODEL, "-"]).stdin("  \n").run();
    assert_eq!(empty.code, 2, "an empty prompt is a usage error");
}

#[test]
fn a_refused_schema_exits_3() {
    // Valid JSON Schema the engine cannot enforce: the gateway passes on its `upstream_rejected`.
    let schema = json!({"type": "array", "items": {"type": "integer"}, "uniqueItems": true, "minItems": 2}).to_string();
    let run = runaii(&["run", MODEL, "Numbers?", "--json-schema", &schema, "--max-tokens", "20"]).run();
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(run.stdout.is_empty());
    assert!(run.stderr.contains("upstream_rejected"), "{}", run.stderr);

    let invalid = runaii(&["run", MODEL, "x", "--json-schema", r#"{"type": "object", "properties": 7}"#]).run();
    assert_eq!(invalid.code, 3, "an invalid schema is refused too: {}", invalid.stderr);
}

#[test]
fn a_cut_answer_exits_4_and_names_the_limit() {
    let schema = json!({"type": "array", "items": {"type": "integer"}, "minItems": 50}).to_string();
    for stream in [false, true] {
        let mut args = vec!["run", MODEL, "List numbers.", "--json-schema", &schema, "--max-tokens", "5"];
        if stream {
            args.push("--stream");
        }
        let run = runaii(&args).run();
        assert_eq!(run.code, 4, "stream {stream}: {}", run.stderr);
        assert!(run.stderr.contains("cut at max_tokens 5"), "{}", run.stderr);
        if !stream {
            assert!(run.stdout.is_empty(), "no partial JSON on stdout: {:?}", run.stdout);
        }
    }
}

#[test]
fn a_grammar_constrains_the_answer() {
    let dir = scratch_dir("grammar");
    let path = dir.join("yes-no.gbnf");
    std::fs::write(&path, "root ::= \"yes\" | \"no\"\n").unwrap();
    let run = runaii(&["run", MODEL, "Is Paris in France?", "--grammar", path.to_str().unwrap(), "--max-tokens", "5"]).run();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout == "yes\n" || run.stdout == "no\n", "{:?}", run.stdout);

    std::fs::write(&path, "root ::= \"unterminated\n").unwrap();
    let bad = runaii(&["run", MODEL, "x", "--grammar", path.to_str().unwrap(), "--max-tokens", "5"]).run();
    assert_eq!(bad.code, 3, "a grammar the engine refuses: {}", bad.stderr);
}

#[test]
fn a_schema_with_a_grammar_fails_before_any_request() {
    // Nothing listens at the base URL: a request would be a transport error (8), not a usage error (2).
    let run = runaii(&["run", MODEL, "x", "--json-schema", "{}", "--grammar", "g.gbnf"]).env("RUNAII_BASE_URL", &closed_port_url()).run();
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--grammar"), "{}", run.stderr);
}

#[test]
fn auth_transport_and_other_refusals_have_their_own_statuses() {
    let bad_key = runaii(&["run", MODEL, "hi", "--max-tokens", "5"]).env("RUNAII_API_KEY", "rk-nope-nope").run();
    assert_eq!(bad_key.code, 6, "{}", bad_key.stderr);
    let no_key = runaii(&["run", MODEL, "hi"]).env_remove("RUNAII_API_KEY").run();
    assert_eq!(no_key.code, 6, "{}", no_key.stderr);
    assert!(no_key.stderr.contains("no API key"), "{}", no_key.stderr);
    let unreachable = runaii(&["run", MODEL, "hi"]).env("RUNAII_BASE_URL", &closed_port_url()).run();
    assert_eq!(unreachable.code, 8, "{}", unreachable.stderr);
    let unknown = runaii(&["run", "no-such-model", "hi"]).run();
    assert_eq!(unknown.code, 7, "{}", unknown.stderr);
}
