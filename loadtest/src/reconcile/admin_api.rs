//! Reading the ledger through the gateway's finance admin API (a token with the `finance` role), for
//! when the database is out of reach. Amounts arrive as decimal strings, so nothing is rounded.
//!
//! Two limits against [`super::postgres`]: the window starts at this machine's clock (the gateway's
//! records carry the database's), and records are listed per tenant, so one filed under another tenant
//! shows up as a missing record rather than a misfiled one.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use uuid::Uuid;

use super::{Balance, Charge, Record};
use crate::money::parse_amount;

#[derive(Debug, Clone)]
pub struct AdminSource {
    http: reqwest::Client,
    base_url: String,
    token: String,
}

#[derive(Debug, thiserror::Error)]
pub enum AdminApiError {
    #[error("admin API unreachable: {0}")]
    Http(#[from] reqwest::Error),
    #[error("admin API answered {status} to {path}: {body}")]
    Status { status: u16, path: String, body: String },
    #[error("admin API sent an amount that is not a decimal: {0}")]
    Amount(#[from] crate::money::NotAnAmount),
}

#[derive(Debug, Deserialize)]
struct Page<T> {
    data: Vec<T>,
    #[serde(default)]
    has_more: bool,
    #[serde(default)]
    next_cursor: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Tenant {
    balance: String,
    reserved: String,
}

#[derive(Debug, Deserialize)]
struct Entry {
    kind: String,
    amount: String,
    request_id: Option<String>,
    created_at: DateTime<Utc>,
}

impl AdminSource {
    #[must_use]
    pub fn new(http: reqwest::Client, base_url: &str, token: String) -> Self {
        Self { http, base_url: base_url.trim_end_matches('/').to_owned(), token }
    }

    async fn get<T: DeserializeOwned>(&self, path: &str, query: &[(&str, String)]) -> Result<T, AdminApiError> {
        let response = self.http.get(format!("{}{path}", self.base_url)).bearer_auth(&self.token).query(query).send().await?;
        let status = response.status();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            return Err(AdminApiError::Status { status: status.as_u16(), path: path.to_owned(), body });
        }
        Ok(response.json().await?)
    }

    /// This machine's clock and the tenant's balance.
    ///
    /// # Errors
    /// HTTP errors, a refusal (401/403/404), or an amount that is not a decimal.
    pub async fn balance(&self, tenant: Uuid) -> Result<(DateTime<Utc>, Balance), AdminApiError> {
        let at = Utc::now();
        let t: Tenant = self.get(&format!("/admin/v1/tenants/{tenant}"), &[]).await?;
        Ok((at, Balance { balance: parse_amount(&t.balance)?, reserved: parse_amount(&t.reserved)? }))
    }

    /// The tenant's records since `from`, every page.
    ///
    /// # Errors
    /// As [`AdminSource::balance`].
    pub async fn records(&self, tenant: Uuid, from: DateTime<Utc>) -> Result<Vec<Record>, AdminApiError> {
        let from = from.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        let mut records = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut query = vec![("tenant_id", tenant.to_string()), ("from", from.clone()), ("limit", "1000".into())];
            if let Some(c) = cursor.take() {
                query.push(("cursor", c));
            }
            let page: Page<Record> = self.get("/admin/v1/cost-records", &query).await?;
            records.extend(page.data);
            match page.next_cursor {
                Some(next) if page.has_more => cursor = Some(next),
                _ => return Ok(records),
            }
        }
    }

    /// The tenant's charges since `from` and the sum of its grants since then (the ledger is paged from
    /// its first entry: the API has no time filter for it).
    ///
    /// # Errors
    /// As [`AdminSource::balance`].
    pub async fn credit_ledger(&self, tenant: Uuid, from: DateTime<Utc>) -> Result<(Vec<Charge>, Decimal), AdminApiError> {
        let (mut charges, mut grants) = (Vec::new(), Decimal::ZERO);
        let mut cursor: Option<String> = None;
        loop {
            let mut query = vec![("limit", "1000".to_owned())];
            if let Some(c) = cursor.take() {
                query.push(("cursor", c));
            }
            let page: Page<Entry> = self.get(&format!("/admin/v1/tenants/{tenant}/credit-ledger"), &query).await?;
            for e in page.data.into_iter().filter(|e| e.created_at >= from) {
                let amount = parse_amount(&e.amount)?;
                match (e.kind.as_str(), e.request_id) {
                    ("charge", Some(request_id)) => charges.push(Charge { request_id, amount }),
                    _ => grants += amount,
                }
            }
            match page.next_cursor {
                Some(next) if page.has_more => cursor = Some(next),
                _ => return Ok((charges, grants)),
            }
        }
    }
}
