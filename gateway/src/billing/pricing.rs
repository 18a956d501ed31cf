//! What a request costs: tokens × price per million tokens, exact. Prompt tokens read from a cache are
//! billed at the model's cached-input price, the rest of the prompt at its input price.

use runaii_wire::money::Prices;
use rust_decimal::Decimal;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::db::models::ModelRow;

/// A request's token counts as billed: the prompt (`input`, cached ones included), the part of it read
/// from a cache (`cached`, never more than `input`), and the answer (`output`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    pub input: u32,
    pub cached: u32,
    pub output: u32,
}

impl Tokens {
    /// Counts as a worker reported them; a cached count above the prompt (a worker's mistake) is cut to
    /// the prompt, so that no token is billed twice and the record stays within its constraint.
    #[must_use]
    pub fn new(input: u32, cached: u32, output: u32) -> Self {
        Self { input, cached: cached.min(input), output }
    }

    /// The counts of an OpenAI chat `usage` object (`prompt_tokens`, `completion_tokens`,
    /// `prompt_tokens_details.cached_tokens`); absent ones are 0.
    #[must_use]
    pub fn of_usage(usage: &Value) -> Self {
        let n = |v: &Value| v.as_u64().and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
        Self::new(n(&usage["prompt_tokens"]), n(&usage["prompt_tokens_details"]["cached_tokens"]), n(&usage["completion_tokens"]))
    }

    /// Writes these counts into an OpenAI chat `usage` object, keeping its other fields: what the client
    /// is told is what the ledger records, `prompt_tokens_details.cached_tokens` included (0 when nothing
    /// came from a cache, as OpenAI writes it).
    pub fn write_usage(&self, usage: &mut Value) {
        if !usage.is_object() {
            *usage = json!({});
        }
        usage["prompt_tokens"] = json!(self.input);
        usage["completion_tokens"] = json!(self.output);
        usage["total_tokens"] = json!(u64::from(self.input) + u64::from(self.output));
        if !usage["prompt_tokens_details"].is_object() {
            usage["prompt_tokens_details"] = json!({});
        }
        usage["prompt_tokens_details"]["cached_tokens"] = json!(self.cached);
    }

    /// Prompt tokens computed afresh: billed at the input price (and Anthropic's `input_tokens`).
    #[must_use]
    pub fn uncached(&self) -> u32 {
        self.input - self.cached.min(self.input)
    }
}

/// `((input − cached) × input price + cached × cached-input price + output × output price) / 1,000,000`,
/// exact.
#[must_use]
pub fn cost(model: &ModelRow, tokens: Tokens) -> Decimal {
    let prices = Prices {
        input_per_mtok: model.input_price_per_mtok,
        cached_input_per_mtok: model.cached_input_price_per_mtok,
        output_per_mtok: model.output_price_per_mtok,
    };
    prices.cost(tokens.input, tokens.cached, tokens.output)
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
            cached_input_price_per_mtok: Decimal::from_str(input).unwrap(),
            output_price_per_mtok: Decimal::from_str(output).unwrap(),
            batch_price_ratio: Decimal::from_str("0.5").unwrap(),
            supports_structured_outputs: true,
            supports_tools: false,
            schema_in_prompt: true,
            public: true,
            created_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn a_batch_line_costs_the_ratio_of_the_online_price_exactly() {
        let m = ModelRow { batch_price_ratio: d("0.3333"), cached_input_price_per_mtok: d("0.025"), ..model("0.10", "0.30") };
        let tokens = Tokens::new(1000, 400, 100);
        assert_eq!(cost(&m.at_batch_price(), tokens), cost(&m, tokens) * d("0.3333"));
        assert_eq!(cost(&model("0.10", "0.30").at_batch_price(), Tokens::new(1_000_000, 0, 1_000_000)), d("0.2"));
    }

    #[test]
    fn cost_is_exact() {
        let m = model("0.10", "0.30");
        let c = cost(&m, Tokens::new(52, 0, 48));
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
        assert_eq!(cost(&third, Tokens::new(1_000_000, 0, 0)), Decimal::from_str("0.3333333333").unwrap());
    }

    fn d(text: &str) -> Decimal {
        Decimal::from_str(text).unwrap()
    }

    #[test]
    fn cached_tokens_are_billed_at_the_cached_price_exactly() {
        let m = ModelRow { cached_input_price_per_mtok: d("0.025"), ..model("0.10", "0.30") };
        // (1000 − 800) × 0.10 + 800 × 0.025 + 48 × 0.30 = 20 + 20 + 14.4 = 54.4 per million.
        assert_eq!(cost(&m, Tokens::new(1000, 800, 48)), d("0.0000544"));
        // Nothing cached: the input price throughout, as before caching existed.
        assert_eq!(cost(&m, Tokens::new(1000, 0, 48)), cost(&model("0.10", "0.30"), Tokens::new(1000, 0, 48)));
        // All of the prompt cached.
        assert_eq!(cost(&m, Tokens::new(1000, 1000, 0)), d("0.000025"));
        // Prices with 10 decimals (the catalog's most) and awkward counts stay exact.
        let odd = ModelRow { cached_input_price_per_mtok: d("0.0000000001"), ..model("0.3333333333", "1.7777777777") };
        let expected = (Decimal::from(4_294_967_295u32 - 3_000_000_000u32) * d("0.3333333333")
            + Decimal::from(3_000_000_000u32) * d("0.0000000001")
            + Decimal::from(7u32) * d("1.7777777777"))
            / Decimal::from(1_000_000);
        assert_eq!(cost(&odd, Tokens::new(u32::MAX, 3_000_000_000, 7)), expected);
        // A cached price above the input price is allowed, and billed as set.
        let dear = ModelRow { cached_input_price_per_mtok: d("0.2"), ..model("0.10", "0.30") };
        assert_eq!(cost(&dear, Tokens::new(10, 10, 0)), d("0.000002"));
    }

    #[test]
    fn a_cached_count_above_the_prompt_is_cut_to_the_prompt() {
        assert_eq!(Tokens::new(10, 25, 3), Tokens { input: 10, cached: 10, output: 3 });
        assert_eq!(Tokens::new(10, 25, 3).uncached(), 0);
        let m = ModelRow { cached_input_price_per_mtok: d("0"), ..model("1", "1") };
        // Even built by hand past the bound, no token is billed twice or negatively.
        assert_eq!(cost(&m, Tokens { input: 10, cached: 25, output: 3 }), d("0.000003"));
    }

    #[test]
    fn usage_is_read_and_written_in_openai_shape() {
        let usage = serde_json::json!({"prompt_tokens": 120, "completion_tokens": 7, "total_tokens": 127,
                                       "prompt_tokens_details": {"cached_tokens": 96, "audio_tokens": 0}});
        let tokens = Tokens::of_usage(&usage);
        assert_eq!(tokens, Tokens { input: 120, cached: 96, output: 7 });
        assert_eq!(Tokens::of_usage(&serde_json::json!({"prompt_tokens": 5, "completion_tokens": 2})).cached, 0);
        // Written back: the ledger's counts, the other details kept, cached 0 written when nothing was cached.
        let mut written = usage.clone();
        Tokens::new(120, 200, 7).write_usage(&mut written);
        assert_eq!(written["prompt_tokens_details"], serde_json::json!({"cached_tokens": 120, "audio_tokens": 0}));
        let mut bare = serde_json::json!({"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7});
        Tokens::of_usage(&bare).write_usage(&mut bare);
        assert_eq!(
            bare,
            serde_json::json!({"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7,
                                           "prompt_tokens_details": {"cached_tokens": 0}})
        );
    }
}
