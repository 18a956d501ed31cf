//! OpenAI-compatible wire types shared by the gateway and the worker.
//!
//! Requests are parsed leniently (unknown fields are ignored, as OpenAI clients send many), responses are
//! written with every field the official SDKs dereference, so `openai-python` and `openai-node` read them
//! unchanged.
//!
//! Besides the types, what both binaries must do alike: the schema budget checked before any compile
//! (`schema_budget`), the worker credential, signed requests and signed registry announcements
//! (`worker_auth`, `request_signature`, `announcement`), whose prompt cache a request may read (`cache_scope`), a request's admission class at the worker (`priority`), Prometheus exposition (`metrics`), exact money (`money`: the price formula and reading amounts back), reaching Redis or a Redis Cluster (`redis_link`) and stopping on SIGTERM (`shutdown`).

pub mod announcement;
pub mod cache_scope;
pub mod chat;
pub mod error;
pub mod metrics;
pub mod money;
pub mod openapi;
pub mod priority;
pub mod redis_link;
pub mod request_signature;
pub mod schema_budget;
pub mod shutdown;
pub mod worker_auth;

pub use chat::*;
pub use error::{ErrorBody, ErrorDetail};
