//! Keywords the engine does not implement, rewritten in the grammar's copy of a schema into ones it does,
//! so fewer schemas are refused. Each rewrite is exact or narrows: every document the rewritten schema
//! admits is valid against the original (which the second-layer validator still checks), never more.
//!
//! - `format` the validator does not check either (`int64`, `non-blank`, vendor formats): dropped, an
//!   annotation on both sides; `uri-reference`, `iri`, `iri-reference` become `uri` (every URI is one);
//! - `uniqueItems: true`: at most one item (one item is always unique), when the schema allows that;
//! - `dependencies`, `dependentRequired`, `dependentSchemas`: the trigger key made impossible when it is
//!   optional, or the dependency required outright when the key is;
//! - `not`: of nothing (`{}`) is nothing; of `required` keys forbids one of them (and non-objects, which
//!   `required` admits); of a `type` removes it; of a `pattern` that is one anchored character class
//!   (`^[…]+$`, `^[…]*$`) is a string with the complementary pattern (every non-string passes `pattern`,
//!   so none passes its negation);
//! - `if`/`then`/`else`: the `if` branch taken, i.e. `allOf: [if, then]`;
//! - `propertyNames` every declared key satisfies: the object closed to its declared keys;
//! - a `pattern` with `^`, `$` or `\b` inside it, which the engine cannot compile: those assertions made
//!   never to match (`pattern.rs`);
//! - overlapping `patternProperties`, which the engine refuses: a pattern naming one key exactly becomes
//!   that key's property, exactly.
//!
//! What none of these covers is left in place, and the engine refuses it as before.

use serde_json::{json, Map, Value};

use super::paths;

/// Formats llguidance implements.
const ENGINE_FORMATS: [&str; 10] = ["date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid", "uri"];
/// Formats the validator checks (in some draft); any other is an annotation to it, and may be dropped.
const VALIDATOR_FORMATS: [&str; 19] = [
    "date",
    "date-time",
    "duration",
    "email",
    "hostname",
    "idn-email",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "iri",
    "iri-reference",
    "json-pointer",
    "regex",
    "relative-json-pointer",
    "time",
    "uri",
    "uri-reference",
    "uri-template",
    "uuid",
];
/// Formats that admit every `uri` (a URI is a URI reference, and an IRI).
const WIDER_THAN_URI: [&str; 3] = ["uri-reference", "iri", "iri-reference"];

/// Keywords whose values are maps of subschemas in a positive position (a narrower child narrows the whole).
const MAPS: [&str; 4] = ["properties", "patternProperties", "$defs", "definitions"];
const LISTS: [&str; 5] = ["allOf", "anyOf", "oneOf", "prefixItems", "items"];
const VALUES: [&str; 4] = ["items", "additionalProperties", "additionalItems", "contains"];

/// Rewrites, in place, every unimplemented keyword this module knows how to narrow (see the module's list).
pub(super) fn narrow(schema: &mut Value) {
    let root = schema.clone();
    visit(schema, &root, 0);
}

/// How deep the walk goes: far past any real schema, and a bound for a document built to be deep.
const MAX_DEPTH: usize = 64;

fn visit(node: &mut Value, root: &Value, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    if let Value::Object(map) = node {
        rewrite(map, root);
        if map.contains_key("not") && not_of_nothing(map) {
            *node = Value::Bool(false);
            return;
        }
    }
    let Value::Object(map) = node else { return };
    for key in MAPS {
        if let Some(Value::Object(children)) = map.get_mut(key) {
            children.values_mut().for_each(|c| visit(c, root, depth + 1));
        }
    }
    for key in LISTS {
        if let Some(Value::Array(children)) = map.get_mut(key) {
            children.iter_mut().for_each(|c| visit(c, root, depth + 1));
        }
    }
    for key in VALUES {
        if let Some(child @ Value::Object(_)) = map.get_mut(key) {
            visit(child, root, depth + 1);
        }
    }
}

fn rewrite(map: &mut Map<String, Value>, root: &Value) {
    format(map);
    unique_items(map);
    dependencies(map);
    if_then_else(map);
    not(map);
    property_names(map, root);
    pattern(map);
    literal_patterns(map);
}

/// Among two or more `patternProperties`, a pattern that names one key exactly (`^_execute_page_action$`)
/// becomes that key's property (beside an existing property of that name, both must hold: `allOf`). The
/// engine requires patterns to be disjoint, and applies the patterns a named property matches itself.
fn literal_patterns(map: &mut Map<String, Value>) {
    let Some(Value::Object(patterns)) = map.get("patternProperties") else { return };
    if patterns.len() < 2 {
        return;
    }
    let literals: Vec<(String, String)> = patterns.keys().filter_map(|p| literal_key(p).map(|key| (p.clone(), key))).collect();
    for (pattern, key) in literals {
        let Some(Value::Object(patterns)) = map.get_mut("patternProperties") else { return };
        let Some(schema) = patterns.remove(&pattern) else { continue };
        let Value::Object(properties) = map.entry("properties").or_insert_with(|| json!({})) else { return };
        let merged = match properties.remove(&key) {
            Some(existing) => json!({"allOf": [existing, schema]}),
            None => schema,
        };
        properties.insert(key, merged);
    }
}

/// The one string an anchored pattern of plain characters matches: `^a\.b$` is `a.b`.
fn literal_key(pattern: &str) -> Option<String> {
    let inner = pattern.strip_prefix('^')?.strip_suffix('$')?;
    let mut key = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(escaped) if !escaped.is_alphanumeric() => key.push(escaped),
                _ => return None,
            },
            '.' | '^' | '$' | '*' | '+' | '?' | '(' | ')' | '[' | ']' | '{' | '}' | '|' => return None,
            plain => key.push(plain),
        }
    }
    Some(key)
}

fn pattern(map: &mut Map<String, Value>) {
    if let Some(narrowed) = map.get("pattern").and_then(Value::as_str).and_then(super::pattern::narrowed) {
        map.insert("pattern".into(), Value::String(narrowed));
    }
}

fn format(map: &mut Map<String, Value>) {
    let Some(Value::String(name)) = map.get("format") else { return };
    if ENGINE_FORMATS.contains(&name.as_str()) {
        return;
    }
    if WIDER_THAN_URI.contains(&name.as_str()) {
        map.insert("format".into(), json!("uri"));
    } else if !VALIDATOR_FORMATS.contains(&name.as_str()) {
        map.remove("format");
    }
}

fn unique_items(map: &mut Map<String, Value>) {
    match map.get("uniqueItems") {
        Some(Value::Bool(false)) => {
            map.remove("uniqueItems");
        }
        Some(Value::Bool(true)) if map.get("minItems").and_then(Value::as_u64).unwrap_or(0) <= 1 => {
            let max = map.get("maxItems").and_then(Value::as_u64).map_or(1, |m| m.min(1));
            map.insert("maxItems".into(), json!(max));
            map.remove("uniqueItems");
        }
        _ => {}
    }
}

fn required_keys(map: &Map<String, Value>) -> Vec<String> {
    map.get("required")
        .and_then(Value::as_array)
        .map_or_else(Vec::new, |r| r.iter().filter_map(|k| k.as_str().map(str::to_owned)).collect())
}

fn forbid(map: &mut Map<String, Value>, key: &str) {
    if let Value::Object(properties) = map.entry("properties").or_insert_with(|| json!({})) {
        properties.insert(key.to_owned(), Value::Bool(false));
    }
}

fn all_of(map: &mut Map<String, Value>, schema: Value) {
    // A malformed allOf (not an array) is left alone: the validator refuses the schema anyway.
    if let Value::Array(all) = map.entry("allOf").or_insert_with(|| json!([])) {
        all.push(schema);
    }
}

/// `{key: [names]}` (required together) or `{key: schema}` (a schema the object must then match).
fn dependencies(map: &mut Map<String, Value>) {
    let mut triggers = Map::new();
    for keyword in ["dependencies", "dependentRequired", "dependentSchemas"] {
        match map.get(keyword) {
            Some(Value::Object(deps)) => triggers.extend(deps.clone()),
            Some(_) => return,
            None => {}
        }
    }
    if triggers.is_empty() {
        return;
    }
    let required = required_keys(map);
    for (key, dependency) in triggers {
        if !required.contains(&key) {
            forbid(map, &key);
            continue;
        }
        match dependency {
            Value::Array(names) => all_of(map, json!({"required": names})),
            schema => all_of(map, schema),
        }
    }
    for keyword in ["dependencies", "dependentRequired", "dependentSchemas"] {
        map.remove(keyword);
    }
}

fn if_then_else(map: &mut Map<String, Value>) {
    let Some(condition) = map.remove("if") else {
        // `then`/`else` without `if` do nothing.
        map.remove("then");
        map.remove("else");
        return;
    };
    map.remove("else");
    all_of(map, condition);
    if let Some(then) = map.remove("then") {
        all_of(map, then);
    }
}

fn not_of_nothing(map: &Map<String, Value>) -> bool {
    matches!(map.get("not"), Some(Value::Object(n)) if n.keys().all(|k| !is_constraint(k)))
        || matches!(map.get("not"), Some(Value::Bool(true)))
}

/// Keywords that say nothing about validity.
fn is_constraint(key: &str) -> bool {
    !paths::ANNOTATIONS.contains(&key)
}

/// `not: {pattern: "^[C]+$"}` (or `*`): the complementary pattern, when `pattern` names one anchored
/// character class. A string fails `^[C]+$` when it is empty or holds a character outside the class;
/// it fails `^[C]*$` when it holds such a character.
fn negated_class_pattern(pattern: &str) -> Option<String> {
    let body = pattern.strip_prefix("^[")?;
    let (class, repeat) = if let Some(class) = body.strip_suffix("]+$") { (class, '+') } else { (body.strip_suffix("]*$")?, '*') };
    // One class only: no unescaped bracket inside it.
    let mut escaped = false;
    for c in class.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '[' | ']' => return None,
            _ => {}
        }
    }
    if class.is_empty() || escaped {
        return None;
    }
    let outside = match class.strip_prefix('^') {
        Some(positive) if !positive.is_empty() => format!("[{positive}]"),
        Some(_) => return None,
        None => format!("[^{class}]"),
    };
    let some_outside = format!("[\\s\\S]*{outside}[\\s\\S]*");
    Some(if repeat == '+' { format!("^(?:|{some_outside})$") } else { format!("^{some_outside}$") })
}

fn not(map: &mut Map<String, Value>) {
    let Some(Value::Object(negated)) = map.get("not") else { return };
    let keys: Vec<&str> = negated.keys().map(String::as_str).filter(|k| is_constraint(k)).collect();
    match keys.as_slice() {
        ["required"] => {
            // Not all of these keys: one of them the object does not require is forbidden.
            let names = required_keys(negated);
            let required = required_keys(map);
            if let Some(free) = names.iter().find(|n| !required.contains(n)).cloned() {
                if objects_only(map) {
                    map.remove("not");
                    forbid(map, &free);
                }
            }
        }
        ["anyOf"] | ["allOf"] => {
            // Not any of {required: [..]}: each forbidden; not all: one forbidden.
            let any = keys == ["anyOf"];
            let Some(branches) = negated.get(keys[0]).and_then(Value::as_array) else { return };
            let groups: Option<Vec<Vec<String>>> = branches
                .iter()
                .map(|b| b.as_object().filter(|b| b.keys().all(|k| k == "required" || !is_constraint(k))).map(required_keys))
                .collect();
            let Some(groups) = groups else { return };
            let required = required_keys(map);
            let mut forbidden = Vec::new();
            for group in &groups {
                match group.iter().find(|n| !required.contains(n)) {
                    Some(free) => forbidden.push(free.clone()),
                    None if any => return,
                    None => {}
                }
                if !any && !forbidden.is_empty() {
                    break;
                }
            }
            if forbidden.is_empty() || !objects_only(map) {
                return;
            }
            map.remove("not");
            forbidden.iter().for_each(|k| forbid(map, k));
        }
        ["pattern"] => {
            let Some(complement) = negated.get("pattern").and_then(Value::as_str).and_then(negated_class_pattern) else { return };
            if map.contains_key("pattern") {
                return;
            }
            match types_of(map.get("type")) {
                Some(types) if !types.iter().any(|t| t == "string") => return,
                _ => {}
            }
            map.remove("not");
            map.insert("type".into(), json!("string"));
            map.insert("pattern".into(), json!(complement));
        }
        ["type"] => {
            let Some(excluded) = types_of(negated.get("type")) else { return };
            let mut allowed = types_of(map.get("type")).unwrap_or_else(|| ALL_TYPES.iter().map(|t| (*t).to_owned()).collect());
            // "A number that is not an integer" has no type of its own: left as it is.
            if excluded.iter().any(|e| e == "integer") && allowed.iter().any(|t| t == "number") {
                return;
            }
            let excludes = |t: &String| excluded.contains(t) || (t == "integer" && excluded.iter().any(|e| e == "number"));
            allowed.retain(|t| !excludes(t));
            if allowed.is_empty() {
                return;
            }
            map.remove("not");
            map.insert("type".into(), json!(allowed));
        }
        _ => {}
    }
}

const ALL_TYPES: [&str; 7] = ["null", "boolean", "object", "array", "string", "number", "integer"];

fn types_of(value: Option<&Value>) -> Option<Vec<String>> {
    match value? {
        Value::String(t) => Some(vec![t.clone()]),
        Value::Array(ts) => ts.iter().map(|t| t.as_str().map(str::to_owned)).collect(),
        _ => None,
    }
}

/// Makes the schema admit objects only (a negated `required` rejects every non-object); false when it
/// admits no object at all.
fn objects_only(map: &mut Map<String, Value>) -> bool {
    match types_of(map.get("type")) {
        Some(types) if !types.iter().any(|t| t == "object") => false,
        _ => {
            map.insert("type".into(), json!("object"));
            true
        }
    }
}

/// `propertyNames` every declared key meets, on an object that can be closed to those keys.
fn property_names(map: &mut Map<String, Value>, root: &Value) {
    let Some(names) = map.get("propertyNames").cloned() else { return };
    let names = match names.get("$ref").and_then(Value::as_str).and_then(paths::pointer_path) {
        Some(path) => paths::node_at(root, &path).cloned().unwrap_or(Value::Bool(false)),
        None => names,
    };
    if names == json!({"type": "string"}) || names == Value::Bool(true) || names == json!({}) {
        map.remove("propertyNames");
        return;
    }
    let Ok(check) = jsonschema::validator_for(&names) else { return };
    let declared: Vec<String> = map.get("properties").and_then(Value::as_object).map_or_else(Vec::new, |p| p.keys().cloned().collect());
    if map.contains_key("unevaluatedProperties")
        || !declared.iter().all(|k| check.is_valid(&json!(k)))
        || !required_keys(map).iter().all(|k| declared.contains(k))
    {
        return;
    }
    // Only the declared keys remain possible, and each has a name the schema allows.
    map.remove("propertyNames");
    map.remove("patternProperties");
    map.insert("additionalProperties".into(), Value::Bool(false));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn narrowed(schema: Value) -> Value {
        let mut out = schema;
        narrow(&mut out);
        out
    }

    #[test]
    fn formats_the_validator_ignores_are_dropped_and_uri_references_become_uris() {
        let out = narrowed(json!({"properties": {"a": {"format": "int64"}, "b": {"format": "uri-reference"}, "c": {"format": "regex"}}}));
        assert_eq!(out["properties"]["a"], json!({}));
        assert_eq!(out["properties"]["b"]["format"], "uri");
        assert_eq!(out["properties"]["c"]["format"], "regex", "the validator checks it: left for the engine to refuse");
    }

    #[test]
    fn a_pattern_naming_one_key_becomes_its_property() {
        let command = json!({"type": "object"});
        let out = narrowed(json!({"properties": {"b": {"minProperties": 1}}, "patternProperties": {
            ".*": command, "^_execute_page_action$": command, "^b$": {"maxProperties": 3}, "^a\\.b$": command, "^c+$": command,
        }}));
        assert_eq!(out["patternProperties"], json!({".*": command, "^c+$": command}), "{out}");
        assert_eq!(out["properties"]["_execute_page_action"], command);
        assert_eq!(out["properties"]["a.b"], command);
        assert_eq!(out["properties"]["b"], json!({"allOf": [{"minProperties": 1}, {"maxProperties": 3}]}), "both must hold");
        let alone = json!({"patternProperties": {"^only$": command}});
        assert_eq!(narrowed(alone.clone()), alone, "one pattern overlaps nothing");
        assert_eq!(literal_key(r"^a\$"), None);
        assert_eq!(literal_key(r"^\d$"), None);
    }

    #[test]
    fn a_pattern_with_inner_anchors_is_narrowed() {
        let out = narrowed(json!({"type": "string", "pattern": r"^(?:(?:^[\*]|[a-z]+)\.)*[a-z]+$"}));
        assert!(!out["pattern"].as_str().unwrap().contains("^["), "{out}");
    }

    #[test]
    fn unique_items_allow_one_item() {
        assert_eq!(narrowed(json!({"type": "array", "uniqueItems": true})), json!({"type": "array", "maxItems": 1}));
        assert_eq!(narrowed(json!({"uniqueItems": false})), json!({}));
        let two = json!({"uniqueItems": true, "minItems": 2});
        assert_eq!(narrowed(two.clone()), two, "cannot be narrowed");
    }

    #[test]
    fn dependencies_forbid_an_optional_trigger_and_require_after_a_required_one() {
        let out = narrowed(json!({"required": ["a"], "dependencies": {"a": ["b"], "c": {"required": ["d"]}}}));
        assert_eq!(out["allOf"], json!([{"required": ["b"]}]));
        assert_eq!(out["properties"]["c"], json!(false));
        assert!(out.get("dependencies").is_none());
    }

    #[test]
    fn negations_become_what_the_engine_knows() {
        assert_eq!(narrowed(json!({"properties": {"x": {"not": {}, "description": "gone"}}}))["properties"]["x"], json!(false));
        let out = narrowed(json!({"anyOf": [{"required": ["a"]}, {"not": {"required": ["a"]}}]}));
        assert_eq!(out["anyOf"][1], json!({"type": "object", "properties": {"a": false}}));
        let out = narrowed(json!({"not": {"anyOf": [{"required": ["a"]}, {"required": ["b"]}]}}));
        assert_eq!(out["properties"], json!({"a": false, "b": false}));
        assert_eq!(narrowed(json!({"type": ["string", "null"], "not": {"type": "null"}}))["type"], json!(["string"]));
        let pattern = json!({"not": {"pattern": "^x"}});
        assert_eq!(narrowed(pattern.clone()), pattern, "left for the engine to refuse");
    }

    #[test]
    fn a_negated_character_class_becomes_its_complement() {
        // The grammar's pattern is then narrowed further by `pattern.rs`; what it admits is checked here.
        let admits = |pattern: &Value, text: &str| jsonschema::validator_for(&json!({"pattern": pattern})).unwrap().is_valid(&json!(text));
        let out = narrowed(json!({"type": "string", "not": {"pattern": "^[\\.\\s]+$"}}));
        assert!(out["type"] == "string" && out.get("not").is_none(), "{out}");
        assert!(admits(&out["pattern"], "") && admits(&out["pattern"], "a. ") && !admits(&out["pattern"], ". ."), "{out}");
        let out = narrowed(json!({"not": {"pattern": "^[^a-z]*$"}}));
        assert_eq!(out["type"], "string");
        assert!(admits(&out["pattern"], "1a2") && !admits(&out["pattern"], "123") && !admits(&out["pattern"], ""), "{out}");
        // The complement admits exactly the strings the original rejects.
        let original = jsonschema::validator_for(&json!({"pattern": "^[ab]+$"})).unwrap();
        let complement = jsonschema::validator_for(&json!({"pattern": negated_class_pattern("^[ab]+$").unwrap()})).unwrap();
        for text in ["", "ab", "abc", "c", "ba", "a\nb", "\n"] {
            assert_ne!(complement.is_valid(&json!(text)), original.is_valid(&json!(text)), "{text:?}");
        }
        for kept in [json!({"type": "integer", "not": {"pattern": "^[a]+$"}}), json!({"pattern": "^b", "not": {"pattern": "^[a]+$"}})] {
            assert_eq!(narrowed(kept.clone()), kept, "no string to constrain, or a second pattern: left alone");
        }
        for unsupported in ["^[a]+", "[a]+$", "^[a][b]+$", "^(?:[a])+$"] {
            assert_eq!(negated_class_pattern(unsupported), None, "{unsupported}");
        }
    }

    #[test]
    fn if_then_takes_the_if_branch() {
        let out = narrowed(json!({"if": {"properties": {"t": {"const": 1}}}, "then": {"required": ["a"]}, "else": {"required": ["b"]}}));
        assert_eq!(out, json!({"allOf": [{"properties": {"t": {"const": 1}}}, {"required": ["a"]}]}));
    }

    #[test]
    fn property_names_close_an_object_whose_keys_all_fit() {
        let out =
            narrowed(json!({"properties": {"ab": {}}, "propertyNames": {"$ref": "#/$defs/k"}, "$defs": {"k": {"pattern": "^[a-z]+$"}}}));
        assert_eq!(out["additionalProperties"], json!(false));
        assert!(out.get("propertyNames").is_none());
        assert!(narrowed(json!({"propertyNames": {"type": "string"}})).get("propertyNames").is_none());
    }
}
