//! The worker registry's record: what a worker writes to Redis about itself, signed, and how a gateway
//! opens it.
//!
//! Every worker of every model writes one field of one hash ([`REGISTRY_KEY`]), so a gateway reads the
//! whole fleet with one `HGETALL`, whatever else the Redis database holds (no `SCAN` over the keyspace).
//! The `{registry}` hash tag keeps it on one slot of a Redis Cluster. Hash fields carry no TTL, so the
//! expiry is inside the signed text; gateways ignore expired fields and delete long-dead ones.

use serde::{Deserialize, Serialize};

use crate::worker_auth::WorkerSecrets;

pub const REGISTRY_KEY: &str = "runaii:{registry}:workers";

/// A signed status says it is good for at most this long: a worker re-announces well within it, and an
/// announcement replayed by someone who copied it stops working soon after.
pub const MAX_LIFETIME_MS: u64 = 60_000;

/// A worker's load, as the gateways route on it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct WorkerStatus {
    pub url: String,
    pub model: String,
    pub slots: u64,
    pub slots_busy: u64,
    pub queue_depth: u64,
}

impl WorkerStatus {
    /// Lower is less loaded: work in flight per slot.
    #[must_use]
    pub fn load(&self) -> f64 {
        (self.slots_busy + self.queue_depth) as f64 / self.slots.max(1) as f64
    }
}

/// The signed text: a status and the time (Unix ms) after which it no longer counts.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Announcement {
    #[serde(flatten)]
    status: WorkerStatus,
    expires_at_ms: u64,
}

/// What is stored in the hash field: the exact text that was signed, and its signature.
#[derive(Debug, Serialize, Deserialize)]
struct Sealed {
    payload: String,
    sig: String,
}

/// Why an announcement was not used; each is counted by the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    #[error("not an announcement")]
    Malformed,
    #[error("signature does not verify")]
    BadSignature,
    #[error("field does not match the signed model and url")]
    Mismatch,
    #[error("expired")]
    Expired,
    #[error("expiry too far ahead")]
    TooFarAhead,
}

impl Rejected {
    /// The metric label.
    #[must_use]
    pub fn reason(self) -> &'static str {
        match self {
            Self::Malformed => "malformed",
            Self::BadSignature => "bad_signature",
            Self::Mismatch => "mismatch",
            Self::Expired => "expired",
            Self::TooFarAhead => "too_far_ahead",
        }
    }
}

/// The hash field of one worker: model and URL, so the same worker may serve several models' fields.
#[must_use]
pub fn field(model: &str, url: &str) -> String {
    format!("{model}\n{url}")
}

/// The value a worker writes: `status`, good until `expires_at_ms`, signed with the current secret.
#[must_use]
pub fn seal(secrets: &WorkerSecrets, status: WorkerStatus, expires_at_ms: u64) -> String {
    let payload = serde_json::to_string(&Announcement { status, expires_at_ms }).unwrap_or_default();
    let sig = secrets.sign(&payload);
    serde_json::to_string(&Sealed { payload, sig }).unwrap_or_default()
}

/// Opens one registry field as a gateway must: the signature first (nothing unsigned is even parsed
/// for routing), then that the field names what was signed, then the expiry against `now_ms`.
///
/// A verified status, and when it stops counting (Unix ms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    pub status: WorkerStatus,
    pub expires_at_ms: u64,
}

/// # Errors
/// The [`Rejected`] reason.
pub fn open(secrets: &WorkerSecrets, field_name: &str, value: &str, now_ms: u64) -> Result<Opened, Rejected> {
    let sealed: Sealed = serde_json::from_str(value).map_err(|_| Rejected::Malformed)?;
    if !secrets.verify(&sealed.payload, &sealed.sig) {
        return Err(Rejected::BadSignature);
    }
    let announcement: Announcement = serde_json::from_str(&sealed.payload).map_err(|_| Rejected::Malformed)?;
    if field(&announcement.status.model, &announcement.status.url) != field_name {
        return Err(Rejected::Mismatch);
    }
    if announcement.expires_at_ms <= now_ms {
        return Err(Rejected::Expired);
    }
    if announcement.expires_at_ms > now_ms + MAX_LIFETIME_MS {
        return Err(Rejected::TooFarAhead);
    }
    Ok(Opened { status: announcement.status, expires_at_ms: announcement.expires_at_ms })
}

/// Unix time in milliseconds.
#[must_use]
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets(s: &str) -> WorkerSecrets {
        WorkerSecrets::load(None, Some(&s.into())).unwrap()
    }

    fn status(url: &str) -> WorkerStatus {
        WorkerStatus { url: url.into(), model: "m".into(), slots: 8, slots_busy: 1, queue_depth: 0 }
    }

    #[test]
    fn a_sealed_status_opens_under_the_same_secret_only() {
        let fleet = secrets("fleet-secret-of-at-least-thirty-two-bytes");
        let value = seal(&fleet, status("http://w:1"), 10_000);
        let opened = open(&fleet, &field("m", "http://w:1"), &value, 5_000).unwrap();
        assert_eq!((opened.status, opened.expires_at_ms), (status("http://w:1"), 10_000));
        let attacker = secrets("attacker-secret-of-at-least-thirty-two-b");
        assert_eq!(open(&attacker, &field("m", "http://w:1"), &value, 5_000), Err(Rejected::BadSignature));
    }

    #[test]
    fn unsigned_moved_expired_and_far_future_announcements_are_refused() {
        let fleet = secrets("fleet-secret-of-at-least-thirty-two-bytes");
        let plain = r#"{"url":"http://127.0.0.1:9999","model":"m","slots":999,"slots_busy":0,"queue_depth":0}"#;
        assert_eq!(open(&fleet, &field("m", "http://127.0.0.1:9999"), plain, 0), Err(Rejected::Malformed));
        let value = seal(&fleet, status("http://w:1"), 10_000);
        assert_eq!(open(&fleet, &field("m", "http://evil:1"), &value, 5_000), Err(Rejected::Mismatch));
        assert_eq!(open(&fleet, &field("m", "http://w:1"), &value, 10_000), Err(Rejected::Expired));
        let far = seal(&fleet, status("http://w:1"), 5_000 + MAX_LIFETIME_MS + 1);
        assert_eq!(open(&fleet, &field("m", "http://w:1"), &far, 5_000), Err(Rejected::TooFarAhead));
        let forged: Sealed = serde_json::from_str(&value).unwrap();
        let tampered =
            serde_json::to_string(&Sealed { payload: forged.payload.replace("\"slots\":8", "\"slots\":999"), sig: forged.sig }).unwrap();
        assert_eq!(open(&fleet, &field("m", "http://w:1"), &tampered, 5_000), Err(Rejected::BadSignature));
    }
}
