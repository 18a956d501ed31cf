//! Cost records: one per request, append-only, keyed by request id. Writing one also settles the
//! request's credit hold and charges the tenant, in the same transaction; a cost the tenant cannot cover
//! is recorded with a shortfall, never dropped.

use rust_decimal::Decimal;
use sqlx::PgPool;
use uuid::Uuid;

#[derive(Debug, Clone)]
pub struct CostRecord {
    pub request_id: String,
    pub tenant_id: Uuid,
    pub api_key_id: Uuid,
    pub model: String,
    pub endpoint: &'static str,
    pub input_tokens: u32,
    pub output_tokens: u32,
    pub cost: Decimal,
    pub status: &'static str,
    pub http_status: u16,
    pub error_code: Option<String>,
    pub latency_ms: u64,
}

/// What a settlement did: the record's cost was charged in full, or up to what the tenant had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    /// Taken from the balance: `cost − shortfall`.
    pub charged: Decimal,
    /// The part of the cost the tenant could not pay (0 unless the cost exceeded its hold and what else
    /// the tenant had available).
    pub shortfall: Decimal,
}

/// Inserts the record, releases the request's hold, charges the tenant and writes the charge to the credit
/// ledger, in one transaction. The charge is the cost, or when the cost is more than the hold plus what is
/// otherwise available (the hold was not a bound after all), all of that: the record keeps the full cost
/// and the difference as `shortfall`, for finance to see, instead of the no-overdraw check refusing it and
/// the record being lost.
///
/// Locks are taken in the order every other writer takes them (the hold row, then the tenant row), so a
/// concurrent release of stale holds waits rather than deadlocks.
///
/// # Errors
/// Database errors, including a second record for the same request id (unique violation).
#[tracing::instrument(name = "cost record", skip_all, fields(status = %r.status))]
pub async fn settle(db: &PgPool, r: &CostRecord) -> Result<Settled, sqlx::Error> {
    let mut tx = db.begin().await?;
    let hold: Decimal = sqlx::query_scalar("DELETE FROM credit_holds WHERE request_id = $1 RETURNING amount")
        .bind(&r.request_id)
        .fetch_optional(&mut *tx)
        .await?
        .unwrap_or(Decimal::ZERO);
    // `reserved` still counts this request's hold: it is released below, in the same update as the charge.
    let (balance, reserved): (Decimal, Decimal) = sqlx::query_as("SELECT balance, reserved FROM tenants WHERE id = $1 FOR UPDATE")
        .bind(r.tenant_id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(sqlx::Error::RowNotFound)?;
    let settled = charge(r.cost, balance - reserved + hold);
    sqlx::query(
        "WITH record AS (
             INSERT INTO cost_records (request_id, tenant_id, api_key_id, model, endpoint, input_tokens, output_tokens,
                                       cost, shortfall, status, http_status, error_code, latency_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
             RETURNING request_id),
         tenant AS (
             UPDATE tenants SET balance = balance - $14, reserved = reserved - $15 WHERE id = $2 RETURNING id)
         INSERT INTO credit_ledger (tenant_id, kind, amount, request_id)
         SELECT $2, 'charge', -$14, request_id FROM record, tenant WHERE $14 > 0",
    )
    .bind(&r.request_id)
    .bind(r.tenant_id)
    .bind(r.api_key_id)
    .bind(&r.model)
    .bind(r.endpoint)
    .bind(i32::try_from(r.input_tokens).unwrap_or(i32::MAX))
    .bind(i32::try_from(r.output_tokens).unwrap_or(i32::MAX))
    .bind(r.cost)
    .bind(settled.shortfall)
    .bind(r.status)
    .bind(i32::from(r.http_status))
    .bind(&r.error_code)
    .bind(i32::try_from(r.latency_ms).unwrap_or(i32::MAX))
    .bind(settled.charged)
    .bind(hold)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(settled)
}

/// The cost, or all that is available when that is less.
fn charge(cost: Decimal, available: Decimal) -> Settled {
    let charged = cost.min(available.max(Decimal::ZERO));
    Settled { charged, shortfall: cost - charged }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_charge_never_exceeds_what_is_available() {
        let d = |s: &str| s.parse::<Decimal>().unwrap();
        assert_eq!(charge(d("0.5"), d("2")), Settled { charged: d("0.5"), shortfall: Decimal::ZERO });
        assert_eq!(charge(d("0.5"), d("0.2")), Settled { charged: d("0.2"), shortfall: d("0.3") });
        assert_eq!(charge(d("0.5"), Decimal::ZERO), Settled { charged: Decimal::ZERO, shortfall: d("0.5") });
        assert_eq!(charge(d("0.5"), d("-1")), Settled { charged: Decimal::ZERO, shortfall: d("0.5") });
    }
}
