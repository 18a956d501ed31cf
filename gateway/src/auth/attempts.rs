//! Failed authentications counted per source address, in this replica's memory: past the allowance an
//! address's further failures, and its lookups of keys this replica does not know, get 429 without any
//! I/O. Another address keeps its own allowance, and a key this replica has already found in the
//! database still works from a limited address, so a guesser behind a shared address (a NAT, a proxy)
//! does not lock out the customers beside it.
//!
//! Each address has a token bucket of `per_minute` failures, refilled continuously. IPv6 addresses are
//! counted by their /64 (one host usually holds a whole /64). The table keeps the most recently failing
//! addresses, evicting the least recent when full: a flood from many addresses can only make the
//! limiter forget, never refuse an address that did not fail.

use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::ConnectInfo;
use axum::http::Extensions;
use hashlink::LruCache;

/// Addresses remembered at most.
const SOURCES: usize = 65_536;

/// Where a request came from, as far as counting failures goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    V4(u32),
    /// The /64 prefix.
    V6(u64),
    /// No peer address (a request built in process).
    Unknown,
}

impl Source {
    #[must_use]
    pub fn of(ip: IpAddr) -> Self {
        match ip.to_canonical() {
            IpAddr::V4(v4) => Self::V4(u32::from(v4)),
            IpAddr::V6(v6) => Self::V6((u128::from(v6) >> 64) as u64),
        }
    }

    /// The peer address the server recorded on the request.
    #[must_use]
    pub fn from_extensions(extensions: &Extensions) -> Self {
        extensions.get::<ConnectInfo<SocketAddr>>().map_or(Self::Unknown, |ConnectInfo(peer)| Self::of(peer.ip()))
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The per-address allowance of failed authentications.
#[derive(Debug)]
pub struct FailedAuth {
    per_minute: f64,
    sources: Mutex<LruCache<Source, Bucket>>,
}

/// What one failure did to its address's allowance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Counted; the address may still try.
    Counted,
    /// The allowance is spent: refuse with 429, retry after this long.
    Limited(Duration),
}

impl FailedAuth {
    #[must_use]
    pub fn new(per_minute: NonZeroU32) -> Self {
        Self { per_minute: f64::from(per_minute.get()), sources: Mutex::new(LruCache::new(SOURCES)) }
    }

    fn refill(&self, bucket: &mut Bucket, now: Instant) {
        let earned = now.duration_since(bucket.at).as_secs_f64() * self.per_minute / 60.0;
        bucket.tokens = (bucket.tokens + earned).min(self.per_minute);
        bucket.at = now;
    }

    fn wait(&self, bucket: &Bucket) -> Duration {
        Duration::from_secs_f64(((1.0 - bucket.tokens) * 60.0 / self.per_minute).max(0.0))
    }

    /// Whether `source` has spent its allowance (and for how long), without counting anything.
    pub fn limited(&self, source: Source) -> Option<Duration> {
        let mut sources = self.sources.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let bucket = sources.get_mut(&source)?;
        self.refill(bucket, Instant::now());
        (bucket.tokens < 1.0).then(|| self.wait(bucket))
    }

    /// Counts one failure from `source`: the failure that spends the last of the allowance is still
    /// answered 401; those after it, 429.
    pub fn fail(&self, source: Source) -> Verdict {
        let now = Instant::now();
        let mut sources = self.sources.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if sources.get(&source).is_none() {
            sources.insert(source, Bucket { tokens: self.per_minute, at: now });
        }
        let Some(bucket) = sources.get_mut(&source) else { return Verdict::Counted };
        self.refill(bucket, now);
        if bucket.tokens < 1.0 {
            return Verdict::Limited(self.wait(bucket));
        }
        bucket.tokens -= 1.0;
        Verdict::Counted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_limited_after_its_allowance_and_another_is_not() {
        let limiter = FailedAuth::new(NonZeroU32::new(3).expect("nonzero"));
        let one = Source::of("10.0.0.1".parse().expect("ip"));
        let other = Source::of("10.0.0.2".parse().expect("ip"));
        for _ in 0..3 {
            assert_eq!(limiter.fail(one), Verdict::Counted);
        }
        assert!(limiter.limited(one).is_some());
        assert!(matches!(limiter.fail(one), Verdict::Limited(wait) if wait > Duration::from_secs(15)));
        assert_eq!(limiter.limited(other), None);
        assert_eq!(limiter.fail(other), Verdict::Counted);
    }

    #[test]
    fn ipv6_counts_by_prefix_and_mapped_ipv4_as_ipv4() {
        let a = Source::of("2001:db8::1".parse().expect("ip"));
        let b = Source::of("2001:db8::ffff:1".parse().expect("ip"));
        assert_eq!(a, b);
        assert_eq!(Source::of("::ffff:10.0.0.1".parse().expect("ip")), Source::of("10.0.0.1".parse().expect("ip")));
    }
}
