//! Asking a worker what it did for a request the gateway cut. A cut request (its client left, or it ran
//! past its deadline) is billed for the work done (docs/finance.md): the prompt the worker read and every
//! token it generated, most of which the gateway never saw. The worker counts them when it lets the
//! request go and tells them at `GET /v1/requests/{id}/usage` (signed like every request).
//!
//! An engine of another make has no such route: the gateway then bills what it saw of the answer.

use std::time::Duration;

use reqwest::header::AUTHORIZATION;
use runaii_wire::signed_request::RequestFacts;
use serde_json::Value;

use crate::state::AppState;

/// The worker waits up to 5 s for its engine to let the request go; this is a little more.
const ASK_FOR: Duration = Duration::from_secs(6);

/// The worker's count of the work done for `request_id`, as a chat `usage` object; `None` when it has
/// none to tell (an engine of another make, a worker gone, or one that still runs the request).
pub async fn work_done(state: &AppState, worker: &str, request_id: &str) -> Option<Value> {
    let path = format!("/v1/requests/{request_id}/usage");
    let facts = RequestFacts { method: "GET", path: &path, body: b"", scope: None };
    let asked = state
        .http
        .get(format!("{worker}{path}"))
        .header(AUTHORIZATION, state.registry.authorization(worker, &facts))
        .timeout(ASK_FOR)
        .send()
        .await;
    let response = match asked {
        Ok(response) if response.status().is_success() => response,
        Ok(response) => {
            tracing::info!(%request_id, status = %response.status(), "the worker told no work done for a cut request");
            return None;
        }
        Err(e) => {
            tracing::warn!(%request_id, error = %e, "the worker could not be asked the work done for a cut request");
            return None;
        }
    };
    let body = super::body::read_whole(response, 64 * 1024, ASK_FOR).await.ok()?;
    let mut told: Value = serde_json::from_slice(&body).ok()?;
    Some(told["usage"].take()).filter(Value::is_object)
}
