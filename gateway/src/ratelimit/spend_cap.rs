//! A tenant's monthly spend cap: once its cost records this month (UTC) add up to the cap, its requests
//! are refused (402 `spend_cap_reached`) until the month ends or an admin raises the cap.
//!
//! The month's spend is the sum of the tenant's cost records, read from Postgres at most every
//! [`FRESH_FOR`] per tenant and replica (one read at a time per tenant), so a capped tenant costs a read a
//! second or so, not one per request. The cap can therefore be passed by what the tenant spends within
//! that window plus its requests in flight; credits still bound what it can spend at all. While Postgres
//! cannot be read, the last figure of this month stands; without one the request is refused
//! (`ledger_unavailable`), never admitted unchecked.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use chrono::{DateTime, Datelike, TimeZone, Utc};
use rust_decimal::Decimal;
use sqlx::PgPool;
use uuid::Uuid;

use crate::error::ApiError;

/// How long a tenant's month spend, once read, is trusted.
pub const FRESH_FOR: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy)]
struct Seen {
    month: DateTime<Utc>,
    spent: Decimal,
    at: Instant,
}

#[derive(Debug)]
pub struct SpendCaps {
    db: PgPool,
    seen: Mutex<HashMap<Uuid, Seen>>,
    /// One read at a time per tenant: the others wait for it and use its figure.
    reading: Mutex<HashMap<Uuid, Arc<tokio::sync::Mutex<()>>>>,
}

impl SpendCaps {
    #[must_use]
    pub fn new(db: PgPool) -> Self {
        Self { db, seen: Mutex::default(), reading: Mutex::default() }
    }

    /// Refuses a request of a tenant whose month's spend has reached its cap.
    ///
    /// # Errors
    /// [`ApiError::SpendCapReached`]; [`ApiError::LedgerUnavailable`] when the month's spend cannot be read
    /// and none was read this month.
    pub async fn check(&self, tenant: Uuid, cap: Option<Decimal>) -> Result<(), ApiError> {
        let Some(cap) = cap else { return Ok(()) };
        let month = month_start(Utc::now());
        let spent = self.spent(tenant, month).await?;
        if spent >= cap {
            return Err(ApiError::SpendCapReached {
                cap: cap.normalize().to_string(),
                spent: spent.normalize().to_string(),
                month: month.format("%Y-%m").to_string(),
            });
        }
        Ok(())
    }

    async fn spent(&self, tenant: Uuid, month: DateTime<Utc>) -> Result<Decimal, ApiError> {
        if let Some(seen) = self.fresh(tenant, month) {
            return Ok(seen.spent);
        }
        let lock = Arc::clone(self.reading.lock().unwrap_or_else(PoisonError::into_inner).entry(tenant).or_default());
        let _reading = lock.lock().await;
        // Read by another request while this one waited.
        if let Some(seen) = self.fresh(tenant, month) {
            return Ok(seen.spent);
        }
        match crate::db::tenants::spent_since(&self.db, tenant, month).await {
            Ok(spent) => {
                self.seen.lock().unwrap_or_else(PoisonError::into_inner).insert(tenant, Seen { month, spent, at: Instant::now() });
                Ok(spent)
            }
            Err(e) => {
                let last = self.seen.lock().unwrap_or_else(PoisonError::into_inner).get(&tenant).copied();
                match last {
                    Some(seen) if seen.month == month => {
                        tracing::warn!(error = %e, "month spend not read; the last figure stands");
                        Ok(seen.spent)
                    }
                    _ => Err(e.into()),
                }
            }
        }
    }

    fn fresh(&self, tenant: Uuid, month: DateTime<Utc>) -> Option<Seen> {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner).get(&tenant).copied()?;
        (seen.month == month && seen.at.elapsed() < FRESH_FOR).then_some(seen)
    }
}

/// The first instant of `now`'s month, UTC.
fn month_start(now: DateTime<Utc>) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(now.year(), now.month(), 1, 0, 0, 0).single().unwrap_or(now)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_month_starts_on_its_first_day_at_midnight_utc() {
        let at = |s: &str| s.parse::<chrono::DateTime<chrono::Utc>>().unwrap();
        assert_eq!(super::month_start(at("2026-12-31T23:59:59Z")), at("2026-12-01T00:00:00Z"));
        assert_eq!(super::month_start(at("2027-01-01T00:00:00Z")), at("2027-01-01T00:00:00Z"));
    }
}
