//! The customer's pages: everything here acts for the signed-in key's tenant, and only reads or changes
//! that tenant's data (every query takes the tenant id from the session, never from the request).

mod batches;
mod keys;
mod overview;
mod playground;
mod requests;

use axum::routing::{get, post};
use axum::Router;

use super::Console;

pub(super) fn routes() -> Router<Console> {
    Router::new()
        .route("/console/account", get(overview::show))
        .route("/console/requests", get(requests::list))
        .route("/console/requests/{id}", get(requests::detail))
        .route("/console/keys", get(keys::list).post(keys::create))
        .route("/console/keys/revoke", post(keys::revoke))
        .route("/console/batches", get(batches::list))
        .route("/console/batches/cancel", post(batches::cancel))
        .route("/console/playground", get(playground::form).post(playground::run))
}
