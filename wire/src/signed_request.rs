//! The gateway's credential on each request to a worker: an HMAC-SHA256 under the fleet's worker secret
//! over what the request is — its method, path, time, a fresh nonce, the SHA-256 of its body and its
//! cache scope — sent as `Authorization: RunaiiSig t=<unix s>,n=<nonce>,sig=<hex>`.
//!
//! Whoever sees a request on the cluster network learns nothing that calls a worker: the signature is
//! good for that body and scope only, for [`DEFAULT_MAX_AGE`] around its time, and once (the worker keeps
//! the nonces it accepted for as long as their signatures could pass). A static bearer, sent in the clear
//! on every request, would let them call workers unbilled, or send a victim's cache scope.
//!
//! An OpenAI-compatible engine of another make (llama-server with `--api-key`) cannot check this: a
//! gateway sends it the static bearer of `worker_auth` instead (`runaii-gateway worker-token`), a weaker
//! credential stated as such in docs/security.md.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use hmac::Mac as _;
use rand::RngCore as _;
use sha2::{Digest as _, Sha256};

use crate::worker_auth::WorkerSecrets;

/// The `Authorization` scheme of a signed request.
pub const SCHEME: &str = "RunaiiSig";

/// What a runaii worker's `/health` says in `credential`: it checks signed requests, so a gateway sends
/// it no bearer.
pub const HEALTH_CREDENTIAL: &str = "signed-request-v2";

/// How far a request's time may be from the worker's clock, either way: clock skew between hosts plus a
/// request's time on the wire.
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(30);

const LABEL: &str = "runaii worker request v2";

/// What a signature covers.
#[derive(Debug, Clone, Copy)]
pub struct RequestFacts<'a> {
    pub method: &'a str,
    /// The path, without the query.
    pub path: &'a str,
    pub body: &'a [u8],
    /// The cache scope header's value, if any.
    pub scope: Option<&'a str>,
}

/// Why a worker refused a request's credential (logged, never told: the answer is one 401).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("no signed-request credential")]
    Malformed,
    #[error("the request's time is outside the accepted window")]
    Stale,
    #[error("the signature does not match the request under any accepted secret")]
    BadSignature,
    #[error("this request was already served once")]
    Replayed,
}

fn text(facts: &RequestFacts<'_>, time: u64, nonce: &str) -> String {
    let body = hex::encode(Sha256::digest(facts.body));
    let scope = facts.scope.unwrap_or("");
    format!("{LABEL}\n{}\n{}\n{time}\n{nonce}\n{body}\n{scope}", facts.method, facts.path)
}

/// Seconds since the Unix epoch.
#[must_use]
pub fn now_s() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl WorkerSecrets {
    /// The `Authorization` value of a request, signed with the current secret at `time` (Unix seconds).
    #[must_use]
    pub fn sign_request(&self, facts: &RequestFacts<'_>, time: u64) -> String {
        let mut nonce = [0u8; 16];
        rand::thread_rng().fill_bytes(&mut nonce);
        let nonce = hex::encode(nonce);
        let mut mac = self.current_mac();
        mac.update(text(facts, time, &nonce).as_bytes());
        format!("{SCHEME} t={time},n={nonce},sig={}", hex::encode(mac.finalize().into_bytes()))
    }
}

/// The parts of a signed credential.
struct Presented<'a> {
    time: u64,
    nonce: &'a str,
    signature: Vec<u8>,
}

fn parse(header: &str) -> Option<Presented<'_>> {
    let rest = header.strip_prefix(SCHEME)?.strip_prefix(' ')?;
    let (mut time, mut nonce, mut signature) = (None, None, None);
    for part in rest.split(',') {
        match part.trim().split_once('=')? {
            ("t", v) => time = v.parse().ok(),
            ("n", v) if v.len() == 32 && v.bytes().all(|b| b.is_ascii_hexdigit()) => nonce = Some(v),
            ("sig", v) => signature = hex::decode(v).ok(),
            _ => return None,
        }
    }
    Some(Presented { time: time?, nonce: nonce?, signature: signature? })
}

/// A worker's check of signed requests, with the nonces it accepted while their signatures could pass.
#[derive(Debug)]
pub struct RequestCheck {
    max_age: u64,
    seen: Mutex<Seen>,
}

#[derive(Debug, Default)]
struct Seen {
    nonces: HashSet<String>,
    /// In the order accepted, with the worker's time: dropped once a replay could no longer be in time.
    order: VecDeque<(u64, String)>,
}

impl RequestCheck {
    #[must_use]
    pub fn new(max_age: Duration) -> Self {
        Self { max_age: max_age.as_secs().max(1), seen: Mutex::default() }
    }

    /// Whether `header` is a good credential for this request at `now` (Unix seconds); the nonce is then
    /// spent. Only requests whose signature verified take room, so only gateways can fill the set, and
    /// never with more than the requests of twice the window.
    ///
    /// # Errors
    /// A [`Refusal`].
    pub fn check(&self, secrets: &WorkerSecrets, header: &str, facts: &RequestFacts<'_>, now: u64) -> Result<(), Refusal> {
        let presented = parse(header).ok_or(Refusal::Malformed)?;
        if presented.time.abs_diff(now) > self.max_age {
            return Err(Refusal::Stale);
        }
        let signed = text(facts, presented.time, presented.nonce);
        // `verify_slice` compares in constant time.
        let good = secrets.macs().into_iter().any(|mut mac| {
            mac.update(signed.as_bytes());
            mac.verify_slice(&presented.signature).is_ok()
        });
        if !good {
            return Err(Refusal::BadSignature);
        }
        let mut seen = self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // Accepted at `at` with a time within `max_age` of it: a replay is in time until `at + 2 × max_age`.
        while seen.order.front().is_some_and(|(at, _)| at + 2 * self.max_age < now) {
            if let Some((_, nonce)) = seen.order.pop_front() {
                seen.nonces.remove(&nonce);
            }
        }
        if !seen.nonces.insert(presented.nonce.to_owned()) {
            return Err(Refusal::Replayed);
        }
        seen.order.push_back((now, presented.nonce.to_owned()));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "a-secret-of-at-least-thirty-two-bytes-0001";
    const B: &str = "b-secret-of-at-least-thirty-two-bytes-0002";

    fn secrets(text: &str) -> WorkerSecrets {
        WorkerSecrets::load(None, Some(&text.into())).unwrap()
    }

    fn facts<'a>(body: &'a [u8], scope: Option<&'a str>) -> RequestFacts<'a> {
        RequestFacts { method: "POST", path: "/v1/chat/completions", body, scope }
    }

    #[test]
    fn a_signature_holds_for_its_request_once_and_in_time() {
        let (a, check) = (secrets(A), RequestCheck::new(Duration::from_secs(30)));
        let header = a.sign_request(&facts(b"{}", Some("s1")), 1000);
        assert_eq!(check.check(&a, &header, &facts(b"{ }", Some("s1")), 1000), Err(Refusal::BadSignature), "another body");
        assert_eq!(check.check(&a, &header, &facts(b"{}", Some("s2")), 1000), Err(Refusal::BadSignature), "another scope");
        assert_eq!(check.check(&a, &header, &facts(b"{}", None), 1000), Err(Refusal::BadSignature), "no scope");
        let other_path = RequestFacts { path: "/v1/other", ..facts(b"{}", Some("s1")) };
        assert_eq!(check.check(&a, &header, &other_path, 1000), Err(Refusal::BadSignature), "another path");
        assert_eq!(check.check(&a, &header, &facts(b"{}", Some("s1")), 1031), Err(Refusal::Stale), "too late");
        assert_eq!(check.check(&a, &header, &facts(b"{}", Some("s1")), 969), Err(Refusal::Stale), "from the future");
        assert_eq!(check.check(&secrets(B), &header, &facts(b"{}", Some("s1")), 1000), Err(Refusal::BadSignature), "another secret");
        assert_eq!(check.check(&a, &header, &facts(b"{}", Some("s1")), 1010), Ok(()));
        assert_eq!(check.check(&a, &header, &facts(b"{}", Some("s1")), 1011), Err(Refusal::Replayed), "spent");
    }

    #[test]
    fn rotation_accepts_both_and_nonces_are_forgotten_when_they_could_not_pass() {
        let (old, both) = (secrets(A), secrets(&format!("{B}\n{A}\n")));
        let check = RequestCheck::new(Duration::from_secs(30));
        assert_eq!(check.check(&both, &old.sign_request(&facts(b"x", None), 1000), &facts(b"x", None), 1000), Ok(()));
        assert_eq!(
            check.check(&old, &both.sign_request(&facts(b"x", None), 1000), &facts(b"x", None), 1000),
            Err(Refusal::BadSignature),
            "the first line signs"
        );
        for t in 1001..1100 {
            assert_eq!(check.check(&old, &old.sign_request(&facts(b"x", None), t), &facts(b"x", None), t), Ok(()));
        }
        let kept = check.seen.lock().unwrap().nonces.len();
        assert!(kept <= 62, "{kept} nonces kept for a 30 s window");
    }

    #[test]
    fn malformed_credentials_are_refused() {
        let (a, check) = (secrets(A), RequestCheck::new(Duration::from_secs(30)));
        let f = facts(b"{}", None);
        for bad in [
            "",
            "Bearer x",
            &a.bearer_header(),
            "RunaiiSig t=1000",
            "RunaiiSig t=1000,n=zz,sig=00",
            "RunaiiSig t=x,n=00000000000000000000000000000000,sig=00",
        ] {
            assert_eq!(check.check(&a, bad, &f, 1000), Err(Refusal::Malformed), "{bad}");
        }
    }
}
