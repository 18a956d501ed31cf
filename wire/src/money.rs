//! Money as the ledger keeps it: exact decimals, never floats. The price formula the gateway bills by
//! (and the load test checks the ledger against), and reading an amount back from what the gateway writes.

use std::str::FromStr;

use rust_decimal::Decimal;

const MILLION: Decimal = Decimal::from_parts(1_000_000, 0, 0, false, 0);

/// A model's prices, USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prices {
    pub input_per_mtok: Decimal,
    /// For prompt tokens a worker read from its cache.
    pub cached_input_per_mtok: Decimal,
    pub output_per_mtok: Decimal,
}

impl Prices {
    /// `((input − cached) × input price + cached × cached-input price + output × output price) /
    /// 1,000,000`, exact; `cached` counts at most the whole prompt.
    #[must_use]
    pub fn cost(&self, input_tokens: u32, cached_tokens: u32, output_tokens: u32) -> Decimal {
        let cached = cached_tokens.min(input_tokens);
        (Decimal::from(input_tokens - cached) * self.input_per_mtok
            + Decimal::from(cached) * self.cached_input_per_mtok
            + Decimal::from(output_tokens) * self.output_per_mtok)
            / MILLION
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
    fn cost_is_exact_to_the_last_digit() {
        let prices = Prices { input_per_mtok: d("0.10"), cached_input_per_mtok: d("0.025"), output_per_mtok: d("0.30") };
        assert_eq!(prices.cost(52, 0, 48), d("0.0000196"));
        assert_eq!(prices.cost(1000, 800, 48), d("0.0000544"));
        assert_eq!(prices.cost(10, 50, 0), prices.cost(10, 10, 0), "no more cached tokens than the prompt");
        // A price with ten decimals stays exact over a million tokens.
        let third = Prices { input_per_mtok: d("0.3333333333"), cached_input_per_mtok: Decimal::ZERO, output_per_mtok: Decimal::ZERO };
        assert_eq!(third.cost(1_000_000, 0, 0), d("0.3333333333"));
    }

    #[test]
    fn amounts_parse_from_numbers_and_strings_without_floats() {
        assert_eq!(parse_amount("0.0000196"), Ok(d("0.0000196")));
        assert_eq!(parse_amount("\"0.0000196000000000\""), Ok(d("0.0000196")));
        assert_eq!(parse_amount("1.96e-5"), Ok(d("0.0000196")));
        assert_eq!(parse_amount("0"), Ok(Decimal::ZERO));
        assert_eq!(parse_amount("0.0000123456789012345678901234").unwrap().to_string(), "0.0000123456789012345678901234");
        // 0.1 + 0.2 in floats is 0.30000000000000004; here it is 0.3.
        assert_eq!(parse_amount("0.1").unwrap() + parse_amount("0.2").unwrap(), d("0.3"));
        assert!(parse_amount("cheap").is_err());
    }
}
