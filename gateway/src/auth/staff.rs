//! Admin bearer tokens: JWTs signed with HS256 (a shared secret) or RS256 (verified with a public key),
//! with a required `exp` and the roles they carry. An API key is not a JWT and never opens this API.

use axum::extract::{FromRef, FromRequestParts};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::config::AdminArgs;
use crate::error::ApiError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The catalog: models, prices, workers.
    Ops,
    /// Cost records, totals, the credit ledger.
    Finance,
    /// Tenants, keys, credit grants, model access, the audit log.
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
    #[serde(default)]
    pub roles: Vec<String>,
    /// When set, the token sees and changes only this tenant's data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<Uuid>,
}

/// Checks tokens against the configured key.
pub struct Verifier {
    key: DecodingKey,
    validation: Validation,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier").field("algorithms", &self.validation.algorithms).finish_non_exhaustive()
    }
}

impl Verifier {
    /// `None` when neither a secret nor a public key is configured.
    ///
    /// # Errors
    /// Both configured, an empty secret, or an unreadable or malformed public key.
    pub fn from_args(args: &AdminArgs) -> anyhow::Result<Option<Self>> {
        let (key, algorithm) = match (&args.admin_jwt_secret, &args.admin_jwt_public_key) {
            (None, None) => return Ok(None),
            (Some(_), Some(_)) => anyhow::bail!("set either the admin JWT secret or its public key, not both"),
            (Some(secret), None) => {
                let secret = secret.expose();
                anyhow::ensure!(secret.len() >= 32, "the admin JWT secret must be at least 32 bytes");
                (DecodingKey::from_secret(secret.as_bytes())?, Algorithm::HS256)
            }
            (None, Some(path)) => {
                let pem = std::fs::read(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
                (DecodingKey::from_rsa_pem(&pem)?, Algorithm::RS256)
            }
        };
        let mut validation = Validation::new(algorithm);
        validation.set_required_spec_claims(&["exp", "sub"]);
        validation.leeway = 5;
        Ok(Some(Self { key, validation }))
    }

    /// # Errors
    /// [`ApiError::AdminUnauthorized`] for a missing `exp`, an expired token, a bad signature or another
    /// algorithm than the configured one.
    pub fn verify(&self, token: &str) -> Result<Claims, ApiError> {
        jsonwebtoken::decode::<Claims>(token, &self.key, &self.validation)
            .map(|data| data.claims)
            .map_err(|e| ApiError::AdminUnauthorized(format!("invalid admin token: {e}")))
    }
}

/// Signs an HS256 token (the CLI's `issue-admin-token`, and tests).
///
/// # Errors
/// Signing errors.
pub fn issue(secret: &str, claims: &Claims) -> anyhow::Result<String> {
    Ok(jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &EncodingKey::from_secret(secret.as_bytes())?)?)
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
    /// log. A confined token is refused with 403 whatever tenant it names, so the answer says nothing about
    /// whether another tenant exists.
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
