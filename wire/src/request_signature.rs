//! The gateway's credential on each request to a worker: an HMAC under the fleet's worker secret, bound
//! to the moment it was sent and to the request itself.
//!
//! A static bearer token, seen once on the cluster network, would let whoever saw it call workers
//! directly for as long as the secret lives: unbilled, and with a copied cache scope reading a tenant's
//! cached prefixes through `cached_tokens`. A signature instead covers the time, a fresh nonce, the
//! method, the path, the headers that decide whose cache and which admission class
//! (`cache_scope`, `priority`) and the SHA-256 of the body. A worker refuses one that is older (or
//! newer) than [`WINDOW`], one whose nonce it has already seen ([`ReplayGuard`]), and one that does
//! not match what arrived: a captured request can be neither replayed nor edited.
//!
//! The header: `x-runaii-signature: t=<unix ms>,n=<32 hex nonce>,v1=<64 hex HMAC-SHA256>`.
//!
//! An OpenAI-compatible engine of another make (llama-server) cannot check this; the gateway sends it
//! the weaker static bearer token (`worker_auth`) instead, and only to workers configured in the
//! catalog, never to announced ones.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::worker_auth::WorkerSecrets;

/// The header the signature rides in.
pub const HEADER: &str = "x-runaii-signature";

/// How far a signature's time may be from the worker's clock, either way: the request's trip plus
/// clock skew between nodes.
pub const WINDOW: Duration = Duration::from_secs(30);

/// Domain separation from the bearer token, announcements and cache scopes.
const LABEL: &[u8] = b"runaii worker request v1\n";

/// What a signature covers besides its time and nonce.
#[derive(Debug, Clone, Copy)]
pub struct Signed<'a> {
    pub method: &'a str,
    /// The path and query, as the worker sees them.
    pub path: &'a str,
    /// The `x-runaii-cache-scope` value, empty when none is sent.
    pub scope: &'a str,
    /// The `x-runaii-priority` value, empty when none is sent.
    pub priority: &'a str,
    pub body: &'a [u8],
}

/// Why a worker refused a signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("no request signature")]
    Missing,
    #[error("malformed request signature")]
    Malformed,
    #[error("request signature outside its time window")]
    Stale,
    #[error("request signature does not match the request")]
    Mismatch,
    #[error("request signature already used")]
    Replayed,
}

/// A verified signature's nonce and time, for the replay guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepted {
    nonce: [u8; 16],
    at_ms: u64,
}

/// The header value for `what`, sent at `now_ms` with a fresh random `nonce`.
#[must_use]
pub fn sign(secrets: &WorkerSecrets, what: &Signed<'_>, now_ms: u64, nonce: [u8; 16]) -> String {
    let mac = secrets.mac_current(LABEL, &message(what, now_ms, &nonce));
    format!("t={now_ms},n={},v1={}", hex::encode(nonce), hex::encode(mac))
}

/// Checks a header value against the request that arrived, at the worker's `now_ms`.
///
/// # Errors
/// A [`Refused`] saying why; the replay check is the caller's ([`ReplayGuard::admit`]).
pub fn verify(secrets: &WorkerSecrets, header: Option<&str>, what: &Signed<'_>, now_ms: u64) -> Result<Accepted, Refused> {
    let header = header.ok_or(Refused::Missing)?;
    let (at_ms, nonce, mac) = parse(header).ok_or(Refused::Malformed)?;
    let window = u64::try_from(WINDOW.as_millis()).unwrap_or(u64::MAX);
    if at_ms.abs_diff(now_ms) > window {
        return Err(Refused::Stale);
    }
    if secrets.verify_mac(LABEL, &message(what, at_ms, &nonce), &mac) {
        Ok(Accepted { nonce, at_ms })
    } else {
        Err(Refused::Mismatch)
    }
}

fn parse(header: &str) -> Option<(u64, [u8; 16], Vec<u8>)> {
    let mut parts = header.split(',');
    let at_ms = parts.next()?.strip_prefix("t=")?.parse().ok()?;
    let nonce = hex::decode(parts.next()?.strip_prefix("n=")?).ok()?.try_into().ok()?;
    let mac = hex::decode(parts.next()?.strip_prefix("v1=")?).ok()?;
    (parts.next().is_none() && mac.len() == 32).then_some((at_ms, nonce, mac))
}

fn message(what: &Signed<'_>, at_ms: u64, nonce: &[u8; 16]) -> Vec<u8> {
    // Every field but the body is a token without newlines (the worker refuses other scope and priority
    // values before it checks), so the newline-joined text is unambiguous.
    let body = hex::encode(Sha256::digest(what.body));
    format!("{at_ms}\n{}\n{}\n{}\n{}\n{}\n{body}", hex::encode(nonce), what.method, what.path, what.scope, what.priority).into_bytes()
}

/// The nonces a worker has accepted within the window: a nonce seen twice is a replay. Only signatures
/// that verified are recorded, so its size is bounded by the gateways' own traffic over [`WINDOW`].
#[derive(Debug, Default)]
pub struct ReplayGuard {
    seen: Mutex<Seen>,
}

#[derive(Debug, Default)]
struct Seen {
    nonces: HashMap<[u8; 16], u64>,
    order: VecDeque<([u8; 16], u64)>,
}

impl ReplayGuard {
    /// Records a verified signature, forgetting those that left the window before `now_ms`.
    ///
    /// # Errors
    /// [`Refused::Replayed`] when its nonce was accepted before.
    pub fn admit(&self, accepted: Accepted, now_ms: u64) -> Result<(), Refused> {
        let window = u64::try_from(WINDOW.as_millis()).unwrap_or(u64::MAX);
        let mut seen = self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // A signature older than the window is refused as stale, so its nonce need not be kept.
        while let Some(&(nonce, at_ms)) = seen.order.front() {
            if at_ms.saturating_add(window) >= now_ms {
                break;
            }
            seen.order.pop_front();
            if seen.nonces.get(&nonce) == Some(&at_ms) {
                seen.nonces.remove(&nonce);
            }
        }
        if seen.nonces.insert(accepted.nonce, accepted.at_ms).is_some() {
            return Err(Refused::Replayed);
        }
        seen.order.push_back((accepted.nonce, accepted.at_ms));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker_auth::testing::{secrets, A, B};

    fn request(body: &[u8]) -> Signed<'_> {
        Signed { method: "POST", path: "/v1/chat/completions", scope: "abc", priority: "", body }
    }

    const NOW: u64 = 1_800_000_000_000;

    #[test]
    fn a_signature_verifies_only_for_its_request_secret_and_time() {
        let a = secrets(A);
        let header = sign(&a, &request(b"{}"), NOW, [7; 16]);
        assert!(verify(&a, Some(&header), &request(b"{}"), NOW + 1_000).is_ok());
        assert_eq!(verify(&a, Some(&header), &request(b"{ }"), NOW), Err(Refused::Mismatch), "another body");
        let other_scope = Signed { scope: "abd", ..request(b"{}") };
        assert_eq!(verify(&a, Some(&header), &other_scope, NOW), Err(Refused::Mismatch), "another tenant's cache");
        let batch = Signed { priority: "batch", ..request(b"{}") };
        assert_eq!(verify(&a, Some(&header), &batch, NOW), Err(Refused::Mismatch), "another class");
        assert_eq!(verify(&secrets(B), Some(&header), &request(b"{}"), NOW), Err(Refused::Mismatch));
        assert_eq!(verify(&a, Some(&header), &request(b"{}"), NOW + 31_000), Err(Refused::Stale));
        assert_eq!(verify(&a, Some(&header), &request(b"{}"), NOW - 31_000), Err(Refused::Stale));
        assert_eq!(verify(&a, None, &request(b"{}"), NOW), Err(Refused::Missing));
        for bad in ["", "t=1", "t=x,n=00,v1=00", &format!("{header},x=1"), &header.replace("v1=", "v2=")] {
            assert_eq!(verify(&a, Some(bad), &request(b"{}"), NOW), Err(Refused::Malformed), "{bad}");
        }
    }

    #[test]
    fn rotation_accepts_the_old_secret_while_it_is_listed() {
        let header = sign(&secrets(A), &request(b"{}"), NOW, [1; 16]);
        assert!(verify(&secrets(&format!("{B}\n{A}")), Some(&header), &request(b"{}"), NOW).is_ok());
    }

    #[test]
    fn a_nonce_is_admitted_once_and_forgotten_after_the_window() {
        let a = secrets(A);
        let guard = ReplayGuard::default();
        let header = sign(&a, &request(b"{}"), NOW, [2; 16]);
        let accepted = verify(&a, Some(&header), &request(b"{}"), NOW).unwrap();
        assert_eq!(guard.admit(accepted, NOW), Ok(()));
        assert_eq!(guard.admit(accepted, NOW + 5), Err(Refused::Replayed));
        let fresh = verify(&a, Some(&sign(&a, &request(b"{}"), NOW, [3; 16])), &request(b"{}"), NOW).unwrap();
        assert_eq!(guard.admit(fresh, NOW), Ok(()));
        let later = verify(&a, Some(&sign(&a, &request(b"{}"), NOW + 60_000, [4; 16])), &request(b"{}"), NOW + 60_000).unwrap();
        assert_eq!(guard.admit(later, NOW + 60_000), Ok(()));
        assert_eq!(guard.seen.lock().unwrap().nonces.len(), 1, "nonces past the window are dropped");
    }
}
