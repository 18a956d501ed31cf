//! Money and times as people read them. Money is printed from the `Decimal` the database returned, digit
//! for digit (no float ever holds it): the same text the API and the CSV export give.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;

/// USD, exact, without the database scale's trailing zeros: `0.000033`, `10`.
#[must_use]
pub(crate) fn money(amount: Decimal) -> String {
    amount.normalize().to_string()
}

/// `2026-12-06 14:03:27 UTC`.
#[must_use]
pub(crate) fn when(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// `2026-12-06 14:03:27`, for table cells under a "(UTC)" heading.
#[must_use]
pub(crate) fn when_cell(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S").to_string()
}

/// The current month, `YYYY-MM` (UTC).
#[must_use]
pub(crate) fn this_month() -> String {
    Utc::now().format("%Y-%m").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_keeps_every_digit_and_drops_trailing_zeros() {
        let d = |s: &str| s.parse::<Decimal>().unwrap();
        assert_eq!(money(d("0.0000330000000000")), "0.000033");
        assert_eq!(money(d("10.0000000000000000")), "10");
        assert_eq!(money(d("0.1234567890123456")), "0.1234567890123456");
        assert_eq!(money(d("-2.50")), "-2.5");
    }
}
