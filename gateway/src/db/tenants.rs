//! Tenants and their money at a glance.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

#[derive(Debug, Clone, sqlx::FromRow, Serialize)]
pub struct Tenant {
    pub id: Uuid,
    pub name: String,
    pub balance: Decimal,
    pub reserved: Decimal,
    pub created_at: DateTime<Utc>,
}

/// The id of the tenant called `name`.
///
/// # Errors
/// Database errors.
pub async fn find(db: &PgPool, name: &str) -> Result<Option<Uuid>, sqlx::Error> {
    sqlx::query_scalar("SELECT id FROM tenants WHERE name = $1").bind(name).fetch_optional(db).await
}

/// # Errors
/// Database errors; a unique violation when the name is taken.
pub async fn create(tx: &mut sqlx::PgConnection, name: &str) -> Result<Tenant, sqlx::Error> {
    sqlx::query_as("INSERT INTO tenants (id, name) VALUES ($1, $2) RETURNING id, name, balance, reserved, created_at")
        .bind(Uuid::now_v7())
        .bind(name)
        .fetch_one(tx)
        .await
}

/// One tenant, or every tenant when `id` is `None`.
///
/// # Errors
/// Database errors.
pub async fn list(db: &PgPool, id: Option<Uuid>) -> Result<Vec<Tenant>, sqlx::Error> {
    sqlx::query_as("SELECT id, name, balance, reserved, created_at FROM tenants WHERE $1::uuid IS NULL OR id = $1 ORDER BY created_at")
        .bind(id)
        .fetch_all(db)
        .await
}
