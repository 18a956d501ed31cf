//! Staff pages are clients of the admin API, called in process through the API's own router with the
//! staff member's own token. So every rule — roles, tenant confinement, validation, the audit row written
//! in the change's transaction — is the API's, in one place; the console adds none and can drift from
//! none, whatever becomes of the handlers behind the routes. The cost is one JSON encoding per call,
//! microseconds next to the query behind it.

use axum::body::Body;
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::{Method, Request, StatusCode};
use axum::response::Response;
use axum::Router;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tower::ServiceExt as _;

use super::error::ConsoleError;
use crate::state::AppState;

/// The largest JSON answer a page reads (a page of 1,000 records is far less).
const MAX_ANSWER_BYTES: usize = 32 * 1024 * 1024;

#[derive(Clone)]
pub(crate) struct AdminApi {
    router: Router,
}

impl std::fmt::Debug for AdminApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminApi").finish_non_exhaustive()
    }
}

impl AdminApi {
    pub(crate) fn new(state: &AppState) -> Self {
        Self { router: crate::admin::router().with_state(state.clone()) }
    }

    /// `GET path` (with its query), answered as `T`.
    ///
    /// # Errors
    /// The API's refusal, with its status and message.
    pub(crate) async fn get<T: DeserializeOwned>(&self, token: &str, path: &str) -> Result<T, ConsoleError> {
        let response = self.call(token, Method::GET, path, None).await?;
        decode(response).await
    }

    /// `method path` with a JSON body, answered as `T`.
    ///
    /// # Errors
    /// The API's refusal, with its status and message.
    pub(crate) async fn send<T: DeserializeOwned>(
        &self,
        token: &str,
        method: Method,
        path: &str,
        body: &impl Serialize,
    ) -> Result<T, ConsoleError> {
        let body = serde_json::to_vec(body).map_err(|e| ConsoleError::Internal(format!("encoding an admin API body: {e}")))?;
        let response = self.call(token, method, path, Some(body)).await?;
        decode(response).await
    }

    /// `GET path` answered as it comes (a streamed CSV export), or the API's refusal.
    ///
    /// # Errors
    /// The API's refusal, with its status and message.
    pub(crate) async fn stream(&self, token: &str, path: &str) -> Result<Response, ConsoleError> {
        let response = self.call(token, Method::GET, path, None).await?;
        if response.status().is_success() {
            Ok(response)
        } else {
            Err(refusal(response).await)
        }
    }

    async fn call(&self, token: &str, method: Method, path: &str, body: Option<Vec<u8>>) -> Result<Response, ConsoleError> {
        let mut request = Request::builder().method(method).uri(path).header(AUTHORIZATION, format!("Bearer {token}"));
        if body.is_some() {
            request = request.header(CONTENT_TYPE, "application/json");
        }
        let request = request
            .body(body.map_or_else(Body::empty, Body::from))
            .map_err(|e| ConsoleError::Internal(format!("building an admin API request: {e}")))?;
        // The router's error type is Infallible: every failure is an answer.
        let Ok(response) = self.router.clone().oneshot(request).await;
        Ok(response)
    }
}

async fn decode<T: DeserializeOwned>(response: Response) -> Result<T, ConsoleError> {
    if !response.status().is_success() {
        return Err(refusal(response).await);
    }
    let bytes = axum::body::to_bytes(response.into_body(), MAX_ANSWER_BYTES)
        .await
        .map_err(|e| ConsoleError::Internal(format!("reading an admin API answer: {e}")))?;
    serde_json::from_slice(&bytes).map_err(|e| ConsoleError::Internal(format!("an admin API answer the console cannot read: {e}")))
}

/// The API's error, with the message it gives every client.
async fn refusal(response: Response) -> ConsoleError {
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 64 * 1024).await.unwrap_or_default();
    let message = serde_json::from_slice::<runaii_wire::ErrorBody>(&bytes)
        .map(|b| b.error.message)
        .unwrap_or_else(|_| status.canonical_reason().unwrap_or("error").to_owned());
    if status == StatusCode::UNAUTHORIZED {
        // The token stopped working between the page's check and this call (it expired meanwhile).
        return ConsoleError::SignedOut(super::error::Ended::CredentialRefused);
    }
    ConsoleError::Api { status, message }
}

/// A query string from `(name, value)` pairs, leaving out empty values.
pub(crate) fn query(pairs: &[(&str, Option<&str>)]) -> String {
    let present: Vec<(&str, &str)> = pairs.iter().filter_map(|(k, v)| v.filter(|v| !v.is_empty()).map(|v| (*k, v))).collect();
    if present.is_empty() {
        return String::new();
    }
    serde_urlencoded::to_string(present).map(|q| format!("?{q}")).unwrap_or_default()
}

/// What a path segment keeps as it is: RFC 3986's unreserved characters.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');

/// A path segment, percent-encoded (a model id may hold `/`, `?`, `#` or spaces).
pub(crate) fn segment(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, SEGMENT).to_string()
}

/// `{"object": "list", "data": […]}`.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct List<T> {
    pub data: Vec<T>,
}

/// `{"object": "list", "data": […], "has_more": …, "next_cursor": …}`.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct Page<T> {
    pub data: Vec<T>,
    pub next_cursor: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_skip_empty_values_and_encode_the_rest() {
        assert_eq!(query(&[("a", None), ("b", Some(""))]), "");
        assert_eq!(query(&[("month", Some("2026-12")), ("model", Some("a/b c&d"))]), "?month=2026-12&model=a%2Fb+c%26d");
        assert_eq!(segment("org/model-v1.2 x?"), "org%2Fmodel-v1.2%20x%3F");
    }
}
