//! The model catalog, which tenants may use private models, and the workers configured for each model.

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use uuid::Uuid;

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ModelRow {
    pub id: String,
    pub owned_by: String,
    pub context_length: i32,
    pub input_price_per_mtok: Decimal,
    /// USD per million prompt tokens read from a cache (a prefix a worker kept from an earlier request).
    pub cached_input_price_per_mtok: Decimal,
    pub output_price_per_mtok: Decimal,
    /// A batch line's prices are these times this ratio (in (0, 1]; half by default).
    pub batch_price_ratio: Decimal,
    pub supports_structured_outputs: bool,
    pub supports_tools: bool,
    pub schema_in_prompt: bool,
    pub public: bool,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

impl ModelRow {
    /// The model as a batch line is priced: every price times the model's batch ratio, exact.
    #[must_use]
    pub fn at_batch_price(&self) -> Self {
        let ratio = self.batch_price_ratio;
        Self {
            input_price_per_mtok: self.input_price_per_mtok * ratio,
            cached_input_price_per_mtok: self.cached_input_price_per_mtok * ratio,
            output_price_per_mtok: self.output_price_per_mtok * ratio,
            ..self.clone()
        }
    }
}

/// Every enabled model (the in-memory catalog's source: `crate::catalog`).
///
/// # Errors
/// Database errors.
pub async fn list_enabled(db: &PgPool) -> Result<Vec<ModelRow>, sqlx::Error> {
    sqlx::query_as!(
        ModelRow,
        "SELECT id, owned_by, context_length, input_price_per_mtok, cached_input_price_per_mtok, output_price_per_mtok,
                batch_price_ratio, supports_structured_outputs, supports_tools, schema_in_prompt, public, created_at
         FROM models WHERE enabled ORDER BY id"
    )
    .fetch_all(db)
    .await
}

/// Every (tenant, model) pair granted access to a private model.
///
/// # Errors
/// Database errors.
pub async fn all_access(db: &PgPool) -> Result<Vec<(Uuid, String)>, sqlx::Error> {
    let rows = sqlx::query!("SELECT tenant_id, model_id FROM model_access").fetch_all(db).await?;
    Ok(rows.into_iter().map(|r| (r.tenant_id, r.model_id)).collect())
}

/// A catalog entry as ops see it: every field, enabled or not, and its configured workers.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct CatalogEntry {
    #[serde(flatten)]
    pub model: ModelRow,
    pub enabled: bool,
    pub workers: Vec<String>,
}

/// # Errors
/// Database errors.
pub async fn catalog(db: &mut sqlx::PgConnection, id: Option<&str>) -> Result<Vec<CatalogEntry>, sqlx::Error> {
    // `workers!`: COALESCE never gives NULL, but a computed column's nullability is unknown to the macros.
    let rows = sqlx::query!(
        r#"SELECT id, owned_by, context_length, input_price_per_mtok, cached_input_price_per_mtok, output_price_per_mtok,
                  batch_price_ratio, supports_structured_outputs, supports_tools, schema_in_prompt, public, created_at, enabled,
                  COALESCE((SELECT array_agg(url ORDER BY url) FROM model_workers w WHERE w.model_id = m.id), '{}') AS "workers!"
           FROM models m WHERE $1::text IS NULL OR id = $1 ORDER BY id"#,
        id,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| CatalogEntry {
            model: ModelRow {
                id: r.id,
                owned_by: r.owned_by,
                context_length: r.context_length,
                input_price_per_mtok: r.input_price_per_mtok,
                cached_input_price_per_mtok: r.cached_input_price_per_mtok,
                output_price_per_mtok: r.output_price_per_mtok,
                batch_price_ratio: r.batch_price_ratio,
                supports_structured_outputs: r.supports_structured_outputs,
                supports_tools: r.supports_tools,
                schema_in_prompt: r.schema_in_prompt,
                public: r.public,
                created_at: r.created_at,
            },
            enabled: r.enabled,
            workers: r.workers,
        })
        .collect())
}

/// The fields ops may set; absent ones keep their value (or the column default on create).
#[derive(Debug, Clone, Default, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelChange {
    pub owned_by: Option<String>,
    pub context_length: Option<i32>,
    /// USD per million input tokens, a decimal string.
    #[schema(value_type = Option<String>, pattern = r"^-?[0-9]+(\.[0-9]+)?$")]
    pub input_price_per_mtok: Option<Decimal>,
    /// USD per million cached input tokens, a decimal string. Absent on a new model: the input price.
    /// Absent on a change: kept, except that a cached price equal to the old input price follows a new
    /// input price (so that no discount appears that nobody set).
    #[schema(value_type = Option<String>, pattern = r"^-?[0-9]+(\.[0-9]+)?$")]
    pub cached_input_price_per_mtok: Option<Decimal>,
    /// USD per million output tokens, a decimal string.
    #[schema(value_type = Option<String>, pattern = r"^-?[0-9]+(\.[0-9]+)?$")]
    pub output_price_per_mtok: Option<Decimal>,
    /// A batch line's price as a share of the online price, a decimal string in (0, 1] with at most 4
    /// decimals. Absent on a new model: 0.5.
    #[schema(value_type = Option<String>, pattern = r"^[0-9]+(\.[0-9]+)?$", example = "0.5")]
    pub batch_price_ratio: Option<Decimal>,
    pub enabled: Option<bool>,
    pub public: Option<bool>,
    pub supports_structured_outputs: Option<bool>,
    pub supports_tools: Option<bool>,
    pub schema_in_prompt: Option<bool>,
    /// Replaces the configured worker URLs.
    pub workers: Option<Vec<String>>,
}

/// Inserts a model (`create`) or changes one, in the caller's transaction. `false` when updating a
/// model that does not exist.
///
/// # Errors
/// Database errors: a unique violation when creating an existing id, a check violation for a bad value.
pub async fn write(tx: &mut sqlx::PgConnection, id: &str, change: &ModelChange, create: bool) -> Result<bool, sqlx::Error> {
    if create {
        // Without a cached price, cached tokens cost what any input token costs. (`$5::numeric`: described
        // without the binds' types, as the macros do, COALESCE's two parameters would be taken for text, and
        // $3 is also the numeric column's value; at run time the binds are numeric either way.)
        sqlx::query!(
            "INSERT INTO models (id, context_length, input_price_per_mtok, output_price_per_mtok, cached_input_price_per_mtok)
             VALUES ($1, $2, $3, $4, COALESCE($5::numeric, $3))",
            id,
            change.context_length,
            change.input_price_per_mtok,
            change.output_price_per_mtok,
            change.cached_input_price_per_mtok,
        )
        .execute(&mut *tx)
        .await?;
    }
    // Right of `=` every column is its value before the update: a cached price that equalled the old input
    // price (the default, never set apart) follows the new one.
    let updated = sqlx::query!(
        "UPDATE models SET owned_by = COALESCE($2, owned_by), context_length = COALESCE($3, context_length),
             input_price_per_mtok = COALESCE($4, input_price_per_mtok),
             cached_input_price_per_mtok = COALESCE($11, CASE WHEN cached_input_price_per_mtok = input_price_per_mtok
                 THEN COALESCE($4, input_price_per_mtok) ELSE cached_input_price_per_mtok END),
             output_price_per_mtok = COALESCE($5, output_price_per_mtok), enabled = COALESCE($6, enabled),
             public = COALESCE($7, public),
             supports_structured_outputs = COALESCE($8, supports_structured_outputs),
             supports_tools = COALESCE($9, supports_tools), schema_in_prompt = COALESCE($10, schema_in_prompt),
             batch_price_ratio = COALESCE($12, batch_price_ratio)
         WHERE id = $1",
        id,
        change.owned_by.as_deref(),
        change.context_length,
        change.input_price_per_mtok,
        change.output_price_per_mtok,
        change.enabled,
        change.public,
        change.supports_structured_outputs,
        change.supports_tools,
        change.schema_in_prompt,
        change.cached_input_price_per_mtok,
        change.batch_price_ratio,
    )
    .execute(&mut *tx)
    .await?;
    if updated.rows_affected() == 0 {
        return Ok(false);
    }
    if let Some(workers) = &change.workers {
        sqlx::query!("DELETE FROM model_workers WHERE model_id = $1", id).execute(&mut *tx).await?;
        sqlx::query!("INSERT INTO model_workers (model_id, url) SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING", id, workers)
            .execute(&mut *tx)
            .await?;
    }
    Ok(true)
}

/// Every (model, worker URL) pair configured in the database.
///
/// # Errors
/// Database errors.
pub async fn configured_workers(db: &PgPool) -> Result<Vec<(String, String)>, sqlx::Error> {
    let rows = sqlx::query!("SELECT model_id, url FROM model_workers").fetch_all(db).await?;
    Ok(rows.into_iter().map(|r| (r.model_id, r.url)).collect())
}

/// Grants (or with `allow = false` withdraws) a tenant's use of a private model. `false` when nothing
/// changed.
///
/// # Errors
/// Database errors (a foreign-key violation for an unknown tenant or model).
pub async fn set_access(tx: &mut sqlx::PgConnection, tenant: Uuid, model: &str, allow: bool) -> Result<bool, sqlx::Error> {
    let done = if allow {
        sqlx::query!("INSERT INTO model_access (tenant_id, model_id) VALUES ($1, $2) ON CONFLICT DO NOTHING", tenant, model)
            .execute(&mut *tx)
            .await?
    } else {
        sqlx::query!("DELETE FROM model_access WHERE tenant_id = $1 AND model_id = $2", tenant, model).execute(&mut *tx).await?
    };
    Ok(done.rows_affected() > 0)
}
