//! The `schema` target: arbitrary JSON as a client's schema, through every check the gateway runs on a
//! `response_format` json_schema and on tool parameters (budget, meta-validation, building the
//! validator), then the validator itself and the schema prompt.

use runaii_wire::schema_budget;
use serde_json::{json, Map, Value};

use super::{assert_refusal, with_json, CONTEXT};
use runaii_gateway::structured;

/// Keywords whose object maps names the caller chose to subschemas: the names are not keywords.
const NAME_MAPS: [&str; 6] = ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"];
/// Keywords whose values are data, not schemas (as the budget reads them).
const DATA_KEYWORDS: [&str; 4] = ["enum", "const", "default", "examples"];

/// Checks `data` as a JSON Schema.
///
/// Invariants:
/// - the budget's verdict is deterministic, does not tighten with a larger context, and does not
///   depend on what properties and definitions are called (a property named `default` is a schema
///   like any other, and must be counted as one);
/// - the gateway refuses every schema the budget refuses, with `schema_too_complex`, and any other
///   refusal is a 400;
/// - it accepts exactly the objects that pass meta-validation and compile into a validator;
/// - an accepted schema's validator gives one verdict per instance, whichever way it is asked;
/// - its schema prompt goes first, as a system message.
///
/// Time and memory are the fuzzer's to bound (`-timeout`, `-rss_limit_mb`); the stack is a worker's.
pub fn schema(data: &[u8]) {
    with_json(data, check);
}

fn check(schema: &Value) {
    let budget = schema_budget::check(schema, context_tokens());
    assert_eq!(budget, schema_budget::check(schema, context_tokens()), "the budget is not deterministic");
    if budget.is_ok() {
        assert!(schema_budget::check(schema, 1 << 40).is_ok(), "a larger context refused what a smaller one took: {schema}");
    }
    // At a one-token context every `minItems: 2` is over budget: small inputs reach the refusals too.
    let renamed = renamed(schema);
    for context in [context_tokens(), 1] {
        let verdict = schema_budget::check(schema, context);
        assert_eq!(
            verdict.is_ok(),
            schema_budget::check(&renamed, context).is_ok(),
            "the budget's verdict depends on property names: {verdict:?} for {schema}, not for {renamed}"
        );
    }

    let body = json!({
        "response_format": {"type": "json_schema", "json_schema": {"name": "fuzz", "schema": schema}},
        "tools": [{"type": "function", "function": {"name": "fuzz", "parameters": schema}}],
    });
    let verdict = structured::check_request_schemas(&body, CONTEXT);
    if let Err((error, reason)) = &verdict {
        assert_refusal(error);
        if budget.is_err() {
            assert_eq!(*reason, "schema_too_complex", "over budget, yet refused for {error}");
        }
    }
    if budget.is_err() || !schema.is_object() {
        assert!(verdict.is_err(), "accepted a schema the budget refuses or that is no object: {schema}");
        return;
    }
    let meta_valid = jsonschema::meta::validate(schema).is_ok();
    let validator = if meta_valid { jsonschema::validator_for(schema).ok() } else { None };
    assert_eq!(verdict.is_ok(), validator.is_some(), "the gateway's verdict {verdict:?} is not meta-validation plus compilation");
    let Some(validator) = validator else { return };

    for instance in instances(schema) {
        let valid = validator.is_valid(&instance);
        assert_eq!(valid, validator.validate(&instance).is_ok(), "is_valid and validate disagree on {instance}");
        assert_eq!(valid, validator.iter_errors(&instance).next().is_none(), "is_valid and iter_errors disagree on {instance}");
        assert_eq!(valid, validator.is_valid(&instance), "two verdicts on {instance}");
    }

    let mut messages = json!([{"role": "user", "content": "x"}]);
    structured::add_schema_prompt(&mut messages, schema);
    assert_eq!(messages[0]["role"], "system");
    assert!(messages[0]["content"].as_str().is_some_and(|c| c.starts_with("Answer with JSON only")), "{messages}");
}

fn context_tokens() -> u64 {
    u64::try_from(CONTEXT).unwrap_or(0)
}

/// The schema with every name in a [`NAME_MAPS`] object replaced by `n0`, `n1`, …: the same schema as
/// far as any budget should care.
fn renamed(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, value) in map {
                let value = match value {
                    Value::Object(names) if NAME_MAPS.contains(&key.as_str()) => {
                        Value::Object(names.values().enumerate().map(|(i, sub)| (format!("n{i}"), renamed(sub))).collect())
                    }
                    data if DATA_KEYWORDS.contains(&key.as_str()) => data.clone(),
                    sub => renamed(sub),
                };
                out.insert(key.clone(), value);
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(renamed).collect()),
        scalar => scalar.clone(),
    }
}

/// Instances to validate: the schema's own examples, default, const and enum values, and one of each
/// JSON type.
fn instances(schema: &Value) -> Vec<Value> {
    let mut out = vec![
        json!(null),
        json!(true),
        json!(0),
        json!(-1.5),
        json!(""),
        json!("a"),
        json!([]),
        json!([1, "a"]),
        json!({}),
        json!({"a": 1}),
    ];
    for key in ["default", "const"] {
        out.extend(schema.get(key).cloned());
    }
    for key in ["examples", "enum"] {
        out.extend(schema.get(key).and_then(Value::as_array).into_iter().flatten().take(8).cloned());
    }
    out
}
