//! The `Caller` extractor: a request's authenticated tenant and key.

use std::sync::Arc;

use axum::extract::{FromRef, FromRequestParts};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use chrono::Utc;
use sqlx::PgPool;
use uuid::Uuid;

use super::KeyCache;
use crate::error::ApiError;
use crate::ratelimit::{Budgets, Limits};

/// What checking a key needs, taken from the application's state.
#[derive(Debug, Clone)]
pub struct KeyCheck {
    pub cache: Arc<KeyCache>,
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
        let token = presented_key(&parts.headers).ok_or(ApiError::InvalidApiKey)?;
        let key = super::parse(token).ok_or(ApiError::InvalidApiKey)?;
        let row = check.cache.lookup(&check.db, key.public_id).await?;
        let stored = row.as_ref().map_or(&DUMMY_HASH[..], |r| &r.secret_hash[..]);
        let matches = key.matches(stored);
        let row = row.filter(|_| matches).ok_or(ApiError::InvalidApiKey)?;
        let now = Utc::now();
        if row.revoked_at.is_some_and(|t| t <= now) || row.expires_at.is_some_and(|t| t <= now) {
            return Err(ApiError::InvalidApiKey);
        }
        let own = |limit: Option<i32>| limit.and_then(|n| u32::try_from(n).ok());
        let (tenant_rpm, tenant_tpm) = (own(row.tenant_rpm_limit), own(row.tenant_tpm_limit));
        // A key set before its tenant's cap was lowered (or left at the defaults) gets no more than the cap.
        let at_most = |limit: u32, cap: Option<u32>| cap.map_or(limit, |cap| limit.min(cap));
        let limits = Limits {
            requests_per_minute: at_most(own(row.rpm_limit).unwrap_or(check.defaults.requests_per_minute), tenant_rpm),
            tokens_per_minute: at_most(own(row.tpm_limit).unwrap_or(check.defaults.tokens_per_minute), tenant_tpm),
        };
        let tenant_limits = (tenant_rpm.is_some() || tenant_tpm.is_some())
            .then(|| Limits { requests_per_minute: tenant_rpm.unwrap_or(u32::MAX), tokens_per_minute: tenant_tpm.unwrap_or(u32::MAX) });
        let max_concurrent = u32::try_from(row.tenant_max_concurrent).unwrap_or(1).max(1);
        Ok(Self {
            tenant_id: row.tenant_id,
            key_id: row.id,
            limits,
            tenant_limits,
            monthly_spend_cap: row.monthly_spend_cap,
            max_concurrent,
        })
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
