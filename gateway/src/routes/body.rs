//! Reading request bodies under a deadline and a size limit, before any route sees them.
//!
//! A client that sends headers and then trickles its body (or stops) would otherwise hold a connection,
//! a task and a growing buffer for as long as it likes. The whole body is read here, within
//! `body_read_timeout_ms`, at most `max_body_bytes`; routes then get it from memory.

use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::state::AppState;

pub(super) async fn read_in_time(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let limit = state.settings.max_body_bytes;
    let timeout_ms = state.settings.body_read_timeout_ms;
    let anthropic = request.uri().path().starts_with("/v1/messages");
    let (parts, body) = request.into_parts();
    let error = match tokio::time::timeout(Duration::from_millis(timeout_ms), axum::body::to_bytes(body, limit)).await {
        Ok(Ok(bytes)) => return next.run(Request::from_parts(parts, Body::from(bytes))).await,
        Err(_) => ApiError::BodyTimeout(timeout_ms),
        Ok(Err(e)) if over_limit(&e) => ApiError::PayloadTooLarge(limit),
        Ok(Err(e)) => ApiError::InvalidJson(format!("the request body could not be read: {e}")),
    };
    let response = error.into_response();
    // Errors of the Messages dialect go out in Anthropic's shape, as the route's own would.
    if anthropic {
        crate::messages::errors::rewrite(response).await
    } else {
        response
    }
}

/// Whether reading stopped at the size limit (http-body's `LengthLimitError`, somewhere in the chain).
fn over_limit(error: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if e.to_string() == "length limit exceeded" {
            return true;
        }
        source = e.source();
    }
    false
}
