//! `POST /v1/responses`: the request as the gateway reads it (`responses::translate`) and the Response
//! object it writes (`responses::object`); the stored responses' routes (`routes::stored_responses`).

use runaii_wire::StopSequences;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

/// A Responses request. Parameters not listed here are refused by name (400 `unsupported_parameter` or
/// `unknown_parameter`): an `include` other than `message.output_text.logprobs`, `truncation: auto`, `conversation`,
/// `prompt`, `max_tool_calls`, a `reasoning.summary`, a `service_tier` other than `auto`/`default`.
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
    /// Continue the conversation of this stored response (its input and output come before `input`;
    /// its `instructions` do not carry over). 400 `previous_response_not_found` for an id the key's
    /// tenant does not have.
    pub previous_response_id: Option<String>,
    /// Keep the response (true by default): `GET`/`DELETE /v1/responses/{id}`, `input_items`, and
    /// `previous_response_id` read it. With `false`, nothing is kept. 400 `storage_quota_exceeded` when
    /// the tenant's stored responses fill its quota.
    pub store: Option<bool>,
    /// Only `effort` (as chat's `reasoning_effort`).
    #[schema(value_type = Option<Object>)]
    pub reasoning: Option<Value>,
    /// Answer at once with the response `queued`, run it on, and let `GET /v1/responses/{id}` show it
    /// `in_progress`, then `completed`, `incomplete` or `failed`; `POST /v1/responses/{id}/cancel` stops it.
    /// Needs `store` (not false) and no `stream`. Billed exactly as online.
    pub background: Option<bool>,
    /// Requests with the same key go to the same worker (see chat's `prompt_cache_key`).
    pub prompt_cache_key: Option<String>,
    /// The caller's end user (at most 256 characters); it does not change the answer.
    pub user: Option<String>,
    /// As `user`.
    pub safety_identifier: Option<String>,
    /// Function tools, flat: `{"type": "function", "name", "description"?, "parameters"?, "strict"?}`.
    /// Calls come back as `function_call` output items; answer them with `function_call_output` input
    /// items (and `previous_response_id`, or the calls sent back as `function_call` items). Built-in
    /// tools are refused.
    pub tools: Option<Vec<FunctionTool>>,
    /// Echoed in the Response.
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
    /// Echoed in the Response.
    pub parallel_tool_calls: Option<bool>,
    /// `auto`, `none`, `required` or `{"type": "function", "name": …}`; echoed in the Response.
    #[schema(value_type = Option<Object>)]
    pub tool_choice: Option<Value>,
    /// `["message.output_text.logprobs"]`: the `output_text` part and the text events carry each token's
    /// log probability (see chat's `logprobs`). Nothing else can be included. Refused with tools the model
    /// may call.
    pub include: Option<Vec<String>>,
    /// 0 to 20: with the logprobs `include`, this many of the most likely tokens at each step.
    #[schema(minimum = 0, maximum = 20)]
    pub top_logprobs: Option<u32>,
}

/// A function the model may call.
#[derive(Serialize, ToSchema)]
pub struct FunctionTool {
    #[serde(rename = "type")]
    #[schema(pattern = "^function$", example = "function")]
    pub kind: String,
    #[schema(pattern = "^[a-zA-Z0-9_-]{1,64}$", example = "get_weather")]
    pub name: String,
    pub description: Option<String>,
    /// A JSON Schema object for the arguments.
    #[schema(value_type = Option<Object>)]
    pub parameters: Option<Value>,
    pub strict: Option<bool>,
}

/// A string (one user message) or a list of items: messages, earlier `function_call`s and their
/// `function_call_output`s.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum ResponsesInput {
    Text(String),
    Items(Vec<InputItem>),
}

#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum InputItem {
    Message(InputMessage),
    FunctionCall(FunctionCallItem),
    FunctionCallOutput(FunctionCallOutputItem),
}

/// The result of a call, for the model to read.
#[derive(Serialize, ToSchema)]
pub struct FunctionCallOutputItem {
    #[serde(rename = "type")]
    #[schema(pattern = "^function_call_output$")]
    pub kind: String,
    pub call_id: String,
    /// Text (or `input_text` parts).
    pub output: String,
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
    /// Null, except on a background response that `failed`: what failed it.
    pub error: Option<ResponseError>,
    /// Whether it ran in the background (`background: true`).
    pub background: bool,
    pub incomplete_details: Option<IncompleteDetails>,
    pub instructions: Option<String>,
    pub max_output_tokens: Option<i64>,
    pub model: String,
    pub output: Vec<OutputItem>,
    pub parallel_tool_calls: bool,
    /// Echoed.
    pub previous_response_id: Option<String>,
    pub reasoning: Reasoning,
    /// Whether the response is stored (the request's `store`, true by default).
    pub store: bool,
    pub temperature: f64,
    pub text: TextConfig,
    /// Echoed; `auto` by default.
    pub tool_choice: Value,
    /// Echoed; `[]` by default.
    pub tools: Vec<FunctionTool>,
    pub top_p: f64,
    /// Echoed.
    pub top_logprobs: Option<u32>,
    #[schema(pattern = "^disabled$")]
    pub truncation: String,
    /// Null only while in progress (in stream events).
    pub usage: Option<ResponseUsage>,
    /// Echoed.
    pub user: Option<String>,
    /// Echoed; `{}` by default.
    #[schema(value_type = Object)]
    pub metadata: Value,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResponseStatus {
    /// A background response not started yet.
    Queued,
    InProgress,
    Completed,
    /// `max_output_tokens` cut the answer.
    Incomplete,
    /// A background response whose run failed (`error` says why).
    Failed,
    /// A background response cancelled before it finished.
    Cancelled,
}

/// Why a background response failed: the error code and message its request would have answered.
#[derive(Serialize, ToSchema)]
pub struct ResponseError {
    pub code: String,
    pub message: String,
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

/// An output item: the answer's text, or a call the model asks the caller to run.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum OutputItem {
    Message(OutputMessage),
    FunctionCall(FunctionCallItem),
}

/// A call: run `name` with `arguments` (a JSON text matching the tool's `parameters`) and send the result
/// back as a `function_call_output` with the same `call_id`.
#[derive(Serialize, ToSchema)]
pub struct FunctionCallItem {
    #[schema(example = "fc_0190b7a8c6f07d3e8a1b2c3d4e5f6a7b")]
    pub id: Option<String>,
    #[serde(rename = "type")]
    #[schema(pattern = "^function_call$")]
    pub kind: String,
    pub status: Option<ResponseStatus>,
    #[schema(example = "call_0190b7a8c6f07d3e8a1b2c3d4e5f6a7b")]
    pub call_id: String,
    pub name: String,
    pub arguments: String,
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
    /// The text's tokens with their log probabilities, with the logprobs `include`; `[]` otherwise.
    pub logprobs: Vec<runaii_wire::TokenLogprob>,
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
/// `content_part` events; `delta` on `response.output_text.delta` and `response.function_call_arguments.delta`;
/// `text` on `response.output_text.done`; `name` and `arguments` on `response.function_call_arguments.done`;
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
    pub item: Option<OutputItem>,
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
    /// On `response.function_call_arguments.done`: the function called.
    #[schema(nullable = false)]
    pub name: Option<String>,
    /// On `response.function_call_arguments.done`: the whole arguments text.
    #[schema(nullable = false)]
    pub arguments: Option<String>,
    /// On `response.output_text.delta` and `.done`: the tokens of the text (all of them on `.done`) as
    /// `{token, logprob, top_logprobs: [{token, logprob}]}`, with the logprobs `include`; `[]` otherwise.
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
    #[serde(rename = "response.function_call_arguments.delta")]
    FunctionCallArgumentsDelta,
    #[serde(rename = "response.function_call_arguments.done")]
    FunctionCallArgumentsDone,
    #[serde(rename = "response.completed")]
    Completed,
    #[serde(rename = "response.incomplete")]
    Incomplete,
    #[serde(rename = "error")]
    Error,
}

/// What `DELETE /v1/responses/{id}` answers.
#[derive(Serialize, ToSchema)]
pub struct DeletedResponse {
    pub id: String,
    #[schema(pattern = "^response$")]
    pub object: &'static str,
    pub deleted: bool,
}

/// The input items of a stored response, a page of them.
#[derive(Serialize, ToSchema)]
pub struct InputItemList {
    #[schema(pattern = "^list$")]
    pub object: &'static str,
    /// Items as the request sent them, each with an `id` (`msg_…` for messages, whose `content` is a list
    /// of `input_text` or `output_text` parts).
    #[schema(value_type = Vec<Object>)]
    pub data: Vec<Value>,
    pub first_id: Option<String>,
    pub last_id: Option<String>,
    pub has_more: bool,
}
