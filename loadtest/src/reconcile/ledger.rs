//! The ledger as read after a run: cost records, charges, balances.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::Serialize;
use uuid::Uuid;

/// One row of `cost_records`.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, serde::Deserialize)]
pub struct Record {
    pub request_id: String,
    pub tenant_id: Uuid,
    pub model: String,
    pub status: String,
    pub http_status: i32,
    pub error_code: Option<String>,
    pub input_tokens: i32,
    /// Of `input_tokens`, those read from a worker's cache (0 from gateways before prompt caching).
    #[serde(default)]
    pub cached_tokens: i32,
    pub output_tokens: i32,
    pub cost: Decimal,
    pub created_at: DateTime<Utc>,
}

/// A `charge` entry of the credit ledger.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Charge {
    pub request_id: String,
    pub amount: Decimal,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Balance {
    pub balance: Decimal,
    pub reserved: Decimal,
}

/// The ledger as it stands after a run, for one tenant, from `window_start` on.
#[derive(Debug, Clone)]
pub struct Ledger {
    pub tenant_id: Uuid,
    pub window_start: DateTime<Utc>,
    /// The tenant's records created since `window_start`, and any record (of any tenant) whose id a
    /// client was given.
    pub records: Vec<Record>,
    /// The tenant's charges since `window_start`.
    pub charges: Vec<Charge>,
    /// The sum of the tenant's grants (and adjustments) since `window_start`.
    pub grants: Decimal,
    pub before: Balance,
    pub after: Balance,
}
