//! Finance: cost records (filtered, paginated, or exported as CSV, see [`csv`]), monthly totals, the credit
//! ledger.
//! Amounts are decimal strings, exact; a month's CSV sums to its total to the last digit.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Json, Query, State};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Datelike, NaiveDate, TimeZone, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::csv;
use super::input::{page_size, paginate, query};
use super::{Claims, Role};
use crate::db::reports::{self, CostFilter, CostRow, LedgerEntry};
use crate::error::ApiError;
use crate::extract::Path;
use crate::shapes::{DecimalString, ListObject, Usd};
use crate::state::AppState;

/// One page, oldest first; pass `next_cursor` as `cursor` for the next.
#[derive(Debug, Serialize, ToSchema)]
pub struct CostRecordPage {
    #[schema(inline)]
    pub object: ListObject,
    pub data: Vec<CostRow>,
    pub has_more: bool,
    pub next_cursor: Option<String>,
}

/// One tenant's month (UTC): sums of its cost records, exact.
#[derive(Debug, Serialize, ToSchema)]
pub struct MonthlyTotal {
    pub tenant_id: Uuid,
    #[schema(example = "2026-11")]
    pub month: String,
    pub requests: i64,
    /// Prompt tokens, cached ones included.
    pub input_tokens: i64,
    /// Of `input_tokens`, those read from a cache (billed at the cached-input price).
    pub cached_tokens: i64,
    pub output_tokens: i64,
    pub cost: DecimalString,
    /// The part of `cost` the balance could not cover (0 unless a cost exceeded its hold and the balance);
    /// the tenant was charged `cost - shortfall`.
    pub shortfall: DecimalString,
    /// Of `requests`, the lines of batches (billed at the batch price).
    pub batch_requests: i64,
    /// Of `cost`, what the lines of batches cost.
    pub batch_cost: DecimalString,
    #[schema(inline)]
    pub currency: Usd,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MonthlyTotalList {
    #[schema(inline)]
    pub object: ListObject,
    pub data: Vec<MonthlyTotal>,
}

/// One page, oldest first; pass `next_cursor` as `cursor` for the next.
#[derive(Debug, Serialize, ToSchema)]
pub struct LedgerPage {
    #[schema(inline)]
    pub object: ListObject,
    pub data: Vec<LedgerEntry>,
    pub has_more: bool,
    pub next_cursor: Option<String>,
}

/// Every matching record, oldest first: a header line (`request_id,created_at,tenant_id,api_key_id,model,
/// endpoint,status,http_status,error_code,input_tokens,cached_tokens,output_tokens,cost,shortfall,latency_ms,batch_id`), then one line per
/// record (RFC 4180 quoting; text a spreadsheet would run as a formula starts with `'`).
#[derive(ToSchema)]
#[schema(value_type = String)]
#[expect(dead_code, reason = "the CSV is streamed row by row (`csv::export`); this type is its schema")]
pub struct CostRecordsCsv(String);

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct CostQuery {
    tenant_id: Option<Uuid>,
    api_key_id: Option<Uuid>,
    model: Option<String>,
    status: Option<String>,
    /// RFC 3339, inclusive.
    from: Option<DateTime<Utc>>,
    /// RFC 3339, exclusive.
    to: Option<DateTime<Utc>>,
    /// `YYYY-MM`: shorthand for that calendar month (UTC).
    month: Option<String>,
    cursor: Option<String>,
    limit: Option<i64>,
    /// `csv` for an export of every matching record, streamed.
    format: Option<String>,
}

#[utoipa::path(
    get,
    path = "/admin/v1/cost-records",
    tag = "admin",
    operation_id = "adminListCostRecords",
    summary = "List or export cost records",
    description = "Role: finance. Filters narrow the set; `month` is shorthand for that calendar month (UTC). A token confined to a tenant sees only its own.",
    params(CostQuery),
    security(("admin_jwt" = [])),
    responses(
        (status = 200, description = "A page of records, or with `format=csv` every matching record", content((CostRecordPage = "application/json"), (CostRecordsCsv = "text/csv"))),
        crate::apidoc::errors::AdminLookupErrors,
    )
)]
pub(super) async fn cost_records(
    State(state): State<AppState>,
    claims: Claims,
    q: Result<Query<CostQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    claims.require(Role::Finance)?;
    let q = query(q)?;
    let (mut from, mut to) = (q.from, q.to);
    if let Some(month) = &q.month {
        let (start, end) = month_range(month)?;
        from = Some(from.map_or(start, |f| f.max(start)));
        to = Some(to.map_or(end, |t| t.min(end)));
    }
    let filter = CostFilter {
        tenant_id: claims.tenant_scope(q.tenant_id)?,
        api_key_id: q.api_key_id,
        model: q.model,
        status: q.status,
        from,
        to,
        after: q.cursor.as_deref().map(parse_cursor).transpose()?,
    };
    if q.format.as_deref() == Some("csv") {
        return csv::export(state.db.clone(), filter).await;
    }
    let size = page_size(q.limit);
    let rows = reports::cost_records(&state.db, &filter, size + 1).await?;
    let (data, has_more, next_cursor) = paginate(rows, size, cursor_of);
    Ok(Json(CostRecordPage { object: ListObject::List, data, has_more, next_cursor }).into_response())
}

/// The cursor is opaque to clients: the last record's time (µs since the epoch) and request id.
fn cursor_of(row: &CostRow) -> String {
    format!("{}:{}", row.created_at.timestamp_micros(), row.request_id)
}

fn parse_cursor(cursor: &str) -> Result<(DateTime<Utc>, String), ApiError> {
    let bad = || ApiError::invalid("cursor is not one this API returned", "cursor");
    let (micros, id) = cursor.split_once(':').ok_or_else(bad)?;
    let at = DateTime::from_timestamp_micros(micros.parse().map_err(|_| bad())?).ok_or_else(bad)?;
    Ok((at, id.to_owned()))
}

/// [first instant of the month, first instant of the next), UTC.
fn month_range(month: &str) -> Result<(DateTime<Utc>, DateTime<Utc>), ApiError> {
    let bad = || ApiError::invalid("month must be YYYY-MM", "month");
    let first = NaiveDate::parse_from_str(&format!("{month}-01"), "%Y-%m-%d").map_err(|_| bad())?;
    let next = if first.month() == 12 {
        NaiveDate::from_ymd_opt(first.year() + 1, 1, 1)
    } else {
        NaiveDate::from_ymd_opt(first.year(), first.month() + 1, 1)
    }
    .ok_or_else(bad)?;
    let at = |d: NaiveDate| d.and_hms_opt(0, 0, 0).map(|t| Utc.from_utc_datetime(&t)).ok_or_else(bad);
    Ok((at(first)?, at(next)?))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct TotalsQuery {
    /// `YYYY-MM` (UTC).
    month: String,
    tenant_id: Option<Uuid>,
}

/// Per-tenant totals for a calendar month (UTC): requests, tokens and cost, summed exactly.
#[utoipa::path(
    get,
    path = "/admin/v1/monthly-totals",
    tag = "admin",
    operation_id = "adminMonthlyTotals",
    summary = "Monthly totals per tenant",
    description = "Role: finance. Requests, tokens, cost and shortfall per tenant for a calendar month (UTC), summed exactly from the cost records; the tenant was charged `cost - shortfall`.",
    params(TotalsQuery),
    security(("admin_jwt" = [])),
    responses(
        (status = 200, description = "One entry per tenant with records that month", body = MonthlyTotalList),
        crate::apidoc::errors::AdminLookupErrors,
    )
)]
pub(super) async fn monthly_totals(
    State(state): State<AppState>,
    claims: Claims,
    q: Result<Query<TotalsQuery>, QueryRejection>,
) -> Result<Json<MonthlyTotalList>, ApiError> {
    claims.require(Role::Finance)?;
    let q = query(q)?;
    let (from, to) = month_range(&q.month)?;
    let totals = reports::totals(&state.db, claims.tenant_scope(q.tenant_id)?, from, to).await?;
    let data = totals
        .into_iter()
        .map(|t| MonthlyTotal {
            tenant_id: t.tenant_id,
            month: q.month.clone(),
            requests: t.requests,
            input_tokens: t.input_tokens,
            cached_tokens: t.cached_tokens,
            output_tokens: t.output_tokens,
            cost: t.cost.into(),
            shortfall: t.shortfall.into(),
            batch_requests: t.batch_requests,
            batch_cost: t.batch_cost.into(),
            currency: Usd::Usd,
        })
        .collect();
    Ok(Json(MonthlyTotalList { object: ListObject::List, data }))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct LedgerQuery {
    /// `next_cursor` of the previous page.
    cursor: Option<i64>,
    limit: Option<i64>,
}

/// Grants and charges of one tenant, oldest first.
#[utoipa::path(
    get,
    path = "/admin/v1/tenants/{id}/credit-ledger",
    tag = "admin",
    operation_id = "adminCreditLedger",
    summary = "A tenant's credit ledger",
    description = "Role: finance.",
    params(("id" = Uuid, Path, description = "The tenant's id"), LedgerQuery),
    security(("admin_jwt" = [])),
    responses(
        (status = 200, description = "Grants and charges, oldest first", body = LedgerPage),
        crate::apidoc::errors::AdminLookupErrors,
    )
)]
pub(super) async fn credit_ledger(
    State(state): State<AppState>,
    claims: Claims,
    Path(tenant): Path<Uuid>,
    q: Result<Query<LedgerQuery>, QueryRejection>,
) -> Result<Json<LedgerPage>, ApiError> {
    claims.require(Role::Finance)?;
    let q = query(q)?;
    let tenant = claims.tenant_scope(Some(tenant))?.unwrap_or(tenant);
    let size = page_size(q.limit);
    let rows = reports::credit_ledger(&state.db, tenant, q.cursor.unwrap_or(0), size + 1).await?;
    let (data, has_more, next_cursor) = paginate(rows, size, |e| e.id.to_string());
    Ok(Json(LedgerPage { object: ListObject::List, data, has_more, next_cursor }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months() {
        let (from, to) = month_range("2026-12").unwrap();
        assert_eq!(from.to_rfc3339(), "2026-12-01T00:00:00+00:00");
        assert_eq!(to.to_rfc3339(), "2027-01-01T00:00:00+00:00");
        assert!(month_range("2026-13").is_err());
    }
}
