//! Cost records: one per request, append-only, keyed by request id. Writing one also settles the
//! request's credit hold and charges the tenant, in the same statement.

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

/// Inserts the record, releases the request's hold, charges the cost to the tenant's balance and writes
/// the charge to the credit ledger: all or nothing, as one statement.
///
/// # Errors
/// Database errors, including a second record for the same request id (unique violation), and a cost
/// above what the tenant holds (the no-overdraw check; the hold is the worst case, so this means a bug).
#[tracing::instrument(name = "cost record", skip_all, fields(status = %r.status))]
pub async fn settle(db: &PgPool, r: &CostRecord) -> Result<(), sqlx::Error> {
    sqlx::query(
        "WITH record AS (
             INSERT INTO cost_records (request_id, tenant_id, api_key_id, model, endpoint, input_tokens, output_tokens,
                                       cost, status, http_status, error_code, latency_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
             RETURNING request_id),
         hold AS (DELETE FROM credit_holds WHERE request_id = $1 RETURNING amount),
         tenant AS (
             UPDATE tenants SET balance = balance - $8, reserved = reserved - COALESCE((SELECT amount FROM hold), 0)
             WHERE id = $2 RETURNING id)
         INSERT INTO credit_ledger (tenant_id, kind, amount, request_id)
         SELECT $2, 'charge', -$8, request_id FROM record, tenant WHERE $8 > 0",
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

/// The status of a request's record, if it has one.
///
/// # Errors
/// Database errors.
pub async fn status_of(db: &PgPool, request_id: &str) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar("SELECT status FROM cost_records WHERE request_id = $1").bind(request_id).fetch_optional(db).await
}
