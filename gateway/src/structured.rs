//! Structured outputs at the gateway: checking `response_format` before anything is forwarded, and
//! showing the model what the schema means.
//!
//! The grammar constrains syntax, not meaning: llama.cpp never shows the model a schema's field
//! descriptions. For json_schema requests (on by default, switchable per model) the schema's field names,
//! types and descriptions are rendered into the system prompt.

use std::collections::HashSet;

use serde_json::{json, Value};

use crate::error::ApiError;

/// Checks `response_format` as OpenAI documents it: text, json_object, or json_schema with a `name`
/// (`[a-zA-Z0-9_-]`, at most 64) and a valid JSON Schema.
///
/// # Errors
/// A 400 with param `response_format`.
pub fn check_response_format(format: Option<&Value>) -> Result<(), ApiError> {
    let Some(format) = format else { return Ok(()) };
    let bad = |m: String| ApiError::invalid(format!("invalid response_format: {m}"), "response_format");
    match format.get("type").and_then(Value::as_str) {
        Some("text" | "json_object") => Ok(()),
        Some("json_schema") => {
            let Some(spec) = format.get("json_schema").filter(|s| s.is_object()) else {
                return Err(bad("json_schema requires a `json_schema` object".into()));
            };
            check_named_schema(spec, "json_schema.").map_err(bad)
        }
        Some(other) => Err(bad(format!("unknown type `{other}`; use text, json_object or json_schema"))),
        None => Err(bad("`type` is required".into())),
    }
}

/// The `name` and `schema` of a json_schema format (chat nests them under `json_schema`, Responses'
/// `text.format` holds them flat): a name of 1 to 64 of `[a-zA-Z0-9_-]`, and a valid JSON Schema object.
/// `prefix` is how the message names the fields (`json_schema.`, or nothing).
///
/// # Errors
/// What is wrong, as text for the caller's error.
pub fn check_named_schema(spec: &Value, prefix: &str) -> Result<(), String> {
    let name = spec.get("name").and_then(Value::as_str).unwrap_or("");
    if name.is_empty() || name.len() > 64 || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        return Err(format!("{prefix}name is required: 1 to 64 characters from a-z, A-Z, 0-9, _ and -"));
    }
    let Some(schema) = spec.get("schema") else { return Err(format!("{prefix}schema is required")) };
    check_schema(schema, prefix)
}

/// Every check a chat body's schemas get before anything is forwarded, in order: the budget first (it is
/// linear, while building a schema validator need not be), then `response_format` itself. Pure, so the
/// fuzz harness (`fuzz/harness/`) runs exactly what `inference::prepare` runs.
///
/// # Errors
/// The refusal, with the reason its metric counts it under (`schema_too_complex` or
/// `invalid_response_format`).
pub fn check_request_schemas(body: &Value, context_length: i32) -> Result<(), (ApiError, &'static str)> {
    check_schema_budgets(body, context_length)
        .map_err(|e| (e, "schema_too_complex"))
        .and_then(|()| check_response_format(body.get("response_format")).map_err(|e| (e, "invalid_response_format")))
}

/// Every schema in the request (`response_format` and each tool's parameters) within the budget of
/// [`runaii_wire::schema_budget`] for a model with `context_length` tokens.
///
/// # Errors
/// A 400 `schema_too_complex` naming the limit and the parameter.
pub fn check_schema_budgets(body: &Value, context_length: i32) -> Result<(), ApiError> {
    let context = u64::try_from(context_length).unwrap_or(0);
    let over = |param: &'static str, e: runaii_wire::schema_budget::OverBudget| ApiError::InvalidRequest {
        message: format!("invalid {param}: {e}"),
        param: Some(param),
        code: "schema_too_complex",
    };
    if let Some(schema) = json_schema_of(body.get("response_format")) {
        runaii_wire::schema_budget::check(schema, context).map_err(|e| over("response_format", e))?;
    }
    let tools = body.get("tools").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    for parameters in tools.iter().filter_map(|t| t.get("function")?.get("parameters")) {
        runaii_wire::schema_budget::check(parameters, context).map_err(|e| over("tools", e))?;
    }
    Ok(())
}

/// A schema must be a JSON object that is valid JSON Schema.
fn check_schema(schema: &Value, prefix: &str) -> Result<(), String> {
    if !schema.is_object() {
        return Err(format!("{prefix}schema must be a JSON object"));
    }
    jsonschema::meta::validate(schema).map_err(|e| format!("{prefix}schema is not a valid JSON Schema: {e}"))?;
    jsonschema::validator_for(schema).map(drop).map_err(|e| format!("{prefix}schema cannot be used: {e}"))
}

/// The schema of a json_schema `response_format`, if that is what was asked.
#[must_use]
pub fn json_schema_of(format: Option<&Value>) -> Option<&Value> {
    let format = format?;
    (format.get("type")? == "json_schema").then(|| format.get("json_schema")?.get("schema"))?
}

/// Adds the schema's description to the system prompt of `messages` (a new system message first, or
/// appended to an existing first system message).
pub fn add_schema_prompt(messages: &mut Value, schema: &Value) {
    let Some(list) = messages.as_array_mut() else { return };
    let guide = render(schema);
    let first_is_system = list.first().is_some_and(|m| matches!(m["role"].as_str(), Some("system" | "developer")));
    if first_is_system {
        if let Some(Value::String(content)) = list.first_mut().and_then(|m| m.get_mut("content")) {
            content.push_str("\n\n");
            content.push_str(&guide);
            return;
        }
    }
    list.insert(0, json!({"role": "system", "content": guide}));
}

/// Longest rendering kept: a huge schema must not eat the context window.
const MAX_GUIDE_CHARS: usize = 4000;
const MAX_DEPTH: usize = 4;

/// Renders the schema as an indented field list: name, type, required, description, allowed values.
#[must_use]
pub fn render(schema: &Value) -> String {
    let mut out = String::from("Answer with JSON only, following this structure:\n");
    if let Some(d) = schema.get("description").and_then(Value::as_str) {
        out.push_str(d);
        out.push('\n');
    }
    render_fields(schema, 0, &mut out);
    if out.len() > MAX_GUIDE_CHARS {
        let mut cut = MAX_GUIDE_CHARS;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push_str("\n…");
    }
    out
}

/// Linear in the schema and stops once past [`MAX_GUIDE_CHARS`]: a schema of a few megabytes may list
/// 100,000 properties, and this runs on a request's thread before anything is forwarded.
fn render_fields(schema: &Value, depth: usize, out: &mut String) {
    if depth >= MAX_DEPTH || out.len() > MAX_GUIDE_CHARS {
        return;
    }
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        if let Some(items) = schema.get("items") {
            render_fields(items, depth, out);
        }
        return;
    };
    // A set: looking each property up in the `required` list was quadratic (found running the `schema`
    // fuzz target on a large input: 40,000 required properties took 12 s of CPU).
    let required: HashSet<&str> =
        schema.get("required").and_then(Value::as_array).map_or_else(HashSet::new, |r| r.iter().filter_map(Value::as_str).collect());
    for (name, field) in properties {
        if out.len() > MAX_GUIDE_CHARS {
            return;
        }
        let indent = "  ".repeat(depth);
        let kind = type_name(field);
        let req = if required.contains(&name.as_str()) { ", required" } else { "" };
        out.push_str(&format!("{indent}- \"{name}\" ({kind}{req})"));
        if let Some(d) = field.get("description").and_then(Value::as_str) {
            out.push_str(": ");
            out.push_str(d);
        }
        if let Some(values) = field.get("enum").and_then(Value::as_array) {
            let list: Vec<String> = values.iter().map(Value::to_string).collect();
            out.push_str(&format!(" One of: {}.", list.join(", ")));
        }
        out.push('\n');
        render_fields(field, depth + 1, out);
    }
}

fn type_name(field: &Value) -> String {
    match field.get("type") {
        Some(Value::String(t)) if t == "array" => {
            let inner = field.get("items").map_or_else(|| "any".to_owned(), type_name);
            format!("array of {inner}")
        }
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" or "),
        _ if field.get("$ref").is_some() => "object".into(),
        _ if field.get("anyOf").is_some() => "one of several shapes".into(),
        _ => "any".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_format_checks() {
        assert!(check_response_format(None).is_ok());
        assert!(check_response_format(Some(&json!({"type": "json_object"}))).is_ok());
        let ok = json!({"type": "json_schema", "json_schema": {"name": "a_b-1", "schema": {"type": "object"}}});
        assert!(check_response_format(Some(&ok)).is_ok());
        for bad in [
            json!({"type": "json_schema", "json_schema": {"schema": {}}}),
            json!({"type": "json_schema", "json_schema": {"name": "bad name", "schema": {}}}),
            json!({"type": "json_schema", "json_schema": {"name": "a"}}),
            json!({"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": 5}}}),
            json!({"type": "yaml"}),
            json!({}),
        ] {
            let err = check_response_format(Some(&bad)).expect_err("refused");
            assert_eq!(err.status(), 400, "{bad}");
        }
    }

    /// 200,000 required properties, about 4 MB (the default body limit): with each looked up in the
    /// `required` list, some 2·10^10 string comparisons on a request's thread.
    #[test]
    fn rendering_a_huge_schema_is_quick_and_bounded() {
        let names: Vec<String> = (0..200_000).map(|i| format!("p{i}")).collect();
        let properties: serde_json::Map<String, Value> = names.iter().map(|n| (n.clone(), json!(true))).collect();
        let schema = json!({"type": "object", "properties": properties, "required": names});
        let started = std::time::Instant::now();
        let guide = render(&schema);
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "{:?}", started.elapsed());
        assert!(guide.len() <= MAX_GUIDE_CHARS + "\n…".len(), "{}", guide.len());
        assert!(guide.contains("- \"p0\" (any, required)") && guide.ends_with('…'), "{guide}");
    }

    #[test]
    fn renders_names_descriptions_and_enums_into_the_system_prompt() {
        let schema = json!({
            "type": "object",
            "properties": {
                "capital": {"type": "string", "description": "The capital city, not the country"},
                "size": {"type": "string", "enum": ["small", "large"]}
            },
            "required": ["capital"]
        });
        let mut messages = json!([{"role": "user", "content": "France?"}]);
        add_schema_prompt(&mut messages, &schema);
        let system = messages[0]["content"].as_str().unwrap();
        assert_eq!(messages[0]["role"], "system");
        assert!(system.contains("\"capital\" (string, required): The capital city, not the country"), "{system}");
        assert!(system.contains("One of: \"small\", \"large\""), "{system}");

        let mut with_system = json!([{"role": "system", "content": "Be terse."}, {"role": "user", "content": "x"}]);
        add_schema_prompt(&mut with_system, &schema);
        assert!(with_system[0]["content"].as_str().unwrap().starts_with("Be terse.\n\n"));
        assert_eq!(with_system.as_array().unwrap().len(), 2);
    }
}
