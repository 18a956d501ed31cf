//! The admin API under `/admin/v1`, for ops (the catalog), finance (cost records and totals) and admins
//! (tenants, keys, credits, model access, the audit log). Every request carries a JWT
//! (`crate::auth::staff`); every change goes through `crate::ops`, which audits it in its transaction.

mod audit;
mod catalog;
mod csv;
mod finance;
mod input;
mod tenants;
mod tokens;

use axum::routing::{get, patch, post, put};
use axum::Router;
use utoipa::OpenApi;

pub use crate::auth::staff::{issue, Claims, Role, Verifier};

use crate::state::AppState;

/// The OpenAPI paths of the routes below: keep the two lists together.
#[derive(OpenApi)]
#[openapi(paths(
    catalog::list,
    catalog::create,
    catalog::update,
    catalog::workers,
    finance::cost_records,
    finance::monthly_totals,
    finance::credit_ledger,
    tenants::list,
    tenants::get,
    tenants::create,
    tenants::set_caps,
    tenants::grant,
    tenants::keys,
    tenants::create_key,
    tenants::update_key,
    tenants::revoke_key,
    tenants::allow_model,
    tenants::deny_model,
    audit::list,
    tokens::revoke,
))]
pub struct AdminApi;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/admin/v1/models", get(catalog::list).post(catalog::create))
        .route("/admin/v1/models/{*id}", patch(catalog::update))
        .route("/admin/v1/workers", get(catalog::workers))
        .route("/admin/v1/cost-records", get(finance::cost_records))
        .route("/admin/v1/monthly-totals", get(finance::monthly_totals))
        .route("/admin/v1/tenants", get(tenants::list).post(tenants::create))
        .route("/admin/v1/tenants/{id}", get(tenants::get).patch(tenants::set_caps))
        .route("/admin/v1/tenants/{id}/credit-ledger", get(finance::credit_ledger))
        .route("/admin/v1/tenants/{id}/credits", post(tenants::grant))
        .route("/admin/v1/tenants/{id}/keys", get(tenants::keys).post(tenants::create_key))
        .route("/admin/v1/tenants/{id}/models/{*model}", put(tenants::allow_model).delete(tenants::deny_model))
        .route("/admin/v1/keys/{id}", patch(tenants::update_key).delete(tenants::revoke_key))
        .route("/admin/v1/audit-log", get(audit::list))
        .route("/admin/v1/admin-token-revocations", post(tokens::revoke))
}
