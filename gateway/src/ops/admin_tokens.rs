//! Revoking a staff token by its `jti`, before it expires. The revocation is written, audited and
//! announced (`NOTIFY`) in one transaction; every replica then refuses the token within a second or so.

use chrono::Utc;
use serde::Deserialize;
use utoipa::ToSchema;

use super::{audit, snapshot, Actor, OpError};
use crate::db::admin_tokens::{self, Revocation};
use crate::db::notify;

/// Which token to revoke.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RevokeToken {
    /// The token's `jti` claim (1 to 200 characters).
    pub jti: String,
}

/// Revokes the token with `jti`; revoking it again answers the first revocation. The row is kept for
/// `max_lifetime_s` (no token with that `jti` can be accepted longer), then forgotten.
///
/// # Errors
/// [`OpError::Invalid`] for an empty `jti` or one over 200 characters.
pub async fn revoke(db: &sqlx::PgPool, actor: Actor<'_>, jti: &str, max_lifetime_s: u64) -> Result<Revocation, OpError> {
    if jti.is_empty() || jti.chars().count() > 200 {
        return Err(OpError::invalid("jti must be 1 to 200 characters", "jti"));
    }
    let kept_for = chrono::Duration::seconds(i64::try_from(max_lifetime_s).unwrap_or(i64::MAX / 2_000) + 60);
    let mut tx = db.begin().await?;
    let revocation = match admin_tokens::insert(&mut tx, jti, Utc::now() + kept_for, actor.0).await? {
        Some(new) => {
            audit(&mut tx, actor, "admin_token.revoke", ("admin_token", jti.to_owned()), None, snapshot(&new)).await?;
            notify::token_revoked(&mut tx, jti).await?;
            new
        }
        None => admin_tokens::find(&mut tx, jti).await?.ok_or_else(|| OpError::Conflict(format!("token {jti} is being revoked")))?,
    };
    tx.commit().await?;
    Ok(revocation)
}
