//! Tenants: creating one (admin API), or finding one by name and creating it when missing (command line),
//! and setting its caps (requests and tokens per minute across all its keys, requests in flight, and a
//! monthly spend cap). Only unconfined staff call [`set_caps`]: a tenant's own token must not lift its caps.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::keys::present;
use super::{audit, snapshot, Actor, OpError};
use crate::db::{keys, notify, tenants as rows};
use crate::shapes::{DecimalString, Usd};

/// A tenant and its money (USD, exact).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Tenant {
    pub id: Uuid,
    #[schema(pattern = "^tenant$")]
    pub object: &'static str,
    pub name: String,
    pub balance: DecimalString,
    /// Held for requests in flight, each for its worst-case cost.
    pub reserved: DecimalString,
    /// Set aside on gateway replicas for the tenant's next requests (still the tenant's, and counted in
    /// `available`): each replica holds requests against its share without a round trip to the ledger.
    pub leased: DecimalString,
    /// `balance - reserved`: what new requests may use.
    pub available: DecimalString,
    /// Requests the tenant may have in flight at once, over every gateway replica; past it a request is
    /// a 429 `concurrency_limit_exceeded` with `retry-after`.
    pub max_concurrent_requests: i32,
    #[schema(inline)]
    pub currency: Usd,
    pub created_at: DateTime<Utc>,
    /// Requests per minute across all the tenant's keys and gateway replicas; `null`: no cap.
    pub rpm_limit: Option<i32>,
    /// Tokens (prompt + output) per minute across all its keys; `null`: no cap.
    pub tpm_limit: Option<i32>,
    /// USD its cost records may reach in a calendar month (UTC) before its requests are refused with
    /// `402 spend_cap_reached`; `null`: no cap.
    pub monthly_spend_cap: Option<DecimalString>,
}

/// Caps to change on a tenant; `null` removes a cap, an absent field is left alone.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CapsUpdate {
    /// Requests per minute across all the tenant's keys (positive).
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i32>)]
    pub rpm_limit: Option<Option<i32>>,
    /// Tokens per minute across all the tenant's keys (positive).
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i32>)]
    pub tpm_limit: Option<Option<i32>>,
    /// USD a month, as a decimal string: at least 0, below 10^12, at most 16 decimals.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, pattern = r"^[0-9]+(\.[0-9]+)?$", example = "500.00")]
    pub monthly_spend_cap: Option<Option<Decimal>>,
    /// Requests the tenant may have in flight at once, over every replica: 1 to 100,000.
    #[schema(minimum = 1, maximum = 100_000)]
    pub max_concurrent_requests: Option<u32>,
}

impl From<&rows::Tenant> for Tenant {
    fn from(t: &rows::Tenant) -> Self {
        Self {
            id: t.id,
            object: "tenant",
            name: t.name.clone(),
            balance: t.balance.into(),
            reserved: t.held().into(),
            leased: t.leased.into(),
            available: (t.balance - t.held()).into(),
            max_concurrent_requests: t.max_concurrent_requests,
            currency: Usd::Usd,
            created_at: t.created_at,
            rpm_limit: t.rpm_limit,
            tpm_limit: t.tpm_limit,
            monthly_spend_cap: t.monthly_spend_cap.map(DecimalString::from),
        }
    }
}

/// A new tenant; names are unique.
///
/// # Errors
/// [`OpError::Invalid`] for a name that is empty or longer than 200 characters, [`OpError::Conflict`]
/// when it is taken.
pub async fn create(db: &sqlx::PgPool, actor: Actor<'_>, name: &str) -> Result<Tenant, OpError> {
    let name = checked_name(name)?;
    let mut tx = db.begin().await?;
    let tenant = Tenant::from(&rows::create(&mut tx, name).await?);
    audit(&mut tx, actor, "tenant.create", ("tenant", tenant.id.to_string()), None, snapshot(&tenant)).await?;
    tx.commit().await?;
    Ok(tenant)
}

/// The id of the tenant called `name`, creating (and auditing) it when there is none.
///
/// # Errors
/// [`OpError::Invalid`] for a bad name; database errors.
pub async fn ensure(db: &sqlx::PgPool, actor: Actor<'_>, name: &str) -> Result<Uuid, OpError> {
    let name = checked_name(name)?;
    if let Some(id) = rows::find(db, name).await? {
        return Ok(id);
    }
    match create(db, actor, name).await {
        Ok(tenant) => Ok(tenant.id),
        // Created by someone else meanwhile.
        Err(OpError::Conflict(_)) => rows::find(db, name).await?.ok_or_else(|| OpError::NotFound(format!("tenant {name}"))),
        Err(e) => Err(e),
    }
}

/// The most a tenant's cap on requests in flight may be: far above what any fleet serves at once.
pub const MAX_CONCURRENT_CAP: i32 = 100_000;

/// Sets a tenant's caps, audited, and tells every replica that its keys' limits changed. Keys whose own
/// limits are above a lowered cap keep them, but are held to the cap (a key never gets more than its
/// tenant).
///
/// # Errors
/// [`OpError::NotFound`] for an unknown tenant, [`OpError::Invalid`] for a spend cap that is negative,
/// too large or too precise, or a cap in flight of 0 or above [`MAX_CONCURRENT_CAP`], [`OpError::Conflict`] for a per-minute cap that is not positive.
pub async fn set_caps(db: &sqlx::PgPool, actor: Actor<'_>, tenant: Uuid, caps: &CapsUpdate) -> Result<Tenant, OpError> {
    let max_concurrent = caps
        .max_concurrent_requests
        .map(|cap| {
            i32::try_from(cap).ok().filter(|c| (1..=MAX_CONCURRENT_CAP).contains(c)).ok_or_else(|| {
                OpError::invalid(format!("max_concurrent_requests must be 1 to {MAX_CONCURRENT_CAP}"), "max_concurrent_requests")
            })
        })
        .transpose()?;
    if let Some(Some(cap)) = caps.monthly_spend_cap {
        if cap.is_sign_negative() || cap >= Decimal::from(1_000_000_000_000_i64) || cap.scale() > 16 {
            return Err(OpError::invalid(
                "monthly_spend_cap must be at least 0, below 10^12, with at most 16 decimals",
                "monthly_spend_cap",
            ));
        }
    }
    let mut tx = db.begin().await?;
    let before = rows::lock(&mut tx, tenant).await?.ok_or_else(|| OpError::NotFound(format!("tenant {tenant}")))?;
    let after = rows::set_caps(&mut tx, tenant, caps.rpm_limit, caps.tpm_limit, caps.monthly_spend_cap, max_concurrent)
        .await?
        .ok_or_else(|| OpError::NotFound(format!("tenant {tenant}")))?;
    let (before, after) = (Tenant::from(&before), Tenant::from(&after));
    audit(&mut tx, actor, "tenant.caps", ("tenant", tenant.to_string()), snapshot(&before), snapshot(&after)).await?;
    // The caps travel with each key's cached row: every replica drops the tenant's keys.
    for public_id in keys::public_ids(&mut tx, tenant).await? {
        notify::key_changed(&mut tx, &public_id).await?;
    }
    tx.commit().await?;
    Ok(after)
}

fn checked_name(name: &str) -> Result<&str, OpError> {
    let name = name.trim();
    if name.is_empty() || name.len() > 200 {
        return Err(OpError::invalid("name must be 1 to 200 characters", "name"));
    }
    Ok(name)
}
