//! The size budget of a caller's JSON Schema, checked before any validator or grammar is built.
//!
//! Schema compilers are not linear in the schema: a few kilobytes can cost seconds and gigabytes
//! (jsonschema 0.33 needed >6 GB for nine levels of nested `anyOf`), and a schema can demand an answer
//! no context window holds (`minItems: 1e9`). One cheap walk over the document refuses those up front,
//! in the gateway and again in the worker, so neither ever starts such a compile.
//!
//! The limits sit far above the 200 real-world schemas of JSONSchemaBench (at most 9,106 nodes, 26
//! levels, 392 enum values).

use serde_json::Value;

/// Most JSON objects and arrays in one schema document (llguidance stops at 50,000 compiled nodes).
pub const MAX_NODES: usize = 50_000;
/// Deepest nesting of objects and arrays.
pub const MAX_DEPTH: usize = 64;
/// Most `enum` values in one schema, all enums together.
pub const MAX_ENUM_VALUES: usize = 10_000;
/// A token holds at most this many characters of a string (generous: real vocabularies stay under 64).
const MAX_CHARS_PER_TOKEN: u64 = 256;

/// Keywords whose values are data, not schemas: their contents are not walked.
const DATA_KEYWORDS: [&str; 4] = ["enum", "const", "default", "examples"];
/// Keywords whose object maps names the caller chose to subschemas. A property may be called `default`
/// or `enum` and is a schema all the same: read as a keyword, its name would hide it from the budget.
const NAME_MAPS: [&str; 6] = ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"];

/// Why a schema is over budget; the message names the limit and where it was crossed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverBudget(pub String);

impl std::fmt::Display for OverBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for OverBudget {}

/// Checks `schema` against the budget for a model whose context holds `context_tokens` tokens.
///
/// # Errors
/// [`OverBudget`] naming the first limit crossed.
pub fn check(schema: &Value, context_tokens: u64) -> Result<(), OverBudget> {
    let mut nodes = 0usize;
    let mut enum_values = 0usize;
    // An explicit stack: a deeply nested document must not overflow the thread's stack. Each entry says
    // whether the value's keys are names (in a `NAME_MAPS` object) rather than keywords.
    let mut stack: Vec<(&Value, usize, bool)> = vec![(schema, 1, false)];
    while let Some((value, depth, names)) = stack.pop() {
        let children: Box<dyn Iterator<Item = (&Value, Option<&str>)>> = match value {
            Value::Object(map) => Box::new(map.iter().map(|(k, v)| (v, Some(k.as_str())))),
            Value::Array(items) => Box::new(items.iter().map(|v| (v, None))),
            _ => continue,
        };
        nodes += 1;
        if nodes > MAX_NODES {
            return Err(OverBudget(format!("the schema is too large: more than {MAX_NODES} objects and arrays")));
        }
        if depth > MAX_DEPTH {
            return Err(OverBudget(format!("the schema nests deeper than {MAX_DEPTH} levels")));
        }
        for (child, key) in children {
            // In a map of names every value is a schema, whatever it is called: walk it.
            match key.filter(|_| !names) {
                Some("enum") => {
                    enum_values += child.as_array().map_or(0, Vec::len);
                    if enum_values > MAX_ENUM_VALUES {
                        return Err(OverBudget(format!("the schema lists more than {MAX_ENUM_VALUES} enum values")));
                    }
                }
                Some(k) if DATA_KEYWORDS.contains(&k) => {}
                Some(k) => {
                    check_minimum(k, child, context_tokens)?;
                    stack.push((child, depth + 1, NAME_MAPS.contains(&k)));
                }
                None => stack.push((child, depth + 1, false)),
            }
        }
    }
    Ok(())
}

/// A minimum count no answer within the context can reach makes every request run to `max_tokens`
/// and fail: refuse it instead. Each array item or property takes at least one token.
fn check_minimum(keyword: &str, value: &Value, context_tokens: u64) -> Result<(), OverBudget> {
    let per_token = match keyword {
        "minItems" | "minProperties" | "minContains" => 1,
        "minLength" => MAX_CHARS_PER_TOKEN,
        _ => return Ok(()),
    };
    // A non-integer or negative value is the schema validator's to refuse.
    let Some(wanted) = value.as_u64().or_else(|| value.as_f64().filter(|f| *f >= 1.0).map(|_| u64::MAX)) else {
        return Ok(());
    };
    let reachable = context_tokens.saturating_mul(per_token);
    if wanted > reachable {
        return Err(OverBudget(format!("{keyword}: {value} cannot be met: the model's context holds {context_tokens} tokens")));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nested_any_of(levels: usize) -> Value {
        let mut s = json!({"type": "string"});
        for _ in 0..levels {
            s = json!({"anyOf": [{"type": "array", "items": s.clone()}, {"type": "object", "properties": {"a": s}}]});
        }
        s
    }

    #[test]
    fn ordinary_schemas_pass() {
        let schema = json!({"type": "object", "properties": {"tags": {"type": "array", "minItems": 2, "items": {"enum": ["a", "b"]}},
            "name": {"type": "string", "minLength": 3}}, "required": ["tags"]});
        assert_eq!(check(&schema, 4096), Ok(()));
        assert_eq!(check(&nested_any_of(8), 4096), Ok(()));
    }

    #[test]
    fn exponential_any_of_is_too_large() {
        let err = check(&nested_any_of(14), 4096).unwrap_err();
        assert!(err.0.contains("too large"), "{err}");
    }

    #[test]
    fn unreachable_minimums_are_refused() {
        for schema in [
            json!({"type": "array", "minItems": 1_000_000_000}),
            json!({"minProperties": 5000}),
            json!({"type": "string", "minLength": 1e9}),
        ] {
            let err = check(&schema, 4096).unwrap_err();
            assert!(err.0.contains("cannot be met"), "{err}");
        }
        assert_eq!(check(&json!({"type": "string", "minLength": 100_000}), 4096), Ok(()));
    }

    #[test]
    fn data_is_not_read_as_schema() {
        assert_eq!(check(&json!({"const": {"minItems": 1_000_000_000}, "default": [[[[1]]]]}), 4096), Ok(()));
    }

    /// Found by the `schema` fuzz target: a property named `default` (or `enum`, `const`, `examples`)
    /// was skipped as data, so any schema under it went unchecked.
    #[test]
    fn names_are_not_keywords() {
        for name in ["default", "enum", "const", "examples", "minItems"] {
            let hidden = json!({"type": "object", "properties": {name: {"type": "array", "minItems": 1_000_000_000}}});
            assert!(check(&hidden, 4096).unwrap_err().0.contains("cannot be met"), "{name}");
            let defs = json!({"$defs": {name: nested_any_of(14)}, "$ref": format!("#/$defs/{name}")});
            assert!(check(&defs, 4096).unwrap_err().0.contains("too large"), "{name}");
        }
        let values: Vec<Value> = (0..20_000).map(Value::from).collect();
        let nested = json!({"properties": {"enum": {"enum": values}}});
        assert!(check(&nested, 4096).unwrap_err().0.contains("enum"));
        // A property named like a minimum keyword is not one.
        assert_eq!(check(&json!({"properties": {"minItems": {"type": "integer"}, "minLength": true}}), 4096), Ok(()));
    }

    #[test]
    fn huge_enums_and_deep_nesting_are_refused() {
        let values: Vec<Value> = (0..20_000).map(Value::from).collect();
        assert!(check(&json!({"enum": values}), 4096).unwrap_err().0.contains("enum"));
        let mut deep = json!({"type": "string"});
        for _ in 0..100 {
            deep = json!({"items": deep});
        }
        assert!(check(&deep, 4096).unwrap_err().0.contains("deeper"));
    }
}
