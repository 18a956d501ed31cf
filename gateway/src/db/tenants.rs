//! Tenants and their money at a glance.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

#[derive(Debug, Clone, Serialize)]
pub struct Tenant {
    pub id: Uuid,
    pub name: String,
    pub balance: Decimal,
    /// Held for requests in flight and leased to gateway replicas (`leased` of it).
    pub reserved: Decimal,
    pub leased: Decimal,
    /// Requests the tenant may have in flight at once, over every replica.
    pub max_concurrent_requests: i32,
    pub created_at: DateTime<Utc>,
}

impl Tenant {
    /// What the tenant's requests in flight hold with holds of their own (the leases excluded: their
    /// credit stays the tenant's, set aside for its next requests).
    #[must_use]
    pub fn held(&self) -> Decimal {
        self.reserved - self.leased
    }
}

/// The id of the tenant called `name`.
///
/// # Errors
/// Database errors.
pub async fn find(db: &PgPool, name: &str) -> Result<Option<Uuid>, sqlx::Error> {
    sqlx::query_scalar!("SELECT id FROM tenants WHERE name = $1", name).fetch_optional(db).await
}

/// # Errors
/// Database errors; a unique violation when the name is taken.
pub async fn create(tx: &mut sqlx::PgConnection, name: &str) -> Result<Tenant, sqlx::Error> {
    sqlx::query_as!(
        Tenant,
        r#"INSERT INTO tenants (id, name) VALUES ($1, $2) RETURNING id, name, balance, reserved, 0::numeric AS "leased!", max_concurrent_requests, created_at"#,
        Uuid::now_v7(),
        name,
    )
    .fetch_one(tx)
    .await
}

/// One tenant, or every tenant when `id` is `None`.
///
/// # Errors
/// Database errors.
pub async fn list<'e>(db: impl sqlx::PgExecutor<'e>, id: Option<Uuid>) -> Result<Vec<Tenant>, sqlx::Error> {
    // `leased!`: the COALESCEd sum is never NULL, but a computed column's nullability is unknown to the macros.
    sqlx::query_as!(
        Tenant,
        r#"SELECT id, name, balance, reserved,
                  COALESCE((SELECT sum(amount) FROM credit_leases l WHERE l.tenant_id = t.id), 0) AS "leased!",
                  max_concurrent_requests, created_at
           FROM tenants t WHERE $1::uuid IS NULL OR id = $1 ORDER BY created_at"#,
        id,
    )
    .fetch_all(db)
    .await
}

/// Sets the tenant's cap on requests in flight; its keys' public ids, for the replicas' key caches (the
/// cap rides with each key). `None` for an unknown tenant.
///
/// # Errors
/// Database errors; a check violation for a cap below 1.
pub async fn set_max_concurrent(tx: &mut sqlx::PgConnection, id: Uuid, cap: i32) -> Result<Option<Vec<String>>, sqlx::Error> {
    let updated = sqlx::query_scalar!("UPDATE tenants SET max_concurrent_requests = $2 WHERE id = $1 RETURNING id", id, cap)
        .fetch_optional(&mut *tx)
        .await?;
    if updated.is_none() {
        return Ok(None);
    }
    let keys = sqlx::query_scalar!("SELECT public_id FROM api_keys WHERE tenant_id = $1", id).fetch_all(&mut *tx).await?;
    Ok(Some(keys))
}
