//! Tenants: creating one (admin API), or finding one by name and creating it when missing (command line);
//! changing a tenant's cap on requests in flight (admin API).

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{audit, snapshot, Actor, OpError};
use crate::db::{notify, tenants as rows};
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

/// Sets a tenant's cap on requests in flight. Every replica sees it within the key cache's lifetime:
/// the cap rides with each of the tenant's keys, whose cached entries are dropped on commit.
///
/// # Errors
/// [`OpError::Invalid`] for a cap of 0 or above [`MAX_CONCURRENT_CAP`], [`OpError::NotFound`] for an
/// unknown tenant.
pub async fn set_max_concurrent(db: &sqlx::PgPool, actor: Actor<'_>, id: Uuid, cap: u32) -> Result<Tenant, OpError> {
    let cap = i32::try_from(cap)
        .ok()
        .filter(|c| (1..=MAX_CONCURRENT_CAP).contains(c))
        .ok_or_else(|| OpError::invalid(format!("max_concurrent_requests must be 1 to {MAX_CONCURRENT_CAP}"), "max_concurrent_requests"))?;
    let not_found = || OpError::NotFound(format!("tenant {id}"));
    let mut tx = db.begin().await?;
    let before = rows::list(&mut *tx, Some(id)).await?.pop().ok_or_else(not_found)?;
    let keys = rows::set_max_concurrent(&mut tx, id, cap).await?.ok_or_else(not_found)?;
    let after = rows::list(&mut *tx, Some(id)).await?.pop().ok_or_else(not_found)?;
    let (before, after) = (Tenant::from(&before), Tenant::from(&after));
    audit(&mut tx, actor, "tenant.update", ("tenant", id.to_string()), snapshot(&before), snapshot(&after)).await?;
    for public_id in keys {
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
