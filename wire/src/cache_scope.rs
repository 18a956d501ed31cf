//! Whose prompt cache a request may read. A worker keeps the KV state of prompts it has read and lets a
//! later prompt skip the prefix they share; a prompt that finds its prefix cached answers sooner, and that
//! difference is visible to whoever sent it. Shared across tenants, the cache would let one tenant learn,
//! by timing its own requests (or by reading `cached_tokens`), whether another tenant sent a given system
//! prompt or document. So every request the gateway sends carries its tenant's scope, and a worker
//! reuses a cached prefix only for a request of the same scope.
//!
//! The scope is an HMAC of the tenant id under the fleet's worker secret: workers never learn who the
//! tenant is, and whoever knows a tenant's id cannot compute its scope. It rides in a header only the
//! gateway sets and signs (`request_signature`): workers accept inference only from gateways, and the
//! gateway builds the header itself, never from anything the client sent. A rotation of the secret gives
//! every tenant a new scope, so the prefix cache starts cold once.

use crate::worker_auth::WorkerSecrets;

/// Domain separation from the other values made of the fleet secret.
const LABEL: &[u8] = b"runaii cache scope v2\n";

/// The header a gateway puts on every request to a worker.
pub const HEADER: &str = "x-runaii-cache-scope";

/// Longest scope a worker accepts: a gateway's scope is 32 hex digits; anything longer is not one.
const MAX_LEN: usize = 64;

/// One tenant's cache scope, as the worker compares it. The default (no header) is a scope of its own:
/// direct callers of a worker share a cache only with each other.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct CacheScope(Option<Box<str>>);

impl CacheScope {
    /// The scope of a tenant, from its id's bytes, under the current worker secret.
    #[must_use]
    pub fn of_tenant(secrets: &WorkerSecrets, tenant_id: &[u8]) -> Self {
        Self(Some(hex::encode(&secrets.mac_current(LABEL, tenant_id)[..16]).into()))
    }

    /// The scope's bytes as a cache key part: empty for a direct caller.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_deref().map_or(&[][..], str::as_bytes)
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
    use crate::worker_auth::testing::{secrets, A, B};

    #[test]
    fn tenants_get_distinct_stable_scopes_that_round_trip() {
        let fleet = secrets(A);
        let a = CacheScope::of_tenant(&fleet, &[1; 16]);
        let b = CacheScope::of_tenant(&fleet, &[2; 16]);
        assert_ne!(a, b);
        assert_eq!(a, CacheScope::of_tenant(&fleet, &[1; 16]));
        let value = a.header_value().unwrap_or_default();
        assert_eq!(value.len(), 32);
        assert_eq!(CacheScope::parse(value), Some(a));
        assert_ne!(CacheScope::default(), b, "no header is not any tenant's scope");
    }

    #[test]
    fn a_scope_cannot_be_computed_from_the_tenant_id_alone() {
        let tenant = [1; 16];
        let other_fleet = secrets(B);
        assert_ne!(CacheScope::of_tenant(&secrets(A), &tenant), CacheScope::of_tenant(&other_fleet, &tenant));
        use sha2::{Digest, Sha256};
        let unkeyed = Sha256::new().chain_update(b"runaii cache scope v1\0").chain_update(tenant).finalize();
        assert_ne!(CacheScope::of_tenant(&secrets(A), &tenant).header_value(), Some(hex::encode(&unkeyed[..16]).as_str()));
    }

    #[test]
    fn a_malformed_scope_is_refused() {
        for bad in ["", "a b", "ä", &"x".repeat(65), "a\nb"] {
            assert_eq!(CacheScope::parse(bad), None, "{bad:?}");
        }
        assert!(CacheScope::parse(&"x".repeat(64)).is_some());
    }
}
