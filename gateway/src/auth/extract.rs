//! The `Caller` extractor: a request's authenticated tenant and key.

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use chrono::Utc;
use uuid::Uuid;

use crate::error::ApiError;
use crate::state::AppState;

#[derive(Debug, Clone, Copy)]
pub struct Caller {
    pub tenant_id: Uuid,
    pub key_id: Uuid,
}

/// Compared against when the public id is unknown, so a miss costs the same hash and compare as a hit.
const DUMMY_HASH: [u8; 32] = [0; 32];

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let header = parts.headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or("");
        let token = header.strip_prefix("Bearer ").map(str::trim).ok_or(ApiError::InvalidApiKey)?;
        let key = super::parse(token).ok_or(ApiError::InvalidApiKey)?;
        let row = state.keys.lookup(&state.db, key.public_id).await?;
        let stored = row.as_ref().map_or(&DUMMY_HASH[..], |r| &r.secret_hash[..]);
        let matches = key.matches(stored);
        let row = row.filter(|_| matches).ok_or(ApiError::InvalidApiKey)?;
        let now = Utc::now();
        if row.revoked_at.is_some_and(|t| t <= now) || row.expires_at.is_some_and(|t| t <= now) {
            return Err(ApiError::InvalidApiKey);
        }
        Ok(Self { tenant_id: row.tenant_id, key_id: row.id })
    }
}
