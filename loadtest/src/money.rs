//! What a request may cost, by the gateway's formula (`runaii_wire::money`): exact decimals, never floats.

pub use runaii_wire::money::{parse_amount, NotAnAmount};
use rust_decimal::Decimal;

/// A model's catalog prices and context window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prices {
    pub per_mtok: runaii_wire::money::Prices,
    pub context_length: u32,
}

impl Prices {
    /// What `input_tokens` of prompt, none from a cache, and `output_tokens` of answer cost.
    #[must_use]
    pub fn cost(&self, input_tokens: u32, output_tokens: u32) -> Decimal {
        self.per_mtok.cost(input_tokens, 0, output_tokens)
    }

    /// The same when `cached_tokens` of the prompt came from a worker's cache.
    #[must_use]
    pub fn cost_with_cache(&self, input_tokens: u32, cached_tokens: u32, output_tokens: u32) -> Decimal {
        self.per_mtok.cost(input_tokens, cached_tokens, output_tokens)
    }

    /// The most a request with this `max_tokens` can cost: neither the prompt nor the answer can pass the
    /// context window. Looser than the gateway's hold (which bounds the prompt by its bytes), but it
    /// needs nothing the client cannot know.
    #[must_use]
    pub fn worst_case(&self, max_tokens: u32) -> Decimal {
        self.cost(self.context_length, max_tokens.min(self.context_length))
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    fn d(text: &str) -> Decimal {
        Decimal::from_str(text).unwrap()
    }

    #[test]
    fn the_worst_case_is_a_full_context_both_ways() {
        let per_mtok =
            runaii_wire::money::Prices { input_per_mtok: d("0.10"), cached_input_per_mtok: d("0.025"), output_per_mtok: d("0.30") };
        let prices = Prices { per_mtok, context_length: 4096 };
        assert_eq!(prices.cost(52, 48), d("0.0000196"));
        assert_eq!(prices.cost_with_cache(1000, 800, 48), d("0.0000544"));
        assert_eq!(prices.worst_case(16), prices.cost(4096, 16));
        assert_eq!(prices.worst_case(100_000), prices.cost(4096, 4096));
    }
}
