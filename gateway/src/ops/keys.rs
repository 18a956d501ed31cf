//! API keys: creating one (its secret is returned this once and never stored), changing its expiry and
//! limits, revoking it (and, when asked, every key minted from it).
//!
//! A key's own limits are at most its tenant's caps: a limit above one is refused by name. A key created
//! with a key (a customer's console session) is bounded by that key too: it expires no later and has no
//! higher limits (unset fields are inherited), and it records its parent, so that revoking the parent can
//! revoke it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::{audit, snapshot, Actor, OpError};
use crate::auth;
use crate::db::keys::{self, KeyInfo, NewKey};
use crate::db::{notify, tenants};

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

/// A revoked key, and the keys minted from it that were revoked with it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RevokedKey {
    #[serde(flatten)]
    pub info: KeyInfo,
    /// The ids of the keys minted from this one (however deep) revoked with it; empty unless asked for.
    pub also_revoked: Vec<Uuid>,
}

/// Keys a tenant may have, revoked ones included (their rows are kept): customers create keys from the
/// console, and each is a row and an audit row.
pub const MAX_KEYS_PER_TENANT: i64 = 10_000;

/// # Errors
/// [`OpError::Invalid`] for a name over 200 characters or a limit above the tenant's cap,
/// [`OpError::NotFound`] for an unknown tenant, [`OpError::Conflict`] for a limit that is not positive or
/// a tenant that has [`MAX_KEYS_PER_TENANT`].
pub async fn create(db: &sqlx::PgPool, actor: Actor<'_>, tenant: Uuid, spec: &KeySpec) -> Result<CreatedKey, OpError> {
    insert(db, actor, tenant, spec, None).await
}

/// A key created with the key `parent` (a customer signed in with it): in the parent's tenant, expiring
/// no later than the parent and limited no higher; fields the spec leaves unset are the parent's.
///
/// # Errors
/// As [`create`]; [`OpError::Invalid`] for an expiry after the parent's or a limit above the parent's,
/// [`OpError::NotFound`] for an unknown parent.
pub async fn create_from_key(db: &sqlx::PgPool, actor: Actor<'_>, parent: Uuid, spec: &KeySpec) -> Result<CreatedKey, OpError> {
    let mut tx = db.begin().await?;
    let parent = keys::info(&mut tx, parent).await?.ok_or_else(|| not_found(parent))?;
    tx.commit().await?;
    insert(db, actor, parent.tenant_id, spec, Some(&parent)).await
}

async fn insert(
    db: &sqlx::PgPool,
    actor: Actor<'_>,
    tenant: Uuid,
    spec: &KeySpec,
    parent: Option<&KeyInfo>,
) -> Result<CreatedKey, OpError> {
    if spec.name.chars().count() > 200 {
        return Err(OpError::invalid("name must be at most 200 characters", "name"));
    }
    let mut new =
        NewKey { name: &spec.name, expires_at: spec.expires_at, rpm_limit: spec.rpm_limit, tpm_limit: spec.tpm_limit, parent_key_id: None };
    if let Some(parent) = parent {
        new.expires_at = bounded(spec.expires_at, parent.expires_at, "expires_at", "the expiry of the key it is created with")?;
        new.rpm_limit = bounded(spec.rpm_limit, parent.rpm_limit, "rpm_limit", "the limit of the key it is created with")?;
        new.tpm_limit = bounded(spec.tpm_limit, parent.tpm_limit, "tpm_limit", "the limit of the key it is created with")?;
        new.parent_key_id = Some(parent.id);
    }
    let (key, public_id, hash) = auth::generate();
    let mut tx = db.begin().await?;
    within_caps(&mut tx, tenant, new.rpm_limit, new.tpm_limit).await?;
    if keys::count(&mut tx, tenant).await? >= MAX_KEYS_PER_TENANT {
        return Err(OpError::Conflict(format!("the tenant has {MAX_KEYS_PER_TENANT} keys, the most it may have")));
    }
    let info = keys::insert(&mut tx, tenant, &public_id, &hash, &new).await?;
    audit(&mut tx, actor, "key.create", ("api_key", info.id.to_string()), None, snapshot(&info)).await?;
    // A replica that was asked for this public id before remembers it as unknown (the negative cache).
    notify::key_changed(&mut tx, &info.public_id).await?;
    tx.commit().await?;
    Ok(CreatedKey { info, key })
}

/// `asked`, or `bound` when nothing is asked; refused by name when it is past `bound`.
fn bounded<T: PartialOrd + Copy + std::fmt::Display>(
    asked: Option<T>,
    bound: Option<T>,
    param: &'static str,
    what: &str,
) -> Result<Option<T>, OpError> {
    match (asked, bound) {
        (Some(asked), Some(bound)) if asked > bound => Err(OpError::invalid(format!("{param} {asked} is past {what} ({bound})"), param)),
        (None, bound) => Ok(bound),
        (asked, _) => Ok(asked),
    }
}

/// Refuses, by name, a key limit above its tenant's cap (the tenant's row is locked against a change of
/// its caps until the transaction ends).
async fn within_caps(tx: &mut sqlx::PgConnection, tenant: Uuid, rpm: Option<i32>, tpm: Option<i32>) -> Result<(), OpError> {
    let (rpm_cap, tpm_cap) = tenants::minute_caps(tx, tenant).await?.ok_or_else(|| OpError::NotFound(format!("tenant {tenant}")))?;
    for (limit, cap, param) in [(rpm, rpm_cap, "rpm_limit"), (tpm, tpm_cap, "tpm_limit")] {
        if let (Some(limit), Some(cap)) = (limit, cap) {
            if limit > cap {
                return Err(OpError::invalid(
                    format!("{param} {limit} is above the tenant's cap of {cap}; an admin sets tenant caps"),
                    param,
                ));
            }
        }
    }
    Ok(())
}

/// `scope`: the one tenant whose keys the caller may touch (`None`: any); a key outside it is "not found".
///
/// # Errors
/// [`OpError::NotFound`] for an unknown key or one outside the scope, [`OpError::Invalid`] for a limit
/// above the tenant's cap, [`OpError::Conflict`] for a limit that is not positive.
pub async fn update(db: &sqlx::PgPool, actor: Actor<'_>, key: Uuid, update: &KeyUpdate, scope: Option<Uuid>) -> Result<KeyInfo, OpError> {
    let mut tx = db.begin().await?;
    let before = in_scope(&mut tx, key, scope).await?;
    within_caps(&mut tx, before.tenant_id, update.rpm_limit.flatten(), update.tpm_limit.flatten()).await?;
    let after = keys::update(&mut tx, key, update.expires_at, update.rpm_limit, update.tpm_limit).await?.ok_or_else(|| not_found(key))?;
    audit(&mut tx, actor, "key.update", ("api_key", key.to_string()), snapshot(&before), snapshot(&after)).await?;
    notify::key_changed(&mut tx, &after.public_id).await?;
    tx.commit().await?;
    Ok(after)
}

/// Revokes a key (the first revocation time is kept), and with `cascade` every key minted from it, however
/// deep; they stop working on every replica within the key cache's lifetime. Each revocation is audited.
///
/// # Errors
/// [`OpError::NotFound`] for an unknown key or one outside the scope.
pub async fn revoke(db: &sqlx::PgPool, actor: Actor<'_>, key: Uuid, scope: Option<Uuid>, cascade: bool) -> Result<RevokedKey, OpError> {
    let mut tx = db.begin().await?;
    let before = in_scope(&mut tx, key, scope).await?;
    let after = keys::revoke(&mut tx, key).await?.ok_or_else(|| not_found(key))?;
    audit(&mut tx, actor, "key.revoke", ("api_key", key.to_string()), snapshot(&before), snapshot(&after)).await?;
    notify::key_changed(&mut tx, &after.public_id).await?;
    let mut also_revoked = Vec::new();
    // Minted keys are in the revoked key's tenant (a key mints only in its own): the scope holds for them.
    for before in if cascade { keys::minted_from(&mut tx, key).await? } else { Vec::new() } {
        let after = keys::revoke(&mut tx, before.id).await?.ok_or_else(|| not_found(before.id))?;
        audit(&mut tx, actor, "key.revoke", ("api_key", after.id.to_string()), snapshot(&before), snapshot(&after)).await?;
        notify::key_changed(&mut tx, &after.public_id).await?;
        also_revoked.push(after.id);
    }
    tx.commit().await?;
    Ok(RevokedKey { info: after, also_revoked })
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
pub(super) fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}
