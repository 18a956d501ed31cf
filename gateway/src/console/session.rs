//! Console sessions, kept server-side in Redis.
//!
//! The browser holds only a random 256-bit session id, in an `HttpOnly; SameSite=Strict; Path=/console`
//! cookie. Redis holds, under an HMAC of that id, the credential the person signed in with (their API key
//! or admin JWT), sealed with ChaCha20-Poly1305 under another key derived from the id. So a copy of Redis
//! alone opens no session and shows no credential, the browser's storage holds nothing but the id, and
//! deleting the record (sign-out) ends the session on every replica at once.
//!
//! The credential is kept, not a summary of it, because every console request is checked by the API's own
//! code on the credential itself (see `signed_in`): a revoked key or an expired token ends the session on
//! the next page. The CSRF token of the session's forms is one more HMAC of the id: bound to the session,
//! nothing more to store.

use std::sync::Arc;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use rand::RngCore;
use runaii_wire::worker_auth::SecretText;
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::redis_link::RedisLink;

/// A session unused this long ends (each page read restarts the count).
pub(crate) const IDLE_SECONDS: i64 = 30 * 60;
/// A session ends this long after sign-in whatever happens, or when its token expires if sooner.
pub(crate) const MAX_SECONDS: i64 = 12 * 3600;
/// The cookie's name: `Path=/console` scopes it, so the API never sees it.
pub(crate) const COOKIE: &str = "runaii_console";

const ID_BYTES: usize = 32;

/// What a person signed in with. Never printed.
#[derive(Clone)]
pub(crate) enum Credential {
    ApiKey(String),
    AdminToken(String),
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::ApiKey(_) => "ApiKey([redacted])",
            Self::AdminToken(_) => "AdminToken([redacted])",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    ApiKey,
    AdminToken,
}

impl Kind {
    /// Bound into the seal, so a record's kind cannot be switched without breaking it.
    fn label(self) -> &'static [u8] {
        match self {
            Self::ApiKey => b"api_key",
            Self::AdminToken => b"admin_token",
        }
    }
}

/// The record in Redis.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    kind: Kind,
    /// Hex.
    nonce: String,
    /// Hex: the sealed credential.
    sealed: String,
    /// Unix seconds: the session's hard end.
    expires_at: i64,
}

/// A session id as the cookie carries it: 64 hex digits. Never printed.
#[derive(Clone)]
pub(crate) struct SessionId([u8; ID_BYTES]);

impl std::fmt::Debug for SessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionId([redacted])")
    }
}

impl SessionId {
    fn random() -> Self {
        let mut id = [0u8; ID_BYTES];
        rand::thread_rng().fill_bytes(&mut id);
        Self(id)
    }

    /// `None` unless `text` is exactly 64 hex digits.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let bytes = hex::decode(text).ok()?;
        Some(Self(bytes.try_into().ok()?))
    }

    /// The cookie value.
    pub(crate) fn cookie_value(&self) -> String {
        hex::encode(self.0)
    }

    /// A key for `purpose`, derived from the id: who lacks the id cannot compute it.
    fn derive(&self, purpose: &[u8]) -> [u8; 32] {
        // HMAC accepts keys of any length: this cannot fail.
        let Ok(mut mac) = <Hmac<Sha256> as Mac>::new_from_slice(&self.0) else { return [0; 32] };
        mac.update(b"runaii console v1\0");
        mac.update(purpose);
        mac.finalize().into_bytes().into()
    }

    fn redis_key(&self) -> String {
        format!("runaii:console:session:{}", hex::encode(self.derive(b"record")))
    }

    /// The token every form of this session carries.
    pub(crate) fn csrf_token(&self) -> String {
        hex::encode(self.derive(b"csrf"))
    }

    /// Constant-time comparison of a form's token with this session's.
    pub(crate) fn csrf_matches(&self, presented: &str) -> bool {
        let expected = self.csrf_token();
        presented.len() == expected.len() && bool::from(expected.as_bytes().ct_eq(presented.as_bytes()))
    }
}

/// What a session id finds.
#[derive(Debug)]
pub(crate) enum Lookup {
    Found(Credential),
    /// No such session: never opened, signed out, idle too long, or not opened by this id.
    Missing,
    /// The session reached its hard end (12 hours, or its admin token's expiry).
    Expired,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionError {
    #[error("sign-in sessions are kept in Redis, which does not answer; try again shortly")]
    Unavailable,
    #[error("the Redis URL is unusable: {0}")]
    BadRedisUrl(String),
}

/// The session store. Connects to Redis on first use (the console must not stop the gateway from
/// starting), through the gateway's [`RedisLink`], which survives Redis going away and coming back.
pub(crate) struct Sessions {
    url: SecretText,
    link: tokio::sync::OnceCell<Arc<RedisLink>>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions").finish_non_exhaustive()
    }
}

impl Sessions {
    pub(crate) fn new(url: SecretText) -> Self {
        Self { url, link: tokio::sync::OnceCell::new() }
    }

    async fn redis(&self) -> Result<&RedisLink, SessionError> {
        let link = self
            .link
            .get_or_try_init(|| async {
                RedisLink::new(self.url.expose()).await.map(Arc::new).map_err(|e| SessionError::BadRedisUrl(e.to_string()))
            })
            .await?;
        Ok(link)
    }

    /// Starts a session for `credential`, ending at `ends` at the latest.
    ///
    /// # Errors
    /// Redis unavailable.
    pub(crate) async fn open(&self, credential: &Credential, ends: DateTime<Utc>) -> Result<SessionId, SessionError> {
        let id = SessionId::random();
        let (kind, secret) = match credential {
            Credential::ApiKey(key) => (Kind::ApiKey, key),
            Credential::AdminToken(token) => (Kind::AdminToken, token),
        };
        let ends = ends.min(Utc::now() + chrono::Duration::seconds(MAX_SECONDS));
        let (nonce, sealed) = seal(&id.derive(b"seal"), kind, secret.as_bytes());
        let record = Record { kind, nonce: hex::encode(nonce), sealed: hex::encode(sealed), expires_at: ends.timestamp() };
        let value = serde_json::to_string(&record).map_err(|_| SessionError::Unavailable)?;
        // Kept a minute past its end, so that the next page can say the session ended rather than that
        // there is none.
        let ttl = IDLE_SECONDS.min((ends - Utc::now()).num_seconds() + 60).max(1);
        let key = id.redis_key();
        self.redis()
            .await?
            .run(|mut redis| async move { redis::cmd("SET").arg(key).arg(value).arg("EX").arg(ttl).query_async::<()>(&mut redis).await })
            .await
            .ok_or(SessionError::Unavailable)?;
        Ok(id)
    }

    /// The session's credential, restarting its idle time.
    ///
    /// # Errors
    /// Redis unavailable.
    pub(crate) async fn load(&self, id: &SessionId) -> Result<Lookup, SessionError> {
        let key = id.redis_key();
        let value = self
            .redis()
            .await?
            .run(|mut redis| async move {
                redis::cmd("GETEX").arg(key).arg("EX").arg(IDLE_SECONDS).query_async::<Option<String>>(&mut redis).await
            })
            .await
            .ok_or(SessionError::Unavailable)?;
        let Some(record) = value.and_then(|v| serde_json::from_str::<Record>(&v).ok()) else { return Ok(Lookup::Missing) };
        if record.expires_at <= Utc::now().timestamp() {
            self.close(id).await;
            return Ok(Lookup::Expired);
        }
        let (Ok(nonce), Ok(sealed)) = (hex::decode(&record.nonce), hex::decode(&record.sealed)) else { return Ok(Lookup::Missing) };
        let Some(plain) = open(&id.derive(b"seal"), record.kind, &nonce, &sealed) else { return Ok(Lookup::Missing) };
        let Ok(secret) = String::from_utf8(plain) else { return Ok(Lookup::Missing) };
        Ok(Lookup::Found(match record.kind {
            Kind::ApiKey => Credential::ApiKey(secret),
            Kind::AdminToken => Credential::AdminToken(secret),
        }))
    }

    /// Ends a session (best effort: while Redis is down the record ends with its idle time).
    pub(crate) async fn close(&self, id: &SessionId) {
        let key = id.redis_key();
        if let Ok(redis) = self.redis().await {
            let _ = redis.run(|mut redis| async move { redis::cmd("DEL").arg(key).query_async::<i64>(&mut redis).await }).await;
        }
    }
}

fn seal(key: &[u8; 32], kind: Kind, plain: &[u8]) -> ([u8; 12], Vec<u8>) {
    let mut nonce = [0u8; 12];
    rand::thread_rng().fill_bytes(&mut nonce);
    let cipher = ChaCha20Poly1305::new(Key::from_slice(key));
    // Encryption fails only for messages past 256 GiB; a credential is a few hundred bytes.
    let sealed = cipher.encrypt(Nonce::from_slice(&nonce), Payload { msg: plain, aad: kind.label() }).unwrap_or_default();
    (nonce, sealed)
}

fn open(key: &[u8; 32], kind: Kind, nonce: &[u8], sealed: &[u8]) -> Option<Vec<u8>> {
    if nonce.len() != 12 {
        return None;
    }
    let cipher = ChaCha20Poly1305::new(Key::from_slice(key));
    cipher.decrypt(Nonce::from_slice(nonce), Payload { msg: sealed, aad: kind.label() }).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seal_opens_only_with_its_id_and_kind() {
        let id = SessionId::random();
        let (nonce, sealed) = seal(&id.derive(b"seal"), Kind::ApiKey, b"rk-abc-def");
        assert_eq!(open(&id.derive(b"seal"), Kind::ApiKey, &nonce, &sealed).as_deref(), Some(&b"rk-abc-def"[..]));
        assert!(open(&id.derive(b"seal"), Kind::AdminToken, &nonce, &sealed).is_none());
        assert!(open(&SessionId::random().derive(b"seal"), Kind::ApiKey, &nonce, &sealed).is_none());
        assert!(!sealed.windows(10).any(|w| w == b"rk-abc-def"));
    }

    #[test]
    fn ids_parse_only_as_64_hex_digits_and_never_print() {
        let id = SessionId::random();
        let text = id.cookie_value();
        assert_eq!(text.len(), 64);
        assert!(SessionId::parse(&text).is_some());
        for bad in ["", "abc", &text[..63], &format!("{text}0"), &text.replace(&text[..1], "g")] {
            assert!(SessionId::parse(bad).is_none(), "{bad}");
        }
        assert!(!format!("{id:?}").contains(&text));
    }

    #[test]
    fn csrf_tokens_are_bound_to_their_session() {
        let (a, b) = (SessionId::random(), SessionId::random());
        assert!(a.csrf_matches(&a.csrf_token()));
        assert!(!a.csrf_matches(&b.csrf_token()));
        assert!(!a.csrf_matches(""));
        assert_ne!(a.redis_key(), b.redis_key());
        assert!(!a.redis_key().contains(&a.cookie_value()));
    }
}
