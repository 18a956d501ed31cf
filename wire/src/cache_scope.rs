//! Whose prompt cache a request may read. A worker keeps the KV state of prompts it has read and lets a
//! later prompt skip the prefix they share; a prompt that finds its prefix cached answers sooner, and that
//! difference is visible to whoever sent it. Shared across tenants, the cache would let one tenant learn,
//! by timing its own requests (or by reading `cached_tokens`), whether another tenant sent a given system
//! prompt or document. So every request the gateway sends carries its tenant's scope, and a worker
//! reuses a cached prefix only for a request of the same scope.
//!
//! The scope is a one-way function of the tenant id: workers never learn who the tenant is. It rides in
//! a header only the gateway sets: workers accept inference only from gateways (`worker_auth`), and the
//! gateway builds the header itself, never from anything the client sent.

use sha2::{Digest, Sha256};

/// The header a gateway puts on every request to a worker.
pub const HEADER: &str = "x-runaii-cache-scope";

/// Longest scope a worker accepts: a gateway's scope is 32 hex digits; anything longer is not one.
const MAX_LEN: usize = 64;

/// One tenant's cache scope, as the worker compares it. The default (no header) is a scope of its own:
/// direct callers of a worker share a cache only with each other.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct CacheScope(Option<Box<str>>);

impl CacheScope {
    /// The scope of a tenant, from its id's bytes.
    #[must_use]
    pub fn of_tenant(tenant_id: &[u8]) -> Self {
        let digest = Sha256::new().chain_update(b"runaii cache scope v1\0").chain_update(tenant_id).finalize();
        Self(Some(hex::encode(&digest[..16]).into()))
    }

    /// The scope a header value names. Empty, over-long or non-token values are refused (`None`), so a
    /// worker can answer 400 rather than guess.
    #[must_use]
    pub fn parse(value: &str) -> Option<Self> {
        let ok = !value.is_empty() && value.len() <= MAX_LEN && value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        ok.then(|| Self(Some(value.into())))
    }

    /// The header value, when there is a scope to send.
    #[must_use]
    pub fn header_value(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenants_get_distinct_stable_scopes_that_round_trip() {
        let a = CacheScope::of_tenant(&[1; 16]);
        let b = CacheScope::of_tenant(&[2; 16]);
        assert_ne!(a, b);
        assert_eq!(a, CacheScope::of_tenant(&[1; 16]));
        let value = a.header_value().unwrap_or_default();
        assert_eq!(value.len(), 32);
        assert_eq!(CacheScope::parse(value), Some(a));
        assert_ne!(CacheScope::default(), b, "no header is not any tenant's scope");
    }

    #[test]
    fn a_malformed_scope_is_refused() {
        for bad in ["", "a b", "ä", &"x".repeat(65), "a\nb"] {
            assert_eq!(CacheScope::parse(bad), None, "{bad:?}");
        }
        assert!(CacheScope::parse(&"x".repeat(64)).is_some());
    }
}
