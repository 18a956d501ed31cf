//! `oneOf` made exact, or refused before a token is generated.
//!
//! The grammar engine can only enforce "at least one branch" (`anyOf`); `oneOf` also demands "not two".
//! An answer that matches two branches passes the grammar and then fails the second layer, so the request
//! ends in a 5xx because of its schema. Here every `oneOf` becomes an `anyOf` whose branches are proven
//! exclusive: for each branch `i` the grammar gets a restriction `A'ᵢ ⊆ Aᵢ` such that no value of `A'ᵢ`
//! is an instance of any other *original* branch `Aⱼ`. Then every value the grammar admits matches
//! exactly the one branch it came from.
//!
//! Proofs use [`Shape`], which over-approximates what a schema admits, so a proof is never wrong. The
//! restrictions tried, in order: require a key whose value tells the branches apart (a discriminator),
//! forbid a key the other branch requires, leave out the JSON types the other branch also admits. A
//! branch that no restriction separates is left out of the grammar (its values would be ambiguous);
//! when no branch is left the schema is refused with the branches that overlap.
//!
//! A `oneOf` this walk does not reach (inside `not` or another keyword the engine does not implement)
//! stays a `oneOf`, which the engine refuses: nothing is ever approximated.

use serde_json::{json, Map, Value};

use super::paths::{node_at, node_at_mut, pointer, schema_paths};
use super::shape::{Reader, Shape, Types, ARRAY, BOOLEAN, FRACTION, INTEGER, NULL, OBJECT, STRING};
use super::Refusal;

/// Rewrites every `oneOf` in `grammar` (a copy of `original`, possibly already tightened) into an
/// exclusive `anyOf`.
///
/// # Errors
/// [`Refusal::Unenforceable`] naming the first `oneOf` whose branches cannot be told apart.
pub(super) fn make_exact(grammar: &mut Value, original: &Value) -> Result<(), Refusal> {
    let mut found: Vec<_> = schema_paths(original)
        .into_iter()
        .filter(|path| matches!(node_at(original, path).and_then(|n| n.get("oneOf")), Some(Value::Array(_))))
        .collect();
    // Deepest first: rewriting an outer oneOf renumbers its branches, and with them the inner paths.
    found.sort_by_key(|path| std::cmp::Reverse(path.len()));
    let mut narrowed_refs = Vec::new();
    for path in found {
        rewrite_one(grammar, original, &path, &mut narrowed_refs)?;
    }
    define_narrowed(grammar, narrowed_refs);
    Ok(())
}

/// A branch that was only a `$ref` and needs restrictions. The engine cannot intersect a recursive
/// reference with sibling keys, so the branch becomes a plain reference to a new definition: a copy of
/// the target with the restrictions merged in, made once every `oneOf` is rewritten (so the copy holds
/// the rewritten ones, and the references that replaced other narrowed branches).
struct NarrowedRef {
    name: String,
    target: String,
    fixes: Vec<Fix>,
}

/// Where narrowed copies are defined in the grammar's copy of the schema.
const NARROWED_PREFIX: &str = "runaii_one_of_branch_";

fn define_narrowed(grammar: &mut Value, narrowed: Vec<NarrowedRef>) {
    let mut definitions = Vec::with_capacity(narrowed.len());
    for NarrowedRef { name, target, fixes } in narrowed {
        let mut content = resolve_alias(grammar, &target);
        if let Value::Object(map) = &mut content {
            fixes.iter().for_each(|fix| fix.apply(map));
        }
        definitions.push((name, content));
    }
    if let Value::Object(root) = grammar {
        if let Value::Object(defs) = root.entry("$defs").or_insert_with(|| json!({})) {
            defs.extend(definitions);
        }
    }
}

/// The schema a reference leads to, through references that only point on (`{"$ref": …}` alone). When
/// it cannot be found (or the chain goes on too long) the copy is the reference with the restrictions
/// beside it, which the engine accepts unless the reference is recursive, and otherwise refuses.
fn resolve_alias(grammar: &Value, reference: &str) -> Value {
    let mut reference = reference.to_owned();
    for _ in 0..8 {
        let Some(target) = super::paths::pointer_path(&reference).and_then(|path| node_at(grammar, &path)) else { break };
        match target {
            Value::Object(map) if map.len() == 1 && map.contains_key("$ref") => {
                reference = map["$ref"].as_str().unwrap_or_default().to_owned();
            }
            Value::Object(map) if !map.contains_key("$id") && !map.contains_key("id") => return target.clone(),
            Value::Bool(true) => return json!({}),
            _ => break,
        }
    }
    json!({"$ref": reference})
}

/// A restriction added to one branch in the grammar.
#[derive(Debug, Clone, PartialEq)]
enum Fix {
    /// The key must be present.
    Require(String),
    /// The key must be absent.
    Forbid(String),
    /// Only these JSON types.
    Types(Types),
}

impl Fix {
    fn shape(&self) -> Shape {
        match self {
            Self::Require(key) => Shape { required: [key.clone()].into(), ..Shape::default() },
            Self::Forbid(key) => Shape { properties: [(key.clone(), Shape::nothing())].into(), ..Shape::default() },
            Self::Types(types) => Shape { types: *types, ..Shape::default() },
        }
    }

    fn apply(&self, branch: &mut Map<String, Value>) {
        match self {
            Self::Require(key) => {
                let required = branch.entry("required").or_insert_with(|| json!([]));
                if let Value::Array(list) = required {
                    if !list.iter().any(|k| k == key) {
                        list.push(json!(key));
                    }
                }
            }
            Self::Forbid(key) => {
                let properties = branch.entry("properties").or_insert_with(|| json!({}));
                if let Value::Object(map) = properties {
                    map.insert(key.clone(), Value::Bool(false));
                }
            }
            Self::Types(types) => {
                branch.insert("type".into(), type_names(*types));
            }
        }
    }
}

fn rewrite_one(grammar: &mut Value, original: &Value, path: &[String], narrowed_refs: &mut Vec<NarrowedRef>) -> Result<(), Refusal> {
    let (Some(node), Some(current)) = (node_at(original, path), node_at(grammar, path)) else {
        // Not reached in the grammar copy: it stays a oneOf and the engine refuses it.
        return Ok(());
    };
    let (Some(Value::Array(originals)), Some(Value::Array(currents))) = (node.get("oneOf"), current.get("oneOf")) else {
        return Ok(());
    };
    // What each original branch admits (for the proofs' other side), and what each grammar branch can
    // generate (the side the restrictions narrow); both within the schema beside the oneOf.
    let theirs = branch_shapes(&Reader::new(original), node, originals);
    let mine = branch_shapes(&Reader::new(grammar), current, currents);
    let mut kept = Vec::new();
    let mut overlap = None;
    for (i, own) in mine.into_iter().enumerate() {
        match separate(own, i, &theirs) {
            Ok(fixes) => kept.push((i, fixes)),
            Err(j) => overlap = overlap.or(Some((i, j))),
        }
    }
    if kept.is_empty() {
        let (i, j) = overlap.unwrap_or((0, 1));
        return Err(Refusal::Unenforceable(format!(
            "oneOf at `{}`: branches {i} and {j} can match the same value, so an answer could match both; use anyOf, \
             or make the branches exclusive (different types, a required property with different const/enum values, \
             or a property one branch requires and the other forbids)",
            pointer(path)
        )));
    }
    let Some(Value::Object(target)) = node_at_mut(grammar, path) else { return Ok(()) };
    let Some(Value::Array(branches)) = target.remove("oneOf") else { return Ok(()) };
    let exclusive: Vec<Value> = kept
        .into_iter()
        .map(|(i, fixes)| {
            let mut branch = match branches.get(i) {
                Some(Value::Object(map)) => map.clone(),
                _ => Map::new(),
            };
            match branch.get("$ref").and_then(Value::as_str) {
                Some(target) if !fixes.is_empty() && branch.len() == 1 => {
                    let name = format!("{NARROWED_PREFIX}{}", narrowed_refs.len());
                    let reference = json!({"$ref": format!("#/$defs/{name}")});
                    narrowed_refs.push(NarrowedRef { name, target: target.to_owned(), fixes });
                    return reference;
                }
                _ => fixes.iter().for_each(|fix| fix.apply(&mut branch)),
            }
            Value::Object(branch)
        })
        .collect();
    if target.contains_key("anyOf") {
        // Both must hold: the existing anyOf and this one.
        let all = target.entry("allOf").or_insert_with(|| json!([]));
        if let Value::Array(all) = all {
            all.push(json!({"anyOf": exclusive}));
        }
    } else {
        target.insert("anyOf".into(), Value::Array(exclusive));
    }
    Ok(())
}

fn branch_shapes(reader: &Reader<'_>, node: &Value, branches: &[Value]) -> Vec<Shape> {
    let beside = reader.shape_except(node, 0, Some("oneOf"));
    branches.iter().map(|branch| beside.clone().meet(&reader.shape(branch, 1))).collect()
}

/// The restrictions that make branch `i` exclusive of every other branch, or the first branch it cannot
/// be told apart from.
fn separate(mut own: Shape, i: usize, theirs: &[Shape]) -> Result<Vec<Fix>, usize> {
    let mut fixes = Vec::new();
    for (j, other) in theirs.iter().enumerate() {
        if j == i || own.disjoint(other) {
            continue;
        }
        let found = candidates(&own, other).into_iter().find(|set| {
            let narrowed = set.iter().fold(own.clone(), |s, fix| s.meet(&fix.shape()));
            !narrowed.is_empty() && narrowed.disjoint(other)
        });
        let Some(set) = found else { return Err(j) };
        for fix in set {
            own = own.meet(&fix.shape());
            fixes.push(fix);
        }
    }
    if own.is_empty() {
        return Err(i);
    }
    Ok(fixes)
}

/// Restrictions worth trying on `own` to separate it from `other`, least restrictive first.
fn candidates(own: &Shape, other: &Shape) -> Vec<Vec<Fix>> {
    let mut object_fixes = Vec::new();
    if own.types & other.types & OBJECT != 0 {
        // A key whose value tells the two apart, or which the other forbids: require it.
        for (key, shape) in &own.properties {
            if !own.required.contains(key) && !shape.is_empty() && shape.disjoint(&other.key(key)) {
                object_fixes.push(Fix::Require(key.clone()));
            }
        }
        // A key the other always has: forbid it.
        for key in &other.required {
            if !own.required.contains(key) {
                object_fixes.push(Fix::Forbid(key.clone()));
            }
        }
    }
    let mut sets: Vec<Vec<Fix>> = object_fixes.iter().map(|fix| vec![fix.clone()]).collect();
    // Leave out the types the other admits (keeping objects when an object fix can separate those).
    let without_common = own.types & !other.types;
    if expressible(without_common) {
        sets.push(vec![Fix::Types(without_common)]);
    }
    let keep_objects = without_common | (own.types & OBJECT);
    if keep_objects != without_common && expressible(keep_objects) {
        sets.push(vec![Fix::Types(keep_objects)]);
        sets.extend(object_fixes.into_iter().map(|fix| vec![Fix::Types(keep_objects), fix]));
    }
    sets
}

/// A type set a `type` keyword can name: numbers with a fraction cannot be asked for alone.
fn expressible(types: Types) -> bool {
    types != 0 && (types & FRACTION == 0 || types & INTEGER != 0)
}

fn type_names(types: Types) -> Value {
    let mut names = Vec::new();
    for (bit, name) in [(NULL, "null"), (BOOLEAN, "boolean"), (OBJECT, "object"), (ARRAY, "array"), (STRING, "string")] {
        if types & bit != 0 {
            names.push(name);
        }
    }
    match (types & INTEGER != 0, types & FRACTION != 0) {
        (true, true) => names.push("number"),
        (true, false) => names.push("integer"),
        _ => {}
    }
    json!(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(schema: Value) -> Result<Value, Refusal> {
        let mut grammar = schema.clone();
        make_exact(&mut grammar, &schema)?;
        if grammar["$defs"] == json!({}) {
            grammar.as_object_mut().unwrap().remove("$defs");
        }
        Ok(grammar)
    }

    #[test]
    fn disjoint_branches_become_any_of_unchanged() {
        let out = exact(json!({"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]})).unwrap();
        assert_eq!(out, json!({"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}));
    }

    #[test]
    fn integer_or_number_is_refused() {
        let refusal = exact(json!({"oneOf": [{"type": "integer"}, {"type": "number"}]})).unwrap_err();
        assert!(refusal.to_string().contains("oneOf at `#`"), "{refusal}");
    }

    #[test]
    fn an_ambiguous_branch_is_left_out_when_the_rest_is_exact() {
        // Strings match both branches, so only null is ever valid.
        let out = exact(json!({"oneOf": [{"type": "string"}, {"type": ["string", "null"]}]})).unwrap();
        assert_eq!(out, json!({"anyOf": [{"type": ["null"]}]}));
    }

    #[test]
    fn required_keys_are_made_exclusive() {
        let schema = json!({"type": "object", "properties": {"value": {}, "values": {}},
                            "oneOf": [{"required": ["value"]}, {"required": ["values"]}]});
        let out = exact(schema).unwrap();
        assert_eq!(out["anyOf"][0], json!({"required": ["value"], "properties": {"values": false}}));
        assert_eq!(out["anyOf"][1], json!({"required": ["values"], "properties": {"value": false}}));
    }

    #[test]
    fn a_discriminator_is_required() {
        let schema = json!({"oneOf": [
            {"properties": {"kind": {"enum": ["company"]}, "name": {"type": "string"}}},
            {"properties": {"kind": {"enum": ["person"]}, "name": {"type": "string"}}},
        ]});
        let out = exact(schema).unwrap();
        assert_eq!(out["anyOf"][0]["required"], json!(["kind"]));
        assert_eq!(out["anyOf"][1]["required"], json!(["kind"]));
    }

    #[test]
    fn references_and_nested_one_of_are_rewritten() {
        let schema = json!({
            "definitions": {"when": {"oneOf": [{"type": "string"}, {"type": "integer"}]}},
            "properties": {"at": {"oneOf": [{"$ref": "#/definitions/when"}, {"type": "null"}]}},
        });
        let out = exact(schema).unwrap();
        assert!(out.to_string().find("oneOf").is_none(), "{out}");
        assert_eq!(out["definitions"]["when"]["anyOf"], json!([{"type": "string"}, {"type": "integer"}]));
    }

    #[test]
    fn a_one_of_reached_only_through_a_reference_is_rewritten() {
        let schema = json!({"type": "object", "properties": {"speed": {"$ref": "#/onvif/speed"}},
                            "onvif": {"speed": {"oneOf": [{"type": "number"}, {"type": "string"}]}}});
        let out = exact(schema).unwrap();
        assert_eq!(out["onvif"]["speed"]["anyOf"], json!([{"type": "number"}, {"type": "string"}]));
    }

    #[test]
    fn a_referenced_branch_is_narrowed_in_a_copy_not_beside_the_reference() {
        let schema = json!({
            "definitions": {
                "list": {"type": "object", "properties": {"kind": {"enum": ["list"]}, "next": {"oneOf": [{"$ref": "#/definitions/list"}, {"$ref": "#/definitions/csv"}]}}},
                "csv": {"type": "object", "properties": {"kind": {"enum": ["csv"]}}},
            },
            "$ref": "#/definitions/list",
        });
        let out = exact(schema).unwrap();
        let branches = &out["definitions"]["list"]["properties"]["next"]["anyOf"];
        assert_eq!(branches[0], json!({"$ref": "#/$defs/runaii_one_of_branch_0"}));
        let copy = &out["$defs"]["runaii_one_of_branch_0"];
        assert_eq!(copy["required"], json!(["kind"]));
        assert_eq!(copy["properties"]["next"]["anyOf"][0], json!({"$ref": "#/$defs/runaii_one_of_branch_0"}), "the copy holds the rewrite");
    }

    #[test]
    fn a_closed_grammar_branch_is_not_asked_for_keys_it_forbids() {
        // The grammar copy closed both branches; requiring `b` in the first would make it empty.
        let schema = json!({"oneOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}, "required": ["b"]}]});
        let mut grammar = schema.clone();
        grammar["oneOf"][0]["additionalProperties"] = json!(false);
        grammar["oneOf"][1]["additionalProperties"] = json!(false);
        make_exact(&mut grammar, &schema).unwrap();
        // Only objects: `null` would match both branches (neither names a type).
        let first = &grammar["anyOf"][0];
        assert_eq!(first["type"], json!(["object"]));
        assert!(first.get("required").is_none(), "{first}");
    }
}
