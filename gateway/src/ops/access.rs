//! Which tenants may use a private model.

use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{audit, Actor, OpError};
use crate::db::{models, notify};

/// Whether a tenant may use a private model, and whether this call changed it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ModelAccess {
    pub tenant_id: Uuid,
    pub model: String,
    pub allowed: bool,
    pub changed: bool,
}

/// Grants (`allow`) or withdraws a tenant's use of a model; audited only when something changed.
///
/// # Errors
/// [`OpError::NotFound`] for an unknown tenant or model.
pub async fn set(db: &sqlx::PgPool, actor: Actor<'_>, tenant: Uuid, model: &str, allow: bool) -> Result<ModelAccess, OpError> {
    let mut tx = db.begin().await?;
    let changed = models::set_access(&mut tx, tenant, model, allow).await?;
    if changed {
        let state = |allowed: bool| Some(json!({"tenant_id": tenant, "model": model, "allowed": allowed}));
        let action = if allow { "model_access.grant" } else { "model_access.revoke" };
        audit(&mut tx, actor, action, ("tenant", tenant.to_string()), state(!allow), state(allow)).await?;
        notify::catalog_changed(&mut tx).await?;
    }
    tx.commit().await?;
    Ok(ModelAccess { tenant_id: tenant, model: model.to_owned(), allowed: allow, changed })
}
