//! What layers, not handlers, put in answers, added once the operations are collected: `x-request-id`
//! and `request-id` on every answer (the request-id middleware), the `x-ratelimit-*` headers on the
//! inference routes' answers (the rate limiter around each inference handler), and the body reader's
//! 408 and 413 on every operation that takes a body (`routes::body`, before any route).

use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::{OpenApi, PathItem, Ref, RefOr, Response};

/// The routes behind the rate limiter.
const INFERENCE_PATHS: [&str; 3] = ["/v1/chat/completions", "/v1/responses", "/v1/messages"];

/// Reusable error responses that only the inference routes answer, after the rate limiter admitted the
/// request. (A 401 is answered before it, and so are the body reader's 408 and 413; a rate-limiter
/// outage answers before its headers are known.)
const ADMITTED_ERRORS: [&str; 15] = [
    "BadRequest",
    "PaymentRequired",
    "NotFound",
    "IdempotencyInProgress",
    "IdempotencyKeyReused",
    "RateLimited",
    "BadGateway",
    "MessagesBadRequest",
    "MessagesPaymentRequired",
    "MessagesNotFound",
    "MessagesIdempotencyInProgress",
    "MessagesIdempotencyKeyReused",
    "MessagesRateLimited",
    "MessagesBadGateway",
    "MessagesUnavailable",
];

const REQUEST_IDS: [(&str, &str); 2] = [
    ("x-request-id", "The request's id (`chatcmpl-…`, `resp_…`, `msg_…` for a completion: its id and its cost record's)"),
    ("request-id", "The same id, where Anthropic's SDKs read it"),
];

const RATE_LIMITS: [(&str, &str); 6] = [
    ("x-ratelimit-limit-requests", "The key's requests per minute"),
    ("x-ratelimit-limit-tokens", "The key's tokens (prompt and output) per minute"),
    ("x-ratelimit-remaining-requests", "Requests left in the bucket (absent while Redis is unreachable)"),
    ("x-ratelimit-remaining-tokens", "Tokens left in the bucket (absent while Redis is unreachable)"),
    ("x-ratelimit-reset-requests", "Until the request bucket is full again, as a duration (`20ms`, `1.5s`, `6m0s`)"),
    ("x-ratelimit-reset-tokens", "Until the token bucket is full again, as a duration"),
];

pub fn add(doc: &mut OpenApi) {
    for (path, item) in &mut doc.paths.paths {
        let inference = INFERENCE_PATHS.contains(&path.as_str());
        for operation in operations(item) {
            if operation.request_body.is_some() {
                // Anthropic's shape on /v1/messages, as the body reader writes it there.
                let dialect = if path == "/v1/messages" { "Messages" } else { "" };
                for (status, error) in [("408", "RequestTimeout"), ("413", "PayloadTooLarge")] {
                    let name = format!("{dialect}{error}");
                    operation.responses.responses.entry(status.to_owned()).or_insert_with(|| RefOr::Ref(Ref::from_response_name(name)));
                }
            }
            for response in operation.responses.responses.values_mut() {
                if let RefOr::T(response) = response {
                    insert(response, &REQUEST_IDS);
                    if inference {
                        insert(response, &RATE_LIMITS);
                    }
                }
            }
        }
    }
    if let Some(components) = doc.components.as_mut() {
        for (name, response) in &mut components.responses {
            if let RefOr::T(response) = response {
                insert(response, &REQUEST_IDS);
                if ADMITTED_ERRORS.contains(&name.as_str()) {
                    insert(response, &RATE_LIMITS);
                }
            }
        }
    }
}

fn operations(item: &mut PathItem) -> impl Iterator<Item = &mut utoipa::openapi::path::Operation> {
    [&mut item.get, &mut item.put, &mut item.post, &mut item.delete, &mut item.patch].into_iter().flatten()
}

fn insert(response: &mut Response, headers: &[(&str, &str)]) {
    for (name, description) in headers {
        let header = HeaderBuilder::new().schema(ObjectBuilder::new().schema_type(Type::String)).description(Some(*description));
        response.headers.insert((*name).to_owned(), header.build());
    }
}
