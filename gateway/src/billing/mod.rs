//! Pricing, credit holds and cost records. Money is `Decimal`, never a float.

pub mod leases;
mod ledger;
mod lifetime;
pub(crate) mod pricing;
mod reserve;
pub mod writer;

pub use ledger::{Ledger, Outcome};
pub use lifetime::{Lifetime, Renewal};
pub use pricing::{cost, json_with_cost, Tokens};
pub use reserve::{worst_case_cost, worst_case_tokens};
