//! The credential gateways and workers share, and what each side proves with it.
//!
//! One fleet-wide secret (a file with one secret per line, or a literal for tests and development) gives
//! several things, each derived under its own label so that none reveals another:
//!
//! - **the gateway → worker request signature** (`request_signature`): bound to the time and to the
//!   request, so a worker reachable by anything else on the network serves nobody but the gateways, and
//!   a request seen on the network can be neither replayed nor edited;
//! - **the static bearer token**: for an OpenAI-compatible engine of another make (llama-server's
//!   `--api-key`) that cannot check a signature. It is weaker (whoever sees it can use it until the secret
//!   rotates), so runaii workers do not accept it unless started with `--accept-bearer`;
//! - **tenants' cache scopes** (`cache_scope`): keyed, so a tenant id alone does not give its scope;
//! - **the worker's signed announcement**: an HMAC-SHA256 over the exact status text a worker writes to
//!   the Redis registry. Gateways route only to announcements that verify, so write access to Redis alone
//!   cannot send a customer's prompt to a listener of the attacker's choosing or decide a bill.
//!
//! Rotation without downtime: the first line is the current secret (used to send and to sign); every line
//! is accepted. Add the new secret as a second line everywhere, move it first, then drop the old one; the
//! file is re-read while running ([`WorkerSecrets::reload_forever`]).

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq as _;

type HmacSha256 = Hmac<Sha256>;

/// Shorter secrets are refused: they could be guessed offline from one signed announcement.
pub const MIN_SECRET_BYTES: usize = 32;

/// Domain separation: the bearer token and the announcement signatures are different functions of the
/// secret, so a captured bearer token (sent in the clear inside the cluster) cannot sign announcements.
const BEARER_LABEL: &[u8] = b"runaii worker bearer v1";
const ANNOUNCE_LABEL: &[u8] = b"runaii worker announcement v1\n";

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("cannot read the worker secret file {path}: {source}")]
    Unreadable { path: PathBuf, source: std::io::Error },
    #[error("the worker secret file {0} holds no secret")]
    Empty(PathBuf),
    #[error("a worker secret must be at least {MIN_SECRET_BYTES} bytes (line {line})")]
    TooShort { line: usize },
    #[error("no worker secret: set RUNAII_WORKER_SECRET_FILE (scripts/run.sh writes .data/worker-secret) or RUNAII_WORKER_SECRET")]
    Missing,
}

/// A secret given on the command line or in the environment: parsed like a string, never printed by
/// `Debug` (settings structs are logged).
#[derive(Clone)]
pub struct SecretText(String);

impl SecretText {
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

impl std::str::FromStr for SecretText {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self(s.to_owned()))
    }
}

impl From<&str> for SecretText {
    fn from(s: &str) -> Self {
        Self(s.to_owned())
    }
}

impl From<String> for SecretText {
    fn from(s: String) -> Self {
        Self(s)
    }
}

/// The secrets in force: the first signs and sends, all are accepted. Never printed.
struct Keys {
    secrets: Vec<Vec<u8>>,
    /// Each secret's bearer token, made once: an HMAC and its hex per request otherwise, on the gateway
    /// that sends it and on the worker that checks it.
    bearers: Vec<String>,
}

impl Keys {
    fn parse(text: &str) -> Result<Self, SecretError> {
        let mut secrets = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if line.len() < MIN_SECRET_BYTES {
                return Err(SecretError::TooShort { line: n + 1 });
            }
            secrets.push(line.as_bytes().to_vec());
        }
        let bearers = secrets.iter().map(|s| bearer_token(s)).collect();
        Ok(Self { secrets, bearers })
    }

    fn current(&self) -> &[u8] {
        self.secrets.first().map_or(&[][..], Vec::as_slice)
    }
}

/// Where the secrets come from.
#[derive(Debug, Clone)]
enum Source {
    File(PathBuf),
    Literal,
}

/// The shared worker credential, safe to clone into every task; re-read from its file when it changes.
#[derive(Clone)]
pub struct WorkerSecrets {
    source: Source,
    keys: Arc<RwLock<Arc<Keys>>>,
}

impl std::fmt::Debug for WorkerSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerSecrets").field("source", &self.source).field("secrets", &"[redacted]").finish()
    }
}

impl WorkerSecrets {
    /// From a file (preferred: rotated by rewriting it) or a literal value.
    ///
    /// # Errors
    /// Neither given, an unreadable or empty file, or a secret shorter than [`MIN_SECRET_BYTES`].
    pub fn load(file: Option<&PathBuf>, literal: Option<&SecretText>) -> Result<Self, SecretError> {
        let (source, text) = match (file, literal) {
            (Some(path), _) => (Source::File(path.clone()), read(path)?),
            (None, Some(text)) => (Source::Literal, text.expose().to_owned()),
            (None, None) => return Err(SecretError::Missing),
        };
        let keys = Keys::parse(&text)?;
        if keys.secrets.is_empty() {
            return Err(match source {
                Source::File(path) => SecretError::Empty(path),
                Source::Literal => SecretError::Missing,
            });
        }
        Ok(Self { source, keys: Arc::new(RwLock::new(Arc::new(keys))) })
    }

    fn keys(&self) -> Arc<Keys> {
        Arc::clone(&self.keys.read().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Re-reads the secret file every `every`; a file that became unreadable or invalid keeps the
    /// secrets in force (logged), so a half-written rotation never locks the fleet out.
    pub async fn reload_forever(self, every: Duration) {
        let Source::File(path) = &self.source else { return };
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            match read(path).and_then(|text| Keys::parse(&text)) {
                Ok(keys) if !keys.secrets.is_empty() => {
                    *self.keys.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(keys);
                }
                Ok(_) => tracing::warn!(path = %path.display(), "worker secret file is empty; keeping the secrets in force"),
                Err(e) => tracing::warn!(error = %e, "worker secret file unusable; keeping the secrets in force"),
            }
        }
    }

    /// The `Authorization` header value a gateway sends to workers.
    #[must_use]
    pub fn bearer_header(&self) -> String {
        format!("Bearer {}", self.bearer_token())
    }

    /// The bearer token alone: what an OpenAI-compatible engine configured as a worker (llama-server's
    /// `--api-key`, say) must be told to accept.
    #[must_use]
    pub fn bearer_token(&self) -> String {
        let keys = self.keys();
        keys.bearers.first().cloned().unwrap_or_else(|| bearer_token(keys.current()))
    }

    /// Whether `header` (the whole `Authorization` value) carries the bearer token of any accepted secret.
    /// Every candidate is compared in constant time.
    #[must_use]
    pub fn accepts_bearer(&self, header: &str) -> bool {
        let Some(token) = header.strip_prefix("Bearer ") else { return false };
        let keys = self.keys();
        let mut ok = subtle::Choice::from(0);
        for bearer in &keys.bearers {
            ok |= bearer.as_bytes().ct_eq(token.trim().as_bytes());
        }
        ok.into()
    }

    /// The signature of an announcement's exact text, with the current secret (hex).
    #[must_use]
    pub fn sign(&self, payload: &str) -> String {
        hex::encode(self.mac_current(ANNOUNCE_LABEL, payload.as_bytes()))
    }

    /// An HMAC under the current secret of `label` then `data`: what the other keyed values of the fleet
    /// (request signatures, cache scopes) are made of, each under its own label.
    #[must_use]
    pub(crate) fn mac_current(&self, label: &[u8], data: &[u8]) -> [u8; 32] {
        let mut mac = keyed(self.keys().current());
        mac.update(label);
        mac.update(data);
        mac.finalize().into_bytes().into()
    }

    /// Whether `mac` is the HMAC of `label` then `data` under any accepted secret (constant time).
    #[must_use]
    pub(crate) fn verify_mac(&self, label: &[u8], data: &[u8], mac: &[u8]) -> bool {
        self.keys().secrets.iter().any(|secret| {
            let mut expected = keyed(secret);
            expected.update(label);
            expected.update(data);
            expected.verify_slice(mac).is_ok()
        })
    }

    /// Whether `signature` (hex) is the signature of `payload` under any accepted secret.
    #[must_use]
    pub fn verify(&self, payload: &str, signature: &str) -> bool {
        let Ok(signature) = hex::decode(signature) else { return false };
        self.verify_mac(ANNOUNCE_LABEL, payload.as_bytes(), &signature)
    }
}

fn read(path: &PathBuf) -> Result<String, SecretError> {
    std::fs::read_to_string(path).map_err(|source| SecretError::Unreadable { path: path.clone(), source })
}

fn keyed(secret: &[u8]) -> HmacSha256 {
    // HMAC accepts keys of any length; this cannot fail.
    <HmacSha256 as Mac>::new_from_slice(secret).unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"))
}

fn bearer_token(secret: &[u8]) -> String {
    let mut mac = keyed(secret);
    mac.update(BEARER_LABEL);
    hex::encode(mac.finalize().into_bytes())
}

/// The fixtures of the crate's tests of keyed values: two secrets and a loader.
#[cfg(test)]
pub(crate) mod testing {
    use super::WorkerSecrets;

    pub(crate) const A: &str = "a-secret-of-at-least-thirty-two-bytes-0001";
    pub(crate) const B: &str = "b-secret-of-at-least-thirty-two-bytes-0002";

    pub(crate) fn secrets(text: &str) -> WorkerSecrets {
        WorkerSecrets::load(None, Some(&text.into())).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{secrets, A, B};
    use super::*;

    #[test]
    fn signatures_verify_only_under_an_accepted_secret_and_exact_text() {
        let a = secrets(A);
        let sig = a.sign(r#"{"url":"http://w:1"}"#);
        assert!(a.verify(r#"{"url":"http://w:1"}"#, &sig));
        assert!(!a.verify(r#"{"url":"http://w:2"}"#, &sig));
        assert!(!secrets(B).verify(r#"{"url":"http://w:1"}"#, &sig));
        assert!(!a.verify(r#"{"url":"http://w:1"}"#, "not hex"));
    }

    #[test]
    fn rotation_accepts_both_and_sends_the_first() {
        let old = secrets(A);
        let both = secrets(&format!("{B}\n# old one, until every worker has B\n{A}\n"));
        assert!(both.accepts_bearer(&old.bearer_header()));
        assert!(both.verify("x", &old.sign("x")));
        assert!(!old.accepts_bearer(&both.bearer_header()), "the first line is the one sent");
    }

    #[test]
    fn the_bearer_is_not_the_secret_and_not_a_signature() {
        let a = secrets(A);
        assert!(!a.bearer_header().contains(A));
        assert!(!a.accepts_bearer(&format!("Bearer {A}")));
        assert!(!a.accepts_bearer("Bearer "));
        assert!(!a.accepts_bearer(""));
    }

    #[test]
    fn short_or_missing_secrets_are_refused() {
        assert!(matches!(WorkerSecrets::load(None, Some(&"short".into())), Err(SecretError::TooShort { line: 1 })));
        assert!(matches!(WorkerSecrets::load(None, None), Err(SecretError::Missing)));
        assert!(matches!(WorkerSecrets::load(None, Some(&"\n# only a comment\n".into())), Err(SecretError::Missing)));
        assert!(!format!("{:?}", secrets(A)).contains(A));
    }
}
