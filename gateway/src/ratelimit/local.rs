//! The limits a replica enforces from memory while Redis cannot be reached: each bucket's share of its
//! limit, that is the limit divided by the live replicas this one knows of (`gateway_replicas`, counted
//! at every heartbeat), so that the replicas together still admit about the limit, never without one.
//!
//! The same two buckets as the script (requests and tokens, each refilling continuously up to its
//! per-minute share), on this process's clock. A bucket first used during an outage starts full: what was
//! taken from Redis before is not known here, so an outage can give a bucket at most one more minute's
//! share on each replica. Buckets that are full again are forgotten.
//!
//! Pure bookkeeping, with time passed in: `mod.rs` decides when to use it.

use std::collections::HashMap;
use std::time::Instant;

use super::{Admission, Bucket, Limits, Quota};

#[derive(Debug)]
struct Pair {
    share: Limits,
    requests: f64,
    tokens: f64,
    at: Instant,
}

impl Pair {
    fn full(share: Limits, now: Instant) -> Self {
        Self { share, requests: f64::from(share.requests_per_minute), tokens: f64::from(share.tokens_per_minute), at: now }
    }

    /// Refills both buckets for the time since they were last seen.
    fn refill(&mut self, now: Instant) {
        let minutes = now.saturating_duration_since(self.at).as_secs_f64() / 60.0;
        let (rpm, tpm) = (f64::from(self.share.requests_per_minute), f64::from(self.share.tokens_per_minute));
        self.requests = rpm.min(self.requests + minutes * rpm);
        self.tokens = tpm.min(self.tokens + minutes * tpm);
        self.at = now;
    }

    fn is_full(&self) -> bool {
        self.requests >= f64::from(self.share.requests_per_minute) && self.tokens >= f64::from(self.share.tokens_per_minute)
    }

    fn quota(&self) -> Quota {
        let (rpm, tpm) = (self.share.requests_per_minute, self.share.tokens_per_minute);
        Quota {
            limits: self.share,
            remaining_requests: floor(self.requests),
            remaining_tokens: floor(self.tokens),
            reset_requests_ms: ms_until(f64::from(rpm) - self.requests, rpm),
            reset_tokens_ms: ms_until(f64::from(tpm) - self.tokens, tpm),
        }
    }
}

fn floor(level: f64) -> u64 {
    // Levels are between a bucket's debt and its limit (below 2^32): the cast cannot truncate.
    #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "clamped to 0..2^32 first")]
    let n = level.clamp(0.0, f64::from(u32::MAX)).floor() as u64;
    n
}

/// Milliseconds for a bucket refilling `per_minute` to gain `missing`.
fn ms_until(missing: f64, per_minute: u32) -> u64 {
    floor((missing.max(0.0) * 60_000.0 / f64::from(per_minute.max(1))).ceil())
}

/// Each limit divided by the live replicas (at least one request and one token).
#[must_use]
pub fn share(limits: Limits, replicas: u32) -> Limits {
    let replicas = replicas.max(1);
    Limits {
        requests_per_minute: (limits.requests_per_minute / replicas).max(1),
        tokens_per_minute: (limits.tokens_per_minute / replicas).max(1),
    }
}

#[derive(Debug, Default)]
pub struct Local {
    buckets: HashMap<Bucket, Pair>,
}

impl Local {
    /// Admits one request from the bucket's share, or says how long until one would pass.
    pub fn admit(&mut self, bucket: Bucket, limits: Limits, replicas: u32, now: Instant) -> Admission {
        let share = share(limits, replicas);
        let pair = self.buckets.entry(bucket).or_insert_with(|| Pair::full(share, now));
        pair.refill(now);
        if pair.share != share {
            // Another count of replicas (or new limits): the levels keep what was used, within the new share.
            pair.share = share;
            pair.requests = pair.requests.min(f64::from(share.requests_per_minute));
            pair.tokens = pair.tokens.min(f64::from(share.tokens_per_minute));
        }
        if pair.requests < 1.0 {
            let wait = ms_until(1.0 - pair.requests, share.requests_per_minute);
            return Admission::Limited { quota: pair.quota(), retry_after_ms: wait.max(1), by_tokens: false, by_tenant: false };
        }
        if pair.tokens < 1.0 {
            let wait = ms_until(1.0 - pair.tokens, share.tokens_per_minute);
            return Admission::Limited { quota: pair.quota(), retry_after_ms: wait.max(1), by_tokens: true, by_tenant: false };
        }
        pair.requests -= 1.0;
        Admission::Allowed(pair.quota())
    }

    /// Takes a finished request's tokens from the bucket's share, if it is being enforced here.
    pub fn spend(&mut self, bucket: Bucket, tokens: u64, now: Instant) {
        if let Some(pair) = self.buckets.get_mut(&bucket) {
            pair.refill(now);
            // Precision past 2^53 tokens does not matter to a per-minute bucket.
            #[expect(clippy::cast_precision_loss, reason = "token counts far below 2^53")]
            let tokens = tokens as f64;
            pair.tokens -= tokens;
        }
    }

    /// A request admitted here for an admission that another budget refused goes back to the share.
    pub fn give_back(&mut self, bucket: Bucket) {
        if let Some(pair) = self.buckets.get_mut(&bucket) {
            pair.requests = f64::from(pair.share.requests_per_minute).min(pair.requests + 1.0);
        }
    }

    /// Forgets the buckets that are full again: they would start full anyway.
    pub fn forget_full(&mut self, now: Instant) {
        self.buckets.retain(|_, pair| {
            pair.refill(now);
            !pair.is_full()
        });
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use uuid::Uuid;

    use super::*;

    const FOUR: Limits = Limits { requests_per_minute: 4, tokens_per_minute: 1000 };

    fn allowed(a: Admission) -> bool {
        matches!(a, Admission::Allowed(_))
    }

    #[test]
    fn each_replica_admits_its_share() {
        let mut local = Local::default();
        let key = Bucket::Key(Uuid::now_v7());
        let t0 = Instant::now();
        let admitted = (0..10).filter(|_| allowed(local.admit(key, FOUR, 2, t0))).count();
        assert_eq!(admitted, 2, "4 a minute over 2 replicas");
        let Admission::Limited { retry_after_ms, by_tokens, quota, .. } = local.admit(key, FOUR, 2, t0) else { panic!("admitted") };
        assert_eq!((retry_after_ms, by_tokens, quota.limits.requests_per_minute), (30_000, false, 2));
        // Half a minute refills one of the two.
        assert!(allowed(local.admit(key, FOUR, 2, t0 + Duration::from_secs(30))));
        assert!(!allowed(local.admit(key, FOUR, 2, t0 + Duration::from_secs(30))));
    }

    #[test]
    fn a_share_is_at_least_one_and_a_lone_replica_has_the_whole_limit() {
        assert_eq!(share(FOUR, 8).requests_per_minute, 1);
        assert_eq!(share(FOUR, 0), FOUR);
        assert_eq!(share(FOUR, 1), FOUR);
    }

    #[test]
    fn spent_tokens_hold_back_the_next_request() {
        let mut local = Local::default();
        let key = Bucket::Key(Uuid::now_v7());
        let t0 = Instant::now();
        assert!(allowed(local.admit(key, FOUR, 1, t0)));
        local.spend(key, 1500, t0);
        let Admission::Limited { by_tokens, .. } = local.admit(key, FOUR, 1, t0) else { panic!("admitted in debt") };
        assert!(by_tokens);
        local.forget_full(t0);
        assert_eq!(local.buckets.len(), 1, "a bucket in debt is remembered");
        local.forget_full(t0 + Duration::from_secs(120));
        assert!(local.buckets.is_empty(), "full again: forgotten");
    }
}
