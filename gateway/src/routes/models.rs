//! `GET /v1/models` and `GET /v1/models/{id}`: the live catalog.

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use crate::auth::MaybeCaller;
use crate::db::models::{self, ModelRow};
use crate::error::ApiError;
use crate::extract::Path;
use crate::openapi::catalog::{Model, ModelList};
use crate::openapi::errors::{Unauthorized, Unavailable};
use crate::state::AppState;

/// Public models to anyone; with a key, also the private models its tenant may use.
#[utoipa::path(
    get,
    path = "/v1/models",
    tag = "models",
    operation_id = "listModels",
    summary = "List models",
    description = "The live catalog: public models to anyone; with a key, also the private models its tenant may use.",
    security((), ("api_key" = []), ("x_api_key" = [])),
    responses(
        (status = 200, description = "The catalog", body = ModelList),
        (status = 401, response = Unauthorized),
        (status = 503, response = Unavailable),
    )
)]
pub(super) async fn list(State(state): State<AppState>, MaybeCaller(caller): MaybeCaller) -> Result<Json<Value>, ApiError> {
    let rows = models::list_visible(&state.db, caller.map(|c| c.tenant_id)).await?;
    let ready = state.registry.ready_models().await;
    let data: Vec<Value> = rows.iter().map(|m| model_json(m, ready.contains(&m.id))).collect();
    Ok(Json(json!({"object": "list", "data": data})))
}

/// The id may hold `/` (percent-encoded by the SDKs as `%2F`, or raw from curl): axum decodes the
/// captured path, and the wildcard takes every segment.
#[utoipa::path(
    get,
    path = "/v1/models/{id}",
    tag = "models",
    operation_id = "getModel",
    summary = "Get a model",
    description = "One catalog entry. An id holding `/` may be sent percent-encoded (`%2F`) or raw.",
    params(("id" = String, Path, description = "The model id", example = "smollm2-135m-instruct")),
    security((), ("api_key" = []), ("x_api_key" = [])),
    responses(
        (status = 200, description = "The model", body = Model),
        (status = 400, response = crate::openapi::errors::InvalidRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = crate::openapi::errors::NotFound),
        (status = 503, response = Unavailable),
    )
)]
pub(super) async fn retrieve(
    State(state): State<AppState>,
    MaybeCaller(caller): MaybeCaller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let row = models::find_visible(&state.db, &id, caller.map(|c| c.tenant_id)).await?.ok_or(ApiError::ModelNotFound(id))?;
    let ready = !state.registry.ready(&row.id).await.is_empty();
    Ok(Json(model_json(&row, ready)))
}

fn model_json(m: &ModelRow, is_ready: bool) -> Value {
    let per_token = |per_mtok: rust_decimal::Decimal| (per_mtok / rust_decimal::Decimal::from(1_000_000)).normalize().to_string();
    let mut parameters = serde_json::Map::new();
    if m.supports_structured_outputs {
        parameters.insert("structured_outputs".into(), json!({"type": "boolean"}));
        parameters.insert("response_format".into(), json!({"type": "boolean"}));
    }
    if m.supports_tools {
        parameters.insert("tools".into(), json!({"type": "boolean"}));
    }
    json!({
        "id": m.id,
        "object": "model",
        "created": m.created_at.timestamp(),
        "owned_by": m.owned_by,
        "context_length": m.context_length,
        "is_ready": is_ready,
        "pricing": {
            "prompt": per_token(m.input_price_per_mtok),
            "completion": per_token(m.output_price_per_mtok),
            "input_per_million_tokens": m.input_price_per_mtok.normalize().to_string(),
            "output_per_million_tokens": m.output_price_per_mtok.normalize().to_string(),
            "currency": "USD"
        },
        "supported_parameters": parameters,
    })
}
