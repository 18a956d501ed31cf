//! The web console at `/console`, for customers (signed in with an API key), ops, finance and admins
//! (signed in with an admin JWT). Pages are HTML rendered here (maud); one stylesheet and one small script
//! are built into the binary (see `assets`); nothing comes from another origin, and every page works
//! without the script. Why this stack, and how sessions, CSRF and the CSP work: docs/console.md.
//!
//! - `sign_in`, `session`, `signed_in`: signing in, server-side sessions in Redis, and the check of the
//!   session's credential by the API's own code on every request;
//! - `form`: the origin and CSRF checks every POST passes; `headers`: CSP and the other headers;
//! - `admin_api`: staff pages call the admin API in process, so its rules are the console's;
//! - `customer/`, `ops/`, `finance/`: the pages; `ui/`: layout, charts, lists, formatting.

mod admin_api;
mod assets;
mod customer;
mod error;
mod finance;
mod form;
mod headers;
mod ops;
mod session;
mod sign_in;
mod signed_in;
mod ui;

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::{middleware, Router};
use maud::html;

use self::admin_api::AdminApi;
use self::error::ConsoleError;
use self::session::Sessions;
use self::signed_in::SignedIn;
use crate::state::AppState;

/// The console's state: the gateway's, the in-process admin API, the session store.
#[derive(Debug, Clone)]
pub(crate) struct Console {
    app: AppState,
    admin: AdminApi,
    sessions: Arc<Sessions>,
}

/// `GET /console/assets/{name}`: the stylesheet or the script, or the console's 404 page.
async fn asset(crate::extract::Path(name): crate::extract::Path<String>) -> Result<axum::response::Response, ConsoleError> {
    assets::answer(&name).ok_or(ConsoleError::NotFound(name))
}

/// Every console route, with the console's headers; merged into the gateway's router.
pub fn router(state: &AppState) -> Router<AppState> {
    let console =
        Console { app: state.clone(), admin: AdminApi::new(state), sessions: Arc::new(Sessions::new(state.settings.redis_url.clone())) };
    Router::new()
        .route("/console", get(sign_in::home))
        .route("/console/", get(sign_in::home))
        .route("/console/assets/{name}", get(asset))
        // Anyone may post the sign-in form: it is read with a small limit before anything is checked.
        .route("/console/sign-in", get(sign_in::form).post(sign_in::submit).layer(DefaultBodyLimit::max(sign_in::FORM_MAX_BYTES)))
        .route("/console/sign-out", post(sign_in::sign_out))
        .route("/console/nothing", get(nothing))
        .merge(customer::routes())
        .merge(ops::routes())
        .merge(finance::routes())
        .route("/console/{*rest}", get(not_found))
        .layer(middleware::from_fn(headers::secure))
        .with_state(console)
}

/// A staff token that carries no role the console has pages for.
async fn nothing(signed: SignedIn) -> axum::response::Response {
    let body = html! { p { "This token carries no role the console has pages for (ops, finance or admin)." } };
    ui::layout::page_or_error(&signed, ui::layout::Section::None, "Nothing to show", Ok(body))
}

async fn not_found() -> ConsoleError {
    ConsoleError::NotFound("this page".into())
}
