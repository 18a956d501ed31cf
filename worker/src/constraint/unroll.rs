//! Recursion unrolled to a fixed depth, for the schemas the engine cannot compile recursive.
//!
//! llguidance resolves a `$ref` lazily, except where it must intersect the reference with something
//! beside it (sibling keywords, another `allOf` member, a property named both in `properties` and by a
//! `patternProperties` pattern). There it compiles the target on the spot, and if that target is the one
//! being compiled — a recursive definition that meets itself — it gives up. Real schemas do this: a
//! runner configuration whose `presets` are runner configurations, extending a test configuration whose
//! `presets` are test configurations.
//!
//! For those schemas only, the grammar's copy is made free of cycles: every definition on a cycle of
//! references is copied once per level `0..=DEPTH`. In the copy at level `i`, a reference that applies to
//! the same value (under `allOf`, `anyOf`, `oneOf`) stays at level `i`, one that applies to a property or
//! an item leads to level `i + 1`, and at the last level that one becomes `false`. The grammar then admits
//! the documents of the original in which a recursive definition nests at most [`DEPTH`] deep: a
//! narrowing, never a widening, and the engine intersects whatever it needs to.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};

use super::paths::{self, Path};

/// How the engine refuses a recursive definition it meets inside itself.
pub(super) const ENGINE_REFUSAL: &str = "circular references with sibling keys are not supported";
/// How deep a recursive definition may nest in an answer: as deep as the bounded "any value", and
/// deeper than the answers models write.
pub(super) const DEPTH: usize = 4;
/// Where the copies of each level are defined in the grammar's copy.
const PREFIX: &str = "runaii_unrolled_";
/// The most JSON values the copies may hold in all: a bound for a document built to multiply (the
/// caller's schema holds at most `schema_budget::MAX_NODES`).
const MAX_COPIED: usize = 200_000;
/// Keys of a copied definition that only mean something at the document's root.
const ROOT_ONLY: [&str; 5] = ["$defs", "definitions", "$id", "$schema", "x-guidance"];

/// The grammar schema with every cycle of references unrolled, or `None` when it has no cycle, refers
/// outside the document, or would copy more than [`MAX_COPIED`] values.
pub(super) fn unroll(schema: &Value, depth: usize) -> Option<Value> {
    let graph = reference_graph(schema)?;
    let cyclic: Vec<&Path> = graph.keys().filter(|target| reaches_itself(&graph, target)).collect();
    if cyclic.is_empty() {
        return None;
    }
    let mut budget = MAX_COPIED / (depth + 1);
    for target in &cyclic {
        budget = budget.checked_sub(values_within(paths::node_at(schema, target)?, budget)?)?;
    }
    let slot: BTreeMap<&Path, usize> = cyclic.iter().enumerate().map(|(i, target)| (*target, i)).collect();
    let at = |level: usize, target: &Path| slot.get(target).map(|i| json!({"$ref": format!("#/$defs/{PREFIX}{level}_{i}")}));
    let mut copies = Map::new();
    for level in 0..=depth {
        for (i, target) in cyclic.iter().enumerate() {
            let mut copy = paths::node_at(schema, target)?.clone();
            if let Value::Object(map) = &mut copy {
                ROOT_ONLY.iter().for_each(|key| {
                    map.remove(*key);
                });
            }
            redirect(&mut copy, false, false, &mut |reference, nested| match (nested, at(level + 1, reference)) {
                (false, _) => at(level, reference),
                (true, Some(_)) if level == depth => Some(Value::Bool(false)),
                (true, next) => next,
            });
            copies.insert(format!("{PREFIX}{level}_{i}"), copy);
        }
    }
    let mut unrolled = schema.clone();
    redirect(&mut unrolled, true, false, &mut |reference, _| at(0, reference));
    let Value::Object(root) = &mut unrolled else { return None };
    if let Value::Object(defs) = root.entry("$defs").or_insert_with(|| json!({})) {
        defs.extend(copies);
    }
    Some(unrolled)
}

/// How many JSON values `node` holds, or `None` beyond `limit`.
fn values_within(node: &Value, limit: usize) -> Option<usize> {
    let mut count = 0;
    let mut pending = vec![node];
    while let Some(value) = pending.pop() {
        count += 1;
        if count > limit {
            return None;
        }
        match value {
            Value::Object(map) => pending.extend(map.values()),
            Value::Array(items) => pending.extend(items),
            _ => {}
        }
    }
    Some(count)
}

/// Each reference target reached from the root, with the targets its own schema refers to (definitions
/// nested in it apart). `None` when a reference is not a pointer into this document.
fn reference_graph(schema: &Value) -> Option<BTreeMap<Path, BTreeSet<Path>>> {
    let mut graph = BTreeMap::new();
    let mut pending = references(schema)?;
    while let Some(target) = pending.pop_first() {
        let next = match paths::node_at(schema, &target) {
            Some(node) => references(node)?,
            None => BTreeSet::new(),
        };
        pending.extend(next.iter().filter(|t| !graph.contains_key(*t) && **t != target).cloned());
        graph.insert(target, next);
    }
    Some(graph)
}

fn references(node: &Value) -> Option<BTreeSet<Path>> {
    let mut targets = BTreeSet::new();
    let mut pending = vec![node];
    while let Some(node) = pending.pop() {
        let Value::Object(map) = node else { continue };
        if let Some(reference) = map.get("$ref") {
            targets.insert(reference.as_str().and_then(paths::pointer_path)?);
        }
        pending.extend(paths::subschemas(map, false).into_iter().map(|(_, _, child)| child));
    }
    Some(targets)
}

fn reaches_itself(graph: &BTreeMap<Path, BTreeSet<Path>>, start: &Path) -> bool {
    let mut seen = BTreeSet::new();
    let mut pending: Vec<&Path> = graph.get(start).into_iter().flatten().collect();
    while let Some(target) = pending.pop() {
        if target == start {
            return true;
        }
        if seen.insert(target) {
            pending.extend(graph.get(target).into_iter().flatten());
        }
    }
    false
}

/// Calls `to` with the target of every reference in `node`, and whether it applies to a value nested
/// in `node`'s (a property's, an item's), and replaces the schema holding the reference with what `to`
/// returns, if anything: an object's keys replace the reference's, anything else the whole schema.
fn redirect(node: &mut Value, with_definitions: bool, nested: bool, to: &mut impl FnMut(&Path, bool) -> Option<Value>) {
    let Value::Object(map) = node else { return };
    if let Some(target) = map.get("$ref").and_then(Value::as_str).and_then(paths::pointer_path) {
        match to(&target, nested) {
            Some(Value::Object(reference)) => map.extend(reference),
            Some(other) => {
                *node = other;
                return;
            }
            None => {}
        }
    }
    for (keyword, _, child) in paths::subschemas_mut(map, with_definitions) {
        redirect(child, with_definitions, nested || !paths::IN_PLACE.contains(&keyword), to);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A list node: `next` is another node.
    fn list() -> Value {
        json!({
            "$defs": {"node": {"type": "object", "properties": {"value": {"type": "integer"}, "next": {"$ref": "#/$defs/node"}}}},
            "$ref": "#/$defs/node",
        })
    }

    #[test]
    fn a_recursive_definition_nests_at_most_depth_levels() {
        let out = unroll(&list(), DEPTH).expect("a cycle");
        assert_eq!(out["$ref"], json!("#/$defs/runaii_unrolled_0_0"));
        for level in 0..DEPTH {
            let copy = &out["$defs"][format!("runaii_unrolled_{level}_0")];
            assert_eq!(copy["properties"]["next"], json!({"$ref": format!("#/$defs/runaii_unrolled_{}_0", level + 1)}));
            assert_eq!(copy["properties"]["value"], json!({"type": "integer"}));
        }
        assert_eq!(out["$defs"][format!("runaii_unrolled_{DEPTH}_0")]["properties"]["next"], json!(false));
        let original = &out["$defs"]["node"]["properties"]["next"];
        assert_eq!(*original, json!({"$ref": "#/$defs/runaii_unrolled_0_0"}), "no reference leads back into a cycle");
    }

    #[test]
    fn a_reference_to_the_same_value_keeps_its_level() {
        let schema = json!({
            "definitions": {
                "base": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/definitions/derived"}}}},
                "derived": {"allOf": [{"$ref": "#/definitions/base"}, {"properties": {"name": {"type": "string"}}}]},
            },
            "$ref": "#/definitions/derived",
        });
        let out = unroll(&schema, DEPTH).expect("a cycle");
        // base is 0, derived is 1 (targets in pointer order).
        let derived = &out["$defs"]["runaii_unrolled_2_1"];
        assert_eq!(derived["allOf"][0], json!({"$ref": "#/$defs/runaii_unrolled_2_0"}), "allOf applies to the same value");
        let base = &out["$defs"]["runaii_unrolled_2_0"];
        assert_eq!(base["properties"]["children"]["items"], json!({"$ref": "#/$defs/runaii_unrolled_3_1"}), "an item is one level down");
    }

    #[test]
    fn a_document_built_to_multiply_is_not_unrolled() {
        // 40 targets nested in one another, each referring to itself: each copy holds the ones below it.
        fn level(depth: usize, path: String) -> Value {
            let below = if depth == 0 { json!({}) } else { level(depth - 1, format!("{path}/properties/a")) };
            json!({"properties": {"a": below, "b": {"$ref": path}, "pad": {"enum": (0..200).collect::<Vec<_>>()}}})
        }
        let schema = level(40, "#".into());
        assert!(reference_graph(&schema).is_some_and(|graph| graph.len() == 41));
        assert_eq!(unroll(&schema, DEPTH), None);
        assert!(unroll(&level(3, "#".into()), DEPTH).is_some(), "a few are unrolled");
    }

    #[test]
    fn schemas_without_cycles_or_with_outside_references_are_left_alone() {
        assert_eq!(unroll(&json!({"$defs": {"a": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/a"}}}), DEPTH), None);
        let outside = json!({"$defs": {"node": {"properties": {"next": {"$ref": "#/$defs/node"}, "o": {"$ref": "other.json"}}}}, "$ref": "#/$defs/node"});
        assert_eq!(unroll(&outside, DEPTH), None);
    }

    #[test]
    fn the_root_as_a_target_is_copied_without_its_definitions() {
        let schema = json!({"$schema": "x", "definitions": {"s": {"type": "string"}},
                            "properties": {"child": {"$ref": "#"}, "s": {"$ref": "#/definitions/s"}}});
        let out = unroll(&schema, DEPTH).expect("a cycle through the root");
        let copy = &out["$defs"]["runaii_unrolled_0_0"];
        assert!(copy.get("definitions").is_none() && copy.get("$schema").is_none(), "{copy}");
        assert_eq!(copy["properties"]["s"], json!({"$ref": "#/definitions/s"}), "a reference off the cycle is kept");
        assert_eq!(out["properties"]["child"], json!({"$ref": "#/$defs/runaii_unrolled_0_0"}));
    }
}
