//! `GET /v1/account`: what a key's holder may know about its own tenant — balance and this month's use.

use axum::extract::State;
use axum::Json;
use chrono::{Datelike, TimeZone, Utc};
use rust_decimal::Decimal;
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::apidoc::errors::{Unauthorized, Unavailable};
use crate::auth::Caller;
use crate::db::{reports, tenants};
use crate::error::ApiError;
use crate::shapes::{DecimalString, Usd};
use crate::state::AppState;

/// The key's tenant: its money (USD, exact), this month's use and the key's rate limits.
#[derive(Debug, Serialize, ToSchema)]
pub struct Account {
    #[schema(inline)]
    pub object: AccountObject,
    pub tenant: AccountTenant,
    #[schema(inline)]
    pub currency: Usd,
    /// Credit granted less what was charged.
    pub balance: DecimalString,
    /// Held for requests in flight (their worst-case cost).
    pub reserved: DecimalString,
    /// `balance - reserved`: what new requests may use.
    pub available: DecimalString,
    pub usage: MonthUsage,
    /// The key's own limits, at most its tenant's caps.
    pub rate_limits: RateLimits,
    pub tenant_caps: TenantCaps,
}

/// The tenant's caps across all its keys and replicas, set by the provider's staff; `null`: none.
#[derive(Debug, Serialize, ToSchema)]
pub struct TenantCaps {
    pub requests_per_minute: Option<i32>,
    pub tokens_per_minute: Option<i32>,
    /// USD this month's requests may cost, in all.
    pub monthly_spend_cap: Option<DecimalString>,
}

#[derive(Debug, Serialize, ToSchema)]
pub enum AccountObject {
    #[serde(rename = "account")]
    Account,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AccountTenant {
    pub id: Uuid,
    pub name: String,
}

/// The calendar month so far (UTC), summed from the cost records.
#[derive(Debug, Serialize, ToSchema)]
pub struct MonthUsage {
    #[schema(pattern = "^[0-9]{4}-[0-9]{2}$", example = "2026-11")]
    pub month: String,
    pub requests: i64,
    /// Prompt tokens, cached ones included.
    pub input_tokens: i64,
    /// Of `input_tokens`, those read from a worker's cache.
    pub cached_tokens: i64,
    pub output_tokens: i64,
    pub cost: DecimalString,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RateLimits {
    pub requests_per_minute: u32,
    pub tokens_per_minute: u32,
}

#[utoipa::path(
    get,
    path = "/v1/account",
    tag = "account",
    operation_id = "getAccount",
    summary = "The key's account",
    description = "The key's tenant: balance, reserved and available credit (USD, exact), this month's use, the key's rate limits and the tenant's caps.",
    security(("api_key" = []), ("x_api_key" = [])),
    responses(
        (status = 200, description = "The account", body = Account),
        (status = 401, response = Unauthorized),
        (status = 503, response = Unavailable),
    )
)]
pub(super) async fn get(State(state): State<AppState>, caller: Caller) -> Result<Json<Account>, ApiError> {
    let tenant = tenants::list(&state.db, Some(caller.tenant_id)).await?.pop().ok_or(ApiError::InvalidApiKey)?;
    let now = Utc::now();
    let start = Utc.with_ymd_and_hms(now.year(), now.month(), 1, 0, 0, 0).single().unwrap_or(now);
    let month = reports::totals(&state.db, Some(caller.tenant_id), start, now + chrono::Duration::seconds(1)).await?.pop();
    Ok(Json(Account {
        object: AccountObject::Account,
        tenant: AccountTenant { id: tenant.id, name: tenant.name.clone() },
        currency: Usd::Usd,
        balance: tenant.balance.into(),
        reserved: tenant.held().into(),
        available: (tenant.balance - tenant.held()).into(),
        usage: MonthUsage {
            month: format!("{:04}-{:02}", now.year(), now.month()),
            requests: month.as_ref().map_or(0, |m| m.requests),
            input_tokens: month.as_ref().map_or(0, |m| m.input_tokens),
            cached_tokens: month.as_ref().map_or(0, |m| m.cached_tokens),
            output_tokens: month.as_ref().map_or(0, |m| m.output_tokens),
            cost: month.map_or(Decimal::ZERO, |m| m.cost).into(),
        },
        rate_limits: RateLimits {
            requests_per_minute: caller.limits.requests_per_minute,
            tokens_per_minute: caller.limits.tokens_per_minute,
        },
        tenant_caps: TenantCaps {
            requests_per_minute: tenant.rpm_limit,
            tokens_per_minute: tenant.tpm_limit,
            monthly_spend_cap: tenant.monthly_spend_cap.map(DecimalString::from),
        },
    }))
}
