//! Ops pages: the catalog (with edits behind a confirmation), live workers with their load and the recent
//! error rate, the audit log. Reads and changes go through the admin API with the staff member's token.

mod audit;
mod catalog;
mod workers;

use axum::routing::{get, post};
use axum::Router;

use super::Console;

pub(super) fn routes() -> Router<Console> {
    Router::new()
        .route("/console/ops/models", get(catalog::list))
        .route("/console/ops/models/edit", get(catalog::edit))
        .route("/console/ops/models/review", post(catalog::review))
        .route("/console/ops/models/apply", post(catalog::apply))
        .route("/console/ops/workers", get(workers::show))
        .route("/console/ops/audit", get(audit::list))
}
