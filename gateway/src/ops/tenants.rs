//! Tenants: creating one (admin API), or finding one by name and creating it when missing (command line).

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{audit, snapshot, Actor, OpError};
use crate::db::tenants as rows;
use crate::shapes::{DecimalString, Usd};

/// A tenant and its money (USD, exact).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Tenant {
    pub id: Uuid,
    #[schema(pattern = "^tenant$")]
    pub object: &'static str,
    pub name: String,
    pub balance: DecimalString,
    pub reserved: DecimalString,
    pub available: DecimalString,
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
            reserved: t.reserved.into(),
            available: (t.balance - t.reserved).into(),
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

fn checked_name(name: &str) -> Result<&str, OpError> {
    let name = name.trim();
    if name.is_empty() || name.len() > 200 {
        return Err(OpError::invalid("name must be 1 to 200 characters", "name"));
    }
    Ok(name)
}
