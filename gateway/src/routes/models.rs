//! `GET /v1/models` and `GET /v1/models/{id}`: the live catalog.

use axum::extract::State;
use axum::Json;
use rust_decimal::Decimal;
use serde::Serialize;
use utoipa::ToSchema;

use crate::apidoc::errors::{Unauthorized, Unavailable};
use crate::auth::MaybeCaller;
use crate::db::models::ModelRow;
use crate::error::ApiError;
use crate::extract::Path;
use crate::shapes::{DecimalString, ListObject, Usd};
use crate::state::AppState;

#[derive(Debug, Serialize, ToSchema)]
pub struct ModelList {
    #[schema(inline)]
    pub object: ListObject,
    pub data: Vec<Model>,
}

/// OpenAI's model object, with what a router needs to choose: context, prices, readiness, features.
#[derive(Debug, Serialize, ToSchema)]
pub struct Model {
    #[schema(example = "smollm2-135m-instruct")]
    pub id: String,
    #[schema(inline)]
    pub object: ModelObject,
    /// Unix seconds: when the model entered the catalog.
    pub created: i64,
    pub owned_by: String,
    /// Tokens, prompt and answer together.
    pub context_length: i32,
    /// Whether a ready worker serves the model right now.
    pub is_ready: bool,
    pub pricing: Pricing,
    pub supported_parameters: SupportedParameters,
}

#[derive(Debug, Serialize, ToSchema)]
pub enum ModelObject {
    #[serde(rename = "model")]
    Model,
}

/// Prices in USD, exact: per token (`prompt`, `completion`, and `input_cache_read` for prompt tokens a
/// worker read from its cache, OpenRouter's names) and per million tokens.
#[derive(Debug, Serialize, ToSchema)]
pub struct Pricing {
    pub prompt: DecimalString,
    pub completion: DecimalString,
    pub input_cache_read: DecimalString,
    pub input_per_million_tokens: DecimalString,
    pub cached_input_per_million_tokens: DecimalString,
    pub output_per_million_tokens: DecimalString,
    #[schema(inline)]
    pub currency: Usd,
}

/// The request features the model takes, each as `{"type": "boolean"}`; absent ones are not supported.
#[derive(Debug, Serialize, ToSchema)]
pub struct SupportedParameters {
    /// `response_format` with `json_schema` (guided decoding).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub structured_outputs: Option<ParameterType>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub response_format: Option<ParameterType>,
    /// `tools` and `tool_choice`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub tools: Option<ParameterType>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ParameterType {
    #[serde(rename = "type")]
    #[schema(inline)]
    pub kind: BooleanType,
}

#[derive(Debug, Serialize, ToSchema)]
pub enum BooleanType {
    #[serde(rename = "boolean")]
    Boolean,
}

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
pub(super) async fn list(State(state): State<AppState>, MaybeCaller(caller): MaybeCaller) -> Result<Json<ModelList>, ApiError> {
    let rows = state.catalog.list_visible(caller.map(|c| c.tenant_id));
    let ready = state.registry.ready_models().await;
    let data = rows.iter().map(|m| Model::of(m, ready.contains(&m.id))).collect();
    Ok(Json(ModelList { object: ListObject::List, data }))
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
        (status = 400, response = crate::apidoc::errors::InvalidRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = crate::apidoc::errors::NotFound),
        (status = 503, response = Unavailable),
    )
)]
pub(super) async fn retrieve(
    State(state): State<AppState>,
    MaybeCaller(caller): MaybeCaller,
    Path(id): Path<String>,
) -> Result<Json<Model>, ApiError> {
    let row = state.catalog.find_visible(&id, caller.map(|c| c.tenant_id)).ok_or(ApiError::ModelNotFound(id))?;
    let ready = !state.registry.ready(&row.id).await.is_empty();
    Ok(Json(Model::of(&row, ready)))
}

impl Model {
    fn of(m: &ModelRow, is_ready: bool) -> Self {
        let per_token = |per_mtok: Decimal| DecimalString::from(per_mtok / Decimal::from(1_000_000));
        let boolean = |supported: bool| supported.then_some(ParameterType { kind: BooleanType::Boolean });
        Self {
            id: m.id.clone(),
            object: ModelObject::Model,
            created: m.created_at.timestamp(),
            owned_by: m.owned_by.clone(),
            context_length: m.context_length,
            is_ready,
            pricing: Pricing {
                prompt: per_token(m.input_price_per_mtok),
                completion: per_token(m.output_price_per_mtok),
                input_cache_read: per_token(m.cached_input_price_per_mtok),
                input_per_million_tokens: m.input_price_per_mtok.into(),
                cached_input_per_million_tokens: m.cached_input_price_per_mtok.into(),
                output_per_million_tokens: m.output_price_per_mtok.into(),
                currency: Usd::Usd,
            },
            supported_parameters: SupportedParameters {
                structured_outputs: boolean(m.supports_structured_outputs),
                response_format: boolean(m.supports_structured_outputs),
                tools: boolean(m.supports_tools),
            },
        }
    }
}
