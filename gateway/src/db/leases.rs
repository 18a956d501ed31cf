//! Credit leases: a replica's slice of a tenant's available credit (see `billing::leases`). Taking one
//! moves credit into `tenants.reserved` in the same statement that checks it is available; returning one
//! moves it back.

use rust_decimal::Decimal;
use sqlx::PgPool;
use uuid::Uuid;

/// Takes `share` of the tenant's available credit (balance − reserved), at most `most`, into the
/// replica's lease; nothing when that would be less than `least`. Returns what was taken.
///
/// # Errors
/// Database errors.
pub async fn take(
    db: &PgPool,
    tenant: Uuid,
    replica: Uuid,
    (share, least, most): (Decimal, Decimal, Decimal),
) -> Result<Decimal, sqlx::Error> {
    // `amount!`: a CTE's column has no table to take NOT NULL from; it is `wanted.amount`, a product of
    // NOT NULL columns and bound values.
    let taken: Option<Decimal> = sqlx::query_scalar!(
        r#"WITH wanted AS (
             SELECT id, LEAST($4, (balance - reserved) * $3) AS amount FROM tenants WHERE id = $1 FOR UPDATE),
         tenant AS (
             UPDATE tenants SET reserved = reserved + wanted.amount FROM wanted
             WHERE tenants.id = wanted.id AND wanted.amount >= $5 AND wanted.amount > 0
             RETURNING wanted.amount),
         lease AS (
             INSERT INTO credit_leases (tenant_id, replica_id, amount) SELECT $1, $2, amount FROM tenant
             ON CONFLICT (tenant_id, replica_id) DO UPDATE SET amount = credit_leases.amount + EXCLUDED.amount)
         SELECT amount AS "amount!" FROM tenant"#,
        tenant,
        replica,
        share,
        most,
        least,
    )
    .fetch_optional(db)
    .await?;
    Ok(taken.unwrap_or(Decimal::ZERO))
}

/// Gives back `amount` of the replica's lease of the tenant's credit; nothing if the lease holds less
/// (the replica's own accounting says it cannot).
///
/// # Errors
/// Database errors.
pub async fn give_back(db: &PgPool, tenant: Uuid, replica: Uuid, amount: Decimal) -> Result<(), sqlx::Error> {
    let mut tx = db.begin().await?;
    // Tenant rows before lease rows, as settling takes them. (No columns: the lock is all that is wanted.)
    sqlx::query!("SELECT FROM tenants WHERE id = $1 FOR UPDATE", tenant).execute(&mut *tx).await?;
    let given = sqlx::query!(
        "UPDATE credit_leases SET amount = amount - $3 WHERE tenant_id = $1 AND replica_id = $2 AND amount >= $3",
        tenant,
        replica,
        amount,
    )
    .execute(&mut *tx)
    .await?;
    if given.rows_affected() > 0 {
        sqlx::query!("UPDATE tenants SET reserved = reserved - $2 WHERE id = $1", tenant, amount).execute(&mut *tx).await?;
    }
    tx.commit().await
}

/// Gives back every lease of the replicas `replicas` (at graceful shutdown, or for replicas that died).
///
/// # Errors
/// Database errors.
pub async fn give_back_all(tx: &mut sqlx::PgConnection, replicas: &[Uuid]) -> Result<(), sqlx::Error> {
    // Tenant rows before lease rows, as settling takes them. (No columns: the lock is all that is wanted.)
    sqlx::query!(
        "SELECT FROM tenants WHERE id IN (SELECT tenant_id FROM credit_leases WHERE replica_id = ANY($1)) ORDER BY id FOR UPDATE",
        replicas,
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!(
        "WITH gone AS (DELETE FROM credit_leases WHERE replica_id = ANY($1) RETURNING tenant_id, amount),
         per_tenant AS (SELECT tenant_id, sum(amount) AS amount FROM gone GROUP BY tenant_id)
         UPDATE tenants SET reserved = reserved - per_tenant.amount FROM per_tenant WHERE tenants.id = per_tenant.tenant_id",
        replicas,
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}
