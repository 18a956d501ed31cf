//! What this replica knows of each key's buckets between Redis calls: the tokens of finished requests
//! not yet sent, and the requests it took from Redis ahead of need (a slice) and has not admitted yet.
//!
//! A busy key would otherwise cost one Redis round trip per request. Instead, each call takes as many
//! requests as the key was admitted here in the last [`SLICE_FOR`] (one, for a key seen for the first
//! time or a slow one), and the next requests are admitted from memory while the slice lasts. Taken
//! requests are gone from the shared bucket, so the replicas together never admit more than the limit;
//! what a slice still holds after [`SLICE_FOR`] goes back. A slice is never more than the limit refills
//! in [`SLICE_FOR`], so a key near its limit is limited as exactly as without slices, and a small limit
//! (under 480 a minute) is taken one request at a time, as before.
//!
//! What memory admits from is what Redis said at the last call, less the tokens spent here since: other
//! replicas' spending is seen at the next call, at most [`SLICE_FOR`] later.
//!
//! Pure bookkeeping, with time passed in: `mod.rs` makes the calls.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::{Bucket, Limits, Quota};

/// How long a slice is admitted from, and the window its size is measured over.
pub const SLICE_FOR: Duration = Duration::from_millis(250);

/// Slices are at most this part of a minute's limit: what the bucket refills in [`SLICE_FOR`].
const SLICES_PER_MINUTE: u32 = 240;

/// A call to make to Redis for one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    pub limits: Limits,
    /// Tokens of finished requests to take.
    pub spend: u64,
    /// Requests to take (admissions only; at least one).
    pub want: u64,
    /// Requests taken earlier and not used, to give back.
    pub give_back: u64,
    /// This call takes the key's slice: others meanwhile take one request each.
    pub slice: bool,
}

/// What Redis answered to an admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    pub taken: u64,
    pub requests_left: u64,
    pub tokens_left: i64,
    pub reset_tokens_ms: u64,
}

/// How to admit one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// From the key's slice, without a call.
    Local(Quota),
    /// Through Redis.
    Call(Call),
}

#[derive(Debug)]
struct Key {
    limits: Limits,
    unsent_tokens: u64,
    /// Requests taken and not yet admitted; usable until `until`.
    left: u64,
    until: Instant,
    /// The buckets as Redis last reported them (`left` not included), tokens spent here since excluded.
    requests_seen: u64,
    tokens_seen: i64,
    reset_tokens_ms: u64,
    taking: bool,
    window_start: Instant,
    this_window: u64,
    last_window: u64,
}

impl Key {
    fn new(limits: Limits, now: Instant) -> Self {
        Self {
            limits,
            unsent_tokens: 0,
            left: 0,
            until: now,
            requests_seen: 0,
            tokens_seen: 0,
            reset_tokens_ms: 0,
            taking: false,
            window_start: now,
            this_window: 0,
            last_window: 0,
        }
    }

    fn count_admission(&mut self, now: Instant) {
        let since = now.saturating_duration_since(self.window_start);
        if since >= SLICE_FOR {
            // A window with nothing between it and now measured the demand; an older one did not.
            self.last_window = if since < 2 * SLICE_FOR { self.this_window } else { 0 };
            self.this_window = 0;
            self.window_start = now;
        }
        self.this_window += 1;
    }

    fn slice_size(&self) -> u64 {
        let cap = u64::from((self.limits.requests_per_minute / SLICES_PER_MINUTE).max(1));
        self.last_window.clamp(1, cap)
    }

    fn tokens_left(&self) -> i64 {
        self.tokens_seen.saturating_sub(i64::try_from(self.unsent_tokens).unwrap_or(i64::MAX))
    }

    fn quota(&self) -> Quota {
        let remaining_requests = self.requests_seen.saturating_add(self.left);
        let tokens = u64::try_from(self.tokens_left()).unwrap_or(0);
        Quota {
            limits: self.limits,
            remaining_requests,
            remaining_tokens: tokens,
            reset_requests_ms: until_full(remaining_requests, self.limits.requests_per_minute),
            reset_tokens_ms: self.reset_tokens_ms,
        }
    }

    /// The unused part of the slice, taken out to be given back.
    fn take_left(&mut self) -> u64 {
        std::mem::take(&mut self.left)
    }
}

/// Milliseconds until a bucket holding `remaining` of `limit` per minute is full again.
fn until_full(remaining: u64, limit: u32) -> u64 {
    let limit = u64::from(limit.max(1));
    (limit.saturating_sub(remaining) * 60_000).div_ceil(limit)
}

#[derive(Debug, Default)]
pub struct Slices {
    keys: HashMap<Bucket, Key>,
}

impl Slices {
    /// Admits from the key's slice when it has a request left and its tokens are not spent; otherwise
    /// says which call to make (its finished tokens and unused requests go with it).
    pub fn plan(&mut self, key_id: Bucket, limits: Limits, now: Instant) -> Plan {
        let key = self.keys.entry(key_id).or_insert_with(|| Key::new(limits, now));
        let mut give_back = 0;
        if key.limits != limits {
            // New limits: what was taken under the old ones goes back, and the next slice is sized anew.
            give_back = key.take_left();
            *key = Key { unsent_tokens: key.unsent_tokens, ..Key::new(limits, now) };
        }
        key.count_admission(now);
        if key.left > 0 && now < key.until && key.tokens_left() >= 1 {
            key.left -= 1;
            return Plan::Local(key.quota());
        }
        give_back += key.take_left();
        let slice = !key.taking;
        key.taking |= slice;
        let want = if slice { key.slice_size() } else { 1 };
        Plan::Call(Call { limits, spend: std::mem::take(&mut key.unsent_tokens), want, give_back, slice })
    }

    /// Keeps what an admission's call took beyond the one request it admitted, and returns the quota
    /// to report (`None` when Redis did not answer: the call's tokens wait for the next one).
    pub fn answered(&mut self, key_id: Bucket, call: Call, reply: Option<Reply>, now: Instant) -> Option<Quota> {
        let key = self.keys.entry(key_id).or_insert_with(|| Key::new(call.limits, now));
        if call.slice {
            key.taking = false;
        }
        let Some(reply) = reply else {
            key.unsent_tokens = key.unsent_tokens.saturating_add(call.spend);
            return None;
        };
        if key.limits == call.limits && reply.taken > 1 {
            key.left += reply.taken - 1;
            key.until = now + SLICE_FOR;
        }
        key.requests_seen = reply.requests_left;
        // Tokens spent here while the call was out are still unsent, and counted against this figure.
        key.tokens_seen = reply.tokens_left;
        key.reset_tokens_ms = reply.reset_tokens_ms;
        let mut quota = key.quota();
        // A refused admission reports the bucket as Redis has it.
        quota.remaining_tokens = u64::try_from(reply.tokens_left).unwrap_or(0);
        Some(quota)
    }

    /// Counts a finished request's tokens, to go with the key's next call.
    pub fn spend(&mut self, key_id: Bucket, limits: Limits, tokens: u64, now: Instant) {
        if tokens > 0 {
            let key = self.keys.entry(key_id).or_insert_with(|| Key::new(limits, now));
            key.unsent_tokens = key.unsent_tokens.saturating_add(tokens);
        }
    }

    /// The calls that cannot wait for the keys' next admissions: their unsent tokens, and slices past
    /// their time (or every slice, when `all`). Keys with nothing left to say are forgotten.
    pub fn due(&mut self, now: Instant, all: bool) -> Vec<(Bucket, Call)> {
        let mut calls = Vec::new();
        for (id, key) in &mut self.keys {
            let give_back = if all || now >= key.until { key.take_left() } else { 0 };
            let spend = std::mem::take(&mut key.unsent_tokens);
            if spend > 0 || give_back > 0 {
                calls.push((*id, Call { limits: key.limits, spend, want: 0, give_back, slice: false }));
            }
        }
        self.keys.retain(|_, key| key.left > 0 || key.taking || now.saturating_duration_since(key.window_start) < 4 * SLICE_FOR);
        calls
    }

    /// A request taken for an admission that another budget refused: kept as unused, it is admitted from
    /// memory by the bucket's next request within [`SLICE_FOR`] or given back with its next call.
    pub fn give_back(&mut self, bucket: Bucket, now: Instant) {
        if let Some(key) = self.keys.get_mut(&bucket) {
            key.left += 1;
            key.until = key.until.max(now + SLICE_FOR);
        }
    }

    /// A flush's call failed: its tokens wait for the next one (its unused requests are lost, and the
    /// bucket refills them).
    pub fn unsent(&mut self, key_id: Bucket, call: Call, now: Instant) {
        self.spend(key_id, call.limits, call.spend, now);
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;

    const BIG: Limits = Limits { requests_per_minute: 240_000, tokens_per_minute: 1_000_000 };

    fn reply(taken: u64) -> Reply {
        Reply { taken, requests_left: 1000, tokens_left: 5000, reset_tokens_ms: 10 }
    }

    fn call_of(plan: Plan) -> Call {
        match plan {
            Plan::Call(call) => call,
            Plan::Local(_) => panic!("expected a call, got {plan:?}"),
        }
    }

    #[test]
    fn a_new_key_takes_one_request_then_slices_sized_by_its_demand() {
        let mut s = Slices::default();
        let key = Bucket::Key(Uuid::now_v7());
        let t0 = Instant::now();
        // 50 admissions in the first window, each a call of one (nothing was measured yet).
        for i in 0..50 {
            let call = call_of(s.plan(key, BIG, t0 + Duration::from_millis(i)));
            assert_eq!(call.want, 1);
            assert!(s.answered(key, call, Some(reply(1)), t0).is_some());
        }
        // The next window takes what the last one admitted.
        let t1 = t0 + SLICE_FOR + Duration::from_millis(1);
        let call = call_of(s.plan(key, BIG, t1));
        assert_eq!((call.want, call.slice), (50, true));
        let quota = s.answered(key, call, Some(reply(50)), t1).unwrap();
        assert_eq!(quota.remaining_requests, 1000 + 49);
        for i in 0..49 {
            match s.plan(key, BIG, t1 + Duration::from_millis(1)) {
                Plan::Local(quota) => assert_eq!(quota.remaining_requests, 1000 + 48 - i),
                other @ Plan::Call(_) => panic!("admission {i} of the slice made a call: {other:?}"),
            }
        }
        assert!(matches!(s.plan(key, BIG, t1 + Duration::from_millis(2)), Plan::Call(_)), "the slice is used up");
    }

    #[test]
    fn a_slice_is_at_most_what_the_limit_refills_meanwhile() {
        let mut s = Slices::default();
        let key = Bucket::Key(Uuid::now_v7());
        let small = Limits { requests_per_minute: 2400, tokens_per_minute: 1_000_000 };
        let t0 = Instant::now();
        for _ in 0..100 {
            let call = call_of(s.plan(key, small, t0));
            s.answered(key, call, Some(reply(1)), t0);
        }
        let call = call_of(s.plan(key, small, t0 + SLICE_FOR));
        assert_eq!(call.want, 10, "2400 a minute refill 10 in 250 ms");
        // Under 480 a minute, one at a time.
        let tiny = Limits { requests_per_minute: 479, tokens_per_minute: 1_000_000 };
        let key = Bucket::Key(Uuid::now_v7());
        for _ in 0..100 {
            let call = call_of(s.plan(key, tiny, t0));
            assert_eq!(call.want, 1);
            s.answered(key, call, Some(reply(1)), t0);
        }
        assert_eq!(call_of(s.plan(key, tiny, t0 + SLICE_FOR)).want, 1);
    }

    #[test]
    fn while_a_slice_is_taken_others_take_one_each() {
        let mut s = Slices::default();
        let key = Bucket::Key(Uuid::now_v7());
        let t0 = Instant::now();
        let first = call_of(s.plan(key, BIG, t0));
        let second = call_of(s.plan(key, BIG, t0));
        assert!(first.slice && !second.slice);
        s.answered(key, second, Some(reply(1)), t0);
        s.answered(key, first, Some(reply(1)), t0);
        assert!(call_of(s.plan(key, BIG, t0)).slice, "the slice's call ended: the next one takes it");
    }

    #[test]
    fn unused_requests_go_back_when_the_slice_expires_or_the_limits_change() {
        let mut s = Slices::default();
        let key = Bucket::Key(Uuid::now_v7());
        let t0 = Instant::now();
        let call = call_of(s.plan(key, BIG, t0));
        s.answered(key, call, Some(reply(8)), t0);
        assert!(s.due(t0, false).is_empty(), "a fresh slice stays");
        let due = s.due(t0 + SLICE_FOR, false);
        assert_eq!(due.len(), 1);
        assert_eq!((due[0].1.give_back, due[0].1.spend), (7, 0));

        let call = call_of(s.plan(key, BIG, t0 + SLICE_FOR));
        s.answered(key, call, Some(reply(5)), t0 + SLICE_FOR);
        let other = Limits { requests_per_minute: 100, ..BIG };
        let call = call_of(s.plan(key, other, t0 + SLICE_FOR));
        assert_eq!((call.give_back, call.want), (4, 1), "new limits: the old slice goes back");
        // Shutting down gives back every slice, expired or not.
        s.answered(key, call, Some(reply(1)), t0 + SLICE_FOR);
        let call = call_of(s.plan(key, BIG, t0 + SLICE_FOR));
        s.answered(key, call, Some(reply(3)), t0 + SLICE_FOR);
        assert_eq!(s.due(t0 + SLICE_FOR, true)[0].1.give_back, 2);
    }

    #[test]
    fn tokens_spent_here_stop_admissions_from_memory() {
        let mut s = Slices::default();
        let key = Bucket::Key(Uuid::now_v7());
        let t0 = Instant::now();
        let call = call_of(s.plan(key, BIG, t0));
        s.answered(key, call, Some(Reply { taken: 10, requests_left: 100, tokens_left: 30, reset_tokens_ms: 0 }), t0);
        assert!(matches!(s.plan(key, BIG, t0), Plan::Local(q) if q.remaining_tokens == 30));
        s.spend(key, BIG, 30, t0);
        let call = call_of(s.plan(key, BIG, t0));
        assert_eq!((call.spend, call.give_back), (30, 8), "no tokens left here: Redis decides, with the spend and the slice");
    }

    #[test]
    fn a_failed_call_keeps_its_tokens_for_the_next() {
        let mut s = Slices::default();
        let key = Bucket::Key(Uuid::now_v7());
        let t0 = Instant::now();
        s.spend(key, BIG, 12, t0);
        let call = call_of(s.plan(key, BIG, t0));
        assert_eq!(call.spend, 12);
        assert!(s.answered(key, call, None, t0).is_none());
        assert_eq!(call_of(s.plan(key, BIG, t0)).spend, 12);
    }

    #[test]
    fn idle_keys_are_forgotten() {
        let mut s = Slices::default();
        let key = Bucket::Key(Uuid::now_v7());
        let t0 = Instant::now();
        let call = call_of(s.plan(key, BIG, t0));
        s.answered(key, call, Some(reply(1)), t0);
        assert!(s.due(t0 + SLICE_FOR, false).is_empty());
        assert_eq!(s.keys.len(), 1);
        let _ = s.due(t0 + 4 * SLICE_FOR, false);
        assert!(s.keys.is_empty());
    }
}
