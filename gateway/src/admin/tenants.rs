//! Admins: tenants and their caps, API keys (the secret is shown once), credit grants, access to private
//! models. Tenants can also be read by finance. A token confined to a tenant reads only that one and
//! manages only its keys, within the tenant's caps: minting credit, setting caps and granting models are
//! for unconfined admins (a tenant's own token must not be able to give it money, lift its own caps, take
//! a larger share of the fleet, or get another tenant's private model).

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Json, Query, State};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::input::{body, query};
use super::{Claims, Role};
use crate::db::keys::KeyInfo;
use crate::db::{keys, tenants};
use crate::error::ApiError;
use crate::extract::Path;
use crate::ops::access::ModelAccess;
use crate::ops::credits::GrantResult;
use crate::ops::keys::{CreatedKey, KeySpec, KeyUpdate, RevokedKey};
use crate::ops::tenants::{CapsUpdate, Tenant};
use crate::ops::{self, Actor};
use crate::shapes::ListObject;
use crate::state::AppState;

#[derive(Debug, Serialize, ToSchema)]
pub struct TenantList {
    #[schema(inline)]
    pub object: ListObject,
    pub data: Vec<Tenant>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct KeyList {
    #[schema(inline)]
    pub object: ListObject,
    pub data: Vec<KeyInfo>,
}

fn reader(claims: &Claims) -> Result<(), ApiError> {
    claims.require(Role::Admin).or_else(|_| claims.require(Role::Finance))
}

fn actor(claims: &Claims) -> Actor<'_> {
    Actor(&claims.sub)
}

#[utoipa::path(
    get,
    path = "/admin/v1/tenants",
    tag = "admin",
    operation_id = "adminListTenants",
    summary = "List tenants",
    description = "Role: admin or finance.",
    security(("admin_jwt" = [])),
    responses(
        (status = 200, description = "Tenants with their money", body = TenantList),
        crate::apidoc::errors::AdminErrors,
    )
)]
pub(super) async fn list(State(state): State<AppState>, claims: Claims) -> Result<Json<TenantList>, ApiError> {
    reader(&claims)?;
    let rows = tenants::list(&state.db, claims.tenant_scope(None)?).await?;
    Ok(Json(TenantList { object: ListObject::List, data: rows.iter().map(Tenant::from).collect() }))
}

#[utoipa::path(
    get,
    path = "/admin/v1/tenants/{id}",
    tag = "admin",
    operation_id = "adminGetTenant",
    summary = "Get a tenant",
    description = "Role: admin or finance.",
    params(("id" = Uuid, Path, description = "The tenant's id")),
    security(("admin_jwt" = [])),
    responses(
        (status = 200, description = "The tenant", body = Tenant),
        crate::apidoc::errors::AdminLookupErrors,
    )
)]
pub(super) async fn get(State(state): State<AppState>, claims: Claims, Path(id): Path<Uuid>) -> Result<Json<Tenant>, ApiError> {
    reader(&claims)?;
    let id = scoped(&claims, id)?;
    let row = tenants::list(&state.db, Some(id)).await?.pop().ok_or_else(|| ApiError::NotFound(format!("tenant {id}")))?;
    Ok(Json(Tenant::from(&row)))
}

/// The tenant a confined token may touch.
fn scoped(claims: &Claims, id: Uuid) -> Result<Uuid, ApiError> {
    Ok(claims.tenant_scope(Some(id))?.unwrap_or(id))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NewTenant {
    /// 1 to 200 characters, unique.
    name: String,
}

#[utoipa::path(
    post,
    path = "/admin/v1/tenants",
    tag = "admin",
    operation_id = "adminCreateTenant",
    summary = "Create a tenant",
    description = "Role: admin, with a token not confined to a tenant. Names are unique (409 when taken).",
    request_body(content = NewTenant, content_type = "application/json"),
    security(("admin_jwt" = [])),
    responses(
        (status = 200, description = "The new tenant", body = Tenant),
        crate::apidoc::errors::AdminCreateErrors,
    )
)]
pub(super) async fn create(
    State(state): State<AppState>,
    claims: Claims,
    new: Result<Json<NewTenant>, JsonRejection>,
) -> Result<Json<Tenant>, ApiError> {
    claims.require_unconfined(Role::Admin)?;
    let new = body(new, state.settings.max_body_bytes)?;
    Ok(Json(ops::tenants::create(&state.db, actor(&claims), &new.name).await?))
}

#[utoipa::path(
    patch,
    path = "/admin/v1/tenants/{id}",
    tag = "admin",
    operation_id = "adminSetTenantCaps",
    summary = "Set a tenant's caps",
    description = "Role: admin, with a token not confined to a tenant. Requests and tokens per minute across all the tenant's keys and gateway replicas, requests in flight at once, and a monthly spend cap in USD; `null` removes a cap, an absent field is left alone. Keys keep their own limits but never get more than the tenant.",
    params(("id" = Uuid, Path, description = "The tenant's id")),
    request_body(content = CapsUpdate, content_type = "application/json"),
    security(("admin_jwt" = [])),
    responses(
        (status = 200, description = "The tenant with its caps", body = Tenant),
        crate::apidoc::errors::AdminChangeErrors,
    )
)]
pub(super) async fn set_caps(
    State(state): State<AppState>,
    claims: Claims,
    Path(id): Path<Uuid>,
    caps: Result<Json<CapsUpdate>, JsonRejection>,
) -> Result<Json<Tenant>, ApiError> {
    // A tenant's own token must not lift the caps its tenant is held to.
    claims.require_unconfined(Role::Admin)?;
    let caps = body(caps, state.settings.max_body_bytes)?;
    Ok(Json(ops::tenants::set_caps(&state.db, actor(&claims), id, &caps).await?))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Grant {
    /// USD as a decimal string; negative for an adjustment. Non-zero, below 10^12, at most 16 decimals.
    #[schema(value_type = String, pattern = r"^-?[0-9]+(\.[0-9]+)?$", example = "10.00")]
    amount: Decimal,
    #[serde(default)]
    note: String,
}

#[utoipa::path(
    post,
    path = "/admin/v1/tenants/{id}/credits",
    tag = "admin",
    operation_id = "adminGrantCredits",
    summary = "Grant credit",
    description = "Role: admin, with a token not confined to a tenant. A negative amount is an adjustment, refused (409) if it would take the balance below what is reserved.",
    params(("id" = Uuid, Path, description = "The tenant's id")),
    request_body(content = Grant, content_type = "application/json"),
    security(("admin_jwt" = [])),
    responses(
        (status = 200, description = "The balance after the grant", body = GrantResult),
        crate::apidoc::errors::AdminChangeErrors,
    )
)]
pub(super) async fn grant(
    State(state): State<AppState>,
    claims: Claims,
    Path(id): Path<Uuid>,
    grant: Result<Json<Grant>, JsonRejection>,
) -> Result<Json<GrantResult>, ApiError> {
    // Credit is money: only an unconfined admin mints it. Finance reads the books but does not write
    // them, so one stolen finance token cannot create balance either.
    claims.require_unconfined(Role::Admin)?;
    let grant = body(grant, state.settings.max_body_bytes)?;
    Ok(Json(ops::credits::grant(&state.db, actor(&claims), id, grant.amount, &grant.note).await?))
}

#[utoipa::path(
    get,
    path = "/admin/v1/tenants/{id}/keys",
    tag = "admin",
    operation_id = "adminListKeys",
    summary = "List a tenant's keys",
    description = "Role: admin.",
    params(("id" = Uuid, Path, description = "The tenant's id")),
    security(("admin_jwt" = [])),
    responses(
        (status = 200, description = "Keys without their secrets", body = KeyList),
        crate::apidoc::errors::AdminLookupErrors,
    )
)]
pub(super) async fn keys(State(state): State<AppState>, claims: Claims, Path(id): Path<Uuid>) -> Result<Json<KeyList>, ApiError> {
    claims.require(Role::Admin)?;
    let data = keys::list(&state.db, scoped(&claims, id)?).await?;
    Ok(Json(KeyList { object: ListObject::List, data }))
}

/// Creates a key; the answer holds the secret, and nothing ever shows it again.
#[utoipa::path(
    post,
    path = "/admin/v1/tenants/{id}/keys",
    tag = "admin",
    operation_id = "adminCreateKey",
    summary = "Create a key",
    description = "Role: admin.",
    params(("id" = Uuid, Path, description = "The tenant's id")),
    request_body(content = KeySpec, content_type = "application/json"),
    security(("admin_jwt" = [])),
    responses(
        (status = 200, description = "The key, with its secret in `key`: shown this once", body = CreatedKey),
        crate::apidoc::errors::AdminChangeErrors,
    )
)]
pub(super) async fn create_key(
    State(state): State<AppState>,
    claims: Claims,
    Path(id): Path<Uuid>,
    spec: Result<Json<KeySpec>, JsonRejection>,
) -> Result<Json<CreatedKey>, ApiError> {
    claims.require(Role::Admin)?;
    let id = scoped(&claims, id)?;
    let spec = body(spec, state.settings.max_body_bytes)?;
    Ok(Json(ops::keys::create(&state.db, actor(&claims), id, &spec).await?))
}

#[utoipa::path(
    patch,
    path = "/admin/v1/keys/{id}",
    tag = "admin",
    operation_id = "adminUpdateKey",
    summary = "Change a key's expiry or limits",
    description = "Role: admin. `null` clears a field; an absent field is left alone.",
    params(("id" = Uuid, Path, description = "The key's id")),
    request_body(content = KeyUpdate, content_type = "application/json"),
    security(("admin_jwt" = [])),
    responses(
        (status = 200, description = "The key", body = KeyInfo),
        crate::apidoc::errors::AdminChangeErrors,
    )
)]
pub(super) async fn update_key(
    State(state): State<AppState>,
    claims: Claims,
    Path(key_id): Path<Uuid>,
    update: Result<Json<KeyUpdate>, JsonRejection>,
) -> Result<Json<KeyInfo>, ApiError> {
    claims.require(Role::Admin)?;
    let update = body(update, state.settings.max_body_bytes)?;
    Ok(Json(ops::keys::update(&state.db, actor(&claims), key_id, &update, claims.tenant_id).await?))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct RevokeQuery {
    /// Also revoke every key minted from this one (created while signed in with it), however deep.
    #[serde(default)]
    cascade: bool,
}

/// Revokes a key; it stops working on every replica within the key cache's lifetime.
#[utoipa::path(
    delete,
    path = "/admin/v1/keys/{id}",
    tag = "admin",
    operation_id = "adminRevokeKey",
    summary = "Revoke a key",
    description = "Role: admin. The key stops working within the key cache's lifetime on every replica; with `cascade=true`, so does every key minted from it.",
    params(("id" = Uuid, Path, description = "The key's id"), RevokeQuery),
    security(("admin_jwt" = [])),
    responses(
        (status = 200, description = "The revoked key (the first revocation time is kept)", body = RevokedKey),
        crate::apidoc::errors::AdminLookupErrors,
    )
)]
pub(super) async fn revoke_key(
    State(state): State<AppState>,
    claims: Claims,
    Path(key_id): Path<Uuid>,
    q: Result<Query<RevokeQuery>, QueryRejection>,
) -> Result<Json<RevokedKey>, ApiError> {
    claims.require(Role::Admin)?;
    let q = query(q)?;
    Ok(Json(ops::keys::revoke(&state.db, actor(&claims), key_id, claims.tenant_id, q.cascade).await?))
}

#[utoipa::path(
    put,
    path = "/admin/v1/tenants/{id}/models/{model}",
    tag = "admin",
    operation_id = "adminAllowModel",
    summary = "Grant a tenant a private model",
    description = "Role: admin, with a token not confined to a tenant.",
    params(("id" = Uuid, Path, description = "The tenant's id"), ("model" = String, Path, description = "The model id")),
    security(("admin_jwt" = [])),
    responses(
        (status = 200, description = "The tenant's access", body = ModelAccess),
        crate::apidoc::errors::AdminLookupErrors,
    )
)]
pub(super) async fn allow_model(
    State(state): State<AppState>,
    claims: Claims,
    Path((id, model)): Path<(Uuid, String)>,
) -> Result<Json<ModelAccess>, ApiError> {
    set_access(&state, &claims, id, &model, true).await
}

#[utoipa::path(
    delete,
    path = "/admin/v1/tenants/{id}/models/{model}",
    tag = "admin",
    operation_id = "adminDenyModel",
    summary = "Withdraw a tenant's private model",
    description = "Role: admin, with a token not confined to a tenant.",
    params(("id" = Uuid, Path, description = "The tenant's id"), ("model" = String, Path, description = "The model id")),
    security(("admin_jwt" = [])),
    responses(
        (status = 200, description = "The tenant's access", body = ModelAccess),
        crate::apidoc::errors::AdminLookupErrors,
    )
)]
pub(super) async fn deny_model(
    State(state): State<AppState>,
    claims: Claims,
    Path((id, model)): Path<(Uuid, String)>,
) -> Result<Json<ModelAccess>, ApiError> {
    set_access(&state, &claims, id, &model, false).await
}

async fn set_access(state: &AppState, claims: &Claims, id: Uuid, model: &str, allow: bool) -> Result<Json<ModelAccess>, ApiError> {
    // A private model is another tenant's business (its weights, its price): only an unconfined admin grants it.
    claims.require_unconfined(Role::Admin)?;
    let access = ops::access::set(&state.db, actor(claims), id, model, allow).await?;
    // This replica serves the change from its next request; the others hear of it (`changes.rs`).
    if let Err(e) = state.catalog.reload(&state.db).await {
        tracing::warn!(error = %e, "catalog not reloaded after a change; the listener will");
    }
    Ok(Json(access))
}
