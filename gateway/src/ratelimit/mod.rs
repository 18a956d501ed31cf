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
//! When Redis cannot be reached, or refuses the script, the configured [`RedisFailure`] decides: `local`
//! (the default) enforces this replica's share of each limit from memory (`local.rs`), `closed` answers
//! 503, and only `open`, asked for by name, serves without limits. The limiter has its own Redis link:
//! nothing another use of Redis meets (the registry's, the console's) can switch its checks off.

mod headers;
mod local;
mod slices;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};
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
    /// Enforce this replica's share of every limit (the limit divided by the live replicas) from memory.
    Local,
    /// Refuse with 503 `rate_limiter_unavailable`.
    Closed,
    /// Serve without rate limits (an explicit choice; credits still bound what a tenant spends).
    Open,
}

/// What a budget belongs to: its buckets in Redis and in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bucket {
    Key(Uuid),
}

impl Bucket {
    /// The prefix of its two Redis keys; the braces hold the hash slot, so both land on one node.
    fn redis_prefix(self) -> String {
        match self {
            Self::Key(id) => format!("runaii:rl:{VERSION}:{{{id}}}"),
        }
    }
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
    /// Redis was unavailable and the gateway was told to fail open: served, limits unknown.
    Unchecked(Limits),
}

#[derive(Debug)]
pub struct Limiter {
    /// The limiter's own link: no other use of Redis shares its connection or its failures.
    redis: RedisLink,
    on_failure: RedisFailure,
    /// Each key's unsent tokens and the requests taken ahead of need.
    slices: Mutex<Slices>,
    /// Shares of the limits enforced from memory while Redis cannot be reached.
    local: Mutex<local::Local>,
    /// The live gateway replicas this one knows of (itself included), for those shares.
    replicas: AtomicU32,
}

impl Limiter {
    #[must_use]
    pub fn new(redis: RedisLink, on_failure: RedisFailure) -> Self {
        Self { redis, on_failure, slices: Mutex::default(), local: Mutex::default(), replicas: AtomicU32::new(1) }
    }

    /// How many gateway replicas are alive, this one included: each enforces `1/n` of every limit while
    /// Redis cannot be reached.
    pub fn set_replicas(&self, n: u32) {
        self.replicas.store(n.max(1), Ordering::Relaxed);
    }

    /// Takes one request from the key's budget: from the slice this replica holds when it has one,
    /// else from Redis.
    ///
    /// # Errors
    /// [`ApiError::RateLimiterUnavailable`] when Redis is unavailable and the gateway fails closed.
    #[tracing::instrument(name = "rate limit", skip_all)]
    pub async fn admit(&self, key_id: Uuid, limits: Limits) -> Result<Admission, ApiError> {
        self.admit_one(Bucket::Key(key_id), limits).await
    }

    async fn admit_one(&self, bucket: Bucket, limits: Limits) -> Result<Admission, ApiError> {
        let call = match self.slices().plan(bucket, limits, Instant::now()) {
            Plan::Local(quota) => {
                crate::metrics::global().rate_limit_admissions.add(&["slice"], 1);
                return Ok(Admission::Allowed(quota));
            }
            Plan::Call(call) => call,
        };
        let reply = self.call(bucket, "admit", call).await;
        let taken = reply.map(|[taken, requests, tokens, _, reset_tokens, _]| Reply {
            taken: u64::try_from(taken).unwrap_or(0),
            requests_left: u64::try_from(requests).unwrap_or(0),
            tokens_left: tokens,
            reset_tokens_ms: u64::try_from(reset_tokens).unwrap_or(0),
        });
        let quota = self.slices().answered(bucket, call, taken, Instant::now());
        let (Some(quota), Some([taken, requests, _, _, _, wait])) = (quota, reply) else {
            return match self.on_failure {
                RedisFailure::Local => Ok(self.from_memory(bucket, limits)),
                RedisFailure::Closed => Err(ApiError::RateLimiterUnavailable),
                RedisFailure::Open => Ok(Admission::Unchecked(limits)),
            };
        };
        Ok(if taken >= 1 {
            crate::metrics::global().rate_limit_admissions.add(&["redis"], 1);
            Admission::Allowed(quota)
        } else {
            Admission::Limited { quota, retry_after_ms: u64::try_from(wait).unwrap_or(0).max(1), by_tokens: requests >= 1 }
        })
    }

    /// This replica's share of the bucket, from memory.
    fn from_memory(&self, bucket: Bucket, limits: Limits) -> Admission {
        let replicas = self.replicas.load(Ordering::Relaxed);
        let admission = self.local().admit(bucket, limits, replicas, Instant::now());
        if matches!(admission, Admission::Allowed(_)) {
            crate::metrics::global().rate_limit_admissions.add(&["memory"], 1);
        }
        admission
    }

    /// Counts the tokens a finished request used: they go to Redis with the key's next call from here,
    /// or within [`SPEND_FLUSH`], and from the key's share in memory when it is enforced there.
    pub fn spend(&self, key_id: Uuid, limits: Limits, tokens: u64) {
        let now = Instant::now();
        self.slices().spend(Bucket::Key(key_id), limits, tokens, now);
        self.local().spend(Bucket::Key(key_id), tokens, now);
    }

    /// Sends every key's unsent tokens and gives back the requests of slices past their time (of every
    /// slice, when `all`: at shutdown). Best effort: tokens that cannot reach Redis wait for the next
    /// call, as while Redis is down nothing is counted.
    pub async fn flush_due(&self, all: bool) {
        self.local().forget_full(Instant::now());
        let due = self.slices().due(Instant::now(), all);
        for (bucket, call) in due {
            if self.call(bucket, "spend", call).await.is_none() {
                self.slices().unsent(bucket, call, Instant::now());
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

    fn local(&self) -> MutexGuard<'_, local::Local> {
        self.local.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn call(&self, bucket: Bucket, mode: &'static str, call: Call) -> Option<[i64; 6]> {
        crate::metrics::global().rate_limit_calls.add(&[mode], 1);
        let bucket = bucket.redis_prefix();
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
