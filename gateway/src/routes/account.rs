//! `GET /v1/account`: what a key's holder may know about its own tenant — balance and this month's use.

use axum::extract::State;
use axum::Json;
use chrono::{Datelike, TimeZone, Utc};
use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::auth::Caller;
use crate::db::{reports, tenants};
use crate::error::ApiError;
use crate::openapi::catalog::Account;
use crate::openapi::errors::{Unauthorized, Unavailable};
use crate::state::AppState;

#[utoipa::path(
    get,
    path = "/v1/account",
    tag = "account",
    operation_id = "getAccount",
    summary = "The key's account",
    description = "The key's tenant: balance, reserved and available credit (USD, exact), this month's use, and the key's rate limits.",
    security(("api_key" = []), ("x_api_key" = [])),
    responses(
        (status = 200, description = "The account", body = Account),
        (status = 401, response = Unauthorized),
        (status = 503, response = Unavailable),
    )
)]
pub(super) async fn get(State(state): State<AppState>, caller: Caller) -> Result<Json<Value>, ApiError> {
    let tenant = tenants::list(&state.db, Some(caller.tenant_id)).await?.pop().ok_or(ApiError::InvalidApiKey)?;
    let now = Utc::now();
    let start = Utc.with_ymd_and_hms(now.year(), now.month(), 1, 0, 0, 0).single().unwrap_or(now);
    let month = reports::totals(&state.db, Some(caller.tenant_id), start, now + chrono::Duration::seconds(1)).await?.pop();
    let money = |d: Decimal| d.normalize().to_string();
    Ok(Json(json!({
        "object": "account",
        "tenant": {"id": tenant.id, "name": tenant.name},
        "currency": "USD",
        "balance": money(tenant.balance),
        "reserved": money(tenant.reserved),
        "available": money(tenant.balance - tenant.reserved),
        "usage": {
            "month": format!("{:04}-{:02}", now.year(), now.month()),
            "requests": month.as_ref().map_or(0, |m| m.requests),
            "input_tokens": month.as_ref().map_or(0, |m| m.input_tokens),
            "output_tokens": month.as_ref().map_or(0, |m| m.output_tokens),
            "cost": money(month.map_or(Decimal::ZERO, |m| m.cost)),
        },
        "rate_limits": {
            "requests_per_minute": caller.limits.requests_per_minute,
            "tokens_per_minute": caller.limits.tokens_per_minute,
        },
    })))
}
