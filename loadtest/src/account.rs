//! What the API key itself may read from the gateway: its tenant (`GET /v1/account`) and the model's
//! prices (`GET /v1/models/{id}`).

use serde::Deserialize;
use uuid::Uuid;

use crate::money::{parse_amount, NotAnAmount, Prices};
use crate::send::Target;

#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    #[error("gateway unreachable: {0}")]
    Http(#[from] reqwest::Error),
    #[error("gateway answered {status} to {path}: {body}")]
    Status { status: u16, path: String, body: String },
    #[error("the catalog's price is not a decimal: {0}")]
    Amount(#[from] NotAnAmount),
}

#[derive(Debug, Deserialize)]
struct Account {
    tenant: TenantRef,
}

#[derive(Debug, Deserialize)]
struct TenantRef {
    id: Uuid,
}

#[derive(Debug, Deserialize)]
struct Model {
    context_length: u32,
    pricing: Pricing,
}

#[derive(Debug, Deserialize)]
struct Pricing {
    input_per_million_tokens: String,
    /// Absent from gateways before prompt caching: cached tokens cost the input price there.
    cached_input_per_million_tokens: Option<String>,
    output_per_million_tokens: String,
}

async fn get<T: serde::de::DeserializeOwned>(target: &Target, path: &str) -> Result<T, AccountError> {
    let response = target.get(path).send().await?;
    let status = response.status();
    if !status.is_success() {
        let body = response.text().await.unwrap_or_default();
        return Err(AccountError::Status { status: status.as_u16(), path: path.to_owned(), body });
    }
    Ok(response.json().await?)
}

/// The key's tenant.
///
/// # Errors
/// HTTP errors, or a refusal (401 for a bad key).
pub async fn tenant(target: &Target) -> Result<Uuid, AccountError> {
    let account: Account = get(target, "/v1/account").await?;
    Ok(account.tenant.id)
}

/// The model's catalog prices, exact.
///
/// # Errors
/// HTTP errors, 404 for a model the key cannot use, or a price that is not a decimal.
pub async fn prices(target: &Target, model: &str) -> Result<Prices, AccountError> {
    let m: Model = get(target, &format!("/v1/models/{model}")).await?;
    let input_per_mtok = parse_amount(&m.pricing.input_per_million_tokens)?;
    let per_mtok = runaii_wire::money::Prices {
        input_per_mtok,
        cached_input_per_mtok: m
            .pricing
            .cached_input_per_million_tokens
            .as_deref()
            .map(parse_amount)
            .transpose()?
            .unwrap_or(input_per_mtok),
        output_per_mtok: parse_amount(&m.pricing.output_per_million_tokens)?,
    };
    Ok(Prices { per_mtok, context_length: m.context_length })
}
