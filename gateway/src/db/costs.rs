//! Cost records: one per request, append-only, keyed by request id.

use rust_decimal::Decimal;
use sqlx::PgPool;
use uuid::Uuid;

#[derive(Debug, Clone)]
pub struct CostRecord {
    pub request_id: String,
    pub tenant_id: Uuid,
    pub api_key_id: Uuid,
    pub model: String,
    pub endpoint: &'static str,
    pub input_tokens: u32,
    pub output_tokens: u32,
    pub cost: Decimal,
    pub status: &'static str,
    pub http_status: u16,
    pub error_code: Option<String>,
    pub latency_ms: u64,
}

/// # Errors
/// Database errors, including a second record for the same request id (unique violation).
pub async fn insert(db: &PgPool, r: &CostRecord) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO cost_records (request_id, tenant_id, api_key_id, model, endpoint, input_tokens, output_tokens,
                                   cost, status, http_status, error_code, latency_ms)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
    )
    .bind(&r.request_id)
    .bind(r.tenant_id)
    .bind(r.api_key_id)
    .bind(&r.model)
    .bind(r.endpoint)
    .bind(i32::try_from(r.input_tokens).unwrap_or(i32::MAX))
    .bind(i32::try_from(r.output_tokens).unwrap_or(i32::MAX))
    .bind(r.cost)
    .bind(r.status)
    .bind(i32::from(r.http_status))
    .bind(&r.error_code)
    .bind(i32::try_from(r.latency_ms).unwrap_or(i32::MAX))
    .execute(db)
    .await?;
    Ok(())
}
