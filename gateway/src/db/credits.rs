//! Credit balances, holds and grants. A balance changes only together with a ledger entry.

use rust_decimal::Decimal;
use sqlx::PgPool;
use uuid::Uuid;

/// Holds `amount` of the tenant's available credit (balance − reserved) for a request. `false` when the
/// tenant does not have that much: one conditional update, so concurrent holds can never overdraw. The
/// hold names the replica that took it, so that if that replica dies the others release it
/// (see [`super::replicas::release_orphaned_holds`]).
///
/// # Errors
/// Database errors.
#[tracing::instrument(name = "credit hold", skip_all)]
pub async fn hold(db: &PgPool, tenant_id: Uuid, request_id: &str, amount: Decimal, replica: Uuid) -> Result<bool, sqlx::Error> {
    let held: Option<String> = sqlx::query_scalar!(
        "WITH tenant AS (
             UPDATE tenants SET reserved = reserved + $3 WHERE id = $1 AND balance - reserved >= $3 RETURNING id)
         INSERT INTO credit_holds (request_id, tenant_id, amount, replica_id) SELECT $2, id, $3, $4 FROM tenant
         RETURNING request_id",
        tenant_id,
        request_id,
        amount,
        replica,
    )
    .fetch_optional(db)
    .await?;
    Ok(held.is_some())
}

/// A tenant's money, exact.
#[derive(Debug, Clone, Copy)]
pub struct Balance {
    pub balance: Decimal,
    pub reserved: Decimal,
}

impl Balance {
    #[must_use]
    pub fn available(&self) -> Decimal {
        self.balance - self.reserved
    }
}

/// # Errors
/// Database errors.
pub async fn balance(db: &PgPool, tenant_id: Uuid) -> Result<Option<Balance>, sqlx::Error> {
    sqlx::query_as!(Balance, "SELECT balance, reserved FROM tenants WHERE id = $1", tenant_id).fetch_optional(db).await
}

/// The balance, locked for the rest of the caller's transaction (to record it before a change).
///
/// # Errors
/// Database errors.
pub async fn balance_for_update(tx: &mut sqlx::PgConnection, tenant_id: Uuid) -> Result<Option<Balance>, sqlx::Error> {
    sqlx::query_as!(Balance, "SELECT balance, reserved FROM tenants WHERE id = $1 FOR UPDATE", tenant_id).fetch_optional(tx).await
}

/// Adds `amount` (negative for an adjustment) to the balance and writes the grant, in the caller's
/// transaction. `None` when the tenant does not exist.
///
/// # Errors
/// Database errors; a check violation (SQLSTATE 23514) when an adjustment would take the balance below
/// what is reserved.
pub async fn grant(
    tx: &mut sqlx::PgConnection,
    tenant_id: Uuid,
    amount: Decimal,
    actor: &str,
    note: &str,
) -> Result<Option<(i64, Balance)>, sqlx::Error> {
    let Some(after) =
        sqlx::query_as!(Balance, "UPDATE tenants SET balance = balance + $2 WHERE id = $1 RETURNING balance, reserved", tenant_id, amount)
            .fetch_optional(&mut *tx)
            .await?
    else {
        return Ok(None);
    };
    let id: i64 = sqlx::query_scalar!(
        "INSERT INTO credit_ledger (tenant_id, kind, amount, actor, note) VALUES ($1, 'grant', $2, $3, $4) RETURNING id",
        tenant_id,
        amount,
        actor,
        note,
    )
    .fetch_one(&mut *tx)
    .await?;
    Ok(Some((id, after)))
}

/// Renews a request's hold: the request is still running, so the age limit of [`release_stale_holds`]
/// counts from now. `false` when the hold is gone (settled, or released).
///
/// # Errors
/// Database errors.
pub async fn renew_hold(db: &PgPool, request_id: &str) -> Result<bool, sqlx::Error> {
    let renewed = sqlx::query!("UPDATE credit_holds SET renewed_at = now() WHERE request_id = $1", request_id).execute(db).await?;
    Ok(renewed.rows_affected() > 0)
}

/// Releases holds not renewed for `older_than_s`: the backstop for requests whose gateway died before
/// settling (holds of dead replicas normally go sooner, see [`super::replicas::release_orphaned_holds`]).
/// A running request renews its hold well within that time (`billing::lifetime`).
///
/// # Errors
/// Database errors.
pub async fn release_stale_holds(db: &PgPool, older_than_s: i64) -> Result<u64, sqlx::Error> {
    let done = sqlx::query!(
        "WITH stale AS (
             DELETE FROM credit_holds WHERE renewed_at < now() - make_interval(secs => $1) RETURNING tenant_id, amount),
         per_tenant AS (SELECT tenant_id, sum(amount) AS amount FROM stale GROUP BY tenant_id)
         UPDATE tenants SET reserved = reserved - per_tenant.amount FROM per_tenant WHERE tenants.id = per_tenant.tenant_id",
        older_than_s as f64,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}
