//! Reading the audit log (admins only).

use axum::extract::rejection::QueryRejection;
use axum::extract::{Json, Query, State};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::input::{page_size, paginate, query};
use super::{Claims, Role};
use crate::db::audit::{self, AuditEntry};
use crate::error::ApiError;
use crate::shapes::ListObject;
use crate::state::AppState;

/// One page, oldest first; pass `next_cursor` as `cursor` for the next.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditPage {
    #[schema(inline)]
    pub object: ListObject,
    pub data: Vec<AuditEntry>,
    pub has_more: bool,
    pub next_cursor: Option<String>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct AuditQuery {
    target_type: Option<String>,
    target_id: Option<String>,
    cursor: Option<i64>,
    limit: Option<i64>,
}

#[utoipa::path(
    get,
    path = "/admin/v1/audit-log",
    tag = "admin",
    operation_id = "adminAuditLog",
    summary = "Read the audit log",
    description = "Role: admin, with a token not confined to a tenant. Every change made through the admin API and the CLI.",
    params(AuditQuery),
    security(("admin_jwt" = [])),
    responses(
        (status = 200, description = "Changes, oldest first", body = AuditPage),
        crate::apidoc::errors::AdminQueryErrors,
    )
)]
pub(super) async fn list(
    State(state): State<AppState>,
    claims: Claims,
    q: Result<Query<AuditQuery>, QueryRejection>,
) -> Result<Json<AuditPage>, ApiError> {
    // The log spans every tenant and the catalog.
    claims.require_unconfined(Role::Admin)?;
    let q = query(q)?;
    let size = page_size(q.limit);
    let rows = audit::list(&state.db, q.target_type.as_deref(), q.target_id.as_deref(), q.cursor.unwrap_or(0), size + 1).await?;
    let (data, has_more, next_cursor) = paginate(rows, size, |e| e.id.to_string());
    Ok(Json(AuditPage { object: ListObject::List, data, has_more, next_cursor }))
}
