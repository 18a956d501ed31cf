//! Catalog models: adding one, changing one, and the command line's create-or-update. Prices are exact:
//! a price the catalog's column would round is refused, never rounded.

use rust_decimal::Decimal;
use serde::Deserialize;
use utoipa::ToSchema;

use super::{audit, snapshot, Actor, OpError};
use crate::db::models::{self, CatalogEntry, ModelChange};
use crate::db::notify;

/// A new catalog model (`POST /admin/v1/models`): `id`, `context_length`, the input and output prices
/// are required; the cached-input price defaults to the input price, the rest to the column defaults. Fields this API does not know are ignored.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct NewCatalogModel {
    /// 1 to 200 characters.
    pub id: String,
    /// Positive.
    pub context_length: i32,
    /// USD per million input tokens: at least 0, below 10^10, at most 10 decimals.
    #[schema(value_type = String, pattern = r"^-?[0-9]+(\.[0-9]+)?$", example = "0.10")]
    pub input_price_per_mtok: Decimal,
    /// USD per million output tokens, as above.
    #[schema(value_type = String, pattern = r"^-?[0-9]+(\.[0-9]+)?$", example = "0.30")]
    pub output_price_per_mtok: Decimal,
    /// USD per million input tokens read from a cache, as above (it may exceed the input price). Absent:
    /// the input price, so that nothing is discounted unless ops say so.
    #[schema(value_type = Option<String>, pattern = r"^-?[0-9]+(\.[0-9]+)?$", example = "0.025")]
    pub cached_input_price_per_mtok: Option<Decimal>,
    /// A batch line's price as a share of the online price, in (0, 1], at most 4 decimals; 0.5 when absent.
    #[schema(value_type = Option<String>, pattern = r"^[0-9]+(\.[0-9]+)?$", example = "0.5")]
    pub batch_price_ratio: Option<Decimal>,
    pub owned_by: Option<String>,
    pub enabled: Option<bool>,
    pub public: Option<bool>,
    pub supports_structured_outputs: Option<bool>,
    pub supports_tools: Option<bool>,
    pub schema_in_prompt: Option<bool>,
    /// Worker URLs (`http://` or `https://`) that serve the model.
    pub workers: Option<Vec<String>>,
}

impl NewCatalogModel {
    fn change(&self) -> ModelChange {
        ModelChange {
            owned_by: self.owned_by.clone(),
            context_length: Some(self.context_length),
            input_price_per_mtok: Some(self.input_price_per_mtok),
            output_price_per_mtok: Some(self.output_price_per_mtok),
            cached_input_price_per_mtok: self.cached_input_price_per_mtok,
            batch_price_ratio: self.batch_price_ratio,
            enabled: self.enabled,
            public: self.public,
            supports_structured_outputs: self.supports_structured_outputs,
            supports_tools: self.supports_tools,
            schema_in_prompt: self.schema_in_prompt,
            workers: self.workers.clone(),
        }
    }
}

/// # Errors
/// [`OpError::Invalid`] for a bad id, length, price or worker URL; [`OpError::Conflict`] when the id is
/// taken.
pub async fn create(db: &sqlx::PgPool, actor: Actor<'_>, new: &NewCatalogModel) -> Result<CatalogEntry, OpError> {
    checked_id(&new.id)?;
    write(db, actor, &new.id, &new.change(), true).await
}

/// Changes the fields `change` names; `workers` replaces the list.
///
/// # Errors
/// [`OpError::Invalid`] for a bad value, [`OpError::ModelNotFound`] for an unknown model.
pub async fn update(db: &sqlx::PgPool, actor: Actor<'_>, id: &str, change: &ModelChange) -> Result<CatalogEntry, OpError> {
    write(db, actor, id, change, false).await
}

/// The command line's entry: creates the model (`change` must then hold its length and prices) or
/// changes it, adding `worker` to the URLs that serve it.
///
/// # Errors
/// As [`create`] and [`update`].
pub async fn upsert(
    db: &sqlx::PgPool,
    actor: Actor<'_>,
    id: &str,
    mut change: ModelChange,
    worker: Option<&str>,
) -> Result<CatalogEntry, OpError> {
    let existing = models::catalog(&mut *db.acquire().await?, Some(id)).await?.pop();
    if let Some(url) = worker {
        let mut workers = existing.as_ref().map(|e| e.workers.clone()).unwrap_or_default();
        if !workers.iter().any(|w| w == url) {
            workers.push(url.to_owned());
        }
        change.workers = Some(workers);
    }
    if existing.is_some() {
        return update(db, actor, id, &change).await;
    }
    if change.context_length.is_none() || change.input_price_per_mtok.is_none() || change.output_price_per_mtok.is_none() {
        return Err(OpError::invalid("a new model needs a context length and both prices", "context_length"));
    }
    checked_id(id)?;
    write(db, actor, id, &change, true).await
}

fn checked_id(id: &str) -> Result<(), OpError> {
    if id.is_empty() || id.len() > 200 {
        return Err(OpError::invalid("id must be 1 to 200 characters", "id"));
    }
    Ok(())
}

async fn write(db: &sqlx::PgPool, actor: Actor<'_>, id: &str, change: &ModelChange, create: bool) -> Result<CatalogEntry, OpError> {
    check(change)?;
    let mut tx = db.begin().await?;
    let before = models::catalog(&mut tx, Some(id)).await?.pop();
    if !models::write(&mut tx, id, change, create).await? {
        return Err(OpError::ModelNotFound(id.to_owned()));
    }
    let after = models::catalog(&mut tx, Some(id)).await?.pop().ok_or_else(|| OpError::ModelNotFound(id.to_owned()))?;
    let action = if create { "model.create" } else { "model.update" };
    audit(&mut tx, actor, action, ("model", id.to_owned()), before.as_ref().and_then(snapshot), snapshot(&after)).await?;
    notify::catalog_changed(&mut tx).await?;
    tx.commit().await?;
    Ok(after)
}

/// The catalog stores prices as `NUMERIC(20, 10)`: refuse what it would round rather than round money.
fn check(change: &ModelChange) -> Result<(), OpError> {
    if change.context_length.is_some_and(|n| n <= 0) {
        return Err(OpError::invalid("context_length must be positive", "context_length"));
    }
    let prices = [
        ("input_price_per_mtok", change.input_price_per_mtok),
        ("cached_input_price_per_mtok", change.cached_input_price_per_mtok),
        ("output_price_per_mtok", change.output_price_per_mtok),
    ];
    for (param, price) in prices {
        if price.is_some_and(|p| p.is_sign_negative() || p.normalize().scale() > 10 || p >= Decimal::from(10_000_000_000u64)) {
            return Err(OpError::invalid("a price per million tokens is at least 0, below 10^10, with at most 10 decimals", param));
        }
    }
    if change.batch_price_ratio.is_some_and(|r| r <= Decimal::ZERO || r > Decimal::ONE || r.normalize().scale() > 4) {
        return Err(OpError::invalid("batch_price_ratio is above 0 and at most 1, with at most 4 decimals", "batch_price_ratio"));
    }
    let bad_url = change.workers.iter().flatten().find(|u| !(u.starts_with("http://") || u.starts_with("https://")));
    if let Some(url) = bad_url {
        return Err(OpError::invalid(format!("worker URL {url:?} must start with http:// or https://"), "workers"));
    }
    Ok(())
}
