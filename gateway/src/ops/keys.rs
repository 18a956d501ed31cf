//! API keys: creating one (its secret is returned this once and never stored), changing its expiry and
//! limits, revoking it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::{audit, snapshot, Actor, OpError};
use crate::auth;
use crate::db::keys::{self, KeyInfo, NewKey};
use crate::db::notify;

/// A new key's label, expiry and limits (requests and tokens per minute, positive).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KeySpec {
    #[serde(default)]
    pub name: String,
    pub expires_at: Option<DateTime<Utc>>,
    pub rpm_limit: Option<i32>,
    pub tpm_limit: Option<i32>,
}

/// Fields to change on a key; `null` clears an expiry or a limit, an absent field is left alone.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyUpdate {
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<DateTime<Utc>>)]
    pub expires_at: Option<Option<DateTime<Utc>>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i32>)]
    pub rpm_limit: Option<Option<i32>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i32>)]
    pub tpm_limit: Option<Option<i32>>,
}

/// A new key, with its secret: shown this once.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CreatedKey {
    #[serde(flatten)]
    pub info: KeyInfo,
    /// The whole key, `rk-<public id>-<secret>`.
    pub key: String,
}

/// Keys a tenant may have, revoked ones included (their rows are kept): customers create keys from the
/// console, and each is a row and an audit row.
pub const MAX_KEYS_PER_TENANT: i64 = 10_000;

/// # Errors
/// [`OpError::Invalid`] for a name over 200 characters, [`OpError::NotFound`] for an unknown tenant,
/// [`OpError::Conflict`] for a limit that is not positive or a tenant that has [`MAX_KEYS_PER_TENANT`].
pub async fn create(db: &sqlx::PgPool, actor: Actor<'_>, tenant: Uuid, spec: &KeySpec) -> Result<CreatedKey, OpError> {
    if spec.name.chars().count() > 200 {
        return Err(OpError::invalid("name must be at most 200 characters", "name"));
    }
    let (key, public_id, hash) = auth::generate();
    let mut tx = db.begin().await?;
    if keys::count(&mut tx, tenant).await? >= MAX_KEYS_PER_TENANT {
        return Err(OpError::Conflict(format!("the tenant has {MAX_KEYS_PER_TENANT} keys, the most it may have")));
    }
    let new = NewKey { name: &spec.name, expires_at: spec.expires_at, rpm_limit: spec.rpm_limit, tpm_limit: spec.tpm_limit };
    let info = keys::insert(&mut tx, tenant, &public_id, &hash, &new).await?;
    audit(&mut tx, actor, "key.create", ("api_key", info.id.to_string()), None, snapshot(&info)).await?;
    // A replica that was asked for this public id before remembers it as unknown (the negative cache).
    notify::key_changed(&mut tx, &info.public_id).await?;
    tx.commit().await?;
    Ok(CreatedKey { info, key })
}

/// `scope`: the one tenant whose keys the caller may touch (`None`: any); a key outside it is "not found".
///
/// # Errors
/// [`OpError::NotFound`] for an unknown key or one outside the scope, [`OpError::Conflict`] for a limit
/// that is not positive.
pub async fn update(db: &sqlx::PgPool, actor: Actor<'_>, key: Uuid, update: &KeyUpdate, scope: Option<Uuid>) -> Result<KeyInfo, OpError> {
    let mut tx = db.begin().await?;
    let before = in_scope(&mut tx, key, scope).await?;
    let after = keys::update(&mut tx, key, update.expires_at, update.rpm_limit, update.tpm_limit).await?.ok_or_else(|| not_found(key))?;
    audit(&mut tx, actor, "key.update", ("api_key", key.to_string()), snapshot(&before), snapshot(&after)).await?;
    notify::key_changed(&mut tx, &after.public_id).await?;
    tx.commit().await?;
    Ok(after)
}

/// Revokes a key (the first revocation time is kept); it stops working on every replica within the key
/// cache's lifetime.
///
/// # Errors
/// [`OpError::NotFound`] for an unknown key or one outside the scope.
pub async fn revoke(db: &sqlx::PgPool, actor: Actor<'_>, key: Uuid, scope: Option<Uuid>) -> Result<KeyInfo, OpError> {
    let mut tx = db.begin().await?;
    let before = in_scope(&mut tx, key, scope).await?;
    let after = keys::revoke(&mut tx, key).await?.ok_or_else(|| not_found(key))?;
    audit(&mut tx, actor, "key.revoke", ("api_key", key.to_string()), snapshot(&before), snapshot(&after)).await?;
    notify::key_changed(&mut tx, &after.public_id).await?;
    tx.commit().await?;
    Ok(after)
}

/// The key, locked for the change, if it is the scope's.
async fn in_scope(tx: &mut sqlx::PgConnection, key: Uuid, scope: Option<Uuid>) -> Result<KeyInfo, OpError> {
    let info = keys::info(tx, key).await?.ok_or_else(|| not_found(key))?;
    if scope.is_some_and(|tenant| tenant != info.tenant_id) {
        // Another tenant's key does not exist as far as this caller may know.
        return Err(not_found(key));
    }
    Ok(info)
}

fn not_found(key: Uuid) -> OpError {
    OpError::NotFound(format!("key {key}"))
}

/// For `Option<Option<T>>` fields: absent stays `None` (through `#[serde(default)]`), `null` becomes
/// `Some(None)`, a value `Some(Some(v))`.
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}
