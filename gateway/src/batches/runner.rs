//! Every replica runs the batches: it validates and finalizes batches one at a time (each under a lease,
//! so two replicas never do the same; a try that fails gives its lease back, for a retry soon), and runs lines, at most `--batch-concurrency` at once, claimed in
//! turns by tenant (the tenant served longest ago goes next, then its batch served longest ago). A line runs as its batch's key in
//! the `batch` class (`auth::Caller::priority`): at the batch price, after online requests at the worker,
//! outside the key's online rate limits and its tenant's cap on requests in flight; its credit hold and
//! cost record are an online request's. A line left running by a replica that died runs again, unless
//! its cost record shows it ran to its end (then it fails as lost: never billed twice).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::FromRef as _;
use axum::response::{IntoResponse as _, Response};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{output, validate};
use crate::auth::KeyCheck;
use crate::db::batches::{self as rows, Claimed, Lease};
use crate::error::ApiError;
use crate::inference::chat::Chat;
use crate::inference::responses::Responses;
use crate::state::AppState;

/// How long a replica may take to validate or finalize one batch before another may take it over.
const LEASE_S: f64 = 600.0;
/// How soon a batch whose validation or finalization failed (a database or storage error) is tried again,
/// by any replica: its lease is given back, not held until it runs out.
const RETRY_S: f64 = 5.0;
/// How many times a line whose worker failed is tried before its failure is its answer.
const MAX_FAILED_TRIES: i32 = 3;
/// The largest answer a line keeps.
const MAX_ANSWER_BYTES: usize = 64 * 1024 * 1024;
/// The answer of a line whose replica died after its cost record and before its answer was kept.
const LOST: &str = r#"{"error":{"message":"The gateway running this request stopped after it was billed and before its answer was kept; it is not run again.","type":"server_error","param":null,"code":"batch_line_lost"}}"#;

/// Runs batches until the process begins to shut down (then lines running finish and are recorded;
/// graceful shutdown waits for them).
pub async fn run_forever(state: AppState) {
    let slots = Arc::new(Semaphore::new(usize::try_from(state.settings.batches.concurrency).unwrap_or(1)));
    let mut tick = tokio::time::interval(Duration::from_millis(state.settings.batches.poll_ms));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !state.tasks.is_closed() {
        tokio::select! {
            _ = tick.tick() => {}
            () = state.batches_wake.notified() => {}
        }
        if let Err(e) = step(&state, &slots).await {
            tracing::warn!(error = ?e, "batch runner step failed; retried at the next tick");
        }
    }
}

async fn step(state: &AppState, slots: &Arc<Semaphore>) -> Result<(), ApiError> {
    let db = &state.db;
    let timeout_s = state.settings.limits.replica_timeout_ms as f64 / 1000.0;
    let recovered = rows::recover(db, timeout_s, LOST).await?;
    if recovered > 0 {
        tracing::warn!(lines = recovered, "batch lines of a replica that died were taken back");
    }
    rows::expire_lines(db).await?;
    rows::settle(db).await?;
    while let Some(lease) = rows::lease(db, "validating", LEASE_S).await? {
        if let Err(e) = validate::validate(state, &lease.id).await {
            give_back(state, &lease, "validate", &e).await;
        }
    }
    while let Some(lease) = rows::lease(db, "finalizing", LEASE_S).await? {
        if let Err(e) = output::finalize(state, &lease).await {
            give_back(state, &lease, "finalize", &e).await;
        }
    }
    while !state.tasks.is_closed() {
        let Ok(permit) = Arc::clone(slots).try_acquire_owned() else { break };
        let Some(line) = rows::claim(db, state.replica_id).await? else { break };
        state.tasks.spawn(run(state.clone(), line, permit));
    }
    Ok(())
}

/// After a failed try to `work` on the batch of `lease`: the lease given back, so that the batch is tried
/// again after [`RETRY_S`] rather than held until its lease runs out. Any other batch is taken meanwhile.
async fn give_back(state: &AppState, lease: &Lease, work: &str, error: &ApiError) {
    tracing::error!(batch = %lease.id, error = ?error, "a batch could not {work}; tried again in {RETRY_S} s");
    if let Err(e) = rows::release(&state.db, lease, RETRY_S).await {
        tracing::error!(batch = %lease.id, error = %e, until = %lease.until, "a batch's lease not given back; it is tried again when it runs out");
    }
}

/// Runs one line and keeps its answer; or, when the fleet had no room for it or its worker failed before
/// answering (nothing billed), puts it back to wait.
async fn run(state: AppState, line: Claimed, _slot: OwnedSemaphorePermit) {
    let response = answer(&state, &line).await;
    let mut status = response.status().as_u16();
    let mut body = match axum::body::to_bytes(response.into_body(), MAX_ANSWER_BYTES).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => {
            serde_json::to_string(&ApiError::Internal(format!("a batch line's answer could not be read: {e}")).body()).unwrap_or_default()
        }
    };
    // A record this try could not write, under a request id that has one: another try of the line (on a
    // replica presumed dead too soon) ran to its end and was billed; its answer is not here.
    if status == 503 && body.contains("\"ledger_unavailable\"") && rows::billed(&state.db, &line.request_id).await.unwrap_or(false) {
        (status, body) = (500, LOST.to_owned());
    }
    if let Some(after) = retry_after(status, &body, line.attempts) {
        let request_id = super::new_request_id(&line.endpoint);
        match rows::retry(&state.db, (&line.batch_id, line.line), state.replica_id, &request_id, after.as_secs_f64()).await {
            Ok(()) => return,
            Err(e) => tracing::warn!(batch = %line.batch_id, line = line.line, error = %e, "a batch line not put back; its answer is kept"),
        }
    }
    let mut wait = Duration::from_millis(100);
    for _ in 0..8 {
        match rows::answer(&state.db, (&line.batch_id, line.line), state.replica_id, status, &body).await {
            Ok(()) => break,
            Err(e) => {
                tracing::warn!(batch = %line.batch_id, line = line.line, error = %e, "a batch line's answer not kept yet; retrying");
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
        }
    }
    state.batches_wake.notify_one();
}

/// Whether a line's answer is one to try again, and after how long: every worker's queue full or no
/// worker ready (load: tried until the batch's window ends), or a worker that failed before answering (a
/// few times). Neither bills anything, so the next try is its line's only charge.
fn retry_after(status: u16, body: &str, attempts: i32) -> Option<Duration> {
    let answer: serde_json::Value = serde_json::from_str(body).ok()?;
    let code = answer["error"]["code"].as_str()?;
    let pause = Duration::from_millis(250 * u64::try_from(attempts.clamp(1, 8)).unwrap_or(1));
    match (status, code) {
        (503, "model_overloaded" | "model_unavailable") => Some(pause),
        (502, "upstream_error") if attempts < MAX_FAILED_TRIES => Some(pause),
        _ => None,
    }
}

async fn answer(state: &AppState, line: &Claimed) -> Response {
    let caller = match KeyCheck::from_ref(state).batch_caller(line.api_key_id).await {
        Ok(Some(caller)) => caller,
        Ok(None) => return ApiError::InvalidApiKey.into_response(),
        Err(e) => return ApiError::from(e).into_response(),
    };
    let (request, id) = (line.body.clone(), line.request_id.clone());
    if line.endpoint == "/v1/responses" {
        crate::inference::serve_line::<Responses>(state, caller, request, id).await
    } else {
        crate::inference::serve_line::<Chat>(state, caller, request, id).await
    }
}
