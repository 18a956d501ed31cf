//! Tenants.

use sqlx::PgPool;
use uuid::Uuid;

/// The tenant's id, creating it when missing.
///
/// # Errors
/// Database errors.
pub async fn ensure(db: &PgPool, name: &str) -> Result<Uuid, sqlx::Error> {
    let id: Uuid = sqlx::query_scalar(
        "INSERT INTO tenants (id, name) VALUES ($1, $2)
         ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
         RETURNING id",
    )
    .bind(Uuid::now_v7())
    .bind(name)
    .fetch_one(db)
    .await?;
    Ok(id)
}
