//! What a JSON Schema admits, over-approximated: enough to prove that two schemas share no instance.
//!
//! A [`Shape`] records facts that hold for *every* instance a schema admits: its possible JSON types, a
//! finite set of values (from `enum`/`const`), the object keys it always has, the keys it never has and
//! what each key holds, array and string length ranges. Whatever is not understood is left out, which
//! widens the shape: a wider shape can only make [`Shape::disjoint`] answer `false` ("not proven"),
//! never a wrong `true`. That one-sidedness is what makes `oneOf` exact (see `one_of.rs`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};

/// JSON types as a bit set. Numbers split in two because `integer` is a subset of `number`.
pub(super) type Types = u8;
pub(super) const NULL: Types = 1;
pub(super) const BOOLEAN: Types = 2;
pub(super) const OBJECT: Types = 4;
pub(super) const ARRAY: Types = 8;
pub(super) const STRING: Types = 16;
pub(super) const INTEGER: Types = 32;
/// Numbers with a non-zero fraction.
pub(super) const FRACTION: Types = 64;
const ALL: Types = 127;

/// Facts true of every instance of a schema. `Shape::default()` admits everything.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Shape {
    pub types: Types,
    /// When set, every instance equals one of these values.
    pub values: Option<Vec<Value>>,
    /// Keys every object instance has.
    pub required: BTreeSet<String>,
    /// What a named key holds when present.
    pub properties: BTreeMap<String, Shape>,
    /// What any other key holds; `None` when unconstrained. A shape admitting no type forbids the keys.
    pub other_keys: Option<Box<Shape>>,
    pub items: Option<Box<Shape>>,
    pub min_items: u64,
    pub max_items: Option<u64>,
    pub min_length: u64,
    pub max_length: Option<u64>,
    /// `pattern`s and `format`s every string instance satisfies, each as a one-keyword schema, checked
    /// with the second layer's own validator so that "does not match" means what it will mean there.
    pub string_checks: Vec<Value>,
    /// From a `pattern` that spells a whole string (`^…$`, literal characters and `.`): the string's
    /// characters, `None` where any character may stand.
    pub template: Option<Vec<Option<char>>>,
}

impl Default for Shape {
    fn default() -> Self {
        Self {
            types: ALL,
            values: None,
            required: BTreeSet::new(),
            properties: BTreeMap::new(),
            other_keys: None,
            items: None,
            min_items: 0,
            max_items: None,
            min_length: 0,
            max_length: None,
            string_checks: Vec::new(),
            template: None,
        }
    }
}

impl Shape {
    pub(super) fn nothing() -> Self {
        Self { types: 0, ..Self::default() }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.types == 0 || self.values.as_ref().is_some_and(Vec::is_empty)
    }

    /// What key `key` of an object instance holds (an empty shape: the key never appears).
    pub(super) fn key(&self, key: &str) -> Shape {
        match (self.properties.get(key), &self.other_keys) {
            (Some(shape), _) => shape.clone(),
            (None, Some(other)) => (**other).clone(),
            (None, None) => Shape::default(),
        }
    }

    /// Both at once (`allOf`).
    pub(super) fn meet(mut self, other: &Shape) -> Shape {
        self.types &= other.types;
        self.values = match (self.values.take(), &other.values) {
            (Some(mine), Some(theirs)) => Some(mine.into_iter().filter(|v| theirs.iter().any(|t| json_equal(v, t))).collect()),
            (Some(mine), None) => Some(mine),
            (None, theirs) => theirs.clone(),
        };
        self.required.extend(other.required.iter().cloned());
        for (key, shape) in &other.properties {
            let merged = match self.properties.remove(key) {
                Some(mine) => mine.meet(shape),
                None => shape.clone(),
            };
            self.properties.insert(key.clone(), merged);
        }
        self.other_keys = match (self.other_keys.take(), &other.other_keys) {
            (Some(mine), Some(theirs)) => Some(Box::new(mine.meet(theirs))),
            (mine, theirs) => mine.or_else(|| theirs.clone()),
        };
        self.items = match (self.items.take(), &other.items) {
            (Some(mine), Some(theirs)) => Some(Box::new(mine.meet(theirs))),
            (mine, theirs) => mine.or_else(|| theirs.clone()),
        };
        self.min_items = self.min_items.max(other.min_items);
        self.max_items = min_option(self.max_items, other.max_items);
        self.min_length = self.min_length.max(other.min_length);
        self.max_length = min_option(self.max_length, other.max_length);
        self.string_checks.extend(other.string_checks.iter().filter(|c| !self.string_checks.contains(c)).cloned().collect::<Vec<_>>());
        if self.template.is_none() {
            self.template.clone_from(&other.template);
        }
        self
    }

    /// Either one (`anyOf`): only what both guarantee survives. A side that admits no objects says
    /// nothing about keys (its `required` is vacuous), so the other side's object facts stand; the same
    /// for arrays and strings.
    pub(super) fn join(&self, other: &Shape) -> Shape {
        if self.is_empty() {
            return other.clone();
        }
        if other.is_empty() {
            return self.clone();
        }
        let both = |a: &Option<Box<Shape>>, b: &Option<Box<Shape>>| match (a, b) {
            (Some(a), Some(b)) => Some(Box::new(a.join(b))),
            _ => None,
        };
        let mut joined = Shape {
            types: self.types | other.types,
            values: match (&self.values, &other.values) {
                (Some(a), Some(b)) => Some(a.iter().chain(b).cloned().collect()),
                _ => None,
            },
            ..Shape::default()
        };
        match (self.types & OBJECT != 0, other.types & OBJECT != 0) {
            (true, true) => {
                joined.required = self.required.intersection(&other.required).cloned().collect();
                joined.properties = self
                    .properties
                    .iter()
                    .filter_map(|(key, shape)| other.properties.get(key).map(|theirs| (key.clone(), shape.join(theirs))))
                    .collect();
                joined.other_keys = both(&self.other_keys, &other.other_keys);
            }
            (true, false) => self.clone_object_facts(&mut joined),
            (false, _) => other.clone_object_facts(&mut joined),
        }
        match (self.types & ARRAY != 0, other.types & ARRAY != 0) {
            (true, true) => {
                joined.items = both(&self.items, &other.items);
                joined.min_items = self.min_items.min(other.min_items);
                joined.max_items = self.max_items.zip(other.max_items).map(|(a, b)| a.max(b));
            }
            (true, false) => (joined.items, joined.min_items, joined.max_items) = (self.items.clone(), self.min_items, self.max_items),
            (false, _) => (joined.items, joined.min_items, joined.max_items) = (other.items.clone(), other.min_items, other.max_items),
        }
        match (self.types & STRING != 0, other.types & STRING != 0) {
            (true, true) => {
                joined.min_length = self.min_length.min(other.min_length);
                joined.max_length = self.max_length.zip(other.max_length).map(|(a, b)| a.max(b));
                joined.string_checks = self.string_checks.iter().filter(|c| other.string_checks.contains(c)).cloned().collect();
                joined.template = self.template.clone().filter(|t| other.template.as_ref() == Some(t));
            }
            (true, false) => {
                (joined.min_length, joined.max_length) = (self.min_length, self.max_length);
                joined.string_checks.clone_from(&self.string_checks);
                joined.template.clone_from(&self.template);
            }
            (false, _) => {
                (joined.min_length, joined.max_length) = (other.min_length, other.max_length);
                joined.string_checks.clone_from(&other.string_checks);
                joined.template.clone_from(&other.template);
            }
        }
        joined
    }

    fn clone_object_facts(&self, into: &mut Shape) {
        into.required.clone_from(&self.required);
        into.properties.clone_from(&self.properties);
        into.other_keys.clone_from(&self.other_keys);
    }

    /// `true` only when no JSON value can be an instance of both: a proof, never a guess.
    pub(super) fn disjoint(&self, other: &Shape) -> bool {
        if self.is_empty() || other.is_empty() || self.types & other.types == 0 {
            return true;
        }
        if let Some(values) = &self.values {
            return values.iter().all(|v| !other.may_admit(v));
        }
        if let Some(values) = &other.values {
            return values.iter().all(|v| !self.may_admit(v));
        }
        // Every type both admit must be ruled out on its own.
        let common = self.types & other.types;
        [NULL, BOOLEAN, INTEGER, FRACTION, STRING, ARRAY, OBJECT].into_iter().filter(|t| common & t != 0).all(|t| match t {
            STRING => {
                ranges_disjoint((self.min_length, self.max_length), (other.min_length, other.max_length))
                    || self.template.as_ref().zip(other.template.as_ref()).is_some_and(|(a, b)| templates_disjoint(a, b))
            }
            ARRAY => self.arrays_disjoint(other),
            OBJECT => self.objects_disjoint(other) || other.objects_disjoint(self),
            _ => false,
        })
    }

    fn arrays_disjoint(&self, other: &Shape) -> bool {
        if ranges_disjoint((self.min_items, self.max_items), (other.min_items, other.max_items)) {
            return true;
        }
        // Only the empty array could be in both; one of them needs an item.
        let items_disjoint = match (&self.items, &other.items) {
            (Some(a), Some(b)) => a.disjoint(b),
            _ => false,
        };
        items_disjoint && (self.min_items > 0 || other.min_items > 0)
    }

    /// A key this shape always has that the other forbids, or holds a value of another kind.
    fn objects_disjoint(&self, other: &Shape) -> bool {
        self.required.iter().any(|key| self.key(key).disjoint(&other.key(key)))
    }

    /// `false` only when `value` is certainly not an instance.
    pub(super) fn may_admit(&self, value: &Value) -> bool {
        if self.types & type_of(value) == 0 {
            return false;
        }
        if let Some(values) = &self.values {
            if !values.iter().any(|v| json_equal(v, value)) {
                return false;
            }
        }
        match value {
            Value::String(s) => {
                in_range(s.chars().count() as u64, self.min_length, self.max_length)
                    && self.string_checks.iter().all(|check| satisfies(check, value))
            }
            Value::Array(items) => {
                in_range(items.len() as u64, self.min_items, self.max_items)
                    && self.items.as_ref().is_none_or(|shape| items.iter().all(|item| shape.may_admit(item)))
            }
            Value::Object(map) => {
                self.required.iter().all(|key| map.contains_key(key)) && map.iter().all(|(key, v)| self.key(key).may_admit(v))
            }
            _ => true,
        }
    }
}

fn templates_disjoint(a: &[Option<char>], b: &[Option<char>]) -> bool {
    a.len() != b.len() || a.iter().zip(b).any(|(x, y)| matches!((x, y), (Some(x), Some(y)) if x != y))
}

/// The template of a pattern that spells a whole string; `None` for any other pattern.
fn template(pattern: &str) -> Option<Vec<Option<char>>> {
    let body = pattern.strip_prefix('^')?.strip_suffix('$')?;
    let mut chars = body.chars();
    let mut out = Vec::new();
    while let Some(c) = chars.next() {
        match c {
            // A pattern ending in `\$` loses its `$` to `strip_suffix` and ends here, in `None`.
            '\\' => match chars.next()? {
                escaped if r".^$*+?()[]{}|\/-".contains(escaped) => out.push(Some(escaped)),
                _ => return None,
            },
            '.' => out.push(None),
            c if "^$*+?()[]{}|".contains(c) => return None,
            c => out.push(Some(c)),
        }
    }
    Some(out)
}

/// Whether `value` passes a one-keyword schema, as the second layer would judge it. A check that does
/// not compile proves nothing: the value may pass.
fn satisfies(check: &Value, value: &Value) -> bool {
    jsonschema::options().should_validate_formats(true).build(check).map_or(true, |v| v.is_valid(value))
}

fn min_option(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn in_range(n: u64, min: u64, max: Option<u64>) -> bool {
    n >= min && max.is_none_or(|max| n <= max)
}

fn ranges_disjoint((min_a, max_a): (u64, Option<u64>), (min_b, max_b): (u64, Option<u64>)) -> bool {
    max_a.is_some_and(|max_a| max_a < min_b) || max_b.is_some_and(|max_b| max_b < min_a)
}

pub(super) fn type_of(value: &Value) -> Types {
    match value {
        Value::Null => NULL,
        Value::Bool(_) => BOOLEAN,
        Value::Object(_) => OBJECT,
        Value::Array(_) => ARRAY,
        Value::String(_) => STRING,
        // JSON Schema counts 1.0 as an integer.
        Value::Number(n) => {
            if n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0) {
                INTEGER
            } else {
                FRACTION
            }
        }
    }
}

/// Equality as JSON Schema's `enum` and `const` see it: numbers by value (1 equals 1.0).
pub(super) fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_equal(x, y)),
        (Value::Object(x), Value::Object(y)) => x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w))),
        _ => a == b,
    }
}

/// Builds shapes from schema documents, following local `$ref`s against `root`.
pub(super) struct Reader<'a> {
    root: &'a Value,
    /// Shapes left to build before every further one is `Shape::default()`: a bound on the work a
    /// recursive or very wide schema can cause.
    budget: std::cell::Cell<u32>,
}

/// How deep into properties, items and references a shape looks.
const MAX_DEPTH: u32 = 6;

impl<'a> Reader<'a> {
    pub(super) fn new(root: &'a Value) -> Self {
        Self { root, budget: std::cell::Cell::new(20_000) }
    }

    /// The shape of `schema`, ignoring its `oneOf`/`anyOf` when `skip` names it (the caller reasons
    /// about each branch itself).
    pub(super) fn shape(&self, schema: &Value, depth: u32) -> Shape {
        self.shape_except(schema, depth, None)
    }

    pub(super) fn shape_except(&self, schema: &Value, depth: u32, skip: Option<&str>) -> Shape {
        let left = self.budget.get();
        if depth > MAX_DEPTH || left == 0 {
            return Shape::default();
        }
        self.budget.set(left - 1);
        match schema {
            Value::Bool(true) => Shape::default(),
            Value::Bool(false) => Shape::nothing(),
            Value::Object(map) => self.object_shape(map, depth, skip),
            _ => Shape::default(),
        }
    }

    fn object_shape(&self, map: &Map<String, Value>, depth: u32, skip: Option<&str>) -> Shape {
        let mut shape = Shape::default();
        if let Some(types) = map.get("type") {
            shape.types = types_named(types);
        }
        if let Some(value) = map.get("const") {
            shape = shape.meet(&Shape { types: type_of(value), values: Some(vec![value.clone()]), ..Shape::default() });
        }
        if let Some(Value::Array(values)) = map.get("enum") {
            let types = values.iter().fold(0, |t, v| t | type_of(v));
            shape = shape.meet(&Shape { types, values: Some(values.clone()), ..Shape::default() });
        }
        if let Some(Value::Array(required)) = map.get("required") {
            shape.required.extend(required.iter().filter_map(Value::as_str).map(str::to_owned));
        }
        if let Some(Value::Object(properties)) = map.get("properties") {
            for (key, sub) in properties {
                shape.properties.insert(key.clone(), self.shape(sub, depth + 1));
            }
        }
        shape.other_keys = self.other_keys(map, depth);
        if let Some(items @ (Value::Object(_) | Value::Bool(_))) = map.get("items") {
            // A tuple (`prefixItems`) constrains its first items otherwise; `items` is then the rest.
            if !map.contains_key("prefixItems") {
                shape.items = Some(Box::new(self.shape(items, depth + 1)));
            }
        }
        shape.template = map.get("pattern").and_then(Value::as_str).and_then(template);
        for key in ["pattern", "format"] {
            if let Some(text @ Value::String(_)) = map.get(key) {
                shape.string_checks.push(json!({ key: text }));
            }
        }
        let number = |key: &str| map.get(key).and_then(Value::as_u64);
        shape.min_items = number("minItems").unwrap_or(0);
        shape.max_items = number("maxItems");
        shape.min_length = number("minLength").unwrap_or(0);
        shape.max_length = number("maxLength");
        if let Some(target) = map.get("$ref").and_then(Value::as_str).and_then(|r| self.resolve(r)) {
            shape = shape.meet(&self.shape(target, depth + 1));
        }
        if let Some(Value::Array(all)) = map.get("allOf") {
            for sub in all {
                shape = shape.meet(&self.shape(sub, depth + 1));
            }
        }
        for key in ["anyOf", "oneOf"] {
            if skip == Some(key) {
                continue;
            }
            if let Some(Value::Array(branches)) = map.get(key) {
                let union = branches.iter().map(|b| self.shape(b, depth + 1)).fold(Shape::nothing(), |acc, s| acc.join(&s));
                shape = shape.meet(&union);
            }
        }
        shape
    }

    /// What keys outside `properties` hold: only `additionalProperties` decides, and only when no
    /// `patternProperties` could claim a key first.
    fn other_keys(&self, map: &Map<String, Value>, depth: u32) -> Option<Box<Shape>> {
        let additional = map.get("additionalProperties").map(|s| self.shape(s, depth + 1));
        match map.get("patternProperties") {
            Some(Value::Object(patterns)) if !patterns.is_empty() => {
                let patterns = patterns.values().map(|s| self.shape(s, depth + 1)).fold(Shape::nothing(), |acc, s| acc.join(&s));
                additional.map(|a| Box::new(a.join(&patterns)))
            }
            _ => additional.map(Box::new),
        }
    }

    /// A reference within this document (`#`, `#/json/pointer`); anything else is not followed.
    pub(super) fn resolve(&self, reference: &str) -> Option<&'a Value> {
        super::paths::node_at(self.root, &super::paths::pointer_path(reference)?)
    }
}

fn types_named(types: &Value) -> Types {
    let one = |name: &str| match name {
        "null" => NULL,
        "boolean" => BOOLEAN,
        "object" => OBJECT,
        "array" => ARRAY,
        "string" => STRING,
        "integer" => INTEGER,
        "number" => INTEGER | FRACTION,
        _ => ALL,
    };
    match types {
        Value::String(name) => one(name),
        Value::Array(names) => names.iter().filter_map(Value::as_str).fold(0, |t, name| t | one(name)),
        _ => ALL,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(schema: Value) -> Shape {
        Reader::new(&schema).shape(&schema, 0)
    }

    fn disjoint(a: Value, b: Value) -> bool {
        let root = json!({"a": a, "b": b});
        let reader = Reader::new(&root);
        reader.shape(&root["a"], 0).disjoint(&reader.shape(&root["b"], 0))
    }

    #[test]
    fn types_values_and_lengths_separate() {
        assert!(disjoint(json!({"type": "string"}), json!({"type": ["array", "null"]})));
        assert!(!disjoint(json!({"type": "integer"}), json!({"type": "number"})));
        assert!(disjoint(json!({"enum": ["a", "b"]}), json!({"enum": ["c"]})));
        assert!(!disjoint(json!({"enum": [1]}), json!({"const": 1.0})));
        assert!(disjoint(json!({"const": 1.5}), json!({"type": "integer"})));
        assert!(disjoint(json!({"type": "string", "maxLength": 2}), json!({"type": "string", "minLength": 3})));
        assert!(!disjoint(json!({"type": "string"}), json!({"type": "string", "pattern": "^a$"})));
        assert!(
            disjoint(json!({"enum": ["Door", "Window"]}), json!({"type": "string", "pattern": "(\\+)\\w+"})),
            "no value matches the pattern"
        );
        assert!(!disjoint(json!({"enum": ["Door", "+Window"]}), json!({"type": "string", "pattern": "(\\+)\\w+"})));
        let position = json!({"type": "string", "pattern": "^http://www.onvif.org/PositionGenericSpace$"});
        assert!(disjoint(position.clone(), json!({"type": "string", "pattern": "^http://www.onvif.org/VelocityGenericSpace$"})));
        assert!(disjoint(position.clone(), json!({"type": "string", "pattern": "^http://www.onvif.org/PositionGenericSpaces$"})));
        assert!(!disjoint(position.clone(), json!({"type": "string", "pattern": "^http://www.onvif.org/PositionGenericSpac.$"})));
        assert!(!disjoint(position, json!({"type": "string", "pattern": "^http://www.onvif.org/(Position)GenericSpace$"})));
        assert!(disjoint(json!({"const": "2024-13-01"}), json!({"type": "string", "format": "date"})), "formats are asserted");
        assert!(!disjoint(json!({}), json!({"type": "null"})));
    }

    #[test]
    fn objects_separate_by_a_required_key() {
        let company = json!({"type": "object", "properties": {"kind": {"enum": ["company"]}}, "required": ["kind"]});
        let person = json!({"type": "object", "properties": {"kind": {"enum": ["person"]}}});
        assert!(disjoint(company.clone(), person.clone()), "kind is required on one side and differs");
        assert!(
            !disjoint(json!({"type": "object", "properties": {"kind": {"enum": ["company"]}}}), person),
            "without required, {{}} is in both"
        );
        assert!(
            disjoint(company, json!({"properties": {"kind": {"enum": ["person"]}}})),
            "only objects are common, and kind tells them apart"
        );
        let untyped = json!({"properties": {"kind": {"enum": ["company"]}}, "required": ["kind"]});
        assert!(!disjoint(untyped, json!({"properties": {"kind": {"enum": ["person"]}}})), "null is an instance of both");
        let closed = json!({"type": "object", "properties": {"a": {}}, "additionalProperties": false});
        assert!(disjoint(closed.clone(), json!({"required": ["b"]})), "b is required on one side, forbidden on the other");
        assert!(!disjoint(closed, json!({"required": ["a"]})));
        let patterned = json!({"type": "object", "properties": {"a": {}}, "additionalProperties": false, "patternProperties": {"^b": {}}});
        assert!(!disjoint(patterned, json!({"required": ["b"]})), "a pattern may admit the key");
    }

    #[test]
    fn arrays_separate_by_length_or_items() {
        assert!(disjoint(json!({"type": "array", "maxItems": 1}), json!({"type": "array", "minItems": 2})));
        let strings = json!({"type": "array", "items": {"type": "string"}, "minItems": 1});
        assert!(disjoint(strings, json!({"type": "array", "items": {"type": "number"}})));
        assert!(!disjoint(json!({"type": "array", "items": {"type": "string"}}), json!({"type": "array", "items": {"type": "number"}})));
    }

    #[test]
    fn references_are_followed_and_cycles_end() {
        let root = json!({
            "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}, "required": ["next"]}},
            "a": {"$ref": "#/$defs/node"},
        });
        let reader = Reader::new(&root);
        let node = reader.shape(&root["a"], 0);
        assert_eq!(node.types, OBJECT);
        assert!(node.required.contains("next"));
        assert!(node.disjoint(&reader.shape(&json!({"type": "string"}), 0)));
    }

    #[test]
    fn any_of_keeps_only_common_facts() {
        let s = shape(json!({"anyOf": [{"type": "object", "required": ["x"]}, {"type": "null"}]}));
        assert_eq!(s.types, OBJECT | NULL);
        assert!(s.required.contains("x"), "required is vacuous for null: every object instance has x");
        let s = shape(json!({"anyOf": [{"type": "object", "required": ["x"]}, {"type": "object"}]}));
        assert!(s.required.is_empty());
    }
}
