//! Ops: the catalog (models, prices, enable/disable, visibility, workers) and live worker health.
//! Every route here needs a token not confined to a tenant: the catalog is shared by every tenant (it
//! names private models and sets prices), and a worker URL decides where prompts are sent.

use axum::extract::rejection::JsonRejection;
use axum::extract::{Json, State};
use serde::Deserialize;
use serde_json::{json, Value};

use super::input::{body, db_error, snapshot};
use super::{Claims, Role};
use crate::db::audit::{self, Change};
use crate::db::models::{self, CatalogEntry, ModelChange};
use crate::error::ApiError;
use crate::extract::Path;
use crate::state::AppState;

#[utoipa::path(
    get,
    path = "/admin/v1/models",
    tag = "admin",
    operation_id = "adminListModels",
    summary = "List the catalog",
    description = "Role: ops, with a token not confined to a tenant. Every model, enabled or not, with prices, flags, configured workers and readiness.",
    security(("admin_jwt" = [])),
    responses(
        (status = 200, description = "Every model, enabled or not", body = crate::openapi::admin::CatalogList),
        (status = 401, response = crate::openapi::errors::AdminUnauthorized),
        (status = 403, response = crate::openapi::errors::AdminForbidden),
        (status = 503, response = crate::openapi::errors::AdminUnavailable),
    )
)]
pub(super) async fn list(State(state): State<AppState>, claims: Claims) -> Result<Json<Value>, ApiError> {
    claims.require_unconfined(Role::Ops)?;
    let entries = models::catalog(&mut *state.db.acquire().await?, None).await?;
    let ready = state.registry.ready_models().await;
    let data: Vec<Value> = entries
        .iter()
        .map(|e| {
            let mut v = json!(e);
            v["is_ready"] = json!(ready.contains(&e.model.id));
            v
        })
        .collect();
    Ok(Json(json!({"object": "list", "data": data})))
}

#[derive(Debug, Deserialize)]
pub(super) struct NewModel {
    id: String,
    #[serde(flatten)]
    change: ModelChange,
}

#[utoipa::path(
    post,
    path = "/admin/v1/models",
    tag = "admin",
    operation_id = "adminCreateModel",
    summary = "Add a model",
    description = "Role: ops, with a token not confined to a tenant. Prices are USD per million tokens: at least 0, below 10^10, at most 10 decimals (never rounded).",
    request_body(content = crate::openapi::admin::NewCatalogModel, content_type = "application/json"),
    security(("admin_jwt" = [])),
    responses(
        (status = 200, description = "The new catalog entry", body = CatalogEntry),
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
    new: Result<Json<NewModel>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    claims.require_unconfined(Role::Ops)?;
    let NewModel { id, change } = body(new, state.settings.max_body_bytes)?;
    if id.is_empty() || id.len() > 200 {
        return Err(ApiError::invalid("id must be 1 to 200 characters", "id"));
    }
    if change.context_length.is_none() || change.input_price_per_mtok.is_none() || change.output_price_per_mtok.is_none() {
        return Err(ApiError::invalid(
            "a new model needs context_length, input_price_per_mtok and output_price_per_mtok",
            "context_length",
        ));
    }
    write(&state, &claims, &id, &change, true).await
}

#[utoipa::path(
    patch,
    path = "/admin/v1/models/{id}",
    tag = "admin",
    operation_id = "adminUpdateModel",
    summary = "Change a model",
    description = "Role: ops, with a token not confined to a tenant. Absent fields keep their value; `workers` replaces the list.",
    params(("id" = String, Path, description = "The model id")),
    request_body(content = ModelChange, content_type = "application/json"),
    security(("admin_jwt" = [])),
    responses(
        (status = 200, description = "The changed catalog entry", body = CatalogEntry),
        (status = 400, response = crate::openapi::errors::InvalidRequest),
        (status = 401, response = crate::openapi::errors::AdminUnauthorized),
        (status = 403, response = crate::openapi::errors::AdminForbidden),
        (status = 404, response = crate::openapi::errors::AdminNotFound),
        (status = 409, response = crate::openapi::errors::AdminConflict),
        (status = 503, response = crate::openapi::errors::AdminUnavailable),
    )
)]
pub(super) async fn update(
    State(state): State<AppState>,
    claims: Claims,
    Path(id): Path<String>,
    change: Result<Json<ModelChange>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    claims.require_unconfined(Role::Ops)?;
    write(&state, &claims, &id, &body(change, state.settings.max_body_bytes)?, false).await
}

async fn write(state: &AppState, claims: &Claims, id: &str, change: &ModelChange, create: bool) -> Result<Json<Value>, ApiError> {
    check(change)?;
    let mut tx = state.db.begin().await?;
    let before = models::catalog(&mut tx, Some(id)).await?.pop();
    if !models::write(&mut tx, id, change, create).await.map_err(db_error)? {
        return Err(ApiError::ModelNotFound(id.to_owned()));
    }
    let after = models::catalog(&mut tx, Some(id)).await?.pop();
    let action = if create { "model.create" } else { "model.update" };
    let entry = Change {
        actor: &claims.sub,
        action,
        target_type: "model",
        target_id: id.to_owned(),
        before: before.as_ref().and_then(snapshot),
        after: after.as_ref().and_then(snapshot),
    };
    audit::append(&mut tx, entry).await?;
    tx.commit().await?;
    // Pick up new worker URLs now rather than at the next probe.
    state.registry.probe().await;
    Ok(Json(json!(after)))
}

fn check(change: &ModelChange) -> Result<(), ApiError> {
    if change.context_length.is_some_and(|n| n <= 0) {
        return Err(ApiError::invalid("context_length must be positive", "context_length"));
    }
    // The catalog stores prices as NUMERIC(20, 10): refuse what it would round rather than round money.
    let prices = [("input_price_per_mtok", change.input_price_per_mtok), ("output_price_per_mtok", change.output_price_per_mtok)];
    for (param, price) in prices {
        if price.is_some_and(|p| p.is_sign_negative() || p.normalize().scale() > 10 || p >= rust_decimal::Decimal::from(10_000_000_000u64))
        {
            return Err(ApiError::invalid("a price per million tokens is at least 0, below 10^10, with at most 10 decimals", param));
        }
    }
    let bad_url = change.workers.iter().flatten().find(|u| !(u.starts_with("http://") || u.starts_with("https://")));
    if let Some(url) = bad_url {
        return Err(ApiError::invalid(format!("worker URL {url:?} must start with http:// or https://"), "workers"));
    }
    Ok(())
}

/// Every worker the gateway knows, announced or configured, with its load; ready ones only.
#[utoipa::path(
    get,
    path = "/admin/v1/workers",
    tag = "admin",
    operation_id = "adminListWorkers",
    summary = "List workers",
    description = "Role: ops, with a token not confined to a tenant.",
    security(("admin_jwt" = [])),
    responses(
        (status = 200, description = "Live workers with their load, and configured ones that are down", body = crate::openapi::admin::WorkerList),
        (status = 401, response = crate::openapi::errors::AdminUnauthorized),
        (status = 403, response = crate::openapi::errors::AdminForbidden),
        (status = 503, response = crate::openapi::errors::AdminUnavailable),
    )
)]
pub(super) async fn workers(State(state): State<AppState>, claims: Claims) -> Result<Json<Value>, ApiError> {
    claims.require_unconfined(Role::Ops)?;
    let configured = models::configured_workers(&state.db).await?;
    // One scan of the registry for every model, not one per model.
    let mut data: Vec<Value> = state
        .registry
        .all_ready()
        .await
        .into_iter()
        .map(|w| json!({"model": w.model, "url": w.url, "ready": true, "slots": w.slots, "slots_busy": w.slots_busy, "queue_depth": w.queue_depth}))
        .collect();
    for (model, url) in configured {
        if !data.iter().any(|w| w["url"] == url && w["model"] == model) {
            data.push(json!({"model": model, "url": url, "ready": false}));
        }
    }
    Ok(Json(json!({"object": "list", "data": data})))
}
