//! Errors on `/v1/messages` in Anthropic's shape, `{"type":"error","error":{"type","message"}}`, with
//! the same status codes and headers as elsewhere: every gateway error (auth, limits, credits,
//! refusals) is written this way on this route, so the Anthropic SDKs raise their own exception classes.

use axum::response::Response;
use serde_json::json;

use crate::error::ApiError;

/// Anthropic's error type for a status.
#[must_use]
pub fn kind(status: u16) -> &'static str {
    match status {
        401 => "authentication_error",
        402 => "billing_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        504 => "timeout_error",
        400..=499 => "invalid_request_error",
        _ => "api_error",
    }
}

/// The error in Anthropic's shape, with the status and headers it has on every route.
#[must_use]
pub fn response(error: ApiError) -> Response {
    let body = json!({"type": "error", "error": {"type": kind(error.status().as_u16()), "message": error.to_string()}});
    error.respond_with(&body)
}
