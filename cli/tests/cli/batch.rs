//! `runaii batch`: a JSONL input submitted, followed to its end, and its answers written beside it; the
//! exit status says whether every line was answered.

use serde_json::{json, Value};

use crate::stack::{runaii, scratch_dir};
use runaii_testkit::{invoice_schema, MODEL};

fn line(custom_id: &str, schema: &Value) -> String {
    let body = json!({
        "model": MODEL,
        "messages": [{"role": "user", "content": format!("Invoice #{custom_id}, due 2026-11-01, total 420.00 USD.")}],
        "max_tokens": 60,
        "temperature": 0,
        "response_format": {"type": "json_schema", "json_schema": {"name": "invoice", "strict": true, "schema": schema}},
    });
    json!({"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}).to_string()
}

#[test]
fn a_batch_is_followed_to_its_end_and_its_answers_written_beside_the_input() {
    let dir = scratch_dir("batch-ok");
    let input = dir.join("invoices.jsonl");
    let ids = ["A-1", "A-2", "A-3"];
    std::fs::write(&input, ids.map(|id| line(id, &invoice_schema())).join("\n")).unwrap();
    let run = runaii(&["batch", input.to_str().unwrap(), "--poll-seconds", "0.2"]).run();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("completed: 3 of 3 lines answered, 0 failed"), "{}", run.stderr);
    assert!(run.stderr.contains("[##############################] 3/3 lines"), "the progress reached its end: {}", run.stderr);
    let output = std::fs::read_to_string(dir.join("invoices.output.jsonl")).unwrap();
    let validator = jsonschema::validator_for(&invoice_schema()).unwrap();
    let lines: Vec<Value> = output.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.iter().map(|l| l["custom_id"].as_str().unwrap()).collect::<Vec<_>>(), ids);
    for l in &lines {
        let content: Value = serde_json::from_str(l["response"]["body"]["choices"][0]["message"]["content"].as_str().unwrap()).unwrap();
        assert!(validator.is_valid(&content), "{content}");
    }
    assert!(!dir.join("invoices.errors.jsonl").exists());
}

#[test]
fn a_line_the_engine_refuses_is_written_to_the_errors_and_the_exit_status_says_so() {
    let dir = scratch_dir("batch-refused");
    let input = dir.join("tags.jsonl");
    let unenforceable = json!({
        "type": "object",
        "properties": {"tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true, "minItems": 2}},
        "required": ["tags"],
        "additionalProperties": false,
    });
    std::fs::write(&input, [line("good", &invoice_schema()), line("refused", &unenforceable)].join("\n")).unwrap();
    let run = runaii(&["batch", input.to_str().unwrap(), "--poll-seconds", "0.2"]).run();
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("1 of 2 lines failed or never ran"), "{}", run.stderr);
    let errors = std::fs::read_to_string(dir.join("tags.errors.jsonl")).unwrap();
    let error: Value = serde_json::from_str(errors.lines().next().unwrap()).unwrap();
    assert_eq!((&error["custom_id"], &error["response"]["status_code"]), (&json!("refused"), &json!(400)), "{error}");
    assert_eq!(error["response"]["body"]["error"]["code"], "upstream_rejected", "{error}");
    let output = std::fs::read_to_string(dir.join("tags.output.jsonl")).unwrap();
    assert_eq!(output.lines().count(), 1);
}
