//! runaii gateway: the stateless, authenticated, metered front of the runaii workers.
//!
//! `auth` (API keys), `routes` (thin handlers), `completions` (the chat service: check, route, meter),
//! `structured` (response_format checks and schema prompts), `upstream` (worker registry and client),
//! `billing` (pricing and the cost ledger), `db` (SQL only).

pub mod app;
pub mod auth;
pub mod billing;
pub mod completions;
pub mod config;
pub mod db;
pub mod error;
pub mod responses;
pub mod routes;
pub mod state;
pub mod structured;
pub mod upstream;

pub use app::Application;
