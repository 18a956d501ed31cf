//! Reading the ledger straight from Postgres: exact `NUMERIC`s, and records looked up by the ids the
//! clients were given whatever tenant they landed under.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;
use uuid::Uuid;

use super::{Balance, Charge, Record};

#[derive(Debug, Clone)]
pub struct PgSource {
    pool: PgPool,
}

impl PgSource {
    /// # Errors
    /// When Postgres cannot be reached.
    pub async fn connect(url: &str) -> Result<Self, sqlx::Error> {
        let pool = PgPoolOptions::new().max_connections(2).connect(url).await?;
        Ok(Self { pool })
    }

    /// The database's clock and the tenant's balance, read together: records created after this
    /// instant are the run's. `reserved` leaves out the gateways' credit leases (still the tenant's,
    /// set aside for its next requests), as the admin API does: what is held for requests in flight.
    ///
    /// # Errors
    /// Database errors; `RowNotFound` for an unknown tenant.
    pub async fn balance(&self, tenant: Uuid) -> Result<(DateTime<Utc>, Balance), sqlx::Error> {
        let (at, balance, reserved): (DateTime<Utc>, Decimal, Decimal) = sqlx::query_as(
            "SELECT now(), balance, reserved - COALESCE((SELECT sum(amount) FROM credit_leases WHERE tenant_id = t.id), 0)
                 FROM tenants t WHERE id = $1",
        )
        .bind(tenant)
        .fetch_one(&self.pool)
        .await?;
        Ok((at, Balance { balance, reserved }))
    }

    /// The tenant's records since `from`, plus the records of `ids` under any tenant.
    ///
    /// # Errors
    /// Database errors.
    pub async fn records(&self, tenant: Uuid, from: DateTime<Utc>, ids: &[String]) -> Result<Vec<Record>, sqlx::Error> {
        sqlx::query_as(
            "SELECT request_id, tenant_id, model, status, http_status, error_code, input_tokens, cached_tokens, output_tokens, cost, created_at
             FROM cost_records
             WHERE (tenant_id = $1 AND created_at >= $2) OR request_id = ANY($3)",
        )
        .bind(tenant)
        .bind(from)
        .bind(ids)
        .fetch_all(&self.pool)
        .await
    }

    /// The tenant's charges since `from`, and the sum of its grants since then.
    ///
    /// # Errors
    /// Database errors.
    pub async fn credit_ledger(&self, tenant: Uuid, from: DateTime<Utc>) -> Result<(Vec<Charge>, Decimal), sqlx::Error> {
        let charges =
            sqlx::query_as("SELECT request_id, amount FROM credit_ledger WHERE tenant_id = $1 AND created_at >= $2 AND kind = 'charge'")
                .bind(tenant)
                .bind(from)
                .fetch_all(&self.pool)
                .await?;
        let grants: Decimal = sqlx::query_scalar(
            "SELECT COALESCE(sum(amount), 0) FROM credit_ledger WHERE tenant_id = $1 AND created_at >= $2 AND kind = 'grant'",
        )
        .bind(tenant)
        .bind(from)
        .fetch_one(&self.pool)
        .await?;
        Ok((charges, grants))
    }
}
