//! JSON Schema handling: the second-layer validator, and the schema as the grammar sees it.

use serde_json::{json, Map, Value};

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
        jsonschema::meta::validate(schema)
            .map_err(|e| Refusal::InvalidSchema(format!("{e} at {}", e.instance_path())))?;
        // Formats are asserted, not just annotated: the grammar enforces them, so the second layer must too.
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(schema)
            .map_err(|e| Refusal::InvalidSchema(e.to_string()))?;
        Ok(Self { validator })
    }

    /// # Errors
    /// An [`OutputViolation`] naming the first failing place.
    pub fn check(&self, answer: &str) -> Result<(), OutputViolation> {
        let value: Value = serde_json::from_str(answer).map_err(|e| OutputViolation::NotJson(e.to_string()))?;
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

/// The schema handed to llguidance: the caller's schema with two changes that keep every answer valid
/// against the original while making it short:
///
/// - an object that names its `properties` and says nothing about other keys gets
///   `additionalProperties: false`, so the model cannot invent keys (a tiny model otherwise pads its
///   answer with made-up fields, and the customer pays for those tokens);
/// - compact separators, so no whitespace runs between JSON tokens.
///
/// Keys keep the caller's declaration order (serde_json is built with `preserve_order`).
pub(super) fn for_grammar(schema: &Value) -> Value {
    let mut schema = schema.clone();
    close_objects(&mut schema, false);
    if let Value::Object(map) = &mut schema {
        map.insert(
            "x-guidance".into(),
            json!({"whitespace_flexible": false, "item_separator": ",", "key_separator": ":", "coerce_one_of": true}),
        );
    }
    schema
}

const SCHEMA_MAPS: [&str; 5] = ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"];
const SCHEMA_LISTS: [&str; 4] = ["anyOf", "oneOf", "prefixItems", "items"];
const SCHEMA_VALUES: [&str; 5] = ["items", "additionalProperties", "additionalItems", "contains", "not"];

fn close_objects(schema: &mut Value, allof_branch: bool) {
    let Value::Object(map) = schema else { return };
    if !allof_branch && can_close(map) {
        map.insert("additionalProperties".into(), Value::Bool(false));
    }
    for key in SCHEMA_MAPS {
        if let Some(Value::Object(children)) = map.get_mut(key) {
            children.values_mut().for_each(|child| close_objects(child, false));
        }
    }
    for key in SCHEMA_LISTS {
        if let Some(Value::Array(children)) = map.get_mut(key) {
            children.iter_mut().for_each(|child| close_objects(child, false));
        }
    }
    for key in SCHEMA_VALUES {
        if let Some(child @ Value::Object(_)) = map.get_mut(key) {
            close_objects(child, false);
        }
    }
    // The branches of an allOf each see the whole object: closing one would forbid the keys that
    // another branch names.
    if let Some(Value::Array(children)) = map.get_mut("allOf") {
        children.iter_mut().for_each(|child| close_objects(child, true));
    }
}

/// Closing is only safe where this schema alone decides which keys exist.
fn can_close(map: &Map<String, Value>) -> bool {
    let Some(Value::Object(properties)) = map.get("properties") else { return false };
    let open_keywords = ["additionalProperties", "patternProperties", "unevaluatedProperties", "allOf", "anyOf", "oneOf", "$ref", "if", "dependentSchemas", "dependencies"];
    if open_keywords.iter().any(|k| map.contains_key(*k)) {
        return false;
    }
    let required_all_named = match map.get("required") {
        Some(Value::Array(required)) => required.iter().all(|r| r.as_str().is_some_and(|name| properties.contains_key(name))),
        _ => true,
    };
    let min_properties_reachable =
        map.get("minProperties").and_then(Value::as_u64).is_none_or(|min| min <= properties.len() as u64);
    required_all_named && min_properties_reachable
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closes_named_objects_and_keeps_open_ones() {
        let schema = json!({
            "type": "object",
            "properties": {"a": {"type": "object", "properties": {"b": {"type": "integer"}}}, "m": {"type": "object"}},
        });
        let out = for_grammar(&schema);
        assert_eq!(out["additionalProperties"], json!(false));
        assert_eq!(out["properties"]["a"]["additionalProperties"], json!(false));
        assert!(out["properties"]["m"].get("additionalProperties").is_none());
        assert_eq!(out["x-guidance"]["whitespace_flexible"], json!(false));
    }

    #[test]
    fn leaves_allof_branches_and_explicit_choices_alone() {
        let schema = json!({
            "allOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}],
            "properties": {"x": {"properties": {"y": {}}, "additionalProperties": true}},
        });
        let out = for_grammar(&schema);
        assert!(out["allOf"][0].get("additionalProperties").is_none());
        assert_eq!(out["properties"]["x"]["additionalProperties"], json!(true));
        assert!(out.get("additionalProperties").is_none(), "allOf beside properties keeps the object open");
    }

    #[test]
    fn required_key_outside_properties_keeps_object_open() {
        let out = for_grammar(&json!({"properties": {"a": {}}, "required": ["a", "b"]}));
        assert!(out.get("additionalProperties").is_none());
    }

    #[test]
    fn validator_rejects_bad_schema_and_bad_answers() {
        assert!(matches!(OutputValidator::new(&json!({"type": 12})), Err(Refusal::InvalidSchema(_))));
        let v = OutputValidator::new(&json!({"type": "object", "required": ["a"]})).expect("valid schema");
        assert!(v.check(r#"{"a":1}"#).is_ok());
        assert!(matches!(v.check("{}"), Err(OutputViolation::Schema { .. })));
        assert!(matches!(v.check("{"), Err(OutputViolation::NotJson(_))));
    }
}
