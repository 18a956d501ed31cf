//! What `GET /v1/models`, `GET /v1/models/{id}` and `GET /v1/account` answer (built with `serde_json`
//! in `routes::models` and `routes::account`).

use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

/// An exact decimal, as text (money in USD, prices): never rounded through a float.
#[derive(Serialize, ToSchema)]
#[schema(value_type = String, pattern = r"^-?[0-9]+(\.[0-9]+)?$", example = "0.0000196")]
pub struct DecimalString(pub String);

#[derive(Serialize, ToSchema)]
pub enum ListObject {
    #[serde(rename = "list")]
    List,
}

#[derive(Serialize, ToSchema)]
pub enum Usd {
    #[serde(rename = "USD")]
    Usd,
}

#[derive(Serialize, ToSchema)]
pub struct ModelList {
    #[schema(inline)]
    pub object: ListObject,
    pub data: Vec<Model>,
}

/// OpenAI's model object, with what a router needs to choose: context, prices, readiness, features.
#[derive(Serialize, ToSchema)]
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

#[derive(Serialize, ToSchema)]
pub enum ModelObject {
    #[serde(rename = "model")]
    Model,
}

/// Prices in USD, exact: per token (`prompt`, `completion`) and per million tokens.
#[derive(Serialize, ToSchema)]
pub struct Pricing {
    pub prompt: DecimalString,
    pub completion: DecimalString,
    pub input_per_million_tokens: DecimalString,
    pub output_per_million_tokens: DecimalString,
    #[schema(inline)]
    pub currency: Usd,
}

/// The request features the model takes, each as `{"type": "boolean"}`; absent ones are not supported.
#[derive(Serialize, ToSchema)]
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

#[derive(Serialize, ToSchema)]
pub struct ParameterType {
    #[serde(rename = "type")]
    #[schema(inline)]
    pub kind: BooleanType,
}

#[derive(Serialize, ToSchema)]
pub enum BooleanType {
    #[serde(rename = "boolean")]
    Boolean,
}

/// The key's tenant: its money (USD, exact), this month's use and the key's rate limits.
#[derive(Serialize, ToSchema)]
pub struct Account {
    #[schema(inline)]
    pub object: AccountObject,
    pub tenant: AccountTenant,
    #[schema(inline)]
    pub currency: Usd,
    /// Credit granted less what was charged.
    pub balance: DecimalString,
    /// Held for requests in flight (their worst-case cost).
    pub reserved: DecimalString,
    /// `balance - reserved`: what new requests may use.
    pub available: DecimalString,
    pub usage: MonthUsage,
    pub rate_limits: RateLimits,
}

#[derive(Serialize, ToSchema)]
pub enum AccountObject {
    #[serde(rename = "account")]
    Account,
}

#[derive(Serialize, ToSchema)]
pub struct AccountTenant {
    pub id: Uuid,
    pub name: String,
}

/// The calendar month so far (UTC), summed from the cost records.
#[derive(Serialize, ToSchema)]
pub struct MonthUsage {
    #[schema(pattern = "^[0-9]{4}-[0-9]{2}$", example = "2026-11")]
    pub month: String,
    pub requests: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost: DecimalString,
}

#[derive(Serialize, ToSchema)]
pub struct RateLimits {
    pub requests_per_minute: u32,
    pub tokens_per_minute: u32,
}
