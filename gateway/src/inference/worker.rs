//! Sending a prepared request to a worker and reading its answer: a refusal is recorded at zero cost, a
//! whole answer is metered and recorded before it is handed back. (Streams are read by `stream.rs`.)

use std::time::Instant;

use runaii_wire::ErrorBody;
use rust_decimal::Decimal;
use serde_json::Value;

use super::Prepared;
use crate::billing::{worst_case_tokens, Ledger, Outcome, Tokens};
use crate::error::ApiError;
use crate::state::AppState;
use crate::upstream::{self, Ask, Receipt, Unanswered, Upstream};

/// Sends the request; a refusal is recorded at zero cost and returned as the gateway's error.
///
/// # Errors
/// The worker's refusal or failure, or no ready worker.
pub async fn open(state: &AppState, prepared: Prepared) -> Result<(Ledger, Upstream), ApiError> {
    let Prepared { ledger, body, .. } = prepared;
    match send(state, &ledger, &body, true).await {
        Ok(upstream) => Ok((ledger, upstream)),
        Err(error) => Err(reject(&ledger, error).await),
    }
}

/// Runs a non-streamed request to its end and records it. (It runs in the request's own task, see
/// `inference::run`: if the client goes away meanwhile, the answer is still metered and recorded.)
///
/// The ledger writer expects this request's record once the worker's answer begins to arrive (a whole
/// answer's headers come with its end, so the record is a body read away), and from the send when the
/// model's answers lately came within the writer's linger (`billing::writer`): a group it is forming
/// waits for the record. The guard is dropped before the record is queued, so a request never waits for
/// itself.
///
/// # Errors
/// As [`open`], or 503 when the cost record cannot be written (the answer is then not served).
pub async fn finish_whole(state: &AppState, prepared: Prepared) -> Result<(Ledger, Value, Decimal), ApiError> {
    let Prepared { ledger, body, .. } = prepared;
    let (sent, early) = (Instant::now(), ledger.writer.sent(&ledger.model.id));
    let upstream = send(state, &ledger, &body, false).await;
    // A request expected from its send stays expected under the same guard: a group begun since waits for
    // the records expected before it began, this one among them.
    let expected = upstream.is_ok().then(|| early.unwrap_or_else(|| ledger.writer.expect()));
    let answer = match upstream {
        Ok(upstream) => {
            ledger.writer.answered(&ledger.model.id, sent.elapsed());
            upstream.json::<Value>().await.map_err(|e| ApiError::UpstreamFailed(format!("unreadable answer: {e}")).into())
        }
        Err(unanswered) => Err(unanswered),
    };
    drop(expected);
    let mut answer = match answer {
        Ok(answer) => answer,
        Err(error) => return Err(reject(&ledger, error).await),
    };
    let upstream_time = sent.elapsed();
    let tokens = Tokens::of_usage(&answer["usage"]);
    let cost = ledger.record(Outcome::Succeeded(tokens)).await?;
    // The answer's usage says what the record holds, cached tokens included.
    tokens.write_usage(&mut answer["usage"]);
    let metrics = crate::metrics::global();
    metrics.worker_timings(&ledger.model.id, &answer["timings"]);
    state.registry.pace().observe(&ledger.model.id, &answer["timings"]);
    metrics.overhead(ledger.endpoint, ledger.started.elapsed(), upstream_time);
    Ok((ledger, answer, cost))
}

/// Sends the request to a worker: its answer when it accepted the request; its refusal or failure (or
/// no ready worker) as the gateway's error, not yet recorded.
async fn send(state: &AppState, ledger: &Ledger, body: &Value, stream: bool) -> Result<Upstream, Unanswered> {
    let ask = Ask {
        tenant: ledger.caller.tenant_id,
        model: &ledger.model.id,
        request_id: &ledger.request_id,
        max_tokens: worst_case_tokens(&ledger.model, body).1,
        stream,
        priority: ledger.caller.priority,
    };
    match upstream::send(state.fleet(), &ask, body).await {
        Ok(upstream) if upstream.response.status().is_success() => Ok(upstream),
        Ok(upstream) => Err(worker_error(upstream).await.into()),
        Err(unanswered) => Err(unanswered),
    }
}

async fn worker_error(upstream: Upstream) -> ApiError {
    let status = upstream.response.status();
    let body: Option<ErrorBody> = upstream.json().await.ok();
    let Some(ErrorBody { error }) = body else {
        return ApiError::UpstreamFailed(format!("worker answered {status} without an error body"));
    };
    match error.code.as_deref() {
        // The worker refused the gateway's own credential: a fleet misconfiguration, not the customer's fault.
        _ if status == reqwest::StatusCode::UNAUTHORIZED => {
            tracing::error!("a worker refused the gateway's credential: do they share the worker secret?");
            ApiError::UpstreamFailed(format!("worker answered {status}: {}", error.message))
        }
        // Every other refusal of the request itself is the seed contract's `upstream_rejected`, naming the
        // field the worker named and, in the message, the check that failed (the worker's code).
        code if status.is_client_error() && status != reqwest::StatusCode::NOT_FOUND => {
            let check = code.unwrap_or("invalid_request").to_owned();
            if matches!(check.as_str(), "grammar_rejected" | "invalid_schema") {
                crate::metrics::global().schema_refusals.add(&[check.as_str()], 1);
            }
            ApiError::UpstreamRejected { message: error.message, param: error.param, check }
        }
        _ => ApiError::UpstreamFailed(format!("worker answered {status}: {}", error.message)),
    }
}

/// The work done for a request that was cut or whose client left: the worker's final counts once it has
/// ended there, or the gateway's own count (`known`) when the worker cannot tell; never less than `known`.
pub(super) async fn work_done(receipt: &Receipt, known: Tokens) -> Tokens {
    match receipt.settled().await {
        Some(c) => Tokens::new(c.prompt_tokens.max(known.input), c.cached_tokens, c.completion_tokens.max(known.output)),
        None => known,
    }
}

/// Records a request that ended before its answer began and hands the error back: `rejected` at cost 0
/// when the request was refused; `failed` when the worker broke (cost 0: the provider's fault) or the
/// deadline passed (billed for the work the worker reports it did, as for a client that leaves).
async fn reject(ledger: &Ledger, unanswered: Unanswered) -> ApiError {
    let Unanswered { error, receipt } = unanswered;
    let (http_status, error_code) = (error.status().as_u16(), error.code());
    let outcome = match error {
        ApiError::UpstreamTimeout(_) => {
            let tokens = match &receipt {
                Some(receipt) => work_done(receipt, Tokens::default()).await,
                None => Tokens::default(),
            };
            Outcome::Failed { tokens, http_status, error_code }
        }
        ApiError::UpstreamFailed(_) => Outcome::Failed { tokens: Tokens::default(), http_status, error_code },
        _ => Outcome::Rejected { http_status, error_code },
    };
    match ledger.record(outcome).await {
        Ok(_) => error,
        Err(ledger_down) => ledger_down,
    }
}
