//! Whose prompt cache a request may read. A worker keeps the KV state of prompts it has read and lets a
//! later prompt skip the prefix they share; a prompt that finds its prefix cached answers sooner, and that
//! difference is visible to whoever sent it. Shared across tenants, the cache would let one tenant learn,
//! by timing its own requests (or by reading `cached_tokens`), whether another tenant sent a given system
//! prompt or document. So every request the gateway sends carries its tenant's scope, and a worker
//! reuses a cached prefix (or a compiled schema) only for a request of the same scope.
//!
//! The scope is an HMAC of the tenant id under the fleet's worker secret: workers never learn who the
//! tenant is, and whoever knows a tenant's id (ids appear in invoices, logs, support mails) still cannot
//! compute its scope. It rides in a header only the gateway sets, covered by the request's signature
//! (`signed_request`), and the gateway builds it itself, never from anything the client sent. When the
//! first line of the secret file changes, every scope changes with it: cached prefixes are then simply not
//! found again (a cold cache, nothing worse).

use crate::worker_auth::WorkerSecrets;

/// The header a gateway puts on every request to a worker.
pub const HEADER: &str = "x-runaii-cache-scope";

/// Longest scope a worker accepts: a gateway's scope is 32 hex digits; anything longer is not one.
const MAX_LEN: usize = 64;

/// One tenant's cache scope, as the worker compares it. The default (no header) is a scope of its own:
/// direct callers of a worker share a cache only with each other.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheScope(Option<Box<str>>);

impl CacheScope {
    /// The scope of a tenant, from its id's bytes, keyed with the fleet's current secret.
    #[must_use]
    pub fn of_tenant(secrets: &WorkerSecrets, tenant_id: &[u8]) -> Self {
        let digest = secrets.keyed_digest(b"runaii cache scope v2\0", tenant_id);
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

    fn secrets(text: &str) -> WorkerSecrets {
        WorkerSecrets::load(None, Some(&text.into())).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn tenants_get_distinct_stable_scopes_that_round_trip() {
        let fleet = secrets("a-secret-of-at-least-thirty-two-bytes-0001");
        let a = CacheScope::of_tenant(&fleet, &[1; 16]);
        let b = CacheScope::of_tenant(&fleet, &[2; 16]);
        assert_ne!(a, b);
        assert_eq!(a, CacheScope::of_tenant(&fleet, &[1; 16]));
        let elsewhere = secrets("b-secret-of-at-least-thirty-two-bytes-0002");
        assert_ne!(a, CacheScope::of_tenant(&elsewhere, &[1; 16]), "the id alone does not make the scope");
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
