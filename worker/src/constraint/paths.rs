//! Where the subschemas of a schema document are: every position a keyword makes a schema, and every
//! place a local `$ref` points to (which may be anywhere in the document, not only under `$defs`).
//!
//! Positions under `not`, `if`, `then`, `else` and `dependencies` are left out: there a narrower schema
//! would admit more, not less, so nothing may be tightened inside them (the engine refuses them anyway).

use std::collections::{BTreeSet, HashSet};

use serde_json::{Map, Value};

/// Keywords whose values are maps of names to subschemas.
pub(super) const SCHEMA_MAPS: [&str; 5] = ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"];
/// Keywords whose values are maps of names to definitions, subschemas only where referred to.
const DEFINITIONS: [&str; 2] = ["$defs", "definitions"];
/// Keywords whose values are lists of subschemas.
const SCHEMA_LISTS: [&str; 5] = ["allOf", "anyOf", "oneOf", "prefixItems", "items"];
/// Keywords whose values are one subschema.
const SCHEMA_VALUES: [&str; 5] = ["items", "additionalProperties", "additionalItems", "contains", "propertyNames"];

/// A position in a document: object keys and array indexes, from the root.
pub(super) type Path = Vec<String>;

/// Every schema object's position, each once, parents before their children.
pub(super) fn schema_paths(root: &Value) -> Vec<Path> {
    let mut found = BTreeSet::new();
    let mut referenced = HashSet::new();
    let mut pending = vec![Vec::new()];
    while let Some(start) = pending.pop() {
        let Some(node) = node_at(root, &start) else { continue };
        let mut refs = Vec::new();
        walk(node, &mut start.clone(), &mut found, &mut refs);
        for path in refs.iter().filter_map(|r| pointer_path(r)) {
            if referenced.insert(path.clone()) {
                pending.push(path);
            }
        }
    }
    let mut paths: Vec<Path> = found.into_iter().collect();
    paths.sort_by_key(Vec::len);
    paths
}

fn walk<'a>(schema: &'a Value, path: &mut Path, found: &mut BTreeSet<Path>, refs: &mut Vec<&'a str>) {
    let Value::Object(map) = schema else { return };
    found.insert(path.clone());
    if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
        refs.push(reference);
    }
    for (_, steps, child) in subschemas(map, true) {
        path.extend(steps.iter().cloned());
        walk(child, path, found, refs);
        path.truncate(path.len() - steps.len());
    }
}

/// The subschemas directly below a schema object, each with the keyword it stands under and the steps
/// from the object to it (`$defs` and `definitions` only `with_definitions`).
pub(super) fn subschemas(map: &Map<String, Value>, with_definitions: bool) -> Vec<(&str, Path, &Value)> {
    let mut found = Vec::new();
    for (key, value) in map {
        let key = key.as_str();
        match value {
            Value::Object(children) if SCHEMA_MAPS.contains(&key) && (with_definitions || !DEFINITIONS.contains(&key)) => {
                found.extend(children.iter().map(|(name, child)| (key, vec![key.to_owned(), name.clone()], child)));
            }
            Value::Array(children) if SCHEMA_LISTS.contains(&key) => {
                found.extend(children.iter().enumerate().map(|(i, child)| (key, vec![key.to_owned(), i.to_string()], child)));
            }
            Value::Object(_) if SCHEMA_VALUES.contains(&key) => found.push((key, vec![key.to_owned()], value)),
            _ => {}
        }
    }
    found
}

/// As [`subschemas`], to change them.
pub(super) fn subschemas_mut(map: &mut Map<String, Value>, with_definitions: bool) -> Vec<(&str, Path, &mut Value)> {
    let mut found = Vec::new();
    for (key, value) in map {
        let key = key.as_str();
        // The kind is decided before `value` is borrowed as a child: a guard on a mutable binding would
        // keep it borrowed in the arms after it.
        if SCHEMA_MAPS.contains(&key) {
            if let Value::Object(children) = value {
                if with_definitions || !DEFINITIONS.contains(&key) {
                    found.extend(children.iter_mut().map(|(name, child)| (key, vec![key.to_owned(), name.clone()], child)));
                }
            }
        } else if value.is_array() {
            if let Value::Array(children) = value {
                if SCHEMA_LISTS.contains(&key) {
                    found.extend(children.iter_mut().enumerate().map(|(i, child)| (key, vec![key.to_owned(), i.to_string()], child)));
                }
            }
        } else if value.is_object() && SCHEMA_VALUES.contains(&key) {
            found.push((key, vec![key.to_owned()], value));
        }
    }
    found
}

/// Keywords that say nothing about validity.
pub(super) const ANNOTATIONS: [&str; 8] =
    ["title", "description", "$comment", "examples", "default", "deprecated", "readOnly", "writeOnly"];

/// Keywords whose subschemas apply to the same value as the schema they stand in (the others apply to
/// a property's or an item's value).
pub(super) const IN_PLACE: [&str; 4] = ["allOf", "anyOf", "oneOf", "dependentSchemas"];

pub(super) fn node_at<'a>(root: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(root, |node, step| match node {
        Value::Object(map) => map.get(step),
        Value::Array(items) => items.get(step.parse::<usize>().ok()?),
        _ => None,
    })
}

pub(super) fn node_at_mut<'a>(root: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    path.iter().try_fold(root, |node, step| match node {
        Value::Object(map) => map.get_mut(step),
        Value::Array(items) => items.get_mut(step.parse::<usize>().ok()?),
        _ => None,
    })
}

/// The path a local reference (`#`, `#/a/b~1c`) names; `None` for any other reference.
pub(super) fn pointer_path(reference: &str) -> Option<Path> {
    let pointer = percent_decode(reference.strip_prefix('#')?)?;
    if pointer.is_empty() {
        return Some(Vec::new());
    }
    let rest = pointer.strip_prefix('/')?;
    Some(rest.split('/').map(|step| step.replace("~1", "/").replace("~0", "~")).collect())
}

/// A path as a JSON pointer fragment, for messages.
pub(super) fn pointer(path: &[String]) -> String {
    path.iter().fold(String::from("#"), |mut out, step| {
        out.push('/');
        out.push_str(&step.replace('~', "~0").replace('/', "~1"));
        out
    })
}

/// `%xx` escapes in a URI fragment; `None` when one is malformed.
fn percent_decode(text: &str) -> Option<String> {
    if !text.contains('%') {
        return Some(text.to_owned());
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keywords_and_references_lead_to_schemas() {
        let schema = json!({
            "properties": {"a": {"$ref": "#/elsewhere/b%20c"}, "n": {"not": {"type": "string"}}},
            "elsewhere": {"b c": {"items": {"type": "integer"}}, "unused": {"type": "null"}},
        });
        let paths: Vec<String> = schema_paths(&schema).iter().map(|p| pointer(p)).collect();
        assert_eq!(paths, ["#", "#/elsewhere/b c", "#/properties/a", "#/properties/n", "#/elsewhere/b c/items"]);
    }

    #[test]
    fn pointers_are_decoded() {
        assert_eq!(pointer_path("#/a~1b/c~0d"), Some(vec!["a/b".to_owned(), "c~d".to_owned()]));
        assert_eq!(pointer_path("#"), Some(vec![]));
        assert_eq!(pointer_path("other.json#/a"), None);
    }
}
