//! The most a request can cost, held from the tenant's credit at admission.
//!
//! The gateway has no tokenizer, so the prompt's token count is bounded from above: a token covers at
//! least one byte of text, so the JSON of the messages (and tools) — longer than their text, and longer
//! than the chat template's per-message markers — plus a fixed allowance for the template's own text
//! (a default system prompt, the generation prompt) cannot be exceeded. Neither side can exceed the
//! model's context window, which the worker enforces.

use rust_decimal::Decimal;
use serde_json::Value;

use crate::db::models::ModelRow;

/// Tokens a chat template may add beyond the messages' JSON: a default system prompt and markers.
const TEMPLATE_ALLOWANCE: usize = 256;

/// The worst-case token counts of a (final, as-sent) chat request: prompt and output.
#[must_use]
pub fn worst_case_tokens(model: &ModelRow, body: &Value) -> (u32, u32) {
    let context = u32::try_from(model.context_length).unwrap_or(0);
    let json_len = |key: &str| body.get(key).map_or(0, |v| v.to_string().len());
    let prompt = json_len("messages") + json_len("tools") + TEMPLATE_ALLOWANCE;
    let prompt = u32::try_from(prompt).unwrap_or(u32::MAX).min(context);
    let asked = ["max_completion_tokens", "max_tokens"].iter().find_map(|k| body.get(*k).and_then(Value::as_u64));
    let output = asked.map_or(context, |n| u32::try_from(n).unwrap_or(u32::MAX).min(context));
    (prompt, output)
}

/// The cost of the worst case, at the model's prices.
#[must_use]
pub fn worst_case_cost(model: &ModelRow, body: &Value) -> Decimal {
    let (prompt, output) = worst_case_tokens(model, body);
    super::cost(model, prompt, output)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bound_covers_the_messages_and_respects_the_context() {
        let model = crate::billing::pricing::tests::model("0.10", "0.30");
        let body = json!({"messages": [{"role": "user", "content": "hello"}], "max_tokens": 50});
        let (prompt, output) = worst_case_tokens(&ModelRow { context_length: 4096, ..model.clone() }, &body);
        assert!(prompt as usize > "hello".len() + TEMPLATE_ALLOWANCE);
        assert_eq!(output, 50);
        let no_max = json!({"messages": [{"role": "user", "content": "x".repeat(10_000)}]});
        assert_eq!(worst_case_tokens(&ModelRow { context_length: 4096, ..model }, &no_max), (4096, 4096));
    }
}
