//! Gateway replicas that are alive, and the credit holds of those that died. Each replica keeps a row
//! fresh while it runs; a row that went stale means its process is gone (killed, crashed, cut off from
//! the database), so the holds it took belong to requests that will never settle.

use sqlx::PgPool;
use uuid::Uuid;

/// Writes (or, after the replica was presumed dead, writes again) the replica's row, fresh now. True when
/// the row was written anew: at the replica's start, or because the others had presumed it dead and
/// released its holds and leases.
///
/// # Errors
/// Database errors.
pub async fn heartbeat(db: &PgPool, replica: Uuid) -> Result<bool, sqlx::Error> {
    // `xmax` is 0 on a row this statement inserted, and this transaction's id on one it updated.
    sqlx::query_scalar!(
        r#"INSERT INTO gateway_replicas (id) VALUES ($1) ON CONFLICT (id) DO UPDATE SET last_seen = now()
           RETURNING (xmax = 0) AS "inserted!""#,
        replica
    )
    .fetch_one(db)
    .await
}

/// How many replicas are alive (heard from within `stale_after_ms`), the caller included.
///
/// # Errors
/// Database errors.
pub async fn live(db: &PgPool, stale_after_ms: i64) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM gateway_replicas WHERE last_seen >= now() - make_interval(secs => $1 / 1000.0)"#,
        stale_after_ms as f64
    )
    .fetch_one(db)
    .await
}

/// Removes the replica's row at graceful shutdown, once its requests have settled.
///
/// # Errors
/// Database errors.
pub async fn remove(db: &PgPool, replica: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query!("DELETE FROM gateway_replicas WHERE id = $1", replica).execute(db).await?;
    Ok(())
}

/// Forgets replicas not seen for `stale_after_ms` and releases every hold and every credit lease taken
/// by a replica that has no live row. Holds without a replica (taken before replicas were recorded) are
/// left to the age limit of [`super::credits::release_stale_holds`].
///
/// A replica registers before it serves, so a hold or lease this sees always has its replica's row in the
/// same snapshot unless that replica is gone. Locks are taken as settling takes them (hold rows, then
/// tenant rows, then lease rows), so a request settling meanwhile waits for this or finds its hold gone,
/// and is charged from what is available.
///
/// # Errors
/// Database errors.
pub async fn release_orphaned_holds(db: &PgPool, stale_after_ms: i64) -> Result<u64, sqlx::Error> {
    let mut tx = db.begin().await?;
    sqlx::query!("DELETE FROM gateway_replicas WHERE last_seen < now() - make_interval(secs => $1 / 1000.0)", stale_after_ms as f64)
        .execute(&mut *tx)
        .await?;
    let holds = sqlx::query!(
        "WITH orphaned AS (
             DELETE FROM credit_holds h
             WHERE h.replica_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM gateway_replicas r WHERE r.id = h.replica_id)
             RETURNING tenant_id, amount),
         per_tenant AS (SELECT tenant_id, sum(amount) AS amount FROM orphaned GROUP BY tenant_id)
         UPDATE tenants SET reserved = reserved - per_tenant.amount FROM per_tenant WHERE tenants.id = per_tenant.tenant_id",
    )
    .execute(&mut *tx)
    .await?;
    let dead: Vec<Uuid> = sqlx::query_scalar!(
        "SELECT DISTINCT replica_id FROM credit_leases l WHERE NOT EXISTS (SELECT 1 FROM gateway_replicas r WHERE r.id = l.replica_id)"
    )
    .fetch_all(&mut *tx)
    .await?;
    if !dead.is_empty() {
        super::leases::give_back_all(&mut tx, &dead).await?;
    }
    tx.commit().await?;
    Ok(holds.rows_affected() + dead.len() as u64)
}
