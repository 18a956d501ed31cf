//! Tenants, their money at a glance, and their caps.

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
    /// Tenant-wide requests and tokens per minute, across every key and replica (`None`: no cap).
    pub rpm_limit: Option<i32>,
    pub tpm_limit: Option<i32>,
    /// USD this month's cost records may reach (`None`: no cap).
    pub monthly_spend_cap: Option<Decimal>,
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
        r#"INSERT INTO tenants (id, name) VALUES ($1, $2) RETURNING id, name, balance, reserved, 0::numeric AS "leased!", created_at,
                     max_concurrent_requests, rpm_limit, tpm_limit, monthly_spend_cap"#,
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
                  COALESCE((SELECT sum(amount) FROM credit_leases l WHERE l.tenant_id = t.id), 0) AS "leased!", created_at,
                  max_concurrent_requests, rpm_limit, tpm_limit, monthly_spend_cap
           FROM tenants t WHERE $1::uuid IS NULL OR id = $1 ORDER BY created_at"#,
        id,
    )
    .fetch_all(db)
    .await
}

/// A tenant's per-minute caps, read in a change's transaction and locked against a concurrent change of
/// them (`None`: no such tenant).
///
/// # Errors
/// Database errors.
pub async fn minute_caps(tx: &mut sqlx::PgConnection, id: Uuid) -> Result<Option<(Option<i32>, Option<i32>)>, sqlx::Error> {
    let row = sqlx::query!("SELECT rpm_limit, tpm_limit FROM tenants WHERE id = $1 FOR SHARE", id).fetch_optional(tx).await?;
    Ok(row.map(|r| (r.rpm_limit, r.tpm_limit)))
}

/// Sets a tenant's caps (`None` leaves a field alone, `Some(None)` clears it); the tenant as it is after.
///
/// # Errors
/// Database errors (a cap that is not positive breaks a CHECK).
pub async fn set_caps(
    tx: &mut sqlx::PgConnection,
    id: Uuid,
    rpm_limit: Option<Option<i32>>,
    tpm_limit: Option<Option<i32>>,
    monthly_spend_cap: Option<Option<Decimal>>,
    max_concurrent_requests: Option<i32>,
) -> Result<Option<Tenant>, sqlx::Error> {
    sqlx::query_as!(
        Tenant,
        r#"UPDATE tenants t SET rpm_limit = CASE WHEN $2 THEN $3 ELSE rpm_limit END,
               tpm_limit = CASE WHEN $4 THEN $5 ELSE tpm_limit END,
               monthly_spend_cap = CASE WHEN $6 THEN $7 ELSE monthly_spend_cap END,
               max_concurrent_requests = COALESCE($8, max_concurrent_requests)
           WHERE id = $1
           RETURNING id, name, balance, reserved,
                     COALESCE((SELECT sum(amount) FROM credit_leases l WHERE l.tenant_id = t.id), 0) AS "leased!", created_at,
                     max_concurrent_requests, rpm_limit, tpm_limit, monthly_spend_cap"#,
        id,
        rpm_limit.is_some(),
        rpm_limit.flatten(),
        tpm_limit.is_some(),
        tpm_limit.flatten(),
        monthly_spend_cap.is_some(),
        monthly_spend_cap.flatten(),
        max_concurrent_requests,
    )
    .fetch_optional(tx)
    .await
}

/// The tenant locked for a change of its caps, as it is before.
///
/// # Errors
/// Database errors.
pub async fn lock(tx: &mut sqlx::PgConnection, id: Uuid) -> Result<Option<Tenant>, sqlx::Error> {
    sqlx::query_as!(
        Tenant,
        r#"SELECT id, name, balance, reserved,
                  COALESCE((SELECT sum(amount) FROM credit_leases l WHERE l.tenant_id = t.id), 0) AS "leased!", created_at,
                  max_concurrent_requests, rpm_limit, tpm_limit, monthly_spend_cap
           FROM tenants t WHERE id = $1 FOR UPDATE"#,
        id,
    )
    .fetch_optional(tx)
    .await
}

/// What the tenant's cost records since `from` add up to, in USD.
///
/// # Errors
/// Database errors.
pub async fn spent_since(db: &PgPool, id: Uuid, from: DateTime<Utc>) -> Result<Decimal, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT COALESCE(sum(cost), 0) AS "spent!" FROM cost_records WHERE tenant_id = $1 AND created_at >= $2"#,
        id,
        from
    )
    .fetch_one(db)
    .await
}
