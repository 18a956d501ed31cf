//! The headers every request from the gateway to a worker carries: the tenant's cache scope (the worker
//! reuses only this tenant's cached prompt prefixes, and answers only about its requests), the class
//! the worker admits it in (online before batch), and the signature over them, the method, the path and
//! the body (`runaii_wire::request_signature`).

use reqwest::header::{HeaderMap, HeaderValue};
use runaii_wire::announcement;
use runaii_wire::cache_scope::{self, CacheScope};
use runaii_wire::priority::{self, Priority};
use runaii_wire::request_signature::{self, Signed};
use runaii_wire::worker_auth::WorkerSecrets;

/// The scope, class and signature headers of one request, signed now under a fresh nonce.
pub(super) fn headers(secrets: &WorkerSecrets, method: &str, path: &str, scope: &CacheScope, class: Priority, body: &[u8]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if let Some(value) = scope.header_value().and_then(|v| HeaderValue::from_str(v).ok()) {
        headers.insert(cache_scope::HEADER, value);
    }
    if let Some(value) = class.header_value() {
        headers.insert(priority::HEADER, HeaderValue::from_static(value));
    }
    let signed = Signed { method, path, scope: scope.header_value().unwrap_or(""), priority: class.header_value().unwrap_or(""), body };
    let signature = request_signature::sign(secrets, &signed, announcement::now_ms(), rand::random());
    if let Ok(value) = HeaderValue::from_str(&signature) {
        headers.insert(request_signature::HEADER, value);
    }
    headers
}
