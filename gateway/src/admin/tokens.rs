//! Staff tokens: revoking one by its `jti`.

use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::Json;

use super::input::body;
use crate::auth::staff::{Claims, Role};
use crate::db::admin_tokens::Revocation;
use crate::error::ApiError;
use crate::ops::admin_tokens::RevokeToken;
use crate::ops::{self, Actor};
use crate::state::AppState;

/// Revokes a staff token before it expires.
#[utoipa::path(
    post,
    path = "/admin/v1/admin-token-revocations",
    tag = "admin",
    operation_id = "adminRevokeAdminToken",
    summary = "Revoke a staff token",
    description = "Role: admin, with a token not confined to a tenant. Every replica refuses the token (by its `jti`) within a second or so; revoking it again answers the first revocation.",
    request_body = RevokeToken,
    security(("admin_jwt" = [])),
    responses(
        (status = 200, description = "The revocation", body = Revocation),
        crate::apidoc::errors::AdminCreateErrors,
    )
)]
pub(super) async fn revoke(
    State(state): State<AppState>,
    claims: Claims,
    request: Result<Json<RevokeToken>, JsonRejection>,
) -> Result<Json<Revocation>, ApiError> {
    claims.require_unconfined(Role::Admin)?;
    let request = body(request, state.settings.max_body_bytes)?;
    let max_lifetime_s = state.admin.as_ref().map_or(0, |v| v.max_lifetime_s());
    Ok(Json(ops::admin_tokens::revoke(&state.db, Actor(&claims.sub), &request.jti, max_lifetime_s).await?))
}
