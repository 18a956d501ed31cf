//! JSON Schema handling: the second-layer validator, and the schema as the grammar sees it.

use serde_json::{json, Value};

use super::Refusal;

/// Checks a finished answer against the schema the caller sent (not the tightened grammar schema).
pub struct OutputValidator {
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for OutputValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputValidator").finish_non_exhaustive()
    }
}

/// Why an answer failed the second layer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum OutputViolation {
    #[error("the answer is not valid JSON: {0}")]
    NotJson(String),
    #[error("the answer does not match the schema at {path}: {message}")]
    Schema { path: String, message: String },
}

impl OutputValidator {
    /// # Errors
    /// [`Refusal::InvalidSchema`] when `schema` is not a valid JSON Schema.
    pub fn new(schema: &Value) -> Result<Self, Refusal> {
        if !schema.is_object() {
            return Err(Refusal::InvalidSchema("a schema must be a JSON object".into()));
        }
        jsonschema::meta::validate(schema).map_err(|e| Refusal::InvalidSchema(format!("{e} at {}", e.instance_path())))?;
        // Formats are asserted, not just annotated: the grammar enforces them, so the second layer must too.
        let validator =
            jsonschema::options().should_validate_formats(true).build(schema).map_err(|e| Refusal::InvalidSchema(e.to_string()))?;
        Ok(Self { validator })
    }

    /// # Errors
    /// An [`OutputViolation`] naming the first failing place.
    pub fn check(&self, answer: &str) -> Result<(), OutputViolation> {
        let mut value: Value = serde_json::from_str(answer).map_err(|e| OutputViolation::NotJson(e.to_string()))?;
        zero_without_sign(&mut value);
        self.check_value(&value)
    }

    /// # Errors
    /// An [`OutputViolation`] naming the first failing place.
    pub fn check_value(&self, value: &Value) -> Result<(), OutputViolation> {
        match self.validator.validate(value) {
            Ok(()) => Ok(()),
            Err(e) => Err(OutputViolation::Schema { path: e.instance_path().to_string(), message: e.to_string() }),
        }
    }
}

/// `-0` is the integer zero (JSON Schema: an integer is a number without a fractional part), but
/// serde_json reads it as the float -0.0, which the validator then calls "not an integer".
fn zero_without_sign(value: &mut Value) {
    match value {
        Value::Number(n) if n.as_f64() == Some(0.0) && !(n.is_u64() || n.is_i64()) && n.to_string().starts_with('-') => {
            *value = json!(0);
        }
        Value::Array(items) => items.iter_mut().for_each(zero_without_sign),
        Value::Object(map) => map.values_mut().for_each(zero_without_sign),
        _ => {}
    }
}

/// The schema handed to llguidance: the caller's schema narrowed so that every answer is valid against
/// the original, exact and short:
///
/// - keywords the engine does not implement rewritten into ones it does, exactly or narrower
///   (`narrow.rs`);
/// - tightened where the engine would admit more than the validator accepts, and objects closed
///   (`tighten.rs`);
/// - every `oneOf` becomes an `anyOf` of branches proven exclusive (`one_of.rs`), or the schema is
///   refused: the engine enforces only "at least one branch";
/// - a named property whose schema a matching `patternProperties` pattern repeats is left to the pattern
///   (`overlap.rs`), sparing the engine an intersection;
/// - compact separators, so no whitespace runs between JSON tokens.
///
/// Keys keep the caller's declaration order (serde_json is built with `preserve_order`).
///
/// # Errors
/// [`Refusal::Unenforceable`] for a `oneOf` whose branches cannot be told apart.
pub(super) fn for_grammar(schema: &Value) -> Result<Value, Refusal> {
    let mut grammar = embedded_for_grammar(schema)?;
    compact_separators(&mut grammar);
    Ok(grammar)
}

/// As `for_grammar`, for a schema embedded in a larger grammar (a tool's arguments in a call, a
/// `response_format` beside tool calls): narrowed, tightened, objects closed and `oneOf` made exact, with
/// the separators left to the enclosing `%json`. Without it a call's arguments could hold keys the tool
/// never declared.
///
/// # Errors
/// [`Refusal::Unenforceable`] for a `oneOf` whose branches cannot be told apart.
pub fn embedded_for_grammar(schema: &Value) -> Result<Value, Refusal> {
    let mut grammar = schema.clone();
    super::narrow::narrow(&mut grammar);
    super::tighten::tighten(&mut grammar);
    super::one_of::make_exact(&mut grammar, schema)?;
    super::overlap::drop_repeated(&mut grammar);
    Ok(grammar)
}

/// Has llguidance hold the JSON a schema describes to `,` and `:` with no whitespace around them. With
/// whitespace free between tokens a small model can loop on it until `max_tokens` (a tool call seen
/// here: `"Paris"\n     \n     \n…`). Applies to a schema compiled alone or embedded with `%json`.
pub fn compact_separators(schema: &mut Value) {
    if let Value::Object(map) = schema {
        map.insert("x-guidance".into(), json!({"whitespace_flexible": false, "item_separator": ",", "key_separator": ":"}));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validator_rejects_bad_schema_and_bad_answers() {
        assert!(matches!(OutputValidator::new(&json!({"type": 12})), Err(Refusal::InvalidSchema(_))));
        let v = OutputValidator::new(&json!({"type": "object", "required": ["a"]})).expect("valid schema");
        assert!(v.check(r#"{"a":1}"#).is_ok());
        assert!(matches!(v.check("{}"), Err(OutputViolation::Schema { .. })));
        assert!(matches!(v.check("{"), Err(OutputViolation::NotJson(_))));
        let integer = OutputValidator::new(&json!({"type": "integer"})).expect("valid schema");
        assert!(integer.check("-0").is_ok(), "-0 is the integer zero");
        assert!(integer.check("-0.5").is_err());
    }
}
