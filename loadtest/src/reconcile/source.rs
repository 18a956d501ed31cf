//! Where the ledger is read from: Postgres (exact, and by request id across tenants) or the finance
//! admin API.

use std::time::Duration;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::admin_api::{AdminApiError, AdminSource};
use super::postgres::PgSource;
use super::{Balance, Ledger};

#[derive(Debug, Clone)]
pub enum Source {
    Postgres(PgSource),
    AdminApi(AdminSource),
}

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("reading the ledger from Postgres: {0}")]
    Postgres(#[from] sqlx::Error),
    #[error(transparent)]
    AdminApi(#[from] AdminApiError),
}

impl Source {
    /// # Errors
    /// The source's errors.
    pub async fn balance(&self, tenant: Uuid) -> Result<(DateTime<Utc>, Balance), SourceError> {
        Ok(match self {
            Source::Postgres(pg) => pg.balance(tenant).await?,
            Source::AdminApi(api) => api.balance(tenant).await?,
        })
    }

    /// Waits until nothing is reserved — every admitted request of the tenant has settled, since its
    /// record, the release of its hold and its charge are one statement — or until `timeout`, and returns
    /// the last reading (the caller reports what is still reserved).
    ///
    /// # Errors
    /// The source's errors.
    pub async fn settled(&self, tenant: Uuid, timeout: Duration) -> Result<(DateTime<Utc>, Balance), SourceError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let reading = self.balance(tenant).await?;
            if reading.1.reserved.is_zero() || tokio::time::Instant::now() >= deadline {
                return Ok(reading);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The ledger since `start`, with the balances read before and after the run.
    ///
    /// # Errors
    /// The source's errors.
    pub async fn ledger(
        &self,
        tenant: Uuid,
        start: DateTime<Utc>,
        before: Balance,
        after: Balance,
        ids: &[String],
    ) -> Result<Ledger, SourceError> {
        let (records, (charges, grants)) = match self {
            Source::Postgres(pg) => (pg.records(tenant, start, ids).await?, pg.credit_ledger(tenant, start).await?),
            Source::AdminApi(api) => (api.records(tenant, start).await?, api.credit_ledger(tenant, start).await?),
        };
        Ok(Ledger { tenant_id: tenant, window_start: start, records, charges, grants, before, after })
    }
}
