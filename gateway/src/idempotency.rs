//! `Idempotency-Key` on the inference endpoints.
//!
//! The first request with a key claims it in Postgres and runs; its answer is stored with the key. A retry
//! with the same key and the same body gets the stored answer (`idempotent-replayed: true`) and is not
//! charged again; the same key with another body is refused (422); a retry while the first still runs is
//! refused with 409 and `retry-after`, so the work never runs twice.
//!
//! A claimed request runs to its end even if the client leaves (that is when a client retries): a
//! non-streamed one in its own task, a streamed one drained into the store while the client is fed.
//! An answer a retry could improve on (a 5xx, a refusal for credit or load, a stream that did not
//! complete) gives the key up instead of being stored.

use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tracing::Instrument as _;
use uuid::Uuid;

use crate::db::idempotency;
use crate::error::{ApiError, QuotaKind};
use crate::inference::stream::Completion;
use crate::request_id;
use crate::state::AppState;

/// Writes an error in the route's dialect.
pub type RenderError = fn(ApiError) -> Response;

const HEADER: &str = "idempotency-key";
/// A `running` claim older than this was left by a gateway that died; a retry may take it over.
const STALE_RUNNING_S: i64 = 3600;

/// The key this request holds while it runs.
#[derive(Debug, Clone)]
pub struct Claim {
    tenant: Uuid,
    key: String,
}

#[derive(Debug)]
pub enum Begin {
    /// Run the request; with a claim when it carried a key.
    Run(Option<Claim>),
    /// A retry of a finished request: its stored answer.
    Replay(Response),
}

/// Claims the request's key, or answers from what the key holds.
///
/// # Errors
/// 400 for a malformed key, 422 for a key used with another body, 409 while the first request runs.
pub async fn begin(state: &AppState, tenant: Uuid, headers: &HeaderMap, endpoint: &str, body: &[u8]) -> Result<Begin, ApiError> {
    let Some(value) = headers.get(HEADER) else {
        return Ok(Begin::Run(None));
    };
    let key = value
        .to_str()
        .ok()
        .filter(|k| !k.is_empty() && k.len() <= 255)
        .ok_or_else(|| ApiError::invalid("Idempotency-Key must be 1 to 255 visible ASCII characters", "Idempotency-Key"))?;
    let hash = Sha256::new().chain_update(endpoint).chain_update([0]).chain_update(body).finalize();
    let ttl_s = i64::from(state.settings.limits.idempotency_ttl_hours) * 3600;
    let Some(existing) = idempotency::claim(&state.db, tenant, key, &hash, ttl_s, STALE_RUNNING_S).await? else {
        let claim = Claim { tenant, key: key.to_owned() };
        within_quota(state, &claim).await?;
        return Ok(Begin::Run(Some(claim)));
    };
    if existing.request_hash != hash.as_slice() {
        return Err(ApiError::IdempotencyKeyReused);
    }
    if existing.state != "done" {
        return Err(ApiError::IdempotencyInProgress);
    }
    Ok(Begin::Replay(replay(existing)))
}

/// Refuses a newly claimed key (and gives it up) when its tenant already keeps as many keys, or as many
/// bytes of answers, as it may. A request in flight may still add one answer of at most
/// `idempotency_max_stored_bytes`, so the bytes kept exceed the quota by at most that per concurrent
/// request.
async fn within_quota(state: &AppState, claim: &Claim) -> Result<(), ApiError> {
    let limits = &state.settings.limits;
    let usage = idempotency::usage(&state.db, claim.tenant).await?;
    // The claim just made counts among the keys.
    let full = if usage.keys > limits.idempotency_max_keys_per_tenant {
        Some(QuotaKind::Keys(limits.idempotency_max_keys_per_tenant))
    } else if usage.bytes >= limits.idempotency_max_bytes_per_tenant {
        Some(QuotaKind::Bytes(limits.idempotency_max_bytes_per_tenant))
    } else {
        None
    };
    match full {
        None => Ok(()),
        Some(kind) => {
            release(state, claim).await;
            Err(ApiError::IdempotencyQuotaExceeded(kind))
        }
    }
}

fn replay(stored: idempotency::Existing) -> Response {
    let status = stored.http_status.and_then(|s| u16::try_from(s).ok()).and_then(|s| StatusCode::from_u16(s).ok());
    let mut response = (status.unwrap_or(StatusCode::OK), stored.body.unwrap_or_default()).into_response();
    let headers = response.headers_mut();
    if let Some(v) = stored.content_type.and_then(|c| HeaderValue::from_str(&c).ok()) {
        headers.insert(header::CONTENT_TYPE, v);
    }
    headers.insert(HeaderName::from_static("idempotent-replayed"), HeaderValue::from_static("true"));
    if let Some(id) = stored.request_id.filter(|id| !id.is_empty()) {
        request_id::attach(&mut response, &id);
    }
    response
}

/// Runs `work` under the claim: to its end whatever the client does, storing or releasing the key.
/// `render` writes the route's errors.
pub async fn run_claimed<F>(state: AppState, claim: Claim, render: RenderError, work: F) -> Response
where
    F: std::future::Future<Output = Response> + Send + 'static,
{
    let task = state.tasks.clone().spawn(
        async move {
            let response = work.await;
            settle(state, claim, render, response).await
        }
        .in_current_span(),
    );
    task.await.unwrap_or_else(|e| render(ApiError::Internal(format!("request task failed: {e}"))))
}

/// Stores a final answer with the key, or gives the key up.
async fn settle(state: AppState, claim: Claim, render: RenderError, mut response: Response) -> Response {
    let status = response.status();
    let content_type = response.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let request_id = request_id::of(&response).unwrap_or("").to_owned();
    let retry_may_differ =
        status.is_server_error() || matches!(status, StatusCode::PAYMENT_REQUIRED | StatusCode::CONFLICT | StatusCode::TOO_MANY_REQUESTS);
    if retry_may_differ {
        release(&state, &claim).await;
        return response;
    }
    if let Some(completion) = response.extensions_mut().remove::<Completion>() {
        return tee_stream(Kept { state, claim, render, content_type, request_id }, response, completion);
    }
    let (parts, body) = response.into_parts();
    let bytes = match axum::body::to_bytes(body, crate::upstream::body::MAX_ANSWER_BYTES).await {
        Ok(bytes) => bytes,
        Err(e) => {
            release(&state, &claim).await;
            return render(ApiError::Internal(format!("answer unreadable: {e}")));
        }
    };
    let kept = (bytes.len() <= state.settings.limits.idempotency_max_stored_bytes).then_some(&bytes[..]);
    Kept { state, claim, render, content_type, request_id }.store_or_refuse(status, kept).await;
    Response::from_parts(parts, Body::from(bytes))
}

/// An answer under a claimed key, and what storing it needs.
struct Kept {
    state: AppState,
    claim: Claim,
    render: RenderError,
    content_type: String,
    request_id: String,
}

/// Feeds the client while it stays (and reads), drains the stream to its end regardless, then stores it
/// if the relay says the request completed. What is kept is capped: past
/// `idempotency_max_stored_bytes` the key is closed as answered-but-not-stored.
fn tee_stream(kept: Kept, response: Response, completion: Completion) -> Response {
    let (parts, body) = response.into_parts();
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(64);
    let settings = &kept.state.settings;
    let (cap, client_write) = (settings.limits.idempotency_max_stored_bytes, Duration::from_millis(settings.client_write_timeout_ms));
    kept.state.tasks.clone().spawn(async move {
        let mut stream = body.into_data_stream();
        // `None` once the answer has outgrown the cap.
        let mut answer = Some(Vec::new());
        let mut client = Some(tx);
        while let Some(chunk) = stream.next().await {
            let Ok(chunk) = chunk else { break };
            answer = answer.filter(|k| k.len() + chunk.len() <= cap).map(|mut k| {
                k.extend_from_slice(&chunk);
                k
            });
            if let Some(tx) = &client {
                // A client that stops reading is let go; the answer still runs to its end for the retry.
                if !matches!(tokio::time::timeout(client_write, tx.send(Ok(chunk))).await, Ok(Ok(()))) {
                    client = None;
                }
            }
        }
        if completion.completed().await {
            kept.store_or_refuse(StatusCode::OK, answer.as_deref()).await;
        } else {
            release(&kept.state, &kept.claim).await;
        }
    });
    Response::from_parts(parts, Body::from_stream(ReceiverStream::new(rx)))
}

impl Kept {
    /// Stores the answer `body`, or — when it was too large to keep (`None`) — a refusal in its place:
    /// the answer was delivered and billed, so a retry must never run (and bill) the request twice.
    async fn store_or_refuse(&self, status: StatusCode, body: Option<&[u8]>) {
        if let Some(body) = body {
            return self.store(status, &self.content_type, body).await;
        }
        let refusal = (self.render)(ApiError::IdempotentAnswerNotStored(self.state.settings.limits.idempotency_max_stored_bytes));
        let status = refusal.status();
        let content_type =
            refusal.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("application/json").to_owned();
        let body = axum::body::to_bytes(refusal.into_body(), 64 * 1024).await.unwrap_or_default();
        self.store(status, &content_type, &body).await;
    }

    async fn store(&self, status: StatusCode, content_type: &str, body: &[u8]) {
        let (state, claim, request_id) = (&self.state, &self.claim, &self.request_id);
        let stored = idempotency::complete(&state.db, claim.tenant, &claim.key, status.as_u16(), content_type, request_id, body).await;
        if let Err(e) = stored {
            // The answer went out and was billed; a retry now runs again rather than waiting forever.
            tracing::error!(%request_id, error = %e, "idempotent answer not stored");
            release(state, claim).await;
        }
    }
}

async fn release(state: &AppState, claim: &Claim) {
    if let Err(e) = idempotency::release(&state.db, claim.tenant, &claim.key).await {
        tracing::error!(error = %e, "idempotency key not released; it frees itself after an hour");
    }
}
