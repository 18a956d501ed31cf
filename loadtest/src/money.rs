//! Money as the gateway computes it: exact decimals, never floats.

use std::str::FromStr;

use rust_decimal::Decimal;

const MILLION: Decimal = Decimal::from_parts(1_000_000, 0, 0, false, 0);

/// A model's catalog prices (USD per million tokens) and context window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prices {
    pub input_per_mtok: Decimal,
    /// For prompt tokens a worker read from its cache.
    pub cached_input_per_mtok: Decimal,
    pub output_per_mtok: Decimal,
    pub context_length: u32,
}

impl Prices {
    /// `(input × input price + output × output price) / 1,000,000`, the gateway's formula.
    #[must_use]
    pub fn cost(&self, input_tokens: u32, output_tokens: u32) -> Decimal {
        self.cost_with_cache(input_tokens, 0, output_tokens)
    }

    /// `((input − cached) × input price + cached × cached-input price + output × output price) / 1,000,000`:
    /// the gateway's formula when `cached` of the prompt's tokens came from a worker's cache.
    #[must_use]
    pub fn cost_with_cache(&self, input_tokens: u32, cached_tokens: u32, output_tokens: u32) -> Decimal {
        let cached = cached_tokens.min(input_tokens);
        (Decimal::from(input_tokens - cached) * self.input_per_mtok
            + Decimal::from(cached) * self.cached_input_per_mtok
            + Decimal::from(output_tokens) * self.output_per_mtok)
            / MILLION
    }

    /// The most a request with this `max_tokens` can cost: neither the prompt nor the answer can pass the
    /// context window. Looser than the gateway's hold (which bounds the prompt by its bytes), but it
    /// needs nothing the client cannot know.
    #[must_use]
    pub fn worst_case(&self, max_tokens: u32) -> Decimal {
        self.cost(self.context_length, max_tokens.min(self.context_length))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a decimal amount")]
pub struct NotAnAmount(pub String);

/// Reads an amount the way the gateway writes it: a JSON number written digit for digit (`usage.cost`),
/// or a decimal string (the admin API). A float would lose digits, so the raw JSON text is parsed.
///
/// # Errors
/// When the text is neither.
pub fn parse_amount(raw: &str) -> Result<Decimal, NotAnAmount> {
    let text = raw.trim();
    let text = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')).unwrap_or(text);
    Decimal::from_str_exact(text)
        .or_else(|_| Decimal::from_scientific(text))
        .or_else(|_| Decimal::from_str(text))
        .map_err(|_| NotAnAmount(raw.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(text: &str) -> Decimal {
        Decimal::from_str(text).unwrap()
    }

    #[test]
    fn cost_matches_the_gateway_to_the_last_digit() {
        let prices =
            Prices { input_per_mtok: d("0.10"), cached_input_per_mtok: d("0.025"), output_per_mtok: d("0.30"), context_length: 4096 };
        assert_eq!(prices.cost(52, 48), d("0.0000196"));
        assert_eq!(prices.cost_with_cache(1000, 800, 48), d("0.0000544"));
        assert_eq!(prices.worst_case(16), prices.cost(4096, 16));
        assert_eq!(prices.worst_case(100_000), prices.cost(4096, 4096));
        // A price with ten decimals stays exact over a million tokens.
        let third = Prices {
            input_per_mtok: d("0.3333333333"),
            cached_input_per_mtok: Decimal::ZERO,
            output_per_mtok: Decimal::ZERO,
            context_length: 1,
        };
        assert_eq!(third.cost(1_000_000, 0), d("0.3333333333"));
    }

    #[test]
    fn amounts_parse_from_numbers_and_strings_without_floats() {
        assert_eq!(parse_amount("0.0000196"), Ok(d("0.0000196")));
        assert_eq!(parse_amount("\"0.0000196000000000\""), Ok(d("0.0000196")));
        assert_eq!(parse_amount("1.96e-5"), Ok(d("0.0000196")));
        assert_eq!(parse_amount("0"), Ok(Decimal::ZERO));
        // 0.1 + 0.2 in floats is 0.30000000000000004; here it is 0.3.
        assert_eq!(parse_amount("0.1").unwrap() + parse_amount("0.2").unwrap(), d("0.3"));
        assert!(parse_amount("cheap").is_err());
    }
}
