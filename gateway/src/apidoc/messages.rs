//! `POST /v1/messages` (Anthropic): the request as the gateway reads it (`messages::translate`), the
//! message it writes (`messages::object`) and Anthropic's error shape (`messages::errors`).

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

/// A Messages request. Any `anthropic-version` and `anthropic-beta` header is accepted.
#[derive(Serialize, ToSchema)]
pub struct MessagesRequest {
    #[schema(example = "smollm2-135m-instruct")]
    pub model: String,
    /// At least 1.
    #[schema(minimum = 1)]
    pub max_tokens: u64,
    /// Alternating turns, at least one (unless `system` alone is the prompt).
    #[schema(min_items = 1)]
    pub messages: Vec<MessageParam>,
    /// A string or text blocks.
    pub system: Option<SystemPrompt>,
    pub tools: Option<Vec<ToolParam>>,
    pub tool_choice: Option<ToolChoice>,
    pub stop_sequences: Option<Vec<String>>,
    #[schema(minimum = 0, maximum = 2)]
    pub temperature: Option<f32>,
    #[schema(exclusive_minimum = 0, maximum = 1)]
    pub top_p: Option<f32>,
    pub top_k: Option<u32>,
    /// Structured output: the answer is one text block holding JSON that matches the schema.
    pub output_config: Option<OutputConfig>,
    /// The deprecated spelling of `output_config.format`.
    pub output_format: Option<OutputFormat>,
    /// Answer as server-sent events.
    pub stream: Option<bool>,
}

#[derive(Serialize, ToSchema)]
pub struct MessageParam {
    pub role: MessageRole,
    pub content: MessageContentParam,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MessageRole {
    User,
    Assistant,
}

#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum MessageContentParam {
    Text(String),
    Blocks(Vec<ContentBlockParam>),
}

/// `text` anywhere; `tool_use` in assistant turns; `tool_result` in user turns. Images and documents are
/// refused: the models read text.
#[derive(Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlockParam {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[schema(value_type = Object)]
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        content: Option<SystemPrompt>,
        /// Prefixes the result with `Error: ` for the model.
        is_error: Option<bool>,
    },
}

/// A string or text blocks.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum SystemPrompt {
    Text(String),
    Blocks(Vec<TextBlock>),
}

#[derive(Serialize, ToSchema)]
pub struct TextBlock {
    #[serde(rename = "type")]
    #[schema(pattern = "^text$")]
    pub kind: String,
    pub text: String,
}

/// A client tool. Server tools (a `type` other than `custom`) are refused.
#[derive(Serialize, ToSchema)]
pub struct ToolParam {
    pub name: String,
    pub description: Option<String>,
    /// A JSON Schema for the tool's input.
    #[schema(value_type = Object)]
    pub input_schema: Value,
    #[serde(rename = "type")]
    #[schema(pattern = "^custom$")]
    pub kind: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct ToolChoice {
    #[serde(rename = "type")]
    pub kind: ToolChoiceType,
    /// With `type: tool`: the tool to call.
    pub name: Option<String>,
    pub disable_parallel_tool_use: Option<bool>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoiceType {
    Auto,
    Any,
    None,
    Tool,
}

#[derive(Serialize, ToSchema)]
pub struct OutputConfig {
    pub format: Option<OutputFormat>,
}

#[derive(Serialize, ToSchema)]
pub struct OutputFormat {
    #[serde(rename = "type")]
    #[schema(pattern = "^json_schema$")]
    pub kind: String,
    /// A JSON Schema (draft 2020-12) object.
    #[schema(value_type = Object)]
    pub schema: Value,
}

/// A message, as Anthropic writes it.
#[derive(Serialize, ToSchema)]
pub struct Message {
    #[schema(example = "msg_0190b7a8c6f07d3e8a1b2c3d4e5f6a7b")]
    pub id: String,
    #[serde(rename = "type")]
    #[schema(pattern = "^message$")]
    pub kind: String,
    #[schema(pattern = "^assistant$")]
    pub role: String,
    pub model: String,
    pub content: Vec<ContentBlock>,
    pub stop_reason: StopReason,
    /// The stop sequence that ended the answer, if one did.
    pub stop_sequence: Option<String>,
    pub usage: MessageUsage,
}

#[derive(Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    Text {
        text: String,
    },
    ToolUse {
        #[schema(example = "toolu_0190b7a8c6f07d3e")]
        id: String,
        name: String,
        /// The call's arguments, parsed.
        #[schema(value_type = Object)]
        input: Value,
    },
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    MaxTokens,
    StopSequence,
    ToolUse,
}

#[derive(Serialize, ToSchema)]
pub struct MessageUsage {
    /// Prompt tokens not read from a cache (as Anthropic counts them: cache reads are apart).
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Always 0: prefixes are cached without `cache_control` and at no extra price.
    pub cache_creation_input_tokens: u64,
    /// Prompt tokens a worker read from its cache, billed at the model's cached-input price.
    pub cache_read_input_tokens: u64,
    /// USD, a JSON number with the ledger's exact digits.
    #[schema(minimum = 0, example = 0.0000196)]
    pub cost: f64,
}

/// An error, in Anthropic's shape.
#[derive(Serialize, ToSchema)]
pub struct AnthropicError {
    #[serde(rename = "type")]
    #[schema(pattern = "^error$")]
    pub kind: String,
    pub error: AnthropicErrorDetail,
}

#[derive(Serialize, ToSchema)]
pub struct AnthropicErrorDetail {
    /// `invalid_request_error`, `authentication_error`, `billing_error`, `permission_error`,
    /// `not_found_error`, `request_too_large`, `rate_limit_error`, `api_error` or `overloaded_error`.
    #[serde(rename = "type")]
    #[schema(example = "invalid_request_error")]
    pub kind: String,
    pub message: String,
}

/// The `data` of one Messages stream event (its `type` repeats the SSE `event` name): `message` on
/// `message_start`; `index` and `content_block` on `content_block_start`; `index` and `delta` on
/// `content_block_delta` (`text_delta` or `input_json_delta`) and `content_block_stop` (index only);
/// `delta` (`stop_reason`, `stop_sequence`) and `usage` (with `cost`) on `message_delta`; `error` on
/// `error`.
#[derive(Serialize, ToSchema)]
pub struct MessageStreamEvent {
    #[serde(rename = "type")]
    pub kind: MessageStreamEventType,
    #[schema(nullable = false)]
    pub message: Option<MessageStart>,
    #[schema(nullable = false)]
    pub index: Option<u64>,
    #[schema(nullable = false)]
    pub content_block: Option<ContentBlock>,
    #[schema(nullable = false)]
    pub delta: Option<StreamDelta>,
    #[schema(nullable = false)]
    pub usage: Option<StreamUsage>,
    #[schema(nullable = false)]
    pub error: Option<AnthropicErrorDetail>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MessageStreamEventType {
    MessageStart,
    ContentBlockStart,
    ContentBlockDelta,
    ContentBlockStop,
    MessageDelta,
    MessageStop,
    Error,
}

/// The message as `message_start` announces it: no content yet, no stop reason, the prompt's tokens.
#[derive(Serialize, ToSchema)]
pub struct MessageStart {
    pub id: String,
    #[serde(rename = "type")]
    #[schema(pattern = "^message$")]
    pub kind: String,
    #[schema(pattern = "^assistant$")]
    pub role: String,
    pub model: String,
    #[schema(value_type = Vec<Object>, max_items = 0)]
    pub content: Vec<Value>,
    /// Null until `message_delta`.
    pub stop_reason: Option<String>,
    pub stop_sequence: Option<String>,
    pub usage: StreamUsage,
}

/// A block's delta (`type` `text_delta` with `text`, or `input_json_delta` with `partial_json`), or on
/// `message_delta` the stop reason and sequence.
#[derive(Serialize, ToSchema)]
pub struct StreamDelta {
    #[serde(rename = "type")]
    #[schema(nullable = false, pattern = "^(text_delta|input_json_delta)$")]
    pub kind: Option<String>,
    #[schema(nullable = false)]
    pub text: Option<String>,
    /// A fragment of the tool input's JSON text; the fragments join into the input.
    #[schema(nullable = false)]
    pub partial_json: Option<String>,
    #[schema(nullable = false)]
    pub stop_reason: Option<StopReason>,
    pub stop_sequence: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct StreamUsage {
    /// Prompt tokens not read from a cache.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Always 0.
    pub cache_creation_input_tokens: u64,
    /// Prompt tokens read from a worker's cache.
    pub cache_read_input_tokens: u64,
    /// On `message_delta`: USD, a JSON number with the ledger's exact digits.
    #[schema(nullable = false, minimum = 0)]
    pub cost: Option<f64>,
}
