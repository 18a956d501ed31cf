//! Background responses (`background: true`): the request is checked, stored `queued` and answered at
//! once; a tracked task runs it through the same driver as any request (credit hold, worker, cost
//! record: billed exactly as online), moving it to `in_progress` and then `completed`, `incomplete` or
//! `failed`. `POST /v1/responses/{id}/cancel` moves a queued or running one to `cancelled`: the task lets
//! go of its stream, so the worker stops and the tokens generated until then are billed, as for a client
//! that leaves.
//!
//! The task reads its own answer as a stream (the driver's streams end at once when their reader
//! leaves, a whole answer runs to its end), and keeps its events where every replica reads them
//! ([`replay`]): `response.created` (status `queued`) when it is queued, then each event of the run, and
//! a `response.failed` for a run that fails. With `stream: true` the create call answers with those
//! events, read back like any resume: the client reads, it does not run, so a client that leaves leaves
//! the response running and billed once. A cancel reaches the task on this replica at once, and on
//! another within `CANCEL_POLL`, by the stored status.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::{FutureExt as _, StreamExt};
use serde_json::{json, Value};
use tokio::sync::Notify;
use tracing::Instrument as _;
use uuid::Uuid;

use super::events::response_event;
use super::object::Shell;
use super::replay::{self, Recorder};
use super::{store, translate, Responses};
use crate::auth::Caller;
use crate::concurrency::Slot;
use crate::db::responses::{self as rows, NewStored};
use crate::error::ApiError;
use crate::inference::Dialect;
use crate::request_id;
use crate::state::AppState;

/// How often a running background response checks whether it was cancelled on another replica.
const CANCEL_POLL: Duration = Duration::from_secs(1);

/// The background responses running on this replica, by id: a cancel here wakes its task at once.
fn running() -> &'static Mutex<HashMap<String, Arc<Notify>>> {
    static RUNNING: OnceLock<Mutex<HashMap<String, Arc<Notify>>>> = OnceLock::new();
    RUNNING.get_or_init(Mutex::default)
}

fn invalid(message: &str, param: &'static str) -> ApiError {
    ApiError::InvalidRequest { message: message.into(), param: Some(param), code: "invalid_request" }
}

/// Checks a background request, stores it `queued`, starts it and answers with it (with `stream: true`,
/// with its events to its end). The work holds the request's `slot` among its tenant's requests in
/// flight until it ends.
pub async fn start(state: &AppState, caller: Caller, slot: Slot, request: Value) -> Response {
    let (tenant, streamed) = (caller.tenant_id, request.get("stream").and_then(Value::as_bool) == Some(true));
    match queue(state, caller, slot, request).await {
        Ok(queued) if streamed => replay::stream(state.clone(), tenant, queued.id, None, Some((0, queued.created))),
        Ok(queued) => {
            let mut response = ([(axum::http::header::CONTENT_TYPE, "application/json")], queued.response).into_response();
            request_id::attach(&mut response, &queued.id);
            response
        }
        Err(e) => Responses::error(e),
    }
}

/// A response just queued.
struct Queued {
    id: String,
    /// The Response, status `queued`.
    response: String,
    /// Its `response.created` event (sequence 0).
    created: Bytes,
}

/// Stores the request `queued` and starts it.
async fn queue(state: &AppState, caller: Caller, slot: Slot, request: Value) -> Result<Queued, ApiError> {
    translate::to_chat(&request)?;
    if request.get("store").and_then(Value::as_bool) == Some(false) {
        return Err(invalid("a background response is stored: store must not be false", "store"));
    }
    // The continuation and the quota are checked now, so that their refusals come back at once.
    let continued = store::continue_from(state, caller.tenant_id, &request).await?;
    let id = Responses::new_id();
    let shell = Shell::new(id.clone(), request.clone());
    let queued = status_text(&shell, "queued");
    let input_items = continued.keeper.as_ref().map_or(Value::Null, |k| k.input_items().clone());
    let (retention_hours, _) = store::terms(state, caller.tenant_id).await?;
    let row = NewStored {
        id: &id,
        tenant: caller.tenant_id,
        previous_response_id: request.get("previous_response_id").and_then(Value::as_str),
        status: "queued",
        background: true,
        input_items: &input_items,
        conversation: &Value::Array(continued.conversation),
        response: &queued,
        retention_hours,
    };
    rows::put(&state.db, &row).await?;
    let mut recorder = Recorder::new(caller.tenant_id, id.clone(), retention_hours);
    let created = response_event("response.created", 0, &queued);
    recorder.record(state, &created).await;
    let mut run = request;
    run["stream"] = json!(true);
    let task_state = state.clone();
    state.tasks.spawn(async move { work(task_state, caller, slot, shell, run, recorder).await }.in_current_span());
    Ok(Queued { id, response: queued, created })
}

/// The Response with `status` and nothing answered yet.
fn status_text(shell: &Shell, status: &str) -> String {
    let mut response = shell.response(None);
    response["status"] = json!(status);
    response.to_string()
}

/// Runs the response to its end (or its cancel), keeping its status and its events.
async fn work(state: AppState, caller: Caller, slot: Slot, shell: Shell, request: Value, mut recorder: Recorder) {
    let id = shell.id.clone();
    let cancel = Arc::new(Notify::new());
    running().lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(id.clone(), Arc::clone(&cancel));
    let tenant = caller.tenant_id;
    let started = rows::advance(&state.db, tenant, &id, &["queued"], "in_progress", &status_text(&shell, "in_progress")).await;
    if matches!(started, Ok(true)) {
        let answer = crate::inference::run_as::<Responses>(&state, caller, slot, request, id.clone()).await;
        follow(&state, tenant, &shell, answer, &cancel, &mut recorder).await;
    }
    running().lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&id);
}

/// Reads the answer's stream to its end, or lets go of it on a cancel, recording its events. The
/// stream's own last event keeps the finished response (see `events.rs`); what ends otherwise is marked
/// `failed`.
async fn follow(state: &AppState, tenant: Uuid, shell: &Shell, answer: Response, cancel: &Notify, recorder: &mut Recorder) {
    let id = &shell.id;
    if !answer.status().is_success() {
        let body = axum::body::to_bytes(answer.into_body(), 64 * 1024).await.unwrap_or_default();
        let error = serde_json::from_slice::<Value>(&body).ok().map(|b| b["error"].clone()).unwrap_or(Value::Null);
        return fail(state, tenant, shell, &error, recorder).await;
    }
    let mut body = answer.into_body().into_data_stream();
    let mut poll = tokio::time::interval(CANCEL_POLL);
    let mut last = Vec::new();
    loop {
        tokio::select! {
            chunk = body.next() => match chunk {
                Some(Ok(bytes)) => {
                    // What else the stream has ready is recorded with it, in one round trip.
                    let mut ready = bytes.to_vec();
                    last = bytes.to_vec();
                    while let Some(Some(Ok(more))) = body.next().now_or_never() {
                        ready.extend_from_slice(&more);
                        last = more.to_vec();
                    }
                    recorder.record(state, &ready).await;
                }
                _ => break,
            },
            () = cancel.notified() => return,
            _ = poll.tick() => {
                if matches!(rows::status(&state.db, tenant, id).await, Ok(Some(s)) if s == "cancelled") {
                    return;
                }
            }
        }
    }
    // A stream that ended in an `error` event did not keep its response: it failed.
    let text = String::from_utf8_lossy(&last);
    if text.starts_with("event: error") {
        let error =
            text.lines().find_map(|l| l.strip_prefix("data: ")).and_then(|d| serde_json::from_str::<Value>(d).ok()).unwrap_or(Value::Null);
        fail(state, tenant, shell, &error, recorder).await;
    }
}

/// Marks the response `failed` and ends its events with `response.failed`.
async fn fail(state: &AppState, tenant: Uuid, shell: &Shell, error: &Value, recorder: &mut Recorder) {
    let mut response = shell.response(None);
    response["status"] = json!("failed");
    response["error"] = json!({"code": error["code"].as_str().unwrap_or("server_error"), "message": error["message"].as_str().unwrap_or("the response failed")});
    let text = response.to_string();
    match rows::advance(&state.db, tenant, &shell.id, &["queued", "in_progress"], "failed", &text).await {
        Ok(true) => recorder.record(state, &response_event("response.failed", recorder.next(), &text)).await,
        Ok(false) => {}
        Err(e) => tracing::error!(response_id = %shell.id, error = %e, "failed background response not marked"),
    }
}

/// Cancels the tenant's background response `id` if it is queued or running; the response as it then
/// stands.
///
/// # Errors
/// 404 for an id the tenant has not kept; 400 for a response that was not run in the background.
pub async fn cancel(state: &AppState, tenant: Uuid, id: &str) -> Result<String, ApiError> {
    let stored = rows::get(&state.db, tenant, id).await?.ok_or_else(|| ApiError::NotFound(format!("response '{id}'")))?;
    if !stored.background {
        return Err(invalid("only a background response can be cancelled", "response_id"));
    }
    let mut response: Value =
        serde_json::from_str(&stored.response).map_err(|e| ApiError::Internal(format!("stored response unreadable: {e}")))?;
    response["status"] = json!("cancelled");
    let text = response.to_string();
    if rows::advance(&state.db, tenant, id, &["queued", "in_progress"], "cancelled", &text).await? {
        if let Some(task) = running().lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(id) {
            task.notify_one();
        }
        return Ok(text);
    }
    // Finished (or cancelled) already: as it stands.
    Ok(rows::get(&state.db, tenant, id).await?.map_or(stored.response, |s| s.response))
}
