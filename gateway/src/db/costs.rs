//! Cost records: one per request, append-only, keyed by request id. Writing one also settles the
//! request's credit hold and charges the tenant, in the same transaction; a cost the tenant cannot cover
//! is recorded with a shortfall, never dropped. Records are written in groups (`billing::writer`), one
//! transaction per group.

use std::collections::HashMap;

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
    /// The prompt's tokens, cached ones included.
    pub input_tokens: u32,
    /// Of `input_tokens`, those read from a cache (billed at the cached-input price).
    pub cached_tokens: u32,
    pub output_tokens: u32,
    pub cost: Decimal,
    pub status: &'static str,
    pub http_status: u16,
    pub error_code: Option<String>,
    pub latency_ms: u64,
    /// Held against a replica's credit lease (`None`: an exact hold, a `credit_holds` row).
    pub leased: Option<Leased>,
}

/// A request held against a replica's lease: its worst case, which the settlement charges from.
#[derive(Debug, Clone, Copy)]
pub struct Leased {
    pub replica: Uuid,
    pub worst: Decimal,
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

/// Settles a group of records in one transaction (one WAL flush for all of them): for each, inserts the
/// record, releases the request's hold, charges the tenant and writes the charge to the credit ledger.
/// The charge is the cost, or when the cost is more than the hold plus what is otherwise available (the
/// hold was not a bound after all), all of that: the record keeps the full cost and the difference as
/// `shortfall`, for finance to see, instead of the no-overdraw check refusing it and the record being
/// lost. Records of one tenant are charged in the order given, each against what the previous left.
///
/// A request held against a replica's lease (`leased`) is charged from its worst case there, and what it
/// is charged (up to that worst case) leaves the lease with it.
///
/// Locks are taken in the order every other writer takes them (hold rows, then tenant rows by id, then
/// lease rows), so a concurrent release of stale holds waits rather than deadlocks.
///
/// # Errors
/// Database errors, including a second record for the same request id (unique violation): then nothing
/// of the group is written.
#[tracing::instrument(name = "ledger commit", skip_all, fields(records = records.len()))]
pub async fn settle(db: &PgPool, records: &[CostRecord]) -> Result<Vec<Settled>, sqlx::Error> {
    let mut tx = db.begin().await?;
    let request_ids: Vec<&str> = records.iter().map(|r| r.request_id.as_str()).collect();
    let holds: HashMap<String, Decimal> =
        sqlx::query!("DELETE FROM credit_holds WHERE request_id = ANY($1) RETURNING request_id, amount", &request_ids as &[&str])
            .fetch_all(&mut *tx)
            .await?
            .into_iter()
            .map(|hold| (hold.request_id, hold.amount))
            .collect();
    let mut tenant_ids: Vec<Uuid> = records.iter().map(|r| r.tenant_id).collect();
    tenant_ids.sort_unstable();
    tenant_ids.dedup();
    // `reserved` still counts these requests' holds: they are released below, with the charges.
    let mut money: HashMap<Uuid, (Decimal, Decimal)> =
        sqlx::query!("SELECT id, balance, reserved FROM tenants WHERE id = ANY($1) ORDER BY id FOR UPDATE", &tenant_ids)
            .fetch_all(&mut *tx)
            .await?
            .into_iter()
            .map(|tenant| (tenant.id, (tenant.balance, tenant.reserved)))
            .collect();
    let mut settled = Vec::with_capacity(records.len());
    let mut per_tenant: HashMap<Uuid, (Decimal, Decimal)> = HashMap::new();
    let mut per_lease: HashMap<(Uuid, Uuid), Decimal> = HashMap::new();
    for r in records {
        let (balance, reserved) = money.get_mut(&r.tenant_id).ok_or(sqlx::Error::RowNotFound)?;
        // An exact hold is released whole. A leased request's worst case is its share of the lease: what
        // it is charged, up to that, leaves the lease; the rest stays leased for the next requests.
        let hold = match r.leased {
            Some(lease) => lease.worst,
            None => holds.get(&r.request_id).copied().unwrap_or(Decimal::ZERO),
        };
        let s = charge(r.cost, *balance - *reserved + hold);
        let released = match r.leased {
            Some(lease) => {
                let from_lease = s.charged.min(lease.worst);
                *per_lease.entry((r.tenant_id, lease.replica)).or_default() += from_lease;
                from_lease
            }
            None => hold,
        };
        *balance -= s.charged;
        *reserved -= released;
        let totals = per_tenant.entry(r.tenant_id).or_default();
        totals.0 += s.charged;
        totals.1 += released;
        settled.push(s);
    }
    if !per_lease.is_empty() {
        let ((tenants, replicas), amounts): ((Vec<Uuid>, Vec<Uuid>), Vec<Decimal>) = per_lease.into_iter().unzip();
        sqlx::query!(
            "UPDATE credit_leases SET amount = credit_leases.amount - d.amount
             FROM UNNEST($1::uuid[], $2::uuid[], $3::numeric[]) AS d(tenant_id, replica_id, amount)
             WHERE credit_leases.tenant_id = d.tenant_id AND credit_leases.replica_id = d.replica_id",
            &tenants,
            &replicas,
            &amounts,
        )
        .execute(&mut *tx)
        .await?;
    }
    insert_records(&mut tx, records, &settled).await?;
    let (ids, (charged, released)): (Vec<Uuid>, (Vec<Decimal>, Vec<Decimal>)) = per_tenant.into_iter().unzip();
    sqlx::query!(
        "UPDATE tenants SET balance = balance - d.charged, reserved = reserved - d.released
         FROM UNNEST($1::uuid[], $2::numeric[], $3::numeric[]) AS d(id, charged, released) WHERE tenants.id = d.id",
        &ids,
        &charged,
        &released,
    )
    .execute(&mut *tx)
    .await?;
    let charges: Vec<(&CostRecord, Decimal)> =
        records.iter().zip(&settled).filter(|(_, s)| s.charged > Decimal::ZERO).map(|(r, s)| (r, s.charged)).collect();
    if !charges.is_empty() {
        let tenants: Vec<Uuid> = charges.iter().map(|(r, _)| r.tenant_id).collect();
        let amounts: Vec<Decimal> = charges.iter().map(|(_, c)| *c).collect();
        let request_ids: Vec<&str> = charges.iter().map(|(r, _)| r.request_id.as_str()).collect();
        sqlx::query!(
            "INSERT INTO credit_ledger (tenant_id, kind, amount, request_id)
             SELECT tenant_id, 'charge', -amount, request_id FROM UNNEST($1::uuid[], $2::numeric[], $3::text[]) AS c(tenant_id, amount, request_id)",
            &tenants,
            &amounts,
            &request_ids as &[&str],
        )
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(settled)
}

async fn insert_records(tx: &mut sqlx::PgConnection, records: &[CostRecord], settled: &[Settled]) -> Result<(), sqlx::Error> {
    let column = |f: &dyn Fn(&CostRecord) -> i32| records.iter().map(f).collect::<Vec<i32>>();
    let text = |f: &dyn Fn(&CostRecord) -> &str| records.iter().map(f).collect::<Vec<&str>>();
    let request_ids = text(&|r| r.request_id.as_str());
    let models = text(&|r| r.model.as_str());
    let endpoints = text(&|r| r.endpoint);
    let statuses = text(&|r| r.status);
    let error_codes: Vec<Option<&str>> = records.iter().map(|r| r.error_code.as_deref()).collect();
    // `as &[&str]`: the macros match a `text[]` parameter against `&[String]` only, and a cast opts a
    // parameter out of that match (the slice of `&str` encodes the same; the statement is still checked).
    sqlx::query!(
        "INSERT INTO cost_records (request_id, tenant_id, api_key_id, model, endpoint, input_tokens, output_tokens,
                                   cost, shortfall, status, http_status, error_code, latency_ms, cached_tokens)
         SELECT * FROM UNNEST($1::text[], $2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::int4[], $7::int4[],
                              $8::numeric[], $9::numeric[], $10::text[], $11::int4[], $12::text[], $13::int4[], $14::int4[])",
        &request_ids as &[&str],
        &records.iter().map(|r| r.tenant_id).collect::<Vec<_>>(),
        &records.iter().map(|r| r.api_key_id).collect::<Vec<_>>(),
        &models as &[&str],
        &endpoints as &[&str],
        &column(&|r| i32::try_from(r.input_tokens).unwrap_or(i32::MAX)),
        &column(&|r| i32::try_from(r.output_tokens).unwrap_or(i32::MAX)),
        &records.iter().map(|r| r.cost).collect::<Vec<_>>(),
        &settled.iter().map(|s| s.shortfall).collect::<Vec<_>>(),
        &statuses as &[&str],
        &column(&|r| i32::from(r.http_status)),
        &error_codes as &[Option<&str>],
        &column(&|r| i32::try_from(r.latency_ms).unwrap_or(i32::MAX)),
        &column(&|r| i32::try_from(r.cached_tokens.min(r.input_tokens)).unwrap_or(i32::MAX)),
    )
    .execute(tx)
    .await?;
    Ok(())
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
