//! Finance pages: cost records (filtered, paged by cursor, exported as CSV), monthly totals per tenant,
//! tenants with their credit, the credit ledger, and credit grants. Everything goes through the admin
//! API with the staff member's token, so a token confined to a tenant sees that tenant only.

mod costs;
mod ledger;
mod tenants;
mod totals;

use axum::routing::{get, post};
use axum::Router;
use rust_decimal::Decimal;
use serde::Deserialize;
use uuid::Uuid;

use super::admin_api::List;
use super::error::ConsoleError;
use super::signed_in::Staff;
use super::Console;

pub(super) fn routes() -> Router<Console> {
    Router::new()
        .route("/console/finance/costs", get(costs::list))
        .route("/console/finance/costs.csv", get(costs::export))
        .route("/console/finance/totals", get(totals::show))
        .route("/console/finance/tenants", get(tenants::list))
        .route("/console/finance/grants", post(tenants::grant))
        .route("/console/finance/ledger", get(ledger::list))
}

/// A tenant as `GET /admin/v1/tenants` gives it.
#[derive(Debug, Clone, Deserialize)]
struct Tenant {
    id: Uuid,
    name: String,
    balance: Decimal,
    reserved: Decimal,
    available: Decimal,
}

/// The tenants the token may read (one for a confined token).
async fn tenants(console: &Console, staff: &Staff) -> Result<Vec<Tenant>, ConsoleError> {
    Ok(console.admin.get::<List<Tenant>>(staff.token(), "/admin/v1/tenants").await?.data)
}

/// A tenant's name, or its id when the list does not hold it.
fn name_of(tenants: &[Tenant], id: Uuid) -> String {
    tenants.iter().find(|t| t.id == id).map_or_else(|| id.to_string(), |t| t.name.clone())
}
