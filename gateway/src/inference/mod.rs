//! Inference, whatever the client's dialect. One driver, [`run`], checks the request, holds its
//! worst-case cost, sends it to a worker, meters the answer and records its cost; the [`Dialect`] the
//! client speaks — OpenAI's chat completions ([`chat`]), OpenAI's Responses ([`responses`]), Anthropic's
//! Messages ([`messages`]) — reads the request and writes the answer, its stream events and its errors,
//! each in its own shape. A dialect only translates: routing, money and records are the driver's.

pub mod chat;
pub mod messages;
pub mod metadata;
pub mod parameters;
mod prepare;
pub mod responses;
mod sse;
pub mod stream;
mod worker;

use std::future::Future;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use rust_decimal::Decimal;
use serde_json::Value;
use tracing::Instrument as _;

pub use prepare::{prepare, Prepared};

use crate::auth::Caller;
use crate::concurrency::{self, Slot};
use crate::error::ApiError;
use crate::request_id;
use crate::state::AppState;

/// A client dialect: what the driver needs to know about a request and how its answers look.
pub trait Dialect: Send + Sized + 'static {
    /// The endpoint the ledger names.
    const ENDPOINT: &'static str;
    /// How this dialect writes a streamed answer.
    type Events: stream::Events;

    /// A fresh answer id, which is also the cost record's key (`chatcmpl-…`, `resp_…`, `msg_…`).
    fn new_id() -> String;

    /// Reads the client's request, whose answer will carry `id`: what the dialect keeps to write the
    /// answer, and the chat request it stands for. A dialect may look up what the request refers to (a
    /// stored conversation) under the caller's tenant.
    ///
    /// # Errors
    /// A 400 for a request the dialect cannot translate.
    fn read(state: &AppState, caller: &Caller, request: Value, id: String) -> impl Future<Output = Result<(Self, Value), ApiError>> + Send;

    /// The events of a streamed answer; `include_usage` is whether the client asked for a usage chunk.
    fn events(self, include_usage: bool) -> Self::Events;

    /// The whole answer for the worker's chat completion, written with its exact cost (`billing::json_with_cost`).
    /// A dialect that keeps its answers (the Responses store) keeps it before it goes out.
    fn whole(self, answer: Value, cost: Decimal) -> impl Future<Output = String> + Send;

    /// An error answer in this dialect's shape.
    fn error(error: ApiError) -> Response;

    /// Starts a request: by default it runs to its answer ([`run`]). (A Responses request with
    /// `background: true` is answered `queued` at once and runs on.)
    /// `slot` is the request's place among its tenant's requests in flight, held until its work is done.
    fn start(state: &AppState, caller: Caller, slot: Slot, request: Value) -> impl Future<Output = Response> + Send {
        async move { run::<Self>(state, caller, slot, request).await }
    }
}

/// Serves one request in dialect `D`. After the credit hold every outcome has a cost record under the
/// answer's id, and whatever goes out (answer, stream or error) names that id.
///
/// The work runs in its own tracked task: a client that leaves drops this future, and with it anything
/// it awaits. Run inline, a client leaving between the credit hold and the worker's answer cancelled the
/// request there: no record, and a hold left until it expired (seen when a loaded machine delayed the
/// handler right after the hold). In a task, the request runs to its record whatever the client does,
/// and graceful shutdown waits for it.
///
/// The request's `slot` among its tenant's requests in flight is held by the task, then by the answer's
/// body: it is given back when the last byte has gone out, or when the client has left and the work is
/// done.
pub async fn run<D: Dialect>(state: &AppState, caller: Caller, slot: Slot, request: Value) -> Response {
    run_as::<D>(state, caller, slot, request, D::new_id()).await
}

/// Serves one line of a batch under `id`, in the caller's task (the batch runner's, tracked): as
/// [`run`], without a place among the tenant's online requests in flight.
pub async fn serve_line<D: Dialect>(state: &AppState, caller: Caller, request: Value, id: String) -> Response {
    serve::<D>(state, caller, request, id).await
}

/// [`run`], for an answer whose id was given out before it ran (a background response's).
pub async fn run_as<D: Dialect>(state: &AppState, caller: Caller, slot: Slot, request: Value, id: String) -> Response {
    let (task_state, arrived) = (state.clone(), crate::metrics::arrived());
    // Boxed: the task then moves a pointer, not the whole request's state machine (its copies were a
    // tenth of the gateway's memmove time).
    let work = Box::pin(async move { concurrency::hold(serve::<D>(&task_state, caller, request, id).await, slot) });
    let task = state.tasks.spawn(crate::metrics::arrived_at(arrived, work).in_current_span());
    task.await.unwrap_or_else(|e| D::error(ApiError::Internal(format!("request task failed: {e}"))))
}

async fn serve<D: Dialect>(state: &AppState, caller: Caller, request: Value, id: String) -> Response {
    let read = D::read(state, &caller, request, id.clone()).await;
    let prepared = match read {
        Ok((dialect, chat)) => prepare(state, caller, chat, D::ENDPOINT, id.clone()).await.map(|p| (dialect, p)),
        Err(e) => Err(e),
    };
    let (dialect, prepared) = match prepared {
        Ok(ready) => ready,
        Err(e) => return D::error(e),
    };
    let mut response = answer(state, prepared, dialect).await.unwrap_or_else(D::error);
    request_id::attach(&mut response, &id);
    response
}

async fn answer<D: Dialect>(state: &AppState, prepared: Prepared, dialect: D) -> Result<Response, ApiError> {
    if prepared.stream {
        let include_usage = prepared.include_usage;
        let (ledger, upstream) = worker::open(state, prepared).await?;
        return Ok(stream::relay(ledger, upstream, dialect.events(include_usage)));
    }
    let (_, answer, cost) = worker::finish_whole(state, prepared).await?;
    Ok(json_response(dialect.whole(answer, cost).await))
}

fn json_response(body: String) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}
