//! The `Caller` extractor: a request's authenticated tenant and key.

use std::sync::Arc;

use axum::extract::{FromRef, FromRequestParts};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use chrono::Utc;
use runaii_wire::priority::Priority;
use sqlx::PgPool;
use uuid::Uuid;

use super::attempts::{FailedAuth, Source, Verdict};
use super::{Cached, KeyCache};
use crate::db::keys::KeyRow;
use crate::error::ApiError;
use crate::ratelimit::{Budgets, Limits};

/// What checking a key needs, taken from the application's state.
#[derive(Debug, Clone)]
pub struct KeyCheck {
    pub cache: Arc<KeyCache>,
    /// Failed authentications per source address.
    pub failures: Arc<FailedAuth>,
    pub db: PgPool,
    /// The limits of a key that sets none.
    pub defaults: Limits,
}

#[derive(Debug, Clone, Copy)]
pub struct Caller {
    pub tenant_id: Uuid,
    pub key_id: Uuid,
    /// The key's own limits, or the gateway's defaults; either way at most its tenant's caps.
    pub limits: Limits,
    /// The tenant's requests and tokens per minute across all its keys, when it has either cap (the
    /// other is then unbounded).
    pub tenant_limits: Option<Limits>,
    /// The USD the tenant's cost records may reach this month, when it has a cap.
    pub monthly_spend_cap: Option<rust_decimal::Decimal>,
    /// The tenant's cap on requests in flight (`concurrency`).
    pub max_concurrent: u32,
    /// The class its requests run in: `Online`, or `Batch` for a batch's lines, which run at the
    /// model's batch price, after online requests at the worker, outside the online rate limits.
    pub priority: Priority,
}

impl Caller {
    /// What the rate limiter admits this caller's requests against.
    #[must_use]
    pub fn budgets(&self) -> Budgets {
        Budgets { key_id: self.key_id, key: self.limits, tenant: self.tenant_limits.map(|limits| (self.tenant_id, limits)) }
    }
}

/// Compared against when the public id is unknown, so a miss costs the same hash and compare as a hit.
const DUMMY_HASH: [u8; 32] = [0; 32];

impl<S> FromRequestParts<S> for Caller
where
    S: Send + Sync,
    KeyCheck: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let check = KeyCheck::from_ref(state);
        let source = Source::from_extensions(&parts.extensions);
        let token = presented_key(&parts.headers).ok_or(ApiError::InvalidApiKey)?;
        match check.authenticate(token, source).await {
            Err(Refusal::Invalid) => Err(match check.failures.fail(source) {
                Verdict::Counted => ApiError::InvalidApiKey,
                Verdict::Limited(wait) => ApiError::TooManyFailedAuthentications { retry_after: wait },
            }),
            Err(Refusal::Limited(wait)) => Err(ApiError::TooManyFailedAuthentications { retry_after: wait }),
            Err(Refusal::Failed(e)) => Err(e),
            Ok(caller) => Ok(caller),
        }
    }
}

/// Why a key was not accepted.
enum Refusal {
    /// A wrong key: counted against the source.
    Invalid,
    /// The source spent its allowance and the key is not one this replica knows.
    Limited(std::time::Duration),
    Failed(ApiError),
}

impl KeyCheck {
    /// The key's tenant and limits. Only a well-shaped key unknown to the cache costs a database read,
    /// and not for a source past its allowance of failures.
    async fn authenticate(&self, token: &str, source: Source) -> Result<Caller, Refusal> {
        let key = super::parse(token).ok_or(Refusal::Invalid)?;
        let row = match self.cache.cached(key.public_id) {
            Cached::Fresh(row) => row,
            // A key that existed is read again whoever asks: at most once per TTL, and a limited source's
            // neighbours keep working.
            Cached::Stale => self.cache.load(&self.db, key.public_id).await.map_err(|e| Refusal::Failed(e.into()))?,
            Cached::Unknown => {
                if let Some(wait) = self.failures.limited(source) {
                    return Err(Refusal::Limited(wait));
                }
                self.cache.load(&self.db, key.public_id).await.map_err(|e| Refusal::Failed(e.into()))?
            }
        };
        let stored = row.as_ref().map_or(&DUMMY_HASH[..], |r| &r.secret_hash[..]);
        let matches = key.matches(stored);
        let row = row.filter(|_| matches).ok_or(Refusal::Invalid)?;
        self.caller_of(&row).ok_or(Refusal::Invalid)
    }

    /// The caller a key's row stands for, online, unless the key is revoked or expired.
    fn caller_of(&self, row: &KeyRow) -> Option<Caller> {
        let now = Utc::now();
        if row.revoked_at.is_some_and(|t| t <= now) || row.expires_at.is_some_and(|t| t <= now) {
            return None;
        }
        let own = |limit: Option<i32>| limit.and_then(|n| u32::try_from(n).ok());
        let (tenant_rpm, tenant_tpm) = (own(row.tenant_rpm_limit), own(row.tenant_tpm_limit));
        // A key set before its tenant's cap was lowered (or left at the defaults) gets no more than the cap.
        let at_most = |limit: u32, cap: Option<u32>| cap.map_or(limit, |cap| limit.min(cap));
        let limits = Limits {
            requests_per_minute: at_most(own(row.rpm_limit).unwrap_or(self.defaults.requests_per_minute), tenant_rpm),
            tokens_per_minute: at_most(own(row.tpm_limit).unwrap_or(self.defaults.tokens_per_minute), tenant_tpm),
        };
        let tenant_limits = (tenant_rpm.is_some() || tenant_tpm.is_some())
            .then(|| Limits { requests_per_minute: tenant_rpm.unwrap_or(u32::MAX), tokens_per_minute: tenant_tpm.unwrap_or(u32::MAX) });
        let max_concurrent = u32::try_from(row.tenant_max_concurrent).unwrap_or(1).max(1);
        Some(Caller {
            tenant_id: row.tenant_id,
            key_id: row.id,
            limits,
            tenant_limits,
            monthly_spend_cap: row.monthly_spend_cap,
            max_concurrent,
            priority: Priority::Online,
        })
    }

    /// The caller for key `id` in the `batch` class, read afresh: for the lines of a batch the key
    /// created. `None` once the key is revoked or expired (its lines then fail, unrun).
    ///
    /// # Errors
    /// Database errors.
    pub async fn batch_caller(&self, id: Uuid) -> Result<Option<Caller>, sqlx::Error> {
        let row = crate::db::keys::find_by_id(&self.db, id).await?;
        Ok(row.and_then(|row| self.caller_of(&row)).map(|caller| Caller { priority: Priority::Batch, ..caller }))
    }
}

/// The key from `Authorization: Bearer …`, or from `x-api-key` (what Anthropic's clients send).
#[must_use]
pub fn presented_key(headers: &axum::http::HeaderMap) -> Option<&str> {
    let bearer = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|h| h.strip_prefix("Bearer "));
    let key = bearer.or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()))?;
    Some(key.trim())
}

/// The caller when a key is presented, `None` when none is, an error when a presented key is bad: for
/// routes that anyone may read but a key holder sees more of.
#[derive(Debug, Clone, Copy)]
pub struct MaybeCaller(pub Option<Caller>);

impl<S> FromRequestParts<S> for MaybeCaller
where
    S: Send + Sync,
    KeyCheck: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        if presented_key(&parts.headers).is_none() {
            return Ok(Self(None));
        }
        Caller::from_request_parts(parts, state).await.map(|c| Self(Some(c)))
    }
}
