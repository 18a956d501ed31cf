//! The gateway's OpenAPI 3.1 document: generated from the `#[utoipa::path]` attributes next to each
//! handler and from the types the routes read and write, committed at `openapi/openapi.json` and served
//! at `GET /openapi.json`.
//!
//! Wire types carry their own schemas (`runaii-wire`); the answers the gateway writes by hand with
//! `serde_json` are described by the documentation types in this module's submodules, and
//! `gateway/tests/openapi.rs` validates real answers against them so the two cannot drift apart.
//! Regenerate the committed file with `cargo run -p runaii-gateway -- openapi > openapi/openapi.json`
//! (or `UPDATE_OPENAPI=1 cargo test -p runaii-gateway --test openapi`).

mod layers;
mod security;

use std::sync::LazyLock;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa::OpenApi;

use security::Schemes;

use crate::apidoc::{errors, messages, responses, streams};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "runaii",
        description = "Multi-tenant inference gateway: OpenAI's chat completions and Responses, Anthropic's \
Messages, with structured outputs guaranteed by grammar-constrained decoding, exact per-request costs, and \
an admin API. Guide: docs/api.md.",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    servers((url = "http://127.0.0.1:8080", description = "scripts/run.sh")),
    tags(
        (name = "models", description = "The live model catalog"),
        (name = "inference", description = "Completions in OpenAI's and Anthropic's dialects"),
        (name = "files", description = "A tenant's files: Batch API inputs and outputs"),
        (name = "batches", description = "The Batch API: a file of requests run once each, at the batch price"),
        (name = "account", description = "What a key's holder may know about its tenant"),
        (name = "admin", description = "The admin API (JWT with roles ops, finance, admin); see docs/admin-api.md"),
        (name = "service", description = "Health and this document"),
    ),
    components(
        schemas(
            runaii_wire::ErrorBody,
            messages::AnthropicError,
            runaii_wire::ChatCompletionChunk,
            responses::ResponseStreamEvent,
            messages::MessageStreamEvent,
        ),
        responses(
            errors::BadRequest,
            errors::Unauthorized,
            errors::PaymentRequired,
            errors::NotFound,
            errors::IdempotencyInProgress,
            errors::PayloadTooLarge,
            errors::RequestTimeout,
            errors::IdempotencyKeyReused,
            errors::RateLimited,
            errors::BadGateway,
            errors::Unavailable,
            errors::MessagesBadRequest,
            errors::MessagesUnauthorized,
            errors::MessagesPaymentRequired,
            errors::MessagesNotFound,
            errors::MessagesIdempotencyInProgress,
            errors::MessagesPayloadTooLarge,
            errors::MessagesRequestTimeout,
            errors::MessagesIdempotencyKeyReused,
            errors::MessagesRateLimited,
            errors::MessagesBadGateway,
            errors::MessagesUnavailable,
            errors::ResponseNotFound,
            errors::FileNotFound,
            errors::BatchNotFound,
            errors::FileRefused,
            errors::FileTooLarge,
            errors::FileUploadTimeout,
            errors::InvalidRequest,
            errors::AdminUnauthorized,
            errors::AdminForbidden,
            errors::AdminNotFound,
            errors::AdminConflict,
            errors::AdminUnavailable,
        )
    ),
    modifiers(&Schemes),
)]
struct Base;

/// The whole document: the base above, the public routes, the admin routes, and what the layers around
/// the handlers add (headers, the body reader's errors).
#[must_use]
pub fn document() -> utoipa::openapi::OpenApi {
    let mut doc = Base::openapi();
    doc.merge(crate::routes::PublicApi::openapi());
    doc.merge(DocumentApi::openapi());
    doc.merge(crate::admin::AdminApi::openapi());
    layers::add(&mut doc);
    doc
}

/// The document as committed and served: [`document`] with the stream event schemas utoipa cannot
/// express ([`streams`]), pretty-printed, keys in a stable order, one trailing newline.
#[must_use]
pub fn to_json() -> String {
    let mut doc = serde_json::to_value(document()).unwrap_or_default();
    streams::describe(&mut doc);
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    text.push('\n');
    text
}

/// The route that serves this document, for [`crate::routes::router`] to mount among the others.
pub fn router() -> axum::Router<crate::state::AppState> {
    axum::Router::new().route("/openapi.json", axum::routing::get(serve))
}

#[derive(OpenApi)]
#[openapi(paths(serve))]
struct DocumentApi;

/// Rendered once: the document does not change while the process runs.
static JSON: LazyLock<String> = LazyLock::new(to_json);

/// This document.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "service",
    operation_id = "getOpenApi",
    security(()),
    responses((status = 200, description = "The OpenAPI 3.1 document of this API", body = Object))
)]
pub async fn serve() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], JSON.as_str()).into_response()
}
