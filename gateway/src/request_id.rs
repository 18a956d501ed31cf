//! The request id on every answer: `x-request-id` for OpenAI clients, `request-id` for Anthropic ones.
//!
//! A completion's id (`chatcmpl-…`, `msg_…`, `resp_…`) is also the key of its cost record, so an answer
//! about a completion (its body, or the error that refused it after its record was written) carries that
//! id, attached to the response as a value ([`attach`]); the client can then find the record. Other
//! answers get a fresh `req_…`.
//!
//! Written here, not with `tower-http`'s `request_id` layers: those fix the id when the request arrives,
//! adopt the one a client sends in `x-request-id`, and copy it only onto an answer that has none, under
//! one header name. Here the id is known only once the answer is (a completion's), a client never names
//! it (it is the key the client looks its cost record up by), and it goes out under both names.

use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;

/// The id an answer names, when it is a completion's.
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

/// Names `id` as the id of the request `response` answers.
pub fn attach(response: &mut Response, id: &str) {
    response.extensions_mut().insert(RequestId(id.to_owned()));
}

/// The id attached to `response`, if any.
#[must_use]
pub fn of(response: &Response) -> Option<&str> {
    response.extensions().get::<RequestId>().map(|id| id.0.as_str())
}

pub async fn stamp(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let id = of(&response).map_or_else(|| format!("req_{}", uuid::Uuid::now_v7().simple()), str::to_owned);
    let Ok(id) = HeaderValue::from_str(&id) else { return response };
    let headers = response.headers_mut();
    headers.insert(HeaderName::from_static("x-request-id"), id.clone());
    headers.insert(HeaderName::from_static("request-id"), id);
    response
}
