//! JSON shapes many answers share: exact decimals written as strings, the list envelope's `object`, the
//! currency. Each is a real type that answers serialize, and its schema is what the OpenAPI document
//! shows.

use rust_decimal::Decimal;
use serde::Serialize;
use utoipa::ToSchema;

/// An exact decimal, as text (money in USD, prices): never rounded through a float.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[schema(value_type = String, pattern = r"^-?[0-9]+(\.[0-9]+)?$", example = "0.0000196")]
pub struct DecimalString(pub String);

impl From<Decimal> for DecimalString {
    /// Without the trailing zeros of the database's scale: `0.0000196`, not `0.0000196000000000`.
    fn from(value: Decimal) -> Self {
        Self(value.normalize().to_string())
    }
}

// `"list"`, the `object` of every list answer. (A plain comment: a doc comment would be repeated as
// the description of every list in the OpenAPI document.)
#[derive(Debug, Clone, Copy, Default, Serialize, ToSchema)]
pub enum ListObject {
    #[default]
    #[serde(rename = "list")]
    List,
}

// `"USD"`: every amount is in US dollars.
#[derive(Debug, Clone, Copy, Default, Serialize, ToSchema)]
pub enum Usd {
    #[default]
    #[serde(rename = "USD")]
    Usd,
}
