//! Pricing, credit holds and cost records. Money is `Decimal`, never a float.

mod ledger;
pub(crate) mod pricing;
mod reserve;
pub mod writer;

pub use ledger::{usage_tokens, Ledger, Outcome};
pub use pricing::{cost, json_with_cost};
pub use reserve::{worst_case_cost, worst_case_tokens};
