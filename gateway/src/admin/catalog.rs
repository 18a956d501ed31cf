//! Ops: the catalog (models, prices, enable/disable, visibility, workers) and live worker health.
//! Every route here needs a token not confined to a tenant: the catalog is shared by every tenant (it
//! names private models and sets prices), and a worker URL decides where prompts are sent.

use axum::extract::rejection::JsonRejection;
use axum::extract::{Json, State};
use serde::Serialize;
use utoipa::ToSchema;

use super::input::body;
use super::{Claims, Role};
use crate::db::models::{self, CatalogEntry, ModelChange};
use crate::error::ApiError;
use crate::extract::Path;
use crate::ops::catalog::NewCatalogModel;
use crate::ops::{self, Actor};
use crate::shapes::ListObject;
use crate::state::AppState;

/// A catalog entry with whether a ready worker serves it now.
#[derive(Debug, Serialize, ToSchema)]
pub struct CatalogModel {
    #[serde(flatten)]
    pub entry: CatalogEntry,
    pub is_ready: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CatalogList {
    #[schema(inline)]
    pub object: ListObject,
    pub data: Vec<CatalogModel>,
}

/// A worker: announced in Redis or configured in the catalog. Load figures only for ready ones.
#[derive(Debug, Serialize, ToSchema)]
pub struct Worker {
    pub model: String,
    pub url: String,
    pub ready: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub slots: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub slots_busy: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub queue_depth: Option<u64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WorkerList {
    #[schema(inline)]
    pub object: ListObject,
    pub data: Vec<Worker>,
}

#[utoipa::path(
    get,
    path = "/admin/v1/models",
    tag = "admin",
    operation_id = "adminListModels",
    summary = "List the catalog",
    description = "Role: ops, with a token not confined to a tenant. Every model, enabled or not, with prices, flags, configured workers and readiness.",
    security(("admin_jwt" = [])),
    responses(
        (status = 200, description = "Every model, enabled or not", body = CatalogList),
        crate::apidoc::errors::AdminErrors,
    )
)]
pub(super) async fn list(State(state): State<AppState>, claims: Claims) -> Result<Json<CatalogList>, ApiError> {
    claims.require_unconfined(Role::Ops)?;
    let entries = models::catalog(&mut *state.db.acquire().await?, None).await?;
    let ready = state.registry.ready_models().await;
    let data = entries.into_iter().map(|entry| CatalogModel { is_ready: ready.contains(&entry.model.id), entry }).collect();
    Ok(Json(CatalogList { object: ListObject::List, data }))
}

#[utoipa::path(
    post,
    path = "/admin/v1/models",
    tag = "admin",
    operation_id = "adminCreateModel",
    summary = "Add a model",
    description = "Role: ops, with a token not confined to a tenant. Prices are USD per million tokens: at least 0, below 10^10, at most 10 decimals (never rounded).",
    request_body(content = NewCatalogModel, content_type = "application/json"),
    security(("admin_jwt" = [])),
    responses(
        (status = 200, description = "The new catalog entry", body = CatalogEntry),
        crate::apidoc::errors::AdminCreateErrors,
    )
)]
pub(super) async fn create(
    State(state): State<AppState>,
    claims: Claims,
    new: Result<Json<NewCatalogModel>, JsonRejection>,
) -> Result<Json<CatalogEntry>, ApiError> {
    claims.require_unconfined(Role::Ops)?;
    let new = body(new, state.settings.max_body_bytes)?;
    let entry = ops::catalog::create(&state.db, Actor(&claims.sub), &new).await?;
    Ok(Json(probed(&state, entry).await))
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
        crate::apidoc::errors::AdminChangeErrors,
    )
)]
pub(super) async fn update(
    State(state): State<AppState>,
    claims: Claims,
    Path(id): Path<String>,
    change: Result<Json<ModelChange>, JsonRejection>,
) -> Result<Json<CatalogEntry>, ApiError> {
    claims.require_unconfined(Role::Ops)?;
    let change = body(change, state.settings.max_body_bytes)?;
    let entry = ops::catalog::update(&state.db, Actor(&claims.sub), &id, &change).await?;
    Ok(Json(probed(&state, entry).await))
}

/// This replica serves the change from its next request (the others hear of it within milliseconds,
/// see `changes.rs`), and picks up new worker URLs now rather than at the next probe.
async fn probed(state: &AppState, entry: CatalogEntry) -> CatalogEntry {
    if let Err(e) = state.catalog.reload(&state.db).await {
        tracing::warn!(error = %e, "catalog not reloaded after a change; the listener will");
    }
    state.registry.probe().await;
    entry
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
        (status = 200, description = "Live workers with their load, and configured ones that are down", body = WorkerList),
        crate::apidoc::errors::AdminErrors,
    )
)]
pub(super) async fn workers(State(state): State<AppState>, claims: Claims) -> Result<Json<WorkerList>, ApiError> {
    claims.require_unconfined(Role::Ops)?;
    let configured = models::configured_workers(&state.db).await?;
    // One scan of the registry for every model, not one per model.
    let mut data: Vec<Worker> = state
        .registry
        .all_ready()
        .await
        .into_iter()
        .map(|w| Worker {
            model: w.model,
            url: w.url,
            ready: true,
            slots: Some(w.slots),
            slots_busy: Some(w.slots_busy),
            queue_depth: Some(w.queue_depth),
        })
        .collect();
    for (model, url) in configured {
        if !data.iter().any(|w| w.url == url && w.model == model) {
            data.push(Worker { model, url, ready: false, slots: None, slots_busy: None, queue_depth: None });
        }
    }
    Ok(Json(WorkerList { object: ListObject::List, data }))
}
