//! Named properties that a `patternProperties` pattern repeats.
//!
//! A property named in `properties` must also match the schema of every pattern its name matches, and
//! llguidance intersects the two when it compiles the object: eagerly, resolving every reference on both
//! sides. Real schemas often give a key and a catch-all pattern the same schema (WashingtonPost's credits:
//! `"by"` and `"^[a-zA-Z0-9_]*"` both lists of authors or references), and there the intersection of two
//! `anyOf`s of recursive references alone exceeds the engine's compile budget. Where the property's schema
//! is the pattern's (annotations apart), the property becomes `true` in the grammar's copy: the engine
//! still applies the pattern's schema to it, so it admits exactly what it did.

use serde_json::Value;

use super::paths;
use super::pattern::engine_matches;

/// Makes `true` every named property whose schema the first pattern its name matches repeats.
pub(super) fn drop_repeated(schema: &mut Value) {
    for path in paths::schema_paths(schema) {
        let Some(Value::Object(map)) = paths::node_at_mut(schema, &path) else { continue };
        let Some(Value::Object(patterns)) = map.get("patternProperties") else { continue };
        let patterns: Vec<(String, Value)> = patterns.iter().map(|(p, s)| (p.clone(), without_annotations(s))).collect();
        let Some(Value::Object(properties)) = map.get_mut("properties") else { continue };
        for (name, property) in properties.iter_mut() {
            let first_match = patterns.iter().find(|(pattern, _)| engine_matches(pattern, name));
            if first_match.is_some_and(|(_, repeated)| *repeated == without_annotations(property)) {
                *property = Value::Bool(true);
            }
        }
    }
}

fn without_annotations(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !paths::ANNOTATIONS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), without_annotations(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_annotations).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_property_the_matching_pattern_repeats_is_left_to_the_pattern() {
        let authors = json!({"type": "array", "items": {"anyOf": [{"$ref": "#/$defs/author"}, {"$ref": "#/$defs/ref"}]}});
        let mut by = authors.clone();
        by["description"] = json!("The primary authors.");
        let mut schema = json!({"type": "object", "properties": {
            "by": by, "count": {"type": "integer"},
            "nested": {"properties": {"x": {"type": "string"}}, "patternProperties": {"^x$": {"type": "string", "title": "X"}}},
        }, "patternProperties": {"^[a-zA-Z0-9_]*": authors}});
        drop_repeated(&mut schema);
        assert_eq!(schema["properties"]["by"], json!(true), "{schema}");
        assert_eq!(schema["properties"]["count"], json!({"type": "integer"}), "a different schema: both must hold");
        assert_eq!(schema["properties"]["nested"]["properties"]["x"], json!(true), "annotations apart, the same");
    }

    #[test]
    fn a_pattern_that_does_not_match_the_name_changes_nothing() {
        let mut schema = json!({"properties": {"Name": {"type": "string"}}, "patternProperties": {"^[a-z]+$": {"type": "string"}}});
        let before = schema.clone();
        drop_repeated(&mut schema);
        assert_eq!(schema, before);
    }
}
