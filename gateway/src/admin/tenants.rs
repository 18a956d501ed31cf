//! Admins: tenants, API keys (the secret is shown once), credit grants, access to private models.
//! Tenants can also be read by finance. A token confined to a tenant reads only that one and manages only
//! its keys: minting credit and granting models are for unconfined admins (a tenant's own token must not
//! be able to give it money or another tenant's private model).

use axum::extract::rejection::JsonRejection;
use axum::extract::{Json, State};
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::Deserialize;
use serde_json::{json, Value};
use uuid::Uuid;

use super::input::{body, db_error, present, snapshot};
use super::{Claims, Role};
use crate::auth;
use crate::db::audit::{self, Change};
use crate::db::keys::{self, KeyInfo, NewKey};
use crate::db::{credits, models, tenants};
use crate::error::ApiError;
use crate::extract::Path;
use crate::state::AppState;

fn tenant_json(t: &tenants::Tenant) -> Value {
    json!({"id": t.id, "object": "tenant", "name": t.name, "balance": t.balance.normalize().to_string(),
           "reserved": t.reserved.normalize().to_string(), "available": (t.balance - t.reserved).normalize().to_string(),
           "currency": "USD", "created_at": t.created_at})
}

fn reader(claims: &Claims) -> Result<(), ApiError> {
    claims.require(Role::Admin).or_else(|_| claims.require(Role::Finance))
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
        (status = 200, description = "Tenants with their money", body = crate::openapi::admin::TenantList),
        (status = 401, response = crate::openapi::errors::AdminUnauthorized),
        (status = 403, response = crate::openapi::errors::AdminForbidden),
        (status = 503, response = crate::openapi::errors::AdminUnavailable),
    )
)]
pub(super) async fn list(State(state): State<AppState>, claims: Claims) -> Result<Json<Value>, ApiError> {
    reader(&claims)?;
    let rows = tenants::list(&state.db, claims.tenant_scope(None)?).await?;
    Ok(Json(json!({"object": "list", "data": rows.iter().map(tenant_json).collect::<Vec<_>>()})))
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
        (status = 200, description = "The tenant", body = crate::openapi::admin::Tenant),
        (status = 400, response = crate::openapi::errors::InvalidRequest),
        (status = 401, response = crate::openapi::errors::AdminUnauthorized),
        (status = 403, response = crate::openapi::errors::AdminForbidden),
        (status = 404, response = crate::openapi::errors::AdminNotFound),
        (status = 503, response = crate::openapi::errors::AdminUnavailable),
    )
)]
pub(super) async fn get(State(state): State<AppState>, claims: Claims, Path(id): Path<Uuid>) -> Result<Json<Value>, ApiError> {
    reader(&claims)?;
    let id = scoped(&claims, id)?;
    let row = tenants::list(&state.db, Some(id)).await?.pop().ok_or_else(|| ApiError::NotFound(format!("tenant {id}")))?;
    Ok(Json(tenant_json(&row)))
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
        (status = 200, description = "The new tenant", body = crate::openapi::admin::Tenant),
        (status = 400, response = crate::openapi::errors::InvalidRequest),
        (status = 401, response = crate::openapi::errors::AdminUnauthorized),
        (status = 403, response = crate::openapi::errors::AdminForbidden),
        (status = 409, response = crate::openapi::errors::AdminConflict),
        (status = 503, response = crate::openapi::errors::AdminUnavailable),
    )
)]
pub(super) async fn create(
    State(state): State<AppState>,
    claims: Claims,
    new: Result<Json<NewTenant>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    claims.require_unconfined(Role::Admin)?;
    let new = body(new, state.settings.max_body_bytes)?;
    if new.name.trim().is_empty() || new.name.len() > 200 {
        return Err(ApiError::invalid("name must be 1 to 200 characters", "name"));
    }
    let mut tx = state.db.begin().await?;
    let tenant = tenants::create(&mut tx, new.name.trim()).await.map_err(db_error)?;
    let after = tenant_json(&tenant);
    audit::append(&mut tx, change(&claims, "tenant.create", "tenant", tenant.id.to_string(), None, Some(after.clone()))).await?;
    tx.commit().await?;
    Ok(Json(after))
}

fn change<'a>(
    claims: &'a Claims,
    action: &'a str,
    target_type: &'a str,
    target_id: String,
    before: Option<Value>,
    after: Option<Value>,
) -> Change<'a> {
    Change { actor: &claims.sub, action, target_type, target_id, before, after }
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
        (status = 200, description = "The balance after the grant", body = crate::openapi::admin::GrantResult),
        (status = 400, response = crate::openapi::errors::InvalidRequest),
        (status = 401, response = crate::openapi::errors::AdminUnauthorized),
        (status = 403, response = crate::openapi::errors::AdminForbidden),
        (status = 404, response = crate::openapi::errors::AdminNotFound),
        (status = 409, response = crate::openapi::errors::AdminConflict),
        (status = 503, response = crate::openapi::errors::AdminUnavailable),
    )
)]
pub(super) async fn grant(
    State(state): State<AppState>,
    claims: Claims,
    Path(id): Path<Uuid>,
    grant: Result<Json<Grant>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    // Credit is money: only an unconfined admin mints it. Finance reads the books but does not write
    // them, so one stolen finance token cannot create balance either.
    claims.require_unconfined(Role::Admin)?;
    let grant = body(grant, state.settings.max_body_bytes)?;
    // Balances are NUMERIC(30, 16): refuse what would be rounded.
    if grant.amount.is_zero() || grant.amount.normalize().scale() > 16 || grant.amount.abs() >= Decimal::from(1_000_000_000_000u64) {
        return Err(ApiError::invalid("amount must be non-zero, below 10^12 in size, with at most 16 decimals", "amount"));
    }
    let mut tx = state.db.begin().await?;
    let before = credits::balance_for_update(&mut tx, id).await?.ok_or_else(|| ApiError::NotFound(format!("tenant {id}")))?;
    let (entry, after) = credits::grant(&mut tx, id, grant.amount, &claims.sub, &grant.note)
        .await
        .map_err(db_error)?
        .ok_or_else(|| ApiError::NotFound(format!("tenant {id}")))?;
    let money = |b: credits::Balance| json!({"balance": b.balance.normalize().to_string(), "reserved": b.reserved.normalize().to_string()});
    let mut after_json = money(after);
    after_json["grant"] = json!({"ledger_entry": entry, "amount": grant.amount.normalize().to_string(), "note": grant.note});
    audit::append(&mut tx, change(&claims, "credits.grant", "tenant", id.to_string(), Some(money(before)), Some(after_json.clone())))
        .await?;
    tx.commit().await?;
    Ok(Json(after_json))
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
        (status = 200, description = "Keys without their secrets", body = crate::openapi::admin::KeyList),
        (status = 400, response = crate::openapi::errors::InvalidRequest),
        (status = 401, response = crate::openapi::errors::AdminUnauthorized),
        (status = 403, response = crate::openapi::errors::AdminForbidden),
        (status = 404, response = crate::openapi::errors::AdminNotFound),
        (status = 503, response = crate::openapi::errors::AdminUnavailable),
    )
)]
pub(super) async fn keys(State(state): State<AppState>, claims: Claims, Path(id): Path<Uuid>) -> Result<Json<Value>, ApiError> {
    claims.require(Role::Admin)?;
    let rows = keys::list(&state.db, scoped(&claims, id)?).await?;
    Ok(Json(json!({"object": "list", "data": rows})))
}

/// A new key's label, expiry and limits (requests and tokens per minute, positive).
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct KeySpec {
    #[serde(default)]
    name: String,
    expires_at: Option<DateTime<Utc>>,
    rpm_limit: Option<i32>,
    tpm_limit: Option<i32>,
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
        (status = 200, description = "The key, with its secret in `key`: shown this once", body = crate::openapi::admin::CreatedKey),
        (status = 400, response = crate::openapi::errors::InvalidRequest),
        (status = 401, response = crate::openapi::errors::AdminUnauthorized),
        (status = 403, response = crate::openapi::errors::AdminForbidden),
        (status = 404, response = crate::openapi::errors::AdminNotFound),
        (status = 409, response = crate::openapi::errors::AdminConflict),
        (status = 503, response = crate::openapi::errors::AdminUnavailable),
    )
)]
pub(super) async fn create_key(
    State(state): State<AppState>,
    claims: Claims,
    Path(id): Path<Uuid>,
    spec: Result<Json<KeySpec>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    claims.require(Role::Admin)?;
    let id = scoped(&claims, id)?;
    let spec = body(spec, state.settings.max_body_bytes)?;
    let (secret_key, public_id, hash) = auth::generate();
    let mut tx = state.db.begin().await?;
    let new = NewKey { name: &spec.name, expires_at: spec.expires_at, rpm_limit: spec.rpm_limit, tpm_limit: spec.tpm_limit };
    let info = keys::insert(&mut tx, id, &public_id, &hash, &new).await.map_err(db_error)?;
    audit::append(&mut tx, change(&claims, "key.create", "api_key", info.id.to_string(), None, snapshot(&info))).await?;
    tx.commit().await?;
    let mut answer = json!(info);
    answer["key"] = json!(secret_key);
    Ok(Json(answer))
}

/// Fields to change on a key; `null` clears an expiry or a limit, an absent field is left alone.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct KeyUpdate {
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<DateTime<Utc>>)]
    expires_at: Option<Option<DateTime<Utc>>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i32>)]
    rpm_limit: Option<Option<i32>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i32>)]
    tpm_limit: Option<Option<i32>>,
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
        (status = 400, response = crate::openapi::errors::InvalidRequest),
        (status = 401, response = crate::openapi::errors::AdminUnauthorized),
        (status = 403, response = crate::openapi::errors::AdminForbidden),
        (status = 404, response = crate::openapi::errors::AdminNotFound),
        (status = 409, response = crate::openapi::errors::AdminConflict),
        (status = 503, response = crate::openapi::errors::AdminUnavailable),
    )
)]
pub(super) async fn update_key(
    State(state): State<AppState>,
    claims: Claims,
    Path(key_id): Path<Uuid>,
    update: Result<Json<KeyUpdate>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    claims.require(Role::Admin)?;
    let update = body(update, state.settings.max_body_bytes)?;
    let mut tx = state.db.begin().await?;
    let before = key_in_scope(&mut tx, &claims, key_id).await?;
    let after = keys::update(&mut tx, key_id, update.expires_at, update.rpm_limit, update.tpm_limit)
        .await
        .map_err(db_error)?
        .ok_or_else(|| ApiError::NotFound(format!("key {key_id}")))?;
    audit::append(&mut tx, change(&claims, "key.update", "api_key", key_id.to_string(), snapshot(&before), snapshot(&after))).await?;
    tx.commit().await?;
    Ok(Json(json!(after)))
}

/// Revokes a key; it stops working on every replica within the key cache's lifetime.
#[utoipa::path(
    delete,
    path = "/admin/v1/keys/{id}",
    tag = "admin",
    operation_id = "adminRevokeKey",
    summary = "Revoke a key",
    description = "Role: admin. The key stops working within the key cache's lifetime on every replica.",
    params(("id" = Uuid, Path, description = "The key's id")),
    security(("admin_jwt" = [])),
    responses(
        (status = 200, description = "The revoked key (the first revocation time is kept)", body = KeyInfo),
        (status = 400, response = crate::openapi::errors::InvalidRequest),
        (status = 401, response = crate::openapi::errors::AdminUnauthorized),
        (status = 403, response = crate::openapi::errors::AdminForbidden),
        (status = 404, response = crate::openapi::errors::AdminNotFound),
        (status = 503, response = crate::openapi::errors::AdminUnavailable),
    )
)]
pub(super) async fn revoke_key(State(state): State<AppState>, claims: Claims, Path(key_id): Path<Uuid>) -> Result<Json<Value>, ApiError> {
    claims.require(Role::Admin)?;
    let mut tx = state.db.begin().await?;
    let before = key_in_scope(&mut tx, &claims, key_id).await?;
    let after = keys::revoke(&mut tx, key_id).await?.ok_or_else(|| ApiError::NotFound(format!("key {key_id}")))?;
    audit::append(&mut tx, change(&claims, "key.revoke", "api_key", key_id.to_string(), snapshot(&before), snapshot(&after))).await?;
    tx.commit().await?;
    Ok(Json(json!(after)))
}

async fn key_in_scope(tx: &mut sqlx::PgConnection, claims: &Claims, key_id: Uuid) -> Result<KeyInfo, ApiError> {
    let key = keys::info(tx, key_id).await?.ok_or_else(|| ApiError::NotFound(format!("key {key_id}")))?;
    scoped(claims, key.tenant_id).map_err(|_| ApiError::NotFound(format!("key {key_id}")))?;
    Ok(key)
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
        (status = 200, description = "The tenant's access", body = crate::openapi::admin::ModelAccess),
        (status = 400, response = crate::openapi::errors::InvalidRequest),
        (status = 401, response = crate::openapi::errors::AdminUnauthorized),
        (status = 403, response = crate::openapi::errors::AdminForbidden),
        (status = 404, response = crate::openapi::errors::AdminNotFound),
        (status = 503, response = crate::openapi::errors::AdminUnavailable),
    )
)]
pub(super) async fn allow_model(
    State(state): State<AppState>,
    claims: Claims,
    Path((id, model)): Path<(Uuid, String)>,
) -> Result<Json<Value>, ApiError> {
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
        (status = 200, description = "The tenant's access", body = crate::openapi::admin::ModelAccess),
        (status = 400, response = crate::openapi::errors::InvalidRequest),
        (status = 401, response = crate::openapi::errors::AdminUnauthorized),
        (status = 403, response = crate::openapi::errors::AdminForbidden),
        (status = 404, response = crate::openapi::errors::AdminNotFound),
        (status = 503, response = crate::openapi::errors::AdminUnavailable),
    )
)]
pub(super) async fn deny_model(
    State(state): State<AppState>,
    claims: Claims,
    Path((id, model)): Path<(Uuid, String)>,
) -> Result<Json<Value>, ApiError> {
    set_access(&state, &claims, id, &model, false).await
}

async fn set_access(state: &AppState, claims: &Claims, id: Uuid, model: &str, allow: bool) -> Result<Json<Value>, ApiError> {
    // A private model is another tenant's business (its weights, its price): only an unconfined admin grants it.
    claims.require_unconfined(Role::Admin)?;
    let mut tx = state.db.begin().await?;
    let changed = models::set_access(&mut tx, id, model, allow).await.map_err(db_error)?;
    let state_json = |allowed: bool| Some(json!({"tenant_id": id, "model": model, "allowed": allowed}));
    if changed {
        let action = if allow { "model_access.grant" } else { "model_access.revoke" };
        audit::append(&mut tx, change(claims, action, "tenant", id.to_string(), state_json(!allow), state_json(allow))).await?;
    }
    tx.commit().await?;
    Ok(Json(json!({"tenant_id": id, "model": model, "allowed": allow, "changed": changed})))
}
