//! What the OpenAPI document says beyond the types answers serialize: the error responses of each
//! dialect (one per status), the headers the inference routes take, the stream event schemas, and the
//! chat, Responses and Messages objects as clients read them. Handlers name these in their
//! `#[utoipa::path]` attributes; `crate::openapi` assembles the document from those attributes and
//! imports nothing else of the routes.

pub mod batches;
pub mod chat;
pub mod errors;
pub mod files;
pub mod messages;
pub mod params;
pub mod responses;
pub mod streams;
