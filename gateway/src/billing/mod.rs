//! Pricing and cost records. Money is `Decimal`, never a float.

mod ledger;
mod pricing;

pub use ledger::{usage_tokens, Ledger, Outcome};
pub use pricing::{cost, json_with_cost};
