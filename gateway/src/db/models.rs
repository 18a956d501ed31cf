//! The model catalog and the workers configured for each model.

use rust_decimal::Decimal;
use sqlx::PgPool;

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ModelRow {
    pub id: String,
    pub owned_by: String,
    pub context_length: i32,
    pub input_price_per_mtok: Decimal,
    pub output_price_per_mtok: Decimal,
    pub supports_structured_outputs: bool,
    pub supports_tools: bool,
    pub schema_in_prompt: bool,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// # Errors
/// Database errors.
pub async fn list_enabled(db: &PgPool) -> Result<Vec<ModelRow>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, owned_by, context_length, input_price_per_mtok, output_price_per_mtok,
                supports_structured_outputs, supports_tools, schema_in_prompt, created_at
         FROM models WHERE enabled ORDER BY id",
    )
    .fetch_all(db)
    .await
}

/// # Errors
/// Database errors.
pub async fn find_enabled(db: &PgPool, id: &str) -> Result<Option<ModelRow>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, owned_by, context_length, input_price_per_mtok, output_price_per_mtok,
                supports_structured_outputs, supports_tools, schema_in_prompt, created_at
         FROM models WHERE enabled AND id = $1",
    )
    .bind(id)
    .fetch_optional(db)
    .await
}

/// Every (model, worker URL) pair configured in the database.
///
/// # Errors
/// Database errors.
pub async fn configured_workers(db: &PgPool) -> Result<Vec<(String, String)>, sqlx::Error> {
    sqlx::query_as("SELECT model_id, url FROM model_workers").fetch_all(db).await
}

/// # Errors
/// Database errors.
pub async fn upsert(
    db: &PgPool,
    id: &str,
    context_length: i32,
    input_price: Decimal,
    output_price: Decimal,
    worker_url: Option<&str>,
) -> Result<(), sqlx::Error> {
    let mut tx = db.begin().await?;
    sqlx::query(
        "INSERT INTO models (id, context_length, input_price_per_mtok, output_price_per_mtok) VALUES ($1, $2, $3, $4)
         ON CONFLICT (id) DO UPDATE SET context_length = EXCLUDED.context_length,
             input_price_per_mtok = EXCLUDED.input_price_per_mtok, output_price_per_mtok = EXCLUDED.output_price_per_mtok",
    )
    .bind(id)
    .bind(context_length)
    .bind(input_price)
    .bind(output_price)
    .execute(&mut *tx)
    .await?;
    if let Some(url) = worker_url {
        sqlx::query("INSERT INTO model_workers (model_id, url) VALUES ($1, $2) ON CONFLICT DO NOTHING")
            .bind(id)
            .bind(url)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await
}
