//! runaii gateway: the stateless, authenticated, metered front of the runaii workers. The parts and the
//! rules between them are drawn in `docs/architecture.md`.
//!
//! `routes` (the public API's thin handlers), `admin` (the JWT-guarded admin API's) and `console` (the web
//! console at `/console`, HTML for customers and staff) call the services:
//! `inference` (one driver for every dialect — chat completions, Responses, Messages — that checks,
//! routes, meters and records; the dialects translate), `ops` (changes to tenants, keys, credit and the
//! catalog, each validated and audited in its transaction; the command line calls them too),
//! `idempotency` (`Idempotency-Key`), `files` (uploads: their checks, quota and storage), `batches` (the Batch API and its runner). Below them: `auth` (API keys, staff tokens), `billing` (pricing,
//! holds, the cost ledger), `structured` (response_format checks and schema prompts), `upstream` (the
//! worker registry and client), `catalog` (the in-memory catalog) and `changes` (the listener that keeps
//! it and the key cache fresh), `ratelimit` (per-key limits in Redis), `db` (SQL only). `shapes` and
//! `apidoc` hold the JSON shapes and documentation types handlers name; `openapi` assembles the document.

pub mod admin;
pub mod apidoc;
pub mod app;
pub mod auth;
pub mod batches;
pub mod billing;
pub mod catalog;
pub mod changes;
pub mod concurrency;
pub mod config;
pub mod console;
pub mod db;
pub mod error;
pub mod extract;
pub mod file_store;
pub mod files;
pub mod idempotency;
pub mod inference;
pub mod metrics;
pub mod openapi;
pub mod ops;
pub mod ratelimit;
pub mod redis_link;
pub mod request_id;
pub mod response_events;
pub mod routes;
pub mod serve;
pub mod shapes;
pub mod state;
pub mod structured;
pub mod upstream;
pub mod worker_secret;

pub use app::Application;
