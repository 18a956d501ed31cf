//! Cost records: one per request, append-only, keyed by request id. Writing one also settles the
//! request's credit hold and charges the tenant, in the same transaction; a cost the tenant cannot cover
//! is recorded with a shortfall, never dropped. Records are written in groups (`billing::writer`), one
//! transaction per group.

use rust_decimal::Decimal;
use sqlx::{PgConnection, PgPool};
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

/// Settles a group of records in one statement, so one round trip and one transaction (one WAL flush for
/// all of them): for each record, `runaii_settle` (migration `20261208090000`) inserts it, releases the
/// request's hold, charges the tenant and writes the charge to the credit ledger. The charge is the cost,
/// or, when the cost is more than the hold plus what is otherwise available (the hold was not a bound after
/// all), all of that. The record keeps the full cost and the difference as `shortfall`, for finance to see;
/// the no-overdraw check never refuses it, so the record is never lost. The records of one tenant are
/// charged in the order given, each against what the previous ones left.
///
/// A request held against a replica's lease (`leased`) is charged out of its worst case there. What it is
/// charged, up to that worst case, leaves the lease with it; a lease released meanwhile (its replica was
/// presumed dead) holds nothing, and the request is charged from what is available. The usual group —
/// every record leased by one replica and within its worst case — goes through `runaii_settle_leased`
/// (migration `20261209090000`), which skips the reads the general function needs.
///
/// Locks are taken in the order every other writer takes them (hold rows, then tenant rows by id, then
/// lease rows), so a concurrent release of stale holds waits; it never deadlocks.
///
/// # Errors
/// Database errors, including a second record for the same request id (unique violation): then nothing
/// of the group is written.
pub async fn settle(db: &PgPool, records: &[CostRecord]) -> Result<Vec<Settled>, sqlx::Error> {
    settle_on(&mut *db.acquire().await?, records).await
}

/// As [`settle`], on a connection the caller holds (the ledger writer keeps one: no pool checkout and
/// no liveness round trip per group).
///
/// # Errors
/// As [`settle`].
#[tracing::instrument(name = "ledger commit", skip_all, fields(records = records.len()))]
pub async fn settle_on(db: &mut PgConnection, records: &[CostRecord]) -> Result<Vec<Settled>, sqlx::Error> {
    if let Some(replica) = within_one_lease(records) {
        match settle_leased(&mut *db, records, replica).await {
            Ok(settled) => return Ok(settled),
            // The lease could not give what was charged (released meanwhile), or the group failed for
            // another reason: the general function settles it, or reports the group's error.
            Err(e) => tracing::debug!(error = %e, "leased settlement refused; settling the group in full"),
        }
    }
    settle_any(db, records).await
}

/// The replica when every record is held against its lease and costs no more than its worst case: each
/// is then charged its whole cost, and `runaii_settle_leased` settles the group with less work.
fn within_one_lease(records: &[CostRecord]) -> Option<Uuid> {
    let replica = records.first()?.leased?.replica;
    records.iter().all(|r| r.leased.is_some_and(|l| l.replica == replica && r.cost <= l.worst)).then_some(replica)
}

/// A group of [`within_one_lease`]: every record charged its cost, with no shortfall.
async fn settle_leased(db: &mut PgConnection, records: &[CostRecord], replica: Uuid) -> Result<Vec<Settled>, sqlx::Error> {
    let columns = Columns::of(records);
    let settled = sqlx::query_scalar!(
        r#"SELECT runaii_settle_leased($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) AS "settled!""#,
        &columns.request_ids as &[&str],
        &columns.tenant_ids,
        &columns.api_key_ids,
        &columns.models as &[&str],
        &columns.endpoints as &[&str],
        &columns.input_tokens,
        &columns.output_tokens,
        &columns.costs,
        &columns.statuses as &[&str],
        &columns.http_statuses,
        &columns.error_codes as &[Option<&str>],
        &columns.latencies_ms,
        &columns.cached_tokens,
        replica,
    )
    .fetch_one(db)
    .await?;
    if usize::try_from(settled).ok() != Some(records.len()) {
        return Err(sqlx::Error::Protocol(format!("runaii_settle_leased settled {settled} of {} records", records.len())));
    }
    Ok(records.iter().map(|r| Settled { charged: r.cost, shortfall: Decimal::ZERO }).collect())
}

/// A group's records as the settling functions take them: one array per column.
struct Columns<'a> {
    request_ids: Vec<&'a str>,
    tenant_ids: Vec<Uuid>,
    api_key_ids: Vec<Uuid>,
    models: Vec<&'a str>,
    endpoints: Vec<&'a str>,
    input_tokens: Vec<i32>,
    output_tokens: Vec<i32>,
    costs: Vec<Decimal>,
    statuses: Vec<&'a str>,
    http_statuses: Vec<i32>,
    error_codes: Vec<Option<&'a str>>,
    latencies_ms: Vec<i32>,
    cached_tokens: Vec<i32>,
}

impl<'a> Columns<'a> {
    fn of(records: &'a [CostRecord]) -> Self {
        let int = |f: &dyn Fn(&CostRecord) -> i32| records.iter().map(f).collect::<Vec<i32>>();
        let text = |f: &dyn Fn(&'a CostRecord) -> &'a str| records.iter().map(f).collect::<Vec<&str>>();
        let clamp = |n: u64| i32::try_from(n).unwrap_or(i32::MAX);
        Self {
            request_ids: text(&|r| r.request_id.as_str()),
            tenant_ids: records.iter().map(|r| r.tenant_id).collect(),
            api_key_ids: records.iter().map(|r| r.api_key_id).collect(),
            models: text(&|r| r.model.as_str()),
            endpoints: text(&|r| r.endpoint),
            input_tokens: int(&|r| clamp(r.input_tokens.into())),
            output_tokens: int(&|r| clamp(r.output_tokens.into())),
            costs: records.iter().map(|r| r.cost).collect(),
            statuses: text(&|r| r.status),
            http_statuses: int(&|r| i32::from(r.http_status)),
            error_codes: records.iter().map(|r| r.error_code.as_deref()).collect(),
            latencies_ms: int(&|r| clamp(r.latency_ms)),
            cached_tokens: int(&|r| clamp(r.cached_tokens.min(r.input_tokens).into())),
        }
    }
}

/// Any group, through `runaii_settle`: exact holds, leased records above their worst case, leases gone.
async fn settle_any(db: &mut PgConnection, records: &[CostRecord]) -> Result<Vec<Settled>, sqlx::Error> {
    let columns = Columns::of(records);
    // `as &[&str]`: the macros match a `text[]` parameter against `&[String]` only, and a cast opts a
    // parameter out of that match (the slice of `&str` encodes the same; the statement is still checked).
    let rows = sqlx::query!(
        r#"SELECT ord AS "ord!", charged AS "charged!", shortfall AS "shortfall!"
           FROM runaii_settle($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)"#,
        &columns.request_ids as &[&str],
        &columns.tenant_ids,
        &columns.api_key_ids,
        &columns.models as &[&str],
        &columns.endpoints as &[&str],
        &columns.input_tokens,
        &columns.output_tokens,
        &columns.costs,
        &columns.statuses as &[&str],
        &columns.http_statuses,
        &columns.error_codes as &[Option<&str>],
        &columns.latencies_ms,
        &columns.cached_tokens,
        &records.iter().map(|r| r.leased.map(|l| l.replica)).collect::<Vec<_>>() as &[Option<Uuid>],
        &records.iter().map(|r| r.leased.map(|l| l.worst)).collect::<Vec<_>>() as &[Option<Decimal>],
    )
    .fetch_all(db)
    .await?;
    // One row per record, in the order given; anything else is not the function this code was built for.
    let in_order = rows.len() == records.len() && rows.iter().zip(1..).all(|(row, ord)| row.ord == ord);
    if !in_order {
        return Err(sqlx::Error::Protocol(format!("runaii_settle answered {} rows for {} records", rows.len(), records.len())));
    }
    Ok(rows.into_iter().map(|row| Settled { charged: row.charged, shortfall: row.shortfall }).collect())
}
