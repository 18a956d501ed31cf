//! What a request costs: tokens × price per million tokens, exact.

use rust_decimal::Decimal;
use serde_json::Value;

use crate::db::models::ModelRow;

const MILLION: Decimal = Decimal::from_parts(1_000_000, 0, 0, false, 0);

#[must_use]
pub fn cost(model: &ModelRow, input_tokens: u32, output_tokens: u32) -> Decimal {
    (Decimal::from(input_tokens) * model.input_price_per_mtok + Decimal::from(output_tokens) * model.output_price_per_mtok) / MILLION
}

/// Marks where the cost goes while the rest of the document is serialized. Model text can never
/// produce it: inside a JSON string a quote is always escaped.
const COST_SLOT: &str = "__runaii_exact_cost__";

/// Serializes `value` with `usage.cost` set to `cost`, written digit for digit as a JSON number (a
/// `serde_json::Value` would round it through `f64`).
#[must_use]
pub fn json_with_cost(value: &mut Value, cost: Decimal) -> String {
    if let Some(usage) = value.get_mut("usage").and_then(Value::as_object_mut) {
        usage.insert("cost".into(), Value::String(COST_SLOT.into()));
    }
    let text = value.to_string();
    text.replacen(&format!("\"{COST_SLOT}\""), &cost.normalize().to_string(), 1)
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
        let mut doc = serde_json::json!({"usage": {"prompt_tokens": 52}, "text": "\"__runaii_exact_cost__\""});
        let out = json_with_cost(&mut doc, c);
        assert!(out.contains("\"cost\":0.0000196"), "{out}");
        assert!(out.contains("__runaii_exact_cost__"), "model text is left alone: {out}");
        let back: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(back["text"], "\"__runaii_exact_cost__\"");
        // 1/3-style prices do not drift: a million tokens at 0.3333333333 cost exactly that.
        let third = model("0.3333333333", "0");
        assert_eq!(cost(&third, 1_000_000, 0), Decimal::from_str("0.3333333333").unwrap());
    }
}
