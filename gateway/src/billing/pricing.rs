//! What a request costs: tokens × price per million tokens, exact.

use rust_decimal::Decimal;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::db::models::ModelRow;

const MILLION: Decimal = Decimal::from_parts(1_000_000, 0, 0, false, 0);

#[must_use]
pub fn cost(model: &ModelRow, input_tokens: u32, output_tokens: u32) -> Decimal {
    (Decimal::from(input_tokens) * model.input_price_per_mtok + Decimal::from(output_tokens) * model.output_price_per_mtok) / MILLION
}

/// Serializes `value` with `usage.cost` set to `cost`, written digit for digit as a JSON number (a
/// `serde_json::Value` would round it through `f64`). The number goes in as a raw JSON value while the
/// document is serialized: no text the client or the model wrote can take its place.
#[must_use]
pub fn json_with_cost(value: &Value, cost: Decimal) -> String {
    let digits = cost.normalize().to_string();
    // A decimal prints as plain digits (never an exponent), which is always a valid JSON number.
    let Ok(cost) = RawValue::from_string(digits.clone()) else {
        let mut value = value.clone();
        if let Some(usage) = value.get_mut("usage").and_then(Value::as_object_mut) {
            usage.insert("cost".into(), Value::String(digits));
        }
        return value.to_string();
    };
    let document = WithCost { value, cost: &cost };
    serde_json::to_string(&document).unwrap_or_else(|_| value.to_string())
}

/// A document whose top-level `usage` object gains `cost`.
struct WithCost<'a> {
    value: &'a Value,
    cost: &'a RawValue,
}

impl Serialize for WithCost<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Some(fields) = self.value.as_object() else {
            return self.value.serialize(serializer);
        };
        let mut map = serializer.serialize_map(Some(fields.len()))?;
        for (name, field) in fields {
            match field.as_object() {
                Some(usage) if name == "usage" => map.serialize_entry(name, &UsageWithCost { usage, cost: self.cost })?,
                _ => map.serialize_entry(name, field)?,
            }
        }
        map.end()
    }
}

/// `usage` with `cost` last (replacing any `cost` it had).
struct UsageWithCost<'a> {
    usage: &'a serde_json::Map<String, Value>,
    cost: &'a RawValue,
}

impl Serialize for UsageWithCost<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for (name, field) in self.usage.iter().filter(|(name, _)| *name != "cost") {
            map.serialize_entry(name, field)?;
        }
        map.serialize_entry("cost", self.cost)?;
        map.end()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::str::FromStr;

    pub(crate) fn model(input: &str, output: &str) -> ModelRow {
        ModelRow {
            id: "m".into(),
            owned_by: "runaii".into(),
            context_length: 1,
            input_price_per_mtok: Decimal::from_str(input).unwrap(),
            output_price_per_mtok: Decimal::from_str(output).unwrap(),
            supports_structured_outputs: true,
            supports_tools: false,
            schema_in_prompt: true,
            public: true,
            created_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn cost_is_exact() {
        let m = model("0.10", "0.30");
        let c = cost(&m, 52, 48);
        assert_eq!(c, Decimal::from_str("0.0000196").unwrap());
        // Whatever strings the client or the model wrote, before or after `usage`, stay as they were.
        for text in ["__runaii_exact_cost__", "\"__runaii_exact_cost__\"", "0.0000196", "\"cost\":1"] {
            let doc = serde_json::json!({"instructions": text, "usage": {"prompt_tokens": 52, "cost": "old"}, "text": text});
            let out = json_with_cost(&doc, c);
            assert!(out.contains("\"usage\":{\"prompt_tokens\":52,\"cost\":0.0000196}"), "{out}");
            let back: Value = serde_json::from_str(&out).unwrap();
            assert_eq!(back["instructions"], text);
            assert_eq!(back["text"], text);
        }
        // Without a usage object the document is unchanged.
        assert_eq!(json_with_cost(&serde_json::json!({"a": [1, "x"]}), c), r#"{"a":[1,"x"]}"#);
        // 1/3-style prices do not drift: a million tokens at 0.3333333333 cost exactly that.
        let third = model("0.3333333333", "0");
        assert_eq!(cost(&third, 1_000_000, 0), Decimal::from_str("0.3333333333").unwrap());
    }
}
