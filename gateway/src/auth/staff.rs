//! Admin bearer tokens: JWTs signed with HS256 (shared secrets) or RS256 (verified with public keys), with
//! the roles they carry. An API key is not a JWT and never opens this API.
//!
//! A token is accepted only when it is signed by an accepted key (its `kid` header names which; a token
//! without one is tried against each), is issued by the configured `iss` for the configured `aud`, carries
//! `sub`, `iat`, `exp` and `jti`, lives no longer than the maximum lifetime (`exp - iat`, with `iat` not in
//! the future), has not expired, and its `jti` has not been revoked ([`RevokedTokens`]).
//!
//! Several keys are accepted at once so that keys rotate with overlap: a new key is added (accepted), then
//! used to sign, then the old one removed once its tokens have expired. An HS256 key's `kid` is derived
//! from the secret (a hash prefix: it names the key without revealing it); an RS256 key's is its PEM file's
//! name without the extension.

use std::path::Path;
use std::sync::Arc;

use axum::extract::{FromRef, FromRequestParts};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

pub use super::revoked::RevokedTokens;
use crate::config::AdminArgs;
pub use crate::config::{DEFAULT_AUDIENCE, DEFAULT_ISSUER};
use crate::error::ApiError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The catalog: models, prices, workers.
    Ops,
    /// Cost records, totals, the credit ledger.
    Finance,
    /// Tenants, keys, credit grants, model access, the audit log, staff token revocation.
    Admin,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Self::Ops => "ops",
            Self::Finance => "finance",
            Self::Admin => "admin",
        }
    }

    /// How a refusal for a token that has the role but is confined to a tenant names what is missing.
    fn unconfined_name(self) -> &'static str {
        match self {
            Self::Ops => "ops (unconfined)",
            Self::Finance => "finance (unconfined)",
            Self::Admin => "admin (unconfined)",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claims {
    /// Who acts; written to the audit log.
    pub sub: String,
    pub exp: u64,
    /// When the token was issued; required (the lifetime is `exp - iat`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<u64>,
    /// The token's id, by which it can be revoked; required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jti: Option<String>,
    #[serde(default)]
    pub roles: Vec<String>,
    /// When set, the token sees and changes only this tenant's data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<Uuid>,
}

impl Claims {
    /// Claims for a token issued now that lives `lifetime_s`, with a fresh `jti`.
    #[must_use]
    pub fn new(sub: impl Into<String>, roles: Vec<String>, tenant_id: Option<Uuid>, lifetime_s: u64) -> Self {
        let now = chrono::Utc::now().timestamp().unsigned_abs();
        Self { sub: sub.into(), iat: Some(now), exp: now + lifetime_s, jti: Some(Uuid::now_v7().to_string()), roles, tenant_id }
    }
}

/// The registered claims a token is issued with, beside [`Claims`].
#[derive(Serialize)]
struct Issued<'a> {
    #[serde(flatten)]
    claims: &'a Claims,
    iss: &'a str,
    aud: &'a str,
}

/// One accepted key.
struct Key {
    kid: String,
    key: DecodingKey,
}

/// Checks tokens against the configured keys, issuer, audience, lifetime and revocations.
pub struct Verifier {
    keys: Vec<Key>,
    validation: Validation,
    max_lifetime_s: u64,
    revoked: Arc<RevokedTokens>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kids: Vec<&str> = self.keys.iter().map(|k| k.kid.as_str()).collect();
        f.debug_struct("Verifier").field("algorithms", &self.validation.algorithms).field("kids", &kids).finish_non_exhaustive()
    }
}

/// The `kid` of an HS256 secret: a prefix of a hash of it, so that it names the key without revealing it.
#[must_use]
pub fn secret_kid(secret: &str) -> String {
    let digest = Sha256::new().chain_update(b"runaii admin jwt kid\0").chain_update(secret.as_bytes()).finalize();
    hex::encode(&digest[..8])
}

/// The HS256 secrets configured: the file's lines (the first signs), then the single secret.
///
/// # Errors
/// An unreadable file, or a secret under 32 bytes.
pub fn secrets(args: &AdminArgs) -> anyhow::Result<Vec<String>> {
    let mut secrets = Vec::new();
    if let Some(path) = &args.admin_jwt_secret_file {
        let text = std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        secrets.extend(text.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned));
    }
    if let Some(secret) = &args.admin_jwt_secret {
        secrets.push(secret.expose().to_owned());
    }
    anyhow::ensure!(secrets.iter().all(|s| s.len() >= 32), "every admin JWT secret must be at least 32 bytes");
    Ok(secrets)
}

fn public_key(path: &Path) -> anyhow::Result<Key> {
    let pem = std::fs::read(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let kid = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_owned();
    Ok(Key { kid, key: DecodingKey::from_rsa_pem(&pem)? })
}

impl Verifier {
    /// `None` when no secret and no public key is configured.
    ///
    /// # Errors
    /// Both kinds configured, a secret under 32 bytes, or an unreadable or malformed public key.
    pub fn from_args(args: &AdminArgs, revoked: Arc<RevokedTokens>) -> anyhow::Result<Option<Self>> {
        let secrets = secrets(args)?;
        let (keys, algorithm) = match (secrets.is_empty(), args.admin_jwt_public_key.is_empty()) {
            (true, true) => return Ok(None),
            (false, false) => anyhow::bail!("set either admin JWT secrets or public keys, not both"),
            (false, true) => {
                let keys = secrets.iter().map(|s| Ok(Key { kid: secret_kid(s), key: DecodingKey::from_secret(s.as_bytes())? }));
                (keys.collect::<anyhow::Result<Vec<_>>>()?, Algorithm::HS256)
            }
            (true, false) => {
                (args.admin_jwt_public_key.iter().map(|p| public_key(p)).collect::<anyhow::Result<Vec<_>>>()?, Algorithm::RS256)
            }
        };
        let mut validation = Validation::new(algorithm);
        validation.set_required_spec_claims(&["exp", "sub", "iss", "aud"]);
        validation.set_issuer(&[&args.admin_jwt_issuer]);
        validation.set_audience(&[&args.admin_jwt_audience]);
        validation.leeway = LEEWAY_S;
        let max_lifetime_s = u64::from(args.admin_jwt_max_lifetime_hours) * 3600;
        Ok(Some(Self { keys, validation, max_lifetime_s, revoked }))
    }

    /// The longest a token may live, in seconds.
    #[must_use]
    pub fn max_lifetime_s(&self) -> u64 {
        self.max_lifetime_s
    }

    /// # Errors
    /// [`ApiError::AdminUnauthorized`] for a token that is not accepted; the message says why.
    pub fn verify(&self, token: &str) -> Result<Claims, ApiError> {
        let refuse = |why: String| ApiError::AdminUnauthorized(format!("invalid admin token: {why}"));
        let header = jsonwebtoken::decode_header(token).map_err(|e| refuse(e.to_string()))?;
        let candidates: Vec<&Key> = match &header.kid {
            Some(kid) => self.keys.iter().filter(|k| &k.kid == kid).collect(),
            None => self.keys.iter().collect(),
        };
        if candidates.is_empty() {
            return Err(refuse("its `kid` names no accepted key".into()));
        }
        let mut last = None;
        let claims = candidates.iter().find_map(|k| match jsonwebtoken::decode::<Claims>(token, &k.key, &self.validation) {
            Ok(data) => Some(data.claims),
            Err(e) => {
                last = Some(e);
                None
            }
        });
        let claims = claims.ok_or_else(|| refuse(last.map_or_else(|| "not verified".into(), |e| e.to_string())))?;
        let now = chrono::Utc::now().timestamp().unsigned_abs();
        let iat = claims.iat.ok_or_else(|| refuse("`iat` is required".into()))?;
        if iat > now + LEEWAY_S {
            return Err(refuse("`iat` is in the future".into()));
        }
        if claims.exp.saturating_sub(iat) > self.max_lifetime_s {
            return Err(refuse(format!("it lives longer than the {} hours a token may", self.max_lifetime_s / 3600)));
        }
        let jti = claims.jti.as_deref().filter(|j| !j.is_empty()).ok_or_else(|| refuse("`jti` is required".into()))?;
        if self.revoked.contains(jti) {
            return Err(refuse("it has been revoked".into()));
        }
        Ok(claims)
    }
}

/// Seconds of clock difference forgiven on `exp` and `iat`.
const LEEWAY_S: u64 = 5;

/// Signs an HS256 token with the default issuer and audience (tests, and [`issue_as`]'s callers that
/// keep the defaults).
///
/// # Errors
/// Signing errors.
pub fn issue(secret: &str, claims: &Claims) -> anyhow::Result<String> {
    issue_as(secret, claims, DEFAULT_ISSUER, DEFAULT_AUDIENCE)
}

/// Signs an HS256 token with `kid` naming the secret (the CLI's `issue-admin-token`).
///
/// # Errors
/// Signing errors.
pub fn issue_as(secret: &str, claims: &Claims, iss: &str, aud: &str) -> anyhow::Result<String> {
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(secret_kid(secret));
    let body = Issued { claims, iss, aud };
    Ok(jsonwebtoken::encode(&header, &body, &EncodingKey::from_secret(secret.as_bytes())?)?)
}

impl Claims {
    /// # Errors
    /// [`ApiError::Forbidden`] when the token lacks `role`.
    pub fn require(&self, role: Role) -> Result<(), ApiError> {
        if self.roles.iter().any(|r| r == role.name()) {
            Ok(())
        } else {
            Err(ApiError::Forbidden(role.name()))
        }
    }

    /// For actions whose effect reaches past one tenant's own data: minting credit, model access, the
    /// catalog and workers (shared by every tenant, and where prompts are sent), tenant creation, the audit
    /// log, staff token revocation. A confined token is refused with 403 whatever tenant it names, so the
    /// answer says nothing about whether another tenant exists.
    ///
    /// # Errors
    /// [`ApiError::Forbidden`] when the token lacks `role` or is confined to a tenant.
    pub fn require_unconfined(&self, role: Role) -> Result<(), ApiError> {
        self.require(role)?;
        if self.tenant_id.is_some() {
            return Err(ApiError::Forbidden(role.unconfined_name()));
        }
        Ok(())
    }

    /// The tenant a query may read: the token's own when it is confined to one (asking for another is
    /// "not found"), otherwise what was asked.
    ///
    /// # Errors
    /// [`ApiError::NotFound`] when a confined token asks for another tenant.
    pub fn tenant_scope(&self, asked: Option<Uuid>) -> Result<Option<Uuid>, ApiError> {
        match (self.tenant_id, asked) {
            (Some(own), Some(asked)) if own != asked => Err(ApiError::NotFound(format!("tenant {asked}"))),
            (Some(own), _) => Ok(Some(own)),
            (None, asked) => Ok(asked),
        }
    }
}

/// The verifier of staff tokens, taken from the application's state (`None` when no key is
/// configured: the admin API then answers 503).
#[derive(Debug, Clone)]
pub struct StaffTokens(pub Option<std::sync::Arc<Verifier>>);

impl<S> FromRequestParts<S> for Claims
where
    S: Send + Sync,
    StaffTokens: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let StaffTokens(verifier) = StaffTokens::from_ref(state);
        let verifier = verifier.ok_or(ApiError::AdminDisabled)?;
        let header = parts.headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or("");
        let token = header
            .strip_prefix("Bearer ")
            .map(str::trim)
            .ok_or_else(|| ApiError::AdminUnauthorized("send an admin JWT as `Authorization: Bearer <token>`".into()))?;
        verifier.verify(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "a-test-secret-of-at-least-32-bytes-long";

    fn verifier(args: AdminArgs) -> (Verifier, Arc<RevokedTokens>) {
        let revoked = Arc::new(RevokedTokens::default());
        (Verifier::from_args(&args, Arc::clone(&revoked)).unwrap().unwrap(), revoked)
    }

    fn args(secret: &str) -> AdminArgs {
        AdminArgs { admin_jwt_secret: Some(secret.into()), ..AdminArgs::default() }
    }

    fn claims(lifetime_s: u64) -> Claims {
        Claims::new("tester", vec!["admin".into()], None, lifetime_s)
    }

    fn refusal(verifier: &Verifier, token: &str) -> String {
        verifier.verify(token).unwrap_err().to_string()
    }

    #[test]
    fn issuer_and_audience_are_checked() {
        let (v, _) = verifier(args(SECRET));
        assert!(v.verify(&issue(SECRET, &claims(60)).unwrap()).is_ok());
        assert!(refusal(&v, &issue_as(SECRET, &claims(60), "someone-else", DEFAULT_AUDIENCE).unwrap()).contains("Issuer"));
        assert!(refusal(&v, &issue_as(SECRET, &claims(60), DEFAULT_ISSUER, "another-service").unwrap()).contains("Audience"));
        let (custom, _) = verifier(AdminArgs { admin_jwt_audience: "ours".into(), ..args(SECRET) });
        assert!(custom.verify(&issue_as(SECRET, &claims(60), DEFAULT_ISSUER, "ours").unwrap()).is_ok());
        assert!(custom.verify(&issue(SECRET, &claims(60)).unwrap()).is_err());
    }

    #[test]
    fn a_token_living_longer_than_the_maximum_or_without_iat_or_jti_is_refused() {
        let (v, _) = verifier(AdminArgs { admin_jwt_max_lifetime_hours: 2, ..args(SECRET) });
        assert!(v.verify(&issue(SECRET, &claims(2 * 3600)).unwrap()).is_ok());
        assert!(refusal(&v, &issue(SECRET, &claims(2 * 3600 + 60)).unwrap()).contains("lives longer"));
        let mut no_iat = claims(60);
        no_iat.iat = None;
        assert!(refusal(&v, &issue(SECRET, &no_iat).unwrap()).contains("iat"));
        let mut future = claims(60);
        future.iat = future.iat.map(|t| t + 3600);
        future.exp += 3600;
        assert!(refusal(&v, &issue(SECRET, &future).unwrap()).contains("future"));
        let mut no_jti = claims(60);
        no_jti.jti = None;
        assert!(refusal(&v, &issue(SECRET, &no_jti).unwrap()).contains("jti"));
    }

    #[test]
    fn several_keys_are_accepted_and_kid_picks_one() {
        let dir = std::env::temp_dir().join(format!("runaii-jwt-{}", Uuid::now_v7()));
        std::fs::create_dir_all(&dir).unwrap();
        let (old, new) = ("the-old-secret-of-at-least-32-bytes!!", "the-new-secret-of-at-least-32-bytes!!");
        std::fs::write(dir.join("secrets"), format!("{new}\n{old}\n")).unwrap();
        let (v, _) = verifier(AdminArgs { admin_jwt_secret_file: Some(dir.join("secrets")), ..AdminArgs::default() });
        assert!(v.verify(&issue(old, &claims(60)).unwrap()).is_ok());
        assert!(v.verify(&issue(new, &claims(60)).unwrap()).is_ok());
        assert!(refusal(&v, &issue("a-third-secret-of-at-least-32-bytes!!", &claims(60)).unwrap()).contains("kid"));
        // A token whose `kid` names one key but is signed by another is refused.
        let token = issue(old, &claims(60)).unwrap();
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(secret_kid(new));
        let body = Issued { claims: &claims(60), iss: DEFAULT_ISSUER, aud: DEFAULT_AUDIENCE };
        let forged = jsonwebtoken::encode(&header, &body, &EncodingKey::from_secret(old.as_bytes()).unwrap()).unwrap();
        assert!(v.verify(&token).is_ok() && v.verify(&forged).is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_revoked_jti_is_refused() {
        let (v, revoked) = verifier(args(SECRET));
        let claims = claims(60);
        let token = issue(SECRET, &claims).unwrap();
        assert!(v.verify(&token).is_ok());
        revoked.add(claims.jti.as_deref().unwrap());
        assert!(refusal(&v, &token).contains("revoked"));
    }
}
