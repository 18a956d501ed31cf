//! runaii gateway: the stateless, authenticated, metered front of the runaii workers.
//!
//! `auth` (API keys), `routes` (thin handlers), `completions` (the chat service: check, route, meter),
//! `structured` (response_format checks and schema prompts), `upstream` (worker registry and client),
//! `billing` (pricing, credit holds and the cost ledger), `ratelimit` (per-key limits in Redis),
//! `idempotency` (`Idempotency-Key`), `admin` (the JWT-guarded admin API), `db` (SQL only), `openapi`
//! (the OpenAPI document, from the handlers' attributes). `fuzzing` holds the invariants the `fuzz/` targets
//! check, so the corpus replays in `cargo test` too. `console` is the web console at `/console`.

pub mod admin;
pub mod app;
pub mod auth;
pub mod billing;
pub mod completions;
pub mod config;
pub mod console;
pub mod db;
pub mod error;
pub mod extract;
#[doc(hidden)]
pub mod fuzzing;
pub mod idempotency;
pub mod messages;
pub mod metrics;
pub mod openapi;
pub mod ratelimit;
pub mod redis_link;
pub mod request_id;
pub mod responses;
pub mod routes;
pub mod state;
pub mod structured;
pub mod upstream;
pub mod worker_secret;

pub use app::Application;
