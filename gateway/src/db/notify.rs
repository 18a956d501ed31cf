//! Telling every replica that something it caches changed: `NOTIFY` in the transaction that makes the
//! change, so the notice is delivered exactly when the change commits (and never for a rollback).

/// The one channel; the payload says what changed.
pub const CHANNEL: &str = "runaii_changes";
/// Payload: the catalog (models, prices, flags, access to private models).
pub const CATALOG: &str = "catalog";
/// Payload prefix: the key with this public id (revoked, expiry or limits changed).
pub const KEY_PREFIX: &str = "key:";

/// Payload prefix: the staff token with this `jti` was revoked.
pub const TOKEN_PREFIX: &str = "token:";

/// # Errors
/// Database errors.
pub async fn token_revoked(tx: &mut sqlx::PgConnection, jti: &str) -> Result<(), sqlx::Error> {
    send(tx, &format!("{TOKEN_PREFIX}{jti}")).await
}

/// # Errors
/// Database errors.
pub async fn catalog_changed(tx: &mut sqlx::PgConnection) -> Result<(), sqlx::Error> {
    send(tx, CATALOG).await
}

/// # Errors
/// Database errors.
pub async fn key_changed(tx: &mut sqlx::PgConnection, public_id: &str) -> Result<(), sqlx::Error> {
    send(tx, &format!("{KEY_PREFIX}{public_id}")).await
}

async fn send(tx: &mut sqlx::PgConnection, payload: &str) -> Result<(), sqlx::Error> {
    sqlx::query!("SELECT pg_notify($1, $2)", CHANNEL, payload).execute(tx).await?;
    Ok(())
}
