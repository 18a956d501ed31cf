//! The request id on every answer: `x-request-id` for OpenAI clients, `request-id` for Anthropic ones.
//!
//! A completion's id (`chatcmpl-…`, `msg_…`, `resp_…`) is also the key of its cost record, so an answer
//! about a completion (its body, or the error that refused it after its record was written) carries that
//! id; the client can then find the record. Other answers get a fresh `req_…`.

use std::cell::RefCell;

use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;

tokio::task_local! {
    static ASSIGNED: RefCell<Option<String>>;
}

/// Names the id of the request being handled (its cost record's key), for whatever answer goes out.
pub fn assign(id: &str) {
    let _ = ASSIGNED.try_with(|assigned| *assigned.borrow_mut() = Some(id.to_owned()));
}

pub async fn stamp(request: Request, next: Next) -> Response {
    let (mut response, assigned) = ASSIGNED
        .scope(RefCell::new(None), async {
            let response = next.run(request).await;
            (response, ASSIGNED.with(|a| a.borrow_mut().take()))
        })
        .await;
    let headers = response.headers_mut();
    let id = match headers.get("x-request-id") {
        Some(id) => id.clone(),
        None => {
            let id = assigned.unwrap_or_else(|| format!("req_{}", uuid::Uuid::now_v7().simple()));
            let Ok(id) = HeaderValue::from_str(&id) else { return response };
            headers.insert(HeaderName::from_static("x-request-id"), id.clone());
            id
        }
    };
    headers.insert(HeaderName::from_static("request-id"), id);
    response
}
