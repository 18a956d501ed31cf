//! Requests and tokens per minute, per API key and per tenant (its caps across all its keys), shared by
//! every replica through one Redis script. A request of a tenant with caps is admitted against both
//! budgets, in two calls made together; when one refuses, the request the other took goes back (`both.rs`).
//! The tenant's buckets go through the same script, slices and shares as a key's.
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
//!
//! A tenant's monthly spend cap, checked against the month's cost records, is `spend_cap.rs`'s.

mod both;
mod headers;
mod local;
mod slices;
pub mod spend_cap;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use uuid::Uuid;

pub use headers::apply;
pub use slices::SLICE_FOR;

use crate::error::ApiError;
use crate::redis_link::RedisLink;
use slices::{Call, Plan, Reply, Slices};

/// Where an admission came from, so that a request given back goes where it was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// Redis, now or ahead of need (a slice): `slices.rs` gives it back with the bucket's next call.
    Redis,
    /// This replica's share in memory.
    Memory,
    /// Nothing was taken (fail-open).
    Unchecked,
}

/// Bump with any change to the script's keys or state layout.
const VERSION: &str = "v2";
static SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(include_str!("limiter_v2.lua")));

/// How long the tokens of a key's finished requests wait for its next admission before they are sent on
/// their own.
pub const SPEND_FLUSH: Duration = Duration::from_millis(200);

pub use crate::config::RedisFailure;

/// What a budget belongs to: its buckets in Redis and in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bucket {
    Key(Uuid),
    /// A tenant's caps, across all its keys.
    Tenant(Uuid),
}

impl Bucket {
    /// The prefix of its two Redis keys; the braces hold the hash slot, so both land on one node.
    fn redis_prefix(self) -> String {
        match self {
            Self::Key(id) => format!("runaii:rl:{VERSION}:{{{id}}}"),
            Self::Tenant(id) => format!("runaii:rl:{VERSION}:{{tenant:{id}}}"),
        }
    }
}

/// The budgets one request is admitted against: its key's, and its tenant's when the tenant has caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budgets {
    pub key_id: Uuid,
    pub key: Limits,
    pub tenant: Option<(Uuid, Limits)>,
}

impl Budgets {
    fn buckets(self) -> impl Iterator<Item = (Bucket, Limits)> {
        std::iter::once((Bucket::Key(self.key_id), self.key)).chain(self.tenant.map(|(id, limits)| (Bucket::Tenant(id), limits)))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub requests_per_minute: u32,
    pub tokens_per_minute: u32,
}

/// A budget's buckets after a check, for the `x-ratelimit-*` headers.
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
        /// The tenant's cap refused, not the key's limit.
        by_tenant: bool,
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
    /// A tenant with caps is checked at the same time; when one budget refuses, the request the other took
    /// goes back to it.
    ///
    /// # Errors
    /// [`ApiError::RateLimiterUnavailable`] when Redis is unavailable and the gateway fails closed.
    #[tracing::instrument(name = "rate limit", skip_all)]
    pub async fn admit(&self, budgets: Budgets) -> Result<Admission, ApiError> {
        let key = Bucket::Key(budgets.key_id);
        let Some((tenant_id, tenant_limits)) = budgets.tenant else {
            return self.admit_one(key, budgets.key).await.map(|(admission, _)| admission);
        };
        let tenant = Bucket::Tenant(tenant_id);
        let (by_key, by_tenant) = tokio::join!(self.admit_one(key, budgets.key), self.admit_one(tenant, tenant_limits));
        let decided = both::decide(by_key, by_tenant);
        if let Some((from_tenant, source)) = decided.give_back {
            self.give_back(if from_tenant { tenant } else { key }, source);
        }
        decided.admission
    }

    /// One request goes back to a bucket that admitted it for a request another budget refused.
    fn give_back(&self, bucket: Bucket, source: Source) {
        match source {
            Source::Redis => self.slices().give_back(bucket, Instant::now()),
            Source::Memory => self.local().give_back(bucket),
            Source::Unchecked => {}
        }
    }

    async fn admit_one(&self, bucket: Bucket, limits: Limits) -> Result<(Admission, Source), ApiError> {
        let call = match self.slices().plan(bucket, limits, Instant::now()) {
            Plan::Local(quota) => {
                crate::metrics::global().rate_limit_admissions.add(&["slice"], 1);
                return Ok((Admission::Allowed(quota), Source::Redis));
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
                RedisFailure::Local => Ok((self.admit_from_memory(bucket, limits), Source::Memory)),
                RedisFailure::Closed => Err(ApiError::RateLimiterUnavailable),
                RedisFailure::Open => Ok((Admission::Unchecked(limits), Source::Unchecked)),
            };
        };
        let by_tenant = matches!(bucket, Bucket::Tenant(_));
        Ok((
            if taken >= 1 {
                crate::metrics::global().rate_limit_admissions.add(&["redis"], 1);
                Admission::Allowed(quota)
            } else {
                let retry_after_ms = u64::try_from(wait).unwrap_or(0).max(1);
                Admission::Limited { quota, retry_after_ms, by_tokens: requests >= 1, by_tenant }
            },
            Source::Redis,
        ))
    }

    /// This replica's share of the bucket, from memory.
    fn admit_from_memory(&self, bucket: Bucket, limits: Limits) -> Admission {
        let replicas = self.replicas.load(Ordering::Relaxed);
        let mut admission = self.local().admit(bucket, limits, replicas, Instant::now());
        if let Admission::Limited { by_tenant, .. } = &mut admission {
            *by_tenant = matches!(bucket, Bucket::Tenant(_));
        }
        if matches!(admission, Admission::Allowed(_)) {
            crate::metrics::global().rate_limit_admissions.add(&["memory"], 1);
        }
        admission
    }

    /// Counts the tokens a finished request used, against its key and its tenant's caps: they go to Redis
    /// with the bucket's next call from here, or within [`SPEND_FLUSH`], and from the bucket's share in
    /// memory when it is enforced there.
    pub fn spend(&self, budgets: Budgets, tokens: u64) {
        let now = Instant::now();
        for (bucket, limits) in budgets.buckets() {
            self.slices().spend(bucket, limits, tokens, now);
            self.local().spend(bucket, tokens, now);
        }
    }

    /// Sends every bucket's unsent tokens and gives back the requests of slices past their time (of every
    /// slice, when `all`: at shutdown), and forgets the shares in memory that are full again. Best effort:
    /// tokens that cannot reach Redis wait for the next call (meanwhile the shares in memory count them).
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
