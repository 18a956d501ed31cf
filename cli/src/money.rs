//! Exact costs. The gateway writes `usage.cost` as a JSON number with every digit of the ledger's
//! decimal; reading it as `f64` would round it, so it is read as its raw text into a [`Decimal`].

use rust_decimal::Decimal;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// For `#[serde(deserialize_with)]`: a number (or a numeric string) read digit for digit; null or absent is `None`.
///
/// # Errors
/// Anything that is not a decimal number.
pub fn exact<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Decimal>, D::Error> {
    let Some(raw) = Option::<Box<RawValue>>::deserialize(deserializer)? else {
        return Ok(None);
    };
    runaii_wire::money::parse_amount(raw.get()).map(Some).map_err(serde::de::Error::custom)
}

/// What requests have cost so far: tokens and USD, summed exactly.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spend {
    pub requests: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cost: Decimal,
    /// Requests whose answer named no cost (another gateway, or an interrupted stream).
    pub unpriced: u64,
}

impl Spend {
    pub fn add(&mut self, prompt_tokens: u64, completion_tokens: u64, cost: Option<Decimal>) {
        self.requests += 1;
        self.prompt_tokens += prompt_tokens;
        self.completion_tokens += completion_tokens;
        match cost {
            Some(cost) => self.cost += cost,
            None => self.unpriced += 1,
        }
    }
}

impl std::fmt::Display for Spend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = if self.requests == 1 { "" } else { "s" };
        write!(
            f,
            "{} request{s}, {} prompt + {} completion tokens, cost {} USD",
            self.requests,
            self.prompt_tokens,
            self.completion_tokens,
            self.cost.normalize()
        )?;
        if self.unpriced > 0 {
            write!(f, " ({} without a cost)", self.unpriced)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    #[derive(Deserialize)]
    struct Usage {
        #[serde(default, deserialize_with = "exact")]
        cost: Option<Decimal>,
    }

    fn cost(json: &str) -> Option<Decimal> {
        serde_json::from_str::<Usage>(json).map(|u| u.cost).unwrap()
    }

    #[test]
    fn costs_keep_every_digit() {
        // 0.1 + 0.2 in f64 is 0.30000000000000004; twenty-eight significant digits survive here.
        assert_eq!(
            cost(r#"{"cost": 0.0000123456789012345678901234}"#).map(|d| d.to_string()).as_deref(),
            Some("0.0000123456789012345678901234")
        );
        assert_eq!(cost(r#"{"cost": "0.00042"}"#), Decimal::from_str("0.00042").ok());
        assert_eq!(cost(r#"{"cost": 1.5e-7}"#), Decimal::from_str("0.00000015").ok());
        assert_eq!(cost(r#"{"cost": null}"#), None);
        assert_eq!(cost("{}"), None);
        assert!(serde_json::from_str::<Usage>(r#"{"cost": "free"}"#).is_err());

        let mut spend = Spend::default();
        spend.add(10, 5, Decimal::from_str("0.1").ok());
        spend.add(10, 5, Decimal::from_str("0.2").ok());
        assert_eq!(spend.cost.to_string(), "0.3");
        assert_eq!(spend.to_string(), "2 requests, 20 prompt + 10 completion tokens, cost 0.3 USD");
    }
}
