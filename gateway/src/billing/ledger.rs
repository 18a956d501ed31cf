//! Writing the one cost record of a request.

use std::sync::Arc;
use std::time::Instant;

use rust_decimal::Decimal;
use tracing::Instrument as _;

use crate::auth::Caller;
use crate::db::costs::CostRecord;
use crate::db::models::ModelRow;
use crate::error::ApiError;
use crate::ratelimit::Limiter;

/// How a request ended, as the ledger records it.
#[derive(Debug, Clone)]
pub enum Outcome {
    Succeeded {
        input_tokens: u32,
        output_tokens: u32,
    },
    /// The client left mid-answer: billed for what was delivered.
    Cancelled {
        input_tokens: u32,
        output_tokens: u32,
    },
    /// The worker failed mid-answer: billed for what was delivered.
    Failed {
        input_tokens: u32,
        output_tokens: u32,
        http_status: u16,
        error_code: Option<String>,
    },
    /// Refused before any token: costs nothing.
    Rejected {
        http_status: u16,
        error_code: Option<String>,
    },
}

impl Outcome {
    /// A complete answer, from an OpenAI `usage` object.
    #[must_use]
    pub fn succeeded(usage: &serde_json::Value) -> Self {
        Self::Succeeded { input_tokens: usage_tokens(usage, "prompt_tokens"), output_tokens: usage_tokens(usage, "completion_tokens") }
    }
}

/// One token count of an OpenAI `usage` object; 0 when absent.
#[must_use]
pub fn usage_tokens(usage: &serde_json::Value, key: &str) -> u32 {
    usage[key].as_u64().and_then(|n| u32::try_from(n).ok()).unwrap_or(0)
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
        let (input_tokens, output_tokens, status, http_status, error_code) = match outcome {
            Outcome::Succeeded { input_tokens, output_tokens } => (input_tokens, output_tokens, "succeeded", 200, None),
            Outcome::Cancelled { input_tokens, output_tokens } => (input_tokens, output_tokens, "cancelled", 499, None),
            Outcome::Failed { input_tokens, output_tokens, http_status, error_code } => {
                (input_tokens, output_tokens, "failed", http_status, error_code)
            }
            Outcome::Rejected { http_status, error_code } => (0, 0, "rejected", http_status, error_code),
        };
        let cost = super::cost(&self.model, input_tokens, output_tokens);
        let record = CostRecord {
            request_id: self.request_id.clone(),
            tenant_id: self.caller.tenant_id,
            api_key_id: self.caller.key_id,
            model: self.model.id.clone(),
            endpoint: self.endpoint,
            input_tokens,
            output_tokens,
            cost,
            status,
            http_status,
            error_code,
            latency_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        };
        let span = tracing::info_span!("cost record", status = record.status);
        let settled = self.writer.settle(record.clone()).instrument(span).await.map_err(|e| {
            tracing::error!(request_id = %self.request_id, error = %e, "cost record not written");
            ApiError::LedgerUnavailable
        })?;
        if !settled.shortfall.is_zero() {
            // The hold was meant to be the worst case: a shortfall means the bound missed something.
            tracing::error!(request_id = %self.request_id, cost = %cost, shortfall = %settled.shortfall.normalize(),
                "cost above the hold and the tenant's balance: recorded with a shortfall");
        }
        crate::metrics::global().recorded(&record, self.started.elapsed());
        let tokens = u64::from(input_tokens) + u64::from(output_tokens);
        if tokens > 0 {
            let (limiter, key_id, limits) = (Arc::clone(&self.limiter), self.caller.key_id, self.caller.limits);
            self.tasks.spawn(async move { limiter.spend(key_id, limits, tokens).await });
        }
        Ok(cost)
    }
}
