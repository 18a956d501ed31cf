//! Writing the one cost record of a request.

use std::sync::Arc;
use std::time::Instant;

use runaii_wire::priority::Priority;
use rust_decimal::Decimal;
use tracing::Instrument as _;

use super::leases::{Held, Leases};
use super::Tokens;
use crate::auth::Caller;
use crate::db::costs::{CostRecord, Leased};
use crate::db::models::ModelRow;
use crate::error::ApiError;
use crate::ratelimit::Limiter;

/// How a request ended, as the ledger records it.
#[derive(Debug, Clone)]
pub enum Outcome {
    Succeeded(Tokens),
    /// The client left mid-answer: billed for what was delivered.
    Cancelled(Tokens),
    /// The worker failed mid-answer: billed for what was delivered.
    Failed {
        tokens: Tokens,
        http_status: u16,
        error_code: Option<String>,
    },
    /// Refused before any token: costs nothing.
    Rejected {
        http_status: u16,
        error_code: Option<String>,
    },
}

/// Everything about a request the ledger needs besides its outcome.
#[derive(Debug, Clone)]
pub struct Ledger {
    /// The replica's group-committing ledger writer.
    pub writer: super::writer::LedgerWriter,
    pub request_id: String,
    pub caller: Caller,
    pub model: ModelRow,
    pub endpoint: &'static str,
    pub started: Instant,
    /// Takes the tokens used from the key's per-minute budget once the request ends.
    pub limiter: Arc<Limiter>,
    /// Where the request's detached work runs (see `AppState::tasks`).
    pub tasks: tokio_util::task::TaskTracker,
    /// How the request's worst case is held, and the replica's leases when it is held against one.
    pub held: Held,
    pub leases: Arc<Leases>,
    pub replica: uuid::Uuid,
}

/// How long the record of an answer already delivered is retried before it is given up (and logged).
const DELIVERED_RETRY_FOR: std::time::Duration = std::time::Duration::from_secs(60);

impl Ledger {
    /// As [`Ledger::record`], for an answer whose tokens already reached the client (a stream): the work
    /// was served, so a ledger that is briefly down (restarting, pool exhausted) is waited for, with
    /// backoff, rather than leaving it unbilled and its credit hold stuck.
    ///
    /// # Errors
    /// [`ApiError::LedgerUnavailable`] when the ledger stayed down for a minute.
    pub async fn record_delivered(&self, outcome: Outcome) -> Result<Decimal, ApiError> {
        let deadline = Instant::now() + DELIVERED_RETRY_FOR;
        let mut pause = std::time::Duration::from_millis(100);
        loop {
            match self.record(outcome.clone()).await {
                Err(ApiError::LedgerUnavailable) if Instant::now() + pause < deadline => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(std::time::Duration::from_secs(5));
                }
                result => return result,
            }
        }
    }

    /// Records the outcome, settles the request's credit hold to its cost, and returns that cost (the full
    /// cost, also when the tenant could pay only part of it: the record then carries the shortfall).
    ///
    /// # Errors
    /// [`ApiError::LedgerUnavailable`] when the record cannot be written: the answer must not go out
    /// unbilled.
    pub async fn record(&self, outcome: Outcome) -> Result<Decimal, ApiError> {
        let (tokens, status, http_status, error_code) = match outcome {
            Outcome::Succeeded(tokens) => (tokens, "succeeded", 200, None),
            Outcome::Cancelled(tokens) => (tokens, "cancelled", 499, None),
            Outcome::Failed { tokens, http_status, error_code } => (tokens, "failed", http_status, error_code),
            Outcome::Rejected { http_status, error_code } => (Tokens::default(), "rejected", http_status, error_code),
        };
        // Counts as the record holds them (a cached count never above the prompt), priced from those.
        let tokens = Tokens::new(tokens.input, tokens.cached, tokens.output);
        let cost = super::cost(&self.model, tokens);
        let record = CostRecord {
            request_id: self.request_id.clone(),
            tenant_id: self.caller.tenant_id,
            api_key_id: self.caller.key_id,
            model: self.model.id.clone(),
            endpoint: self.endpoint,
            input_tokens: tokens.input,
            cached_tokens: tokens.cached,
            output_tokens: tokens.output,
            cost,
            status,
            http_status,
            error_code,
            latency_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            // A request held in a forgotten epoch has no lease any more: it settles as unheld.
            leased: match self.held {
                Held::Leased { worst, epoch } if self.leases.holds(epoch) => Some(Leased { replica: self.replica, worst }),
                Held::Leased { .. } | Held::Exact => None,
            },
        };
        let span = tracing::info_span!("cost record", status = record.status);
        // On failure a leased request's worst case stays counted against the lease (the record may yet
        // be written by a retry): the slice stays conservative, never larger than the lease row.
        let settled = self.writer.settle(record.clone()).instrument(span).await.map_err(|e| {
            tracing::error!(request_id = %self.request_id, error = %e, "cost record not written");
            ApiError::LedgerUnavailable
        })?;
        if let Some(leased) = record.leased {
            self.leases.settled(self.caller.tenant_id, self.held, settled.charged.min(leased.worst));
        }
        if !settled.shortfall.is_zero() {
            // The hold was meant to be the worst case: a shortfall means the bound missed something.
            tracing::error!(request_id = %self.request_id, cost = %cost, shortfall = %settled.shortfall.normalize(),
                "cost above the hold and the tenant's balance: recorded with a shortfall");
        }
        crate::metrics::global().recorded(&record, self.started.elapsed());
        // A batch's lines have their own pool: they never spend the key's online budget.
        if self.caller.priority == Priority::Online {
            self.limiter.spend(self.caller.budgets(), u64::from(tokens.input) + u64::from(tokens.output));
        }
        Ok(cost)
    }
}
