//! What the client saw of one request: everything the summary and the reconciliation need.

use std::time::Duration;

use rust_decimal::Decimal;

use crate::mix::Kind;

/// The gateway's code for "the cost record could not be written".
pub const LEDGER_UNAVAILABLE: &str = "ledger_unavailable";

/// How a request ended, from the client's side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A whole answer with its `usage` (a stream: its usage chunk and `[DONE]`). `cost` is `usage.cost`,
    /// which the gateway adds and a bare worker does not.
    Completed { cost: Option<Decimal>, prompt_tokens: u32, completion_tokens: u32 },
    /// A stream the client dropped after its first content chunk, on purpose.
    Abandoned,
    /// A stream that began (2xx) and then carried an error chunk (its code is the observation's
    /// `error_code`): the worker failed mid-answer, or the gateway could not record the answer.
    StreamFailed { message: String },
    /// A 4xx answer.
    Refused,
    /// A 5xx answer.
    ServerError,
    /// No usable answer: no connection, a timeout, a 2xx whose body could not be read or lacked its cost.
    Broken { why: String },
}

impl Outcome {
    /// The summary's name for it.
    #[must_use]
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Completed { .. } => "completed",
            Outcome::Abandoned => "abandoned",
            Outcome::StreamFailed { .. } => "stream_failed",
            Outcome::Refused => "refused_4xx",
            Outcome::ServerError => "server_error_5xx",
            Outcome::Broken { .. } => "broken",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Observation {
    /// The request's number in the run (which also chose its prompt).
    pub n: u64,
    pub kind: Kind,
    /// `None` when no HTTP answer came.
    pub status: Option<u16>,
    /// The answer's `x-request-id`.
    pub request_id: Option<String>,
    /// The error's `error.code`: of the body of a non-2xx answer, or of a stream's error chunk.
    pub error_code: Option<String>,
    pub outcome: Outcome,
    /// From the time the request was due (open loop) or sent (closed loop) to the end of the answer, or
    /// to the moment an abandoned stream was dropped.
    pub latency: Duration,
    /// Streams: to the first chunk with content.
    pub first_token: Option<Duration>,
    /// Chunks with content received (streams).
    pub content_chunks: u32,
}

impl Observation {
    #[must_use]
    pub fn is_accepted(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }

    /// Whether the answer shows a worker failing: a 502 or 503 from the worker side (not the ledger's or
    /// the rate limiter's 503), or a stream cut by an error chunk other than the ledger's.
    #[must_use]
    pub fn is_worker_failure(&self) -> bool {
        let code = self.error_code.as_deref();
        match self.outcome {
            Outcome::StreamFailed { .. } => code != Some(LEDGER_UNAVAILABLE),
            Outcome::ServerError => {
                matches!(self.status, Some(502 | 503)) && matches!(code, None | Some("upstream_error" | "model_unavailable"))
            }
            _ => false,
        }
    }

    /// Output tokens of a completed answer.
    #[must_use]
    pub fn completion_tokens(&self) -> u32 {
        match self.outcome {
            Outcome::Completed { completion_tokens, .. } => completion_tokens,
            _ => 0,
        }
    }

    /// What the client was told the request cost.
    #[must_use]
    pub fn told_cost(&self) -> Option<Decimal> {
        match self.outcome {
            Outcome::Completed { cost, .. } => cost,
            _ => None,
        }
    }
}
