//! Requests and tokens per minute, per API key, shared by every replica through one Redis script.
//!
//! A request is admitted when the key has a request left and its token bucket is not in debt; the tokens
//! a request used are taken when it ends (they are not known before). They are not sent on their own:
//! they wait in memory and go with the key's next admission on this replica, in the same script call, so
//! a request costs one Redis round trip, not two. A key with no next request has its tokens sent by the
//! flusher within [`SPEND_FLUSH`]: that is how late another replica may see them. The script is
//! versioned: its keys carry the version, so replicas running different versions during a deploy never
//! read each other's bucket layout.
//!
//! When Redis is unavailable the configured [`RedisFailure`] decides: `open` serves without limits
//! (credits in Postgres still bound what a tenant can spend), `closed` answers 503.

mod headers;

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::Duration;

use uuid::Uuid;

pub use headers::apply;

use crate::error::ApiError;
use crate::redis_link::RedisLink;

/// Bump with any change to the script's keys or state layout.
const VERSION: &str = "v1";
static SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(include_str!("limiter_v1.lua")));

/// How long the tokens of a key's finished requests wait for its next admission before they are sent on
/// their own.
pub const SPEND_FLUSH: Duration = Duration::from_millis(200);

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
    /// Tokens of finished requests not yet taken in Redis, by key, with the key's limits.
    unsent: Mutex<HashMap<Uuid, (Limits, u64)>>,
}

impl Limiter {
    #[must_use]
    pub fn new(redis: Arc<RedisLink>, on_failure: RedisFailure) -> Self {
        Self { redis, on_failure, unsent: Mutex::default() }
    }

    /// Takes one request from the key's budget.
    ///
    /// # Errors
    /// [`ApiError::RateLimiterUnavailable`] when Redis is unavailable and the gateway fails closed.
    #[tracing::instrument(name = "rate limit", skip_all)]
    pub async fn admit(&self, key_id: Uuid, limits: Limits) -> Result<Admission, ApiError> {
        // The key's finished requests' tokens are taken first, in the same call.
        let spent = self.unsent().remove(&key_id).map_or(0, |(_, tokens)| tokens);
        let Some(reply) = self.call(key_id, limits, "admit", spent).await else {
            self.add_unsent(key_id, limits, spent);
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

    /// Counts the tokens a finished request used: they go to Redis with the key's next admission here,
    /// or within [`SPEND_FLUSH`].
    pub fn spend(&self, key_id: Uuid, limits: Limits, tokens: u64) {
        self.add_unsent(key_id, limits, tokens);
    }

    /// Sends every key's unsent tokens. Best effort: those that cannot reach Redis are not counted, as
    /// while Redis is down nothing is.
    pub async fn flush(&self) {
        let unsent = std::mem::take(&mut *self.unsent());
        for (key_id, (limits, tokens)) in unsent {
            let _ = self.call(key_id, limits, "spend", tokens).await;
        }
    }

    /// Flushes every [`SPEND_FLUSH`], for keys whose next request has not come.
    pub async fn flush_forever(&self) {
        let mut tick = tokio::time::interval(SPEND_FLUSH);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            self.flush().await;
        }
    }

    fn add_unsent(&self, key_id: Uuid, limits: Limits, tokens: u64) {
        if tokens > 0 {
            let mut unsent = self.unsent();
            let entry = unsent.entry(key_id).or_insert((limits, 0));
            *entry = (limits, entry.1.saturating_add(tokens));
        }
    }

    fn unsent(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, (Limits, u64)>> {
        self.unsent.lock().unwrap_or_else(PoisonError::into_inner)
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
