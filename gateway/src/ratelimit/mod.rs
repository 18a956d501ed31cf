//! Requests and tokens per minute, per API key, shared by every replica through one Redis script.
//!
//! A request is admitted when the key has a request left and its token bucket is not in debt; the tokens
//! a request used are taken when it ends (they are not known before). The script is versioned: its keys
//! carry the version, so replicas running different versions during a deploy never read each other's
//! bucket layout.
//!
//! When Redis is unavailable the configured [`RedisFailure`] decides: `open` serves without limits
//! (credits in Postgres still bound what a tenant can spend), `closed` answers 503.

mod headers;

use std::sync::{Arc, LazyLock};

use uuid::Uuid;

pub use headers::apply;

use crate::error::ApiError;
use crate::redis_link::RedisLink;

/// Bump with any change to the script's keys or state layout.
const VERSION: &str = "v1";
static SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(include_str!("limiter_v1.lua")));

/// What the gateway does while Redis cannot be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RedisFailure {
    /// Serve without rate limits.
    Open,
    /// Refuse with 503 `rate_limiter_unavailable`.
    Closed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub requests_per_minute: u32,
    pub tokens_per_minute: u32,
}

/// A key's buckets after a check, for the `x-ratelimit-*` headers.
#[derive(Debug, Clone, Copy)]
pub struct Quota {
    pub limits: Limits,
    pub remaining_requests: u64,
    pub remaining_tokens: u64,
    pub reset_requests_ms: u64,
    pub reset_tokens_ms: u64,
}

#[derive(Debug, Clone, Copy)]
pub enum Admission {
    Allowed(Quota),
    Limited {
        quota: Quota,
        retry_after_ms: u64,
        by_tokens: bool,
    },
    /// Redis was unavailable and the gateway fails open: served, limits unknown.
    Unchecked(Limits),
}

#[derive(Debug)]
pub struct Limiter {
    redis: Arc<RedisLink>,
    on_failure: RedisFailure,
}

impl Limiter {
    #[must_use]
    pub fn new(redis: Arc<RedisLink>, on_failure: RedisFailure) -> Self {
        Self { redis, on_failure }
    }

    /// Takes one request from the key's budget.
    ///
    /// # Errors
    /// [`ApiError::RateLimiterUnavailable`] when Redis is unavailable and the gateway fails closed.
    #[tracing::instrument(name = "rate limit", skip_all)]
    pub async fn admit(&self, key_id: Uuid, limits: Limits) -> Result<Admission, ApiError> {
        let Some(reply) = self.call(key_id, limits, "admit", 0).await else {
            return match self.on_failure {
                RedisFailure::Open => Ok(Admission::Unchecked(limits)),
                RedisFailure::Closed => Err(ApiError::RateLimiterUnavailable),
            };
        };
        let [allowed, requests, tokens, reset_requests, reset_tokens, wait] = reply;
        let quota = Quota {
            limits,
            remaining_requests: u64::try_from(requests).unwrap_or(0),
            remaining_tokens: u64::try_from(tokens).unwrap_or(0),
            reset_requests_ms: u64::try_from(reset_requests).unwrap_or(0),
            reset_tokens_ms: u64::try_from(reset_tokens).unwrap_or(0),
        };
        Ok(if allowed == 1 {
            Admission::Allowed(quota)
        } else {
            Admission::Limited { quota, retry_after_ms: u64::try_from(wait).unwrap_or(0).max(1), by_tokens: requests >= 1 }
        })
    }

    /// Takes the tokens a finished request used. Best effort: while Redis is down they are not counted.
    pub async fn spend(&self, key_id: Uuid, limits: Limits, tokens: u64) {
        if tokens > 0 {
            let _ = self.call(key_id, limits, "spend", tokens).await;
        }
    }

    async fn call(&self, key_id: Uuid, limits: Limits, mode: &'static str, tokens: u64) -> Option<[i64; 6]> {
        let bucket = format!("runaii:rl:{VERSION}:{{{key_id}}}");
        self.redis
            .run(|mut redis| async move {
                SCRIPT
                    .key(format!("{bucket}:req"))
                    .key(format!("{bucket}:tok"))
                    .arg(mode)
                    .arg(limits.requests_per_minute.max(1))
                    .arg(limits.tokens_per_minute.max(1))
                    .arg(tokens)
                    .invoke_async::<Vec<i64>>(&mut redis)
                    .await
            })
            .await
            .and_then(|reply| <[i64; 6]>::try_from(reply).ok())
    }
}
