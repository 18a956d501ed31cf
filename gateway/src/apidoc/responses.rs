//! `POST /v1/responses`: the request as the gateway reads it (`responses::translate`) and the Response
//! object it writes (`responses::object`). Responses are not stored.

use runaii_wire::StopSequences;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

/// A Responses request. Stateless: `previous_response_id` is refused, and `tools` are not run yet.
#[derive(Serialize, ToSchema)]
pub struct ResponsesRequest {
    #[schema(example = "smollm2-135m-instruct")]
    pub model: String,
    pub input: ResponsesInput,
    /// A system message put before the input.
    pub instructions: Option<String>,
    pub text: Option<TextConfig>,
    /// The most tokens to generate.
    pub max_output_tokens: Option<i64>,
    #[schema(minimum = 0, maximum = 2)]
    pub temperature: Option<f32>,
    #[schema(exclusive_minimum = 0, maximum = 1)]
    pub top_p: Option<f32>,
    pub seed: Option<i64>,
    pub stop: Option<StopSequences>,
    /// Answer as server-sent events.
    pub stream: Option<bool>,
    /// Refused with 400 `previous_response_not_found`: responses are not stored.
    pub previous_response_id: Option<String>,
    /// Must be empty: tools are not supported on this route yet (use chat completions).
    #[schema(value_type = Option<Vec<Object>>, max_items = 0)]
    pub tools: Option<Vec<Value>>,
    /// Echoed in the Response.
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
    /// Echoed in the Response.
    pub parallel_tool_calls: Option<bool>,
    /// Echoed in the Response; tools are not run here.
    pub tool_choice: Option<Value>,
}

/// A string (one user message) or a list of messages.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum ResponsesInput {
    Text(String),
    Messages(Vec<InputMessage>),
}

#[derive(Serialize, ToSchema)]
pub struct InputMessage {
    /// `message` when present.
    #[serde(rename = "type")]
    #[schema(value_type = Option<String>, pattern = "^message$")]
    pub kind: Option<String>,
    /// `system`, `developer`, `user` or `assistant`.
    pub role: String,
    pub content: InputContent,
}

/// Text, or text parts (`input_text`, `output_text`, `text`).
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum InputContent {
    Text(String),
    Parts(Vec<InputPart>),
}

#[derive(Serialize, ToSchema)]
pub struct InputPart {
    #[serde(rename = "type")]
    #[schema(pattern = "^(input_text|output_text|text)$", example = "input_text")]
    pub kind: String,
    pub text: String,
}

#[derive(Serialize, ToSchema)]
pub struct TextConfig {
    pub format: TextFormat,
}

/// Flat, unlike chat's `response_format`: `name` and `schema` sit next to `type`.
#[derive(Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TextFormat {
    Text,
    JsonObject,
    JsonSchema {
        name: String,
        /// A JSON Schema (draft 2020-12) object.
        #[schema(value_type = Object)]
        schema: Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        strict: Option<bool>,
        #[serde(skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
}

/// A Response. Request settings are echoed (with OpenAI's defaults where absent).
#[derive(Serialize, ToSchema)]
pub struct ResponseObject {
    #[schema(example = "resp_0190b7a8c6f07d3e8a1b2c3d4e5f6a7b")]
    pub id: String,
    #[schema(pattern = "^response$")]
    pub object: String,
    /// Unix seconds.
    pub created_at: i64,
    pub status: ResponseStatus,
    pub completed_at: Option<i64>,
    /// Always null: a failure is an HTTP error instead.
    pub error: Option<String>,
    pub incomplete_details: Option<IncompleteDetails>,
    pub instructions: Option<String>,
    pub max_output_tokens: Option<i64>,
    pub model: String,
    pub output: Vec<OutputMessage>,
    pub parallel_tool_calls: bool,
    /// Always null.
    pub previous_response_id: Option<String>,
    pub reasoning: Reasoning,
    /// Always false.
    pub store: bool,
    pub temperature: f64,
    pub text: TextConfig,
    /// Echoed; `auto` by default.
    pub tool_choice: Value,
    /// Always empty.
    #[schema(value_type = Vec<Object>, max_items = 0)]
    pub tools: Vec<Value>,
    pub top_p: f64,
    #[schema(pattern = "^disabled$")]
    pub truncation: String,
    /// Null only while in progress (in stream events).
    pub usage: Option<ResponseUsage>,
    /// Always null.
    pub user: Option<String>,
    /// Echoed; `{}` by default.
    #[schema(value_type = Object)]
    pub metadata: Value,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResponseStatus {
    InProgress,
    Completed,
    /// `max_output_tokens` cut the answer.
    Incomplete,
}

#[derive(Serialize, ToSchema)]
pub struct IncompleteDetails {
    #[schema(pattern = "^max_output_tokens$")]
    pub reason: String,
}

#[derive(Serialize, ToSchema)]
pub struct Reasoning {
    pub effort: Option<String>,
    pub summary: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct OutputMessage {
    pub id: String,
    #[serde(rename = "type")]
    #[schema(pattern = "^message$")]
    pub kind: String,
    pub status: ResponseStatus,
    #[schema(pattern = "^assistant$")]
    pub role: String,
    pub content: Vec<OutputText>,
}

#[derive(Serialize, ToSchema)]
pub struct OutputText {
    #[serde(rename = "type")]
    #[schema(pattern = "^output_text$")]
    pub kind: String,
    /// The answer (with a json_schema format: the JSON, as text).
    pub text: String,
    #[schema(value_type = Vec<Object>)]
    pub annotations: Vec<Value>,
    #[schema(value_type = Vec<Object>)]
    pub logprobs: Vec<Value>,
}

#[derive(Serialize, ToSchema)]
pub struct ResponseUsage {
    pub input_tokens: u64,
    pub input_tokens_details: InputTokensDetails,
    pub output_tokens: u64,
    pub output_tokens_details: OutputTokensDetails,
    pub total_tokens: u64,
    /// USD, a JSON number with the ledger's exact digits.
    #[schema(minimum = 0, example = 0.0000196)]
    pub cost: f64,
}

#[derive(Serialize, ToSchema)]
pub struct InputTokensDetails {
    /// The part of `input_tokens` a worker read from its cache, billed at the model's cached-input price.
    pub cached_tokens: u64,
    /// Always 0.
    pub cache_write_tokens: u64,
}

#[derive(Serialize, ToSchema)]
pub struct OutputTokensDetails {
    pub reasoning_tokens: u64,
}

/// The `data` of one Responses stream event (its `type` repeats the SSE `event` name). Which fields are
/// present depends on the type: `response` on `response.created`, `response.in_progress`,
/// `response.completed` and `response.incomplete`; `item` on the `output_item` events; `part` on the
/// `content_part` events; `delta` on `response.output_text.delta`; `text` on `response.output_text.done`;
/// `code`, `message` and `param` on `error`.
#[derive(Serialize, ToSchema)]
pub struct ResponseStreamEvent {
    #[serde(rename = "type")]
    pub kind: ResponseStreamEventType,
    pub sequence_number: u64,
    #[schema(nullable = false)]
    pub response: Option<ResponseObject>,
    #[schema(nullable = false)]
    pub output_index: Option<u64>,
    #[schema(nullable = false)]
    pub item: Option<OutputMessage>,
    #[schema(nullable = false)]
    pub item_id: Option<String>,
    #[schema(nullable = false)]
    pub content_index: Option<u64>,
    #[schema(nullable = false)]
    pub part: Option<OutputText>,
    #[schema(nullable = false)]
    pub delta: Option<String>,
    #[schema(nullable = false)]
    pub text: Option<String>,
    #[schema(nullable = false, value_type = Option<Vec<Object>>)]
    pub logprobs: Option<Vec<Value>>,
    /// On `error`: the error's code (see the 4xx/5xx answers).
    pub code: Option<String>,
    #[schema(nullable = false)]
    pub message: Option<String>,
    pub param: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub enum ResponseStreamEventType {
    #[serde(rename = "response.created")]
    Created,
    #[serde(rename = "response.in_progress")]
    InProgress,
    #[serde(rename = "response.output_item.added")]
    OutputItemAdded,
    #[serde(rename = "response.content_part.added")]
    ContentPartAdded,
    #[serde(rename = "response.output_text.delta")]
    OutputTextDelta,
    #[serde(rename = "response.output_text.done")]
    OutputTextDone,
    #[serde(rename = "response.content_part.done")]
    ContentPartDone,
    #[serde(rename = "response.output_item.done")]
    OutputItemDone,
    #[serde(rename = "response.completed")]
    Completed,
    #[serde(rename = "response.incomplete")]
    Incomplete,
    #[serde(rename = "error")]
    Error,
}
