//! Extractors whose rejections are the gateway's own errors: a malformed path parameter (a tenant id
//! that is not a UUID, an id that is not UTF-8 once percent-decoded) is a JSON 400 like every other
//! refusal, not axum's plain-text one.

use axum::extract::rejection::PathRejection;
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
