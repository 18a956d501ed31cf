//! What finance reads: cost records by filter with keyset pagination, monthly totals, the credit ledger.
//! Sums are taken by Postgres over NUMERIC, so they are exact.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

/// One request's cost record.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct CostRow {
    pub request_id: String,
    pub created_at: DateTime<Utc>,
    pub tenant_id: Uuid,
    pub api_key_id: Uuid,
    pub model: String,
    pub endpoint: String,
    pub status: String,
    pub http_status: i32,
    pub error_code: Option<String>,
    /// The prompt's tokens, cached ones included.
    pub input_tokens: i32,
    /// Of `input_tokens`, those read from a cache, billed at the cached-input price.
    pub cached_tokens: i32,
    pub output_tokens: i32,
    /// The full cost, as the client was told.
    pub cost: Decimal,
    /// The part of `cost` the tenant's balance could not cover when it settled (0 almost always); the
    /// tenant was charged `cost − shortfall`.
    pub shortfall: Decimal,
    pub latency_ms: i32,
    /// The batch whose line this request was (billed at the batch price); null for an online request.
    pub batch_id: Option<String>,
}

/// Which records; every field narrows the set.
#[derive(Debug, Clone, Default)]
pub struct CostFilter {
    pub tenant_id: Option<Uuid>,
    pub api_key_id: Option<Uuid>,
    pub model: Option<String>,
    pub status: Option<String>,
    /// Inclusive.
    pub from: Option<DateTime<Utc>>,
    /// Exclusive.
    pub to: Option<DateTime<Utc>>,
    /// Records strictly after this (created_at, request_id), in that order.
    pub after: Option<(DateTime<Utc>, String)>,
}

/// Up to `limit` records matching `filter`, oldest first.
///
/// # Errors
/// Database errors.
pub async fn cost_records(db: &PgPool, filter: &CostFilter, limit: i64) -> Result<Vec<CostRow>, sqlx::Error> {
    let (after_at, after_id) = filter.after.clone().unzip();
    sqlx::query_as!(
        CostRow,
        "SELECT request_id, created_at, tenant_id, api_key_id, model, endpoint, status, http_status, error_code,
                input_tokens, cached_tokens, output_tokens, cost, shortfall, latency_ms,
                (SELECT bl.batch_id FROM batch_lines bl WHERE bl.request_id = cost_records.request_id) AS \"batch_id?\"
         FROM cost_records
         WHERE ($1::uuid IS NULL OR tenant_id = $1) AND ($2::uuid IS NULL OR api_key_id = $2)
           AND ($3::text IS NULL OR model = $3) AND ($4::text IS NULL OR status = $4)
           AND ($5::timestamptz IS NULL OR created_at >= $5) AND ($6::timestamptz IS NULL OR created_at < $6)
           AND ($7::timestamptz IS NULL OR (created_at, request_id) > ($7, $8::text))
         ORDER BY created_at, request_id
         LIMIT $9",
        filter.tenant_id,
        filter.api_key_id,
        filter.model.as_deref(),
        filter.status.as_deref(),
        filter.from,
        filter.to,
        after_at,
        after_id,
        limit,
    )
    .fetch_all(db)
    .await
}

#[derive(Debug, Clone, Serialize)]
pub struct MonthlyTotal {
    pub tenant_id: Uuid,
    pub requests: i64,
    pub input_tokens: i64,
    /// Of `input_tokens`, those read from a cache.
    pub cached_tokens: i64,
    pub output_tokens: i64,
    pub cost: Decimal,
    /// What of `cost` went unpaid; the tenants were charged `cost − shortfall`.
    pub shortfall: Decimal,
    /// Of `requests` and `cost`, the lines of batches.
    pub batch_requests: i64,
    pub batch_cost: Decimal,
}

/// Per-tenant totals of the records created in [from, to).
///
/// # Errors
/// Database errors.
pub async fn totals(db: &PgPool, tenant: Option<Uuid>, from: DateTime<Utc>, to: DateTime<Utc>) -> Result<Vec<MonthlyTotal>, sqlx::Error> {
    // `!`: counts and COALESCEd sums are never NULL, but a computed column's nullability is unknown to the
    // macros.
    sqlx::query_as!(
        MonthlyTotal,
        r#"SELECT tenant_id, count(*) AS "requests!", COALESCE(sum(input_tokens), 0)::bigint AS "input_tokens!",
                  COALESCE(sum(cached_tokens), 0)::bigint AS "cached_tokens!", COALESCE(sum(output_tokens), 0)::bigint AS "output_tokens!",
                  COALESCE(sum(cost), 0) AS "cost!", COALESCE(sum(shortfall), 0) AS "shortfall!",
                  count(bl.batch_id) AS "batch_requests!", COALESCE(sum(cost) FILTER (WHERE bl.batch_id IS NOT NULL), 0) AS "batch_cost!"
           FROM cost_records LEFT JOIN batch_lines bl ON bl.request_id = cost_records.request_id
           WHERE ($1::uuid IS NULL OR tenant_id = $1) AND created_at >= $2 AND created_at < $3
           GROUP BY tenant_id ORDER BY tenant_id"#,
        tenant,
        from,
        to,
    )
    .fetch_all(db)
    .await
}

/// A grant, an adjustment or a request's charge.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct LedgerEntry {
    pub id: i64,
    pub tenant_id: Uuid,
    pub kind: String,
    pub amount: Decimal,
    pub request_id: Option<String>,
    pub actor: Option<String>,
    pub note: String,
    pub created_at: DateTime<Utc>,
}

/// A tenant's credit ledger after entry `after_id`, oldest first.
///
/// # Errors
/// Database errors.
pub async fn credit_ledger(db: &PgPool, tenant: Uuid, after_id: i64, limit: i64) -> Result<Vec<LedgerEntry>, sqlx::Error> {
    sqlx::query_as!(
        LedgerEntry,
        "SELECT id, tenant_id, kind, amount, request_id, actor, note, created_at FROM credit_ledger
         WHERE tenant_id = $1 AND id > $2 ORDER BY id LIMIT $3",
        tenant,
        after_id,
        limit,
    )
    .fetch_all(db)
    .await
}
