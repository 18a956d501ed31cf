//! Errors on `/v1/messages` in Anthropic's shape, `{"type":"error","error":{"type","message"}}`, with
//! the same status codes: every gateway error (auth, limits, credits, refusals) is rewritten on the way
//! out, so the Anthropic SDKs raise their own exception classes.

use axum::body::Body;
use axum::http::header;
use axum::response::Response;
use serde_json::{json, Value};

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
        400..=499 => "invalid_request_error",
        _ => "api_error",
    }
}

/// Rewrites an error answer (OpenAI-shaped JSON) into Anthropic's shape; anything else passes.
pub async fn rewrite(response: Response) -> Response {
    let status = response.status();
    let is_json =
        response.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|c| c.starts_with("application/json"));
    if status.is_success() || !is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 1024 * 1024).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let original: Value = serde_json::from_slice(&bytes).unwrap_or_default();
    let message = original["error"]["message"].as_str().unwrap_or("request failed");
    let body = json!({"type": "error", "error": {"type": kind(status.as_u16()), "message": message}});
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body.to_string()))
}
