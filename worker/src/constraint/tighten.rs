//! The grammar's copy of a schema, narrowed so that everything the engine admits is an answer the
//! validator (and the caller's JSON parser) accepts, and short. Each change keeps a subset of the
//! caller's schema, never more:
//!
//! - **closed objects**: an object that names its `properties` and says nothing about other keys gets
//!   `additionalProperties: false`, so the model cannot invent keys (a tiny model otherwise pads its
//!   answer with made-up fields, and the customer pays for those tokens);
//! - **finite numbers**: a `number` without a bound on one side gets one at ±10¹⁸. Unbounded, the engine
//!   admits exponents such as `1e999`, which no 64-bit float holds: the validator (and most JSON
//!   parsers) cannot read the answer. Bounded, numbers are written without exponents. Bounds beyond
//!   ±10¹⁸ are brought to it, where the engine's range compiler stops;
//! - **real calendar dates and times**: `date`, `date-time` and `time` exclude February 29th and the
//!   leap second `:60`, which the engine's format admits and the validator accepts only in leap years
//!   and at 23:59 UTC.
//!
//! Found by `worker/tests/jsonschemabench.rs`, which walks each grammar at random and validates every
//! document it completes.

use serde_json::{json, Map, Value};

use std::collections::BTreeSet;

use super::paths::{self, Path};

/// The largest magnitude a generated number may have: far beyond the quantities answers hold, and within
/// what llguidance's range compiler handles (it works in 64-bit integers).
const NUMBER_LIMIT: f64 = 1e18;

/// Keywords by which an object schema speaks about keys.
const KEY_KEYWORDS: [&str; 4] = ["properties", "patternProperties", "additionalProperties", "required"];
/// Every JSON type, for a schema that names none.
const ALL_TYPES: [&str; 6] = ["null", "boolean", "object", "array", "string", "number"];
/// Keywords that constrain a value; anything else (`description`, `examples`, a vendor's `x-…`) only
/// annotates it.
const CONSTRAINTS: [&str; 37] = [
    "type",
    "enum",
    "const",
    "$ref",
    "$dynamicRef",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "properties",
    "patternProperties",
    "additionalProperties",
    "unevaluatedProperties",
    "required",
    "minProperties",
    "maxProperties",
    "propertyNames",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "items",
    "prefixItems",
    "additionalItems",
    "unevaluatedItems",
    "contains",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
];

fn constrains(key: &str) -> bool {
    CONSTRAINTS.contains(&key) || ["exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minContains", "maxContains"].contains(&key)
}
/// Where the levels of the bounded "any value" are defined in the grammar's copy.
const BOUNDED_ANY: &str = "runaii_any_";
/// How deep a value the schema leaves free may nest in an answer.
const ANY_DEPTH: usize = 4;

/// Narrows the grammar's copy of a schema in place (see the module's list).
pub(super) fn tighten(schema: &mut Value) {
    let shared = shared_targets(schema);
    close(schema, false, &mut Vec::new(), &shared);
    for path in paths::schema_paths(schema) {
        let company = company(schema, &path);
        if let Some(Value::Object(map)) = paths::node_at_mut(schema, &path) {
            bound_any(map, company);
            bound_numbers(map);
            exact_formats(map);
        }
    }
    if let Value::Object(root) = schema {
        if let Value::Object(defs) = root.entry("$defs").or_insert_with(|| json!({})) {
            defs.extend(bounded_any_levels());
        }
    }
}

/// The bounded "any value": any JSON nested at most [`ANY_DEPTH`] deep, numbers within the limit. One
/// definition per level, each referring to the next: a recursive definition would make the engine
/// intersect it with itself without end wherever two such values meet (`allOf`, siblings).
fn bounded_any_levels() -> Vec<(String, Value)> {
    (0..=ANY_DEPTH)
        .map(|level| {
            let mut any = if level == 0 {
                json!({"type": ["null", "boolean", "string", "number"]})
            } else {
                let inner = json!({"$ref": format!("#/$defs/{BOUNDED_ANY}{}", level - 1)});
                json!({"type": ALL_TYPES, "items": inner, "additionalProperties": inner})
            };
            if let Value::Object(map) = &mut any {
                bound_numbers(map);
            }
            (format!("{BOUNDED_ANY}{level}"), any)
        })
        .collect()
}

fn any_value() -> Value {
    json!({"$ref": format!("#/$defs/{BOUNDED_ANY}{ANY_DEPTH}")})
}

/// What the schemas the engine intersects with the one at `path` say: about object keys, about array
/// items. Its co-members of an `allOf`, and whatever stands beside the combinator it is a branch of; a
/// reference or a combinator among them may say anything.
#[derive(Debug, Default, Clone, Copy)]
struct Company {
    names_keys: bool,
    names_items: bool,
}

const OPAQUE: [&str; 4] = ["$ref", "allOf", "anyOf", "oneOf"];

fn company(root: &Value, path: &[String]) -> Company {
    let [parent_path @ .., combinator, index] = path else { return Company::default() };
    if !["allOf", "anyOf", "oneOf"].contains(&combinator.as_str()) {
        return Company::default();
    }
    let Some(parent) = paths::node_at(root, parent_path).and_then(Value::as_object) else { return Company::default() };
    let mut others: Vec<&Map<String, Value>> = vec![parent];
    let mut opaque = parent.keys().any(|k| k != combinator && OPAQUE.contains(&k.as_str()));
    if combinator == "allOf" {
        for (i, member) in parent.get("allOf").and_then(Value::as_array).into_iter().flatten().enumerate() {
            match member {
                _ if i.to_string() == *index => {}
                Value::Object(map) => others.push(map),
                _ => opaque = true,
            }
        }
    }
    let any = |keys: &[&str]| {
        opaque
            || others.iter().enumerate().any(|(n, map)| {
                map.keys().any(|k| (n > 0 || k != combinator) && (keys.contains(&k.as_str()) || OPAQUE.contains(&k.as_str())))
            })
    };
    Company {
        names_keys: any(&["properties", "patternProperties", "additionalProperties", "required"]),
        names_items: any(&["items", "prefixItems", "additionalItems"]),
    }
}

/// `shares_object`: the schema is a branch of a combinator whose other parts (siblings, other `allOf`
/// branches) also name keys; closing it would forbid those. `shared` are the reference targets in that
/// position (see [`shared_targets`]); `path` is where `schema` stands.
fn close(schema: &mut Value, shares_object: bool, path: &mut Path, shared: &BTreeSet<Path>) {
    let Value::Object(map) = schema else { return };
    if !shares_object && !shared.contains(path) && can_close(map) {
        map.insert("additionalProperties".into(), Value::Bool(false));
    }
    let names_keys = KEY_KEYWORDS.iter().any(|k| map.contains_key(*k));
    // `propertyNames` constrains key strings: nothing to close there.
    for (keyword, steps, child) in paths::subschemas_mut(map, true).into_iter().filter(|(k, _, _)| *k != "propertyNames") {
        // The branches of an allOf each see the whole object: closing one would forbid the keys that
        // another branch names; those of an anyOf or oneOf, the keys named beside them.
        let shares = match keyword {
            "allOf" => true,
            "anyOf" | "oneOf" => names_keys,
            _ => false,
        };
        path.extend(steps.iter().cloned());
        close(child, shares, path, shared);
        path.truncate(path.len() - steps.len());
    }
}

/// Reference targets that share their object with other schemas naming keys: the target of an `allOf`
/// member's reference, of a reference beside keywords naming keys or beside combinators, of an `anyOf`
/// or `oneOf` branch's reference beside named keys, and what such a target itself only refers to.
/// Closing one would forbid the keys the others name (a runner configuration that extends a test
/// configuration by `allOf` would lose every key of its own).
fn shared_targets(root: &Value) -> BTreeSet<Path> {
    let mut shared = BTreeSet::new();
    for path in paths::schema_paths(root) {
        let Some(Value::Object(map)) = paths::node_at(root, &path) else { continue };
        let beside = map.keys().any(|k| KEY_KEYWORDS.contains(&k.as_str()) || OPAQUE.contains(&k.as_str()) && k != "$ref");
        if beside {
            shared.extend(reference_of(map));
        }
        let names_keys = KEY_KEYWORDS.iter().any(|k| map.contains_key(*k));
        for combinator in ["allOf", "anyOf", "oneOf"] {
            if combinator != "allOf" && !names_keys {
                continue;
            }
            let members = map.get(combinator).and_then(Value::as_array).into_iter().flatten();
            shared.extend(members.filter_map(Value::as_object).filter_map(reference_of));
        }
    }
    // A shared target that is only a reference passes its object on.
    let mut pending: Vec<Path> = shared.iter().cloned().collect();
    while let Some(target) = pending.pop() {
        if let Some(next) = paths::node_at(root, &target).and_then(Value::as_object).and_then(reference_of) {
            if shared.insert(next.clone()) {
                pending.push(next);
            }
        }
    }
    shared
}

fn reference_of(map: &Map<String, Value>) -> Option<Path> {
    map.get("$ref").and_then(Value::as_str).and_then(paths::pointer_path)
}

/// Where a schema leaves values unconstrained (no `type`, no `items`, no `additionalProperties`, a `true`
/// subschema), it admits any JSON, numbers with any exponent among it: there the grammar gets the
/// bounded "any value" instead (`bounded_any_levels`).
///
/// The engine intersects a schema with its [`Company`], and cannot intersect recursive references, so
/// nothing is added that would meet a reference it did not meet before: a schema with a `$ref` or a
/// combinator gets nothing (its targets and branches are tightened where they stand), `items` and
/// `additionalProperties` only where no company speaks of them, and a `type` only where the schema
/// already constrains something.
fn bound_any(map: &mut Map<String, Value>, company: Company) {
    if OPAQUE.iter().any(|k| map.contains_key(*k)) {
        return;
    }
    let open = |v: Option<&Value>| v.is_none_or(|v| *v == Value::Bool(true));
    if !map.keys().any(|k| constrains(k)) {
        // `{}` (perhaps with a description): the bounded any value itself.
        map.clear();
        map.insert("$ref".into(), any_value()["$ref"].take());
        return;
    }
    if !["type", "enum", "const"].iter().any(|k| map.contains_key(*k)) {
        map.insert("type".into(), json!(ALL_TYPES));
    }
    let admits = |map: &Map<String, Value>, t: &str| match map.get("type") {
        Some(Value::String(name)) => name == t,
        Some(Value::Array(names)) => names.iter().any(|n| n == t),
        _ => false,
    };
    if !company.names_items && admits(map, "array") && !map.contains_key("prefixItems") && open(map.get("items")) {
        map.insert("items".into(), any_value());
    }
    if !company.names_keys && admits(map, "object") && open(map.get("additionalProperties")) {
        map.insert("additionalProperties".into(), any_value());
    }
    for key in ["properties", "patternProperties"] {
        if let Some(Value::Object(children)) = map.get_mut(key) {
            children.values_mut().filter(|v| **v == Value::Bool(true)).for_each(|v| *v = any_value());
        }
    }
    for key in ["prefixItems", "items"] {
        if let Some(Value::Array(children)) = map.get_mut(key) {
            children.iter_mut().filter(|v| **v == Value::Bool(true)).for_each(|v| *v = any_value());
        }
    }
}

/// Closing is only safe where this schema alone decides which keys exist.
fn can_close(map: &Map<String, Value>) -> bool {
    let Some(Value::Object(properties)) = map.get("properties") else { return false };
    let open_keywords = [
        "additionalProperties",
        "patternProperties",
        "unevaluatedProperties",
        "allOf",
        "anyOf",
        "oneOf",
        "$ref",
        "if",
        "dependentSchemas",
        "dependencies",
    ];
    if open_keywords.iter().any(|k| map.contains_key(*k)) {
        return false;
    }
    let required_all_named = match map.get("required") {
        Some(Value::Array(required)) => required.iter().all(|r| r.as_str().is_some_and(|name| properties.contains_key(name))),
        _ => true,
    };
    let min_properties_reachable = map.get("minProperties").and_then(Value::as_u64).is_none_or(|min| min <= properties.len() as u64);
    required_all_named && min_properties_reachable
}

/// Keeps numbers within ±[`NUMBER_LIMIT`]: a `number` without a bound gets one, and a bound beyond the
/// limit (`integer`s included) is brought to it. llguidance builds range regexes in 64-bit integers and
/// fails on larger bounds (a minimum of -2⁶³ even panics inside it); each change only narrows.
fn bound_numbers(map: &mut Map<String, Value>) {
    let names = |t: &str| match map.get("type") {
        Some(Value::String(name)) => name == t,
        Some(Value::Array(names)) => names.iter().any(|n| n == t),
        _ => false,
    };
    let (number, integer) = (names("number"), names("integer"));
    if !number && !integer {
        return;
    }
    // As an integer where integers are allowed: `1e18` is a float in JSON, which an integer bound is not.
    let limit = |sign: f64| if integer && !number { json!(sign as i64 * 1_000_000_000_000_000_000) } else { json!(sign * NUMBER_LIMIT) };
    for (keys, sign) in [(["minimum", "exclusiveMinimum"], -1.0), (["maximum", "exclusiveMaximum"], 1.0)] {
        let bounds: Vec<f64> = keys.iter().filter_map(|k| map.get(*k).and_then(Value::as_f64)).collect();
        if bounds.is_empty() && number {
            map.insert(keys[0].into(), limit(sign));
        }
        for key in keys {
            if map.get(key).and_then(Value::as_f64).is_some_and(|b| b * sign > NUMBER_LIMIT) {
                map.insert(key.into(), limit(sign));
            }
        }
    }
}

/// What the engine's format regexes leave out and the validator checks: calendar dates without
/// February 29th and the leap second; the lengths of an email address (64 before the `@`, 254 in all)
/// and of a host name (253). A pattern is anchored at the start only: the format anchors the whole.
fn exact_formats(map: &mut Map<String, Value>) {
    const DATE: &str = r"[0-9]{4}-(?:(?:0[13-9]|1[0-2])-[0-9]{2}|02-(?:[01][0-9]|2[0-8]))";
    let (pattern, max_length) = match map.get("format").and_then(Value::as_str) {
        Some("date") => (format!("^{DATE}"), None),
        Some("date-time") => (format!("^{DATE}[Tt][0-9]{{2}}:[0-9]{{2}}:[0-5][0-9]"), None),
        Some("time") => ("^[0-9]{2}:[0-9]{2}:[0-5][0-9]".to_owned(), None),
        Some("email") => ("^[^@]{1,64}@".to_owned(), Some(254)),
        Some("hostname") => (String::new(), Some(253)),
        _ => return,
    };
    if let Some(limit) = max_length {
        let current = map.get("maxLength").and_then(Value::as_u64);
        map.insert("maxLength".into(), json!(current.map_or(limit, |c| c.min(limit))));
    }
    if pattern.is_empty() {
        return;
    }
    if map.contains_key("pattern") {
        // Both patterns must hold.
        let all = map.entry("allOf").or_insert_with(|| json!([]));
        if let Value::Array(all) = all {
            all.push(json!({"pattern": pattern}));
        }
    } else {
        map.insert("pattern".into(), Value::String(pattern));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tightened(schema: &Value) -> Value {
        let mut out = schema.clone();
        tighten(&mut out);
        out
    }

    #[test]
    fn closes_named_objects_and_keeps_open_ones() {
        let schema = json!({
            "type": "object",
            "properties": {"a": {"type": "object", "properties": {"b": {"type": "integer"}}}, "m": {"type": "object"}},
        });
        let out = tightened(&schema);
        assert_eq!(out["additionalProperties"], json!(false));
        assert_eq!(out["properties"]["a"]["additionalProperties"], json!(false));
        assert_ne!(out["properties"]["m"]["additionalProperties"], json!(false));
    }

    #[test]
    fn leaves_allof_branches_and_explicit_choices_alone() {
        let schema = json!({
            "allOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}],
            "properties": {"x": {"properties": {"y": {}}, "additionalProperties": true}},
        });
        let out = tightened(&schema);
        assert_ne!(out["allOf"][0]["additionalProperties"], json!(false));
        assert_eq!(out["properties"]["x"]["additionalProperties"], any_value(), "an explicit `true` stays open, bounded");
        assert_ne!(out["additionalProperties"], json!(false), "allOf beside properties keeps the object open");
    }

    #[test]
    fn branches_beside_named_keys_stay_open() {
        let schema = json!({"properties": {"kind": {}}, "anyOf": [{"properties": {"a": {}}}], "oneOf": [{"properties": {"b": {}}}]});
        let out = tightened(&schema);
        assert_ne!(out["anyOf"][0]["additionalProperties"], json!(false), "closing it would forbid `kind`: {out}");
        let alone = tightened(&json!({"anyOf": [{"properties": {"a": {}}}]}));
        assert_eq!(alone["anyOf"][0]["additionalProperties"], json!(false));
    }

    #[test]
    fn a_target_extended_beside_other_keys_stays_open() {
        let schema = json!({
            "definitions": {
                "base": {"type": "object", "properties": {"a": {}}},
                "alias": {"$ref": "#/definitions/base2"},
                "base2": {"type": "object", "properties": {"d": {}}},
                "alone": {"type": "object", "properties": {"b": {}}},
            },
            "allOf": [{"$ref": "#/definitions/base"}, {"properties": {"c": {}}}],
            "properties": {"x": {"$ref": "#/definitions/alone"}, "y": {"$ref": "#/definitions/alias", "required": ["e"]}},
        });
        let out = tightened(&schema);
        assert_ne!(out["definitions"]["base"]["additionalProperties"], json!(false), "closing it would forbid `c`");
        assert_ne!(out["definitions"]["base2"]["additionalProperties"], json!(false), "through an alias, beside `required`");
        assert_eq!(out["definitions"]["alone"]["additionalProperties"], json!(false), "a plain reference's target closes");
    }

    #[test]
    fn required_key_outside_properties_keeps_object_open() {
        let out = tightened(&json!({"properties": {"a": {}}, "required": ["a", "b"]}));
        assert_ne!(out["additionalProperties"], json!(false));
    }

    #[test]
    fn unconstrained_values_become_the_bounded_any_value() {
        let out = tightened(&json!({"type": "object", "properties": {"free": {"description": "anything"}, "list": {"type": "array"}}}));
        assert_eq!(out["properties"]["free"], any_value());
        assert_eq!(out["properties"]["list"]["items"], any_value());
        let bounded = &out["$defs"][format!("{BOUNDED_ANY}{ANY_DEPTH}")];
        assert_eq!((&bounded["minimum"], &bounded["maximum"]), (&json!(-NUMBER_LIMIT), &json!(NUMBER_LIMIT)));
        let referenced = tightened(&json!({"$ref": "#/$defs/x", "$defs": {"x": {"type": "number"}}}));
        assert_eq!(referenced["$ref"], json!("#/$defs/x"), "a reference gets no siblings");
        assert_eq!(referenced["$defs"]["x"]["maximum"], json!(NUMBER_LIMIT), "its target is bounded");
    }

    #[test]
    fn numbers_get_finite_bounds_and_keep_their_own() {
        let out = tightened(&json!({"type": ["number", "null"], "exclusiveMinimum": 0}));
        assert!(out.get("minimum").is_none());
        assert_eq!(out["maximum"], json!(NUMBER_LIMIT));
        assert!(tightened(&json!({"type": "integer"})).get("maximum").is_none(), "integers have no exponents");
    }

    #[test]
    fn bounds_beyond_the_limit_are_brought_to_it() {
        let out = tightened(&json!({"type": "integer", "minimum": i64::MIN, "maximum": 7}));
        assert_eq!(out["minimum"], json!(-1_000_000_000_000_000_000_i64));
        assert_eq!(out["maximum"], json!(7));
        let out = tightened(&json!({"type": "number", "exclusiveMaximum": 1e30}));
        assert_eq!(out["exclusiveMaximum"], json!(NUMBER_LIMIT));
        assert_eq!(out["minimum"], json!(-NUMBER_LIMIT));
        let out = tightened(&json!({"type": "number", "minimum": 2e18}));
        assert_eq!(out["minimum"], json!(2e18), "a bound is never loosened");
    }

    #[test]
    fn calendar_formats_leave_out_leap_days_and_seconds() {
        let out = tightened(&json!({"type": "string", "format": "date-time"}));
        let pattern = jsonschema::validator_for(&json!({"pattern": out["pattern"]})).unwrap();
        let matches = |s: &str| pattern.is_valid(&json!(s));
        assert!(matches("2024-02-28T23:59:59Z") && matches("2024-12-31T23:59:59Z"));
        assert!(!matches("2024-02-29T10:00:00Z") && !matches("2024-06-30T23:59:60Z"));
        let both = tightened(&json!({"type": "string", "format": "date", "pattern": "^2"}));
        assert_eq!(both["pattern"], json!("^2"));
        assert!(both["allOf"][0]["pattern"].is_string());
    }
}
