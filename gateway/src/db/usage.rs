//! One tenant's own usage, for the console's customer pages: its recent requests (newest first), one of
//! them by id, and its spend per day and per model. Every query here takes the tenant as a required
//! parameter, never an `Option`: there is no way to ask these functions for "every tenant", so a page built
//! on them cannot show another tenant's records.

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use sqlx::PgPool;
use uuid::Uuid;

use super::reports::CostRow;

/// Up to `limit` of the tenant's records, newest first; with `before`, only those strictly before that
/// (created_at, request_id). Two statements rather than one with `$2 IS NULL OR …`, so that the cursor is
/// always a condition the (tenant_id, created_at) index can start from, however deep the page.
///
/// # Errors
/// Database errors.
pub async fn recent(db: &PgPool, tenant: Uuid, before: Option<(DateTime<Utc>, String)>, limit: i64) -> Result<Vec<CostRow>, sqlx::Error> {
    match before {
        None => {
            sqlx::query_as!(
                CostRow,
                "SELECT request_id, created_at, tenant_id, api_key_id, model, endpoint, status, http_status, error_code,
                        input_tokens, cached_tokens, output_tokens, cost, shortfall, latency_ms,
                (SELECT bl.batch_id FROM batch_lines bl WHERE bl.request_id = cost_records.request_id) AS \"batch_id?\"
                 FROM cost_records WHERE tenant_id = $1 ORDER BY created_at DESC, request_id DESC LIMIT $2",
                tenant,
                limit,
            )
            .fetch_all(db)
            .await
        }
        Some((at, id)) => {
            sqlx::query_as!(
                CostRow,
                "SELECT request_id, created_at, tenant_id, api_key_id, model, endpoint, status, http_status, error_code,
                        input_tokens, cached_tokens, output_tokens, cost, shortfall, latency_ms,
                (SELECT bl.batch_id FROM batch_lines bl WHERE bl.request_id = cost_records.request_id) AS \"batch_id?\"
                 FROM cost_records
                 WHERE tenant_id = $1 AND created_at <= $2 AND (created_at, request_id) < ($2, $3)
                 ORDER BY created_at DESC, request_id DESC LIMIT $4",
                tenant,
                at,
                id,
                limit,
            )
            .fetch_all(db)
            .await
        }
    }
}

/// The tenant's record of one request; `None` when there is none, or it is another tenant's.
///
/// # Errors
/// Database errors.
pub async fn one(db: &PgPool, tenant: Uuid, request_id: &str) -> Result<Option<CostRow>, sqlx::Error> {
    sqlx::query_as!(
        CostRow,
        "SELECT request_id, created_at, tenant_id, api_key_id, model, endpoint, status, http_status, error_code,
                input_tokens, cached_tokens, output_tokens, cost, shortfall, latency_ms,
                (SELECT bl.batch_id FROM batch_lines bl WHERE bl.request_id = cost_records.request_id) AS \"batch_id?\"
         FROM cost_records WHERE tenant_id = $1 AND request_id = $2",
        tenant,
        request_id,
    )
    .fetch_optional(db)
    .await
}

/// A day's spend (UTC), summed exactly.
#[derive(Debug, Clone)]
pub struct DaySpend {
    pub day: NaiveDate,
    pub requests: i64,
    pub cost: Decimal,
}

/// A model's share of the spend, summed exactly.
#[derive(Debug, Clone)]
pub struct ModelSpend {
    pub model: String,
    pub requests: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost: Decimal,
}

/// The tenant's spend over [from, to), per UTC day (days without records absent, oldest first) and per
/// model (most expensive first).
#[derive(Debug, Clone, Default)]
pub struct Spend {
    pub per_day: Vec<DaySpend>,
    pub per_model: Vec<ModelSpend>,
}

/// One row of the grouping sets: `day` is set on the per-day rows, `model` on the per-model rows.
struct SpendRow {
    day: Option<NaiveDate>,
    model: Option<String>,
    requests: i64,
    input_tokens: i64,
    output_tokens: i64,
    cost: Decimal,
}

/// The tenant's spend per day and per model, in one pass over its records (grouping sets): a busy
/// tenant's month is hundreds of thousands of rows, read once rather than twice.
///
/// # Errors
/// Database errors.
pub async fn spend(db: &PgPool, tenant: Uuid, from: DateTime<Utc>, to: DateTime<Utc>) -> Result<Spend, sqlx::Error> {
    // `?`: `day` and `model` are each NULL on the other grouping set's rows (`model` is NOT NULL in the table,
    // so the macros would otherwise read it as never NULL). `!`: counts and COALESCEd sums are never NULL.
    let rows: Vec<SpendRow> = sqlx::query_as!(
        SpendRow,
        r#"SELECT (created_at AT TIME ZONE 'UTC')::date AS "day?", model AS "model?", count(*) AS "requests!",
                  COALESCE(sum(input_tokens), 0)::bigint AS "input_tokens!", COALESCE(sum(output_tokens), 0)::bigint AS "output_tokens!",
                  COALESCE(sum(cost), 0) AS "cost!"
           FROM cost_records WHERE tenant_id = $1 AND created_at >= $2 AND created_at < $3
           GROUP BY GROUPING SETS ((created_at AT TIME ZONE 'UTC')::date, model)"#,
        tenant,
        from,
        to,
    )
    .fetch_all(db)
    .await?;
    let mut spend = Spend::default();
    for row in rows {
        match (row.day, row.model) {
            (Some(day), None) => spend.per_day.push(DaySpend { day, requests: row.requests, cost: row.cost }),
            (None, Some(model)) => spend.per_model.push(ModelSpend {
                model,
                requests: row.requests,
                input_tokens: row.input_tokens,
                output_tokens: row.output_tokens,
                cost: row.cost,
            }),
            _ => {}
        }
    }
    spend.per_day.sort_by_key(|d| d.day);
    spend.per_model.sort_by(|a, b| b.cost.cmp(&a.cost).then_with(|| a.model.cmp(&b.model)));
    Ok(spend)
}
