//! Requests and tokens per minute, per API key, shared by every replica through one Redis script.
//!
//! A request is admitted when the key has a request left and its token bucket is not in debt; the tokens
//! a request used are taken when it ends (they are not known before). They are not sent on their own:
//! they wait in memory and go with the key's next call from this replica, so a request costs at most one
//! Redis round trip, not two. A key with no next request has its tokens sent by the flusher within
//! [`SPEND_FLUSH`]: that is how late another replica may see them.
//!
//! A busy key costs fewer: each call takes as many requests as the key was admitted here lately, and the
//! next ones are admitted from memory (`slices.rs`). Requests taken are gone from the shared bucket, so
//! the replicas together never admit more than the limit; a small limit is still taken one request at a
//! time. The script is versioned: its keys carry the version, so replicas running different versions
//! during a deploy never read each other's bucket layout.
//!
//! When Redis is unavailable the configured [`RedisFailure`] decides: `open` serves without limits
//! (credits in Postgres still bound what a tenant can spend), `closed` answers 503.

mod headers;
mod slices;

use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use uuid::Uuid;

pub use headers::apply;
pub use slices::SLICE_FOR;

use crate::error::ApiError;
use crate::redis_link::RedisLink;
use slices::{Call, Plan, Reply, Slices};

/// Bump with any change to the script's keys or state layout.
const VERSION: &str = "v2";
static SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(include_str!("limiter_v2.lua")));

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    /// Each key's unsent tokens and the requests taken ahead of need.
    slices: Mutex<Slices>,
}

impl Limiter {
    #[must_use]
    pub fn new(redis: Arc<RedisLink>, on_failure: RedisFailure) -> Self {
        Self { redis, on_failure, slices: Mutex::default() }
    }

    /// Takes one request from the key's budget: from the slice this replica holds when it has one,
    /// else from Redis.
    ///
    /// # Errors
    /// [`ApiError::RateLimiterUnavailable`] when Redis is unavailable and the gateway fails closed.
    #[tracing::instrument(name = "rate limit", skip_all)]
    pub async fn admit(&self, key_id: Uuid, limits: Limits) -> Result<Admission, ApiError> {
        let call = match self.slices().plan(key_id, limits, Instant::now()) {
            Plan::Local(quota) => {
                crate::metrics::global().rate_limit_admissions.add(&["slice"], 1);
                return Ok(Admission::Allowed(quota));
            }
            Plan::Call(call) => call,
        };
        let reply = self.call(key_id, "admit", call).await;
        let taken = reply.map(|[taken, requests, tokens, _, reset_tokens, _]| Reply {
            taken: u64::try_from(taken).unwrap_or(0),
            requests_left: u64::try_from(requests).unwrap_or(0),
            tokens_left: tokens,
            reset_tokens_ms: u64::try_from(reset_tokens).unwrap_or(0),
        });
        let quota = self.slices().answered(key_id, call, taken, Instant::now());
        let (Some(quota), Some([taken, requests, _, _, _, wait])) = (quota, reply) else {
            return match self.on_failure {
                RedisFailure::Open => Ok(Admission::Unchecked(limits)),
                RedisFailure::Closed => Err(ApiError::RateLimiterUnavailable),
            };
        };
        Ok(if taken >= 1 {
            crate::metrics::global().rate_limit_admissions.add(&["redis"], 1);
            Admission::Allowed(quota)
        } else {
            Admission::Limited { quota, retry_after_ms: u64::try_from(wait).unwrap_or(0).max(1), by_tokens: requests >= 1 }
        })
    }

    /// Counts the tokens a finished request used: they go to Redis with the key's next call from here,
    /// or within [`SPEND_FLUSH`].
    pub fn spend(&self, key_id: Uuid, limits: Limits, tokens: u64) {
        self.slices().spend(key_id, limits, tokens, Instant::now());
    }

    /// Sends every key's unsent tokens and gives back the requests of slices past their time (of every
    /// slice, when `all`: at shutdown). Best effort: tokens that cannot reach Redis wait for the next
    /// call, as while Redis is down nothing is counted.
    pub async fn flush_due(&self, all: bool) {
        let due = self.slices().due(Instant::now(), all);
        for (key_id, call) in due {
            if self.call(key_id, "spend", call).await.is_none() {
                self.slices().unsent(key_id, call, Instant::now());
            }
        }
    }

    /// At shutdown: everything unsent, and every slice given back.
    pub async fn flush(&self) {
        self.flush_due(true).await;
    }

    /// Flushes every [`SPEND_FLUSH`], for keys whose next request has not come.
    pub async fn flush_forever(&self) {
        let mut tick = tokio::time::interval(SPEND_FLUSH);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            self.flush_due(false).await;
        }
    }

    fn slices(&self) -> MutexGuard<'_, Slices> {
        self.slices.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn call(&self, key_id: Uuid, mode: &'static str, call: Call) -> Option<[i64; 6]> {
        crate::metrics::global().rate_limit_calls.add(&[mode], 1);
        let bucket = format!("runaii:rl:{VERSION}:{{{key_id}}}");
        self.redis
            .run(|mut redis| async move {
                SCRIPT
                    .key(format!("{bucket}:req"))
                    .key(format!("{bucket}:tok"))
                    .arg(mode)
                    .arg(call.limits.requests_per_minute.max(1))
                    .arg(call.limits.tokens_per_minute.max(1))
                    .arg(call.spend)
                    .arg(call.want)
                    .arg(call.give_back)
                    .invoke_async::<Vec<i64>>(&mut redis)
                    .await
            })
            .await
            .and_then(|reply| <[i64; 6]>::try_from(reply).ok())
    }
}
