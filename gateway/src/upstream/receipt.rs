//! Asking a worker what a request consumed (`GET /v1/requests/{id}/usage`), once the gateway has cut the
//! request or its client has left: the prompt tokens the worker read and the tokens it generated, which
//! no chunk may yet have carried. That is what such a request is billed (see `docs/finance.md`,
//! *Work done*). The question is signed like every request to a worker and carries the tenant's cache
//! scope: a worker answers only about requests of that scope.

use std::time::Duration;

use runaii_wire::cache_scope::CacheScope;
use runaii_wire::priority::Priority;
use runaii_wire::worker_auth::WorkerSecrets;
use serde::Deserialize;

/// How often, and how many times, the worker is asked until the request has ended there: the engine
/// frees a sequence at its next step after the connection closes.
const POLL_EVERY: Duration = Duration::from_millis(50);
const POLLS: usize = 60;

/// Where to ask about one request.
#[derive(Clone)]
pub struct Receipt {
    pub(super) http: reqwest::Client,
    pub(super) secrets: WorkerSecrets,
    pub(super) url: String,
    pub(super) scope: CacheScope,
    pub(super) request_id: String,
}

impl std::fmt::Debug for Receipt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receipt").field("url", &self.url).field("request_id", &self.request_id).finish_non_exhaustive()
    }
}

/// A request's final counts, as the worker kept them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct Consumed {
    pub prompt_tokens: u32,
    pub cached_tokens: u32,
    pub completion_tokens: u32,
    ended: bool,
}

impl Receipt {
    /// The request's final counts once it has ended at the worker; `None` when the worker cannot tell
    /// (an engine of another make, a worker gone, a request still running after the polls).
    pub async fn settled(&self) -> Option<Consumed> {
        for _ in 0..POLLS {
            match self.ask().await {
                Some(consumed) if consumed.ended => return Some(consumed),
                Some(_) => tokio::time::sleep(POLL_EVERY).await,
                None => return None,
            }
        }
        tracing::warn!(request_id = %self.request_id, worker = %self.url, "request still running at the worker; billed from the gateway's count");
        None
    }

    async fn ask(&self) -> Option<Consumed> {
        let path = format!("/v1/requests/{}/usage", self.request_id);
        let headers = super::signed::headers(&self.secrets, "GET", &path, &self.scope, Priority::Online, b"");
        let response = self.http.get(format!("{}{path}", self.url)).headers(headers).timeout(Duration::from_secs(1)).send().await.ok()?;
        if !response.status().is_success() {
            return None;
        }
        response.json().await.ok()
    }
}
