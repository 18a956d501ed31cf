//! Extractors whose rejections are the gateway's own errors: a malformed path parameter (a tenant id
//! that is not a UUID, an id that is not UTF-8 once percent-decoded) is a JSON 400 like every other
//! refusal, not axum's plain-text one.

use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::FromRequestParts;

use crate::error::ApiError;

/// `axum::extract::Path` answering [`ApiError`].
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct Path<T>(pub T);

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        if rejection.status().is_client_error() {
            Self::InvalidRequest { message: rejection.body_text(), param: Some("path"), code: "invalid_request_error" }
        } else {
            // A route whose pattern lacks the parameter its handler reads: a bug, not the client's.
            Self::Internal(rejection.body_text())
        }
    }
}

/// A JSON body, or the gateway's error: 400 with the parser's reason, 413 or 408 for a body too large or
/// too slow to arrive.
///
/// # Errors
/// As above.
pub fn json_body<T>(body: Result<axum::Json<T>, axum::extract::rejection::JsonRejection>, max_body_bytes: usize) -> Result<T, ApiError> {
    use axum::extract::rejection::JsonRejection;
    body.map(|axum::Json(b)| b).map_err(|e| match e {
        JsonRejection::BytesRejection(r) => body_error(&r, max_body_bytes),
        e => ApiError::InvalidJson(e.body_text()),
    })
}

/// A request body that did not arrive in time (see `routes::body`).
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0} ms")]
pub struct BodyDeadline(pub u64);

/// The gateway's error for a body that could not be read: too large (413), too slow (408), or broken.
#[must_use]
pub fn body_error(rejection: &BytesRejection, max_body_bytes: usize) -> ApiError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(rejection);
    while let Some(e) = source {
        if let Some(BodyDeadline(ms)) = e.downcast_ref::<BodyDeadline>() {
            return ApiError::BodyTimeout(*ms);
        }
        source = e.source();
    }
    if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::PayloadTooLarge(max_body_bytes);
    }
    ApiError::InvalidJson(format!("the request body could not be read: {}", rejection.body_text()))
}
