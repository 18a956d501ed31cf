//! `POST /v1/chat/completions`: request, response and stream chunk shapes.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::openapi;

/// A chat completion request. Only the fields runaii acts on are typed; the rest are ignored.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct ChatCompletionRequest {
    /// A model id from `GET /v1/models`.
    #[schema(example = "smollm2-135m-instruct")]
    pub model: String,
    /// The conversation so far: at least one message.
    #[schema(min_items = 1)]
    pub messages: Vec<ChatMessage>,
    /// 0 to 2; 1 by default.
    #[serde(default, deserialize_with = "finite_f32", skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 2)]
    pub temperature: Option<f32>,
    /// Above 0, at most 1; 1 by default.
    #[serde(default, deserialize_with = "finite_f32", skip_serializing_if = "Option::is_none")]
    #[schema(exclusive_minimum = 0, maximum = 1)]
    pub top_p: Option<f32>,
    /// Extension (llama.cpp): keep only the k most likely tokens before sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
    /// With a seed, the same request samples the same tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    /// Up to 4 non-empty strings; the answer ends before the first one it would contain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<StopSequences>,
    /// Deprecated spelling of `max_completion_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub max_tokens: Option<i64>,
    /// The most tokens to generate; wins over `max_tokens`. By default what the context leaves (up to
    /// the worker's default); more than the context leaves is a 400 `context_length_exceeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub max_completion_tokens: Option<i64>,
    /// How many answers (choices) to generate, each from the same prompt read once: billed for the
    /// prompt once and every answer's tokens. A worker answers at most as many as it runs sequences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 128)]
    pub n: Option<i64>,
    /// Answer as server-sent events (`text/event-stream` of `chat.completion.chunk`s, then `data: [DONE]`).
    #[serde(default)]
    pub stream: bool,
    /// Only with `stream: true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat>,
    /// Tool definitions (`{"type": "function", "function": {name, description, parameters}}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = openapi::tools)]
    pub tools: Option<Vec<Value>>,
    /// `"auto"`, `"required"`, `"none"` or `{"type": "function", "function": {"name": …}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = openapi::tool_choice)]
    pub tool_choice: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// Extension (llama.cpp): a GBNF grammar the answer must match. Exclusive with `response_format`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grammar: Option<String>,
    /// −2 to 2; 0 by default. Lowers a token's logit by this much for each time the answer already used it.
    #[serde(default, deserialize_with = "finite_f32", skip_serializing_if = "Option::is_none")]
    #[schema(minimum = -2, maximum = 2)]
    pub frequency_penalty: Option<f32>,
    /// −2 to 2; 0 by default. Lowers the logit of every token the answer already used by this much.
    #[serde(default, deserialize_with = "finite_f32", skip_serializing_if = "Option::is_none")]
    #[schema(minimum = -2, maximum = 2)]
    pub presence_penalty: Option<f32>,
    /// Extension (llama.cpp's DRY repetition guard): 0 turns it off. A token that would extend a repeat of
    /// `n ≥ dry_allowed_length` tokens of the answer loses `dry_multiplier · dry_base^(n − dry_allowed_length)`.
    /// Off by default, except for `json_schema` answers: 0.8, base 1.75, allowed length 2.
    #[serde(default, deserialize_with = "finite_f32", skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 5)]
    pub dry_multiplier: Option<f32>,
    /// Extension: 1 to 4; 1.75 by default.
    #[serde(default, deserialize_with = "finite_f32", skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 4)]
    pub dry_base: Option<f32>,
    /// Extension: 1 to 100; 2 by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 100)]
    pub dry_allowed_length: Option<u32>,
    /// Extension: for a `json_schema` answer (the default, `true`), the tokens that close the innermost
    /// open string, array or object get a large bonus once the tokens left are about what closing
    /// everything takes, so the answer ends complete and valid instead of being cut by `max_tokens`.
    /// Like the penalties it acts before the grammar, so it never admits what the schema forbids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub close_before_limit: Option<bool>,
    /// `none`, `minimal`, `low`, `medium`, `high` or `xhigh`. Honoured where the model's chat template
    /// has a thinking switch (`none` turns thinking off, any other level on) or effort levels (passed on);
    /// elsewhere only `none` is accepted. A constrained answer is written without thinking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(pattern = "^(none|minimal|low|medium|high|xhigh)$", example = "low")]
    pub reasoning_effort: Option<String>,
    /// Requests with the same key (and model) go to the same worker, whose cache most likely holds
    /// their common prompt prefix. Scoped to the caller's tenant. Without one, the leading messages
    /// choose the worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache_key: Option<String>,
    /// Return the log probability of each answer token (`choices[].logprobs.content`). They are the
    /// model's own distribution at that step (its logits, before temperature, penalties, top-k and top-p)
    /// restricted to the tokens the request's grammar allows there and renormalised over them. Refused
    /// with tools that may be called (the answer's text is then read for calls, not shown as it came).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<bool>,
    /// 0 to 20: with `logprobs: true`, this many of the most likely tokens at each step, with theirs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 20)]
    pub top_logprobs: Option<u32>,
}

/// An `f32` that is finite. From JSON text serde_json refuses a number beyond `f32`'s range, but from a
/// `serde_json::Value` (how the gateway reads a body) serde casts it to infinity: the gateway took
/// `"temperature": 1e39` and forwarded it to a worker that refused it (found by the `messages` fuzz
/// target). Refusing infinity makes both readings agree.
fn finite_f32<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<f32>, D::Error> {
    match Option::<f32>::deserialize(deserializer)? {
        Some(value) if !value.is_finite() => Err(serde::de::Error::custom(format!("number out of range: {value}"))),
        value => Ok(value),
    }
}

impl ChatCompletionRequest {
    /// The output limit the caller asked for: `max_completion_tokens` wins over the deprecated `max_tokens`.
    #[must_use]
    pub fn requested_max_tokens(&self) -> Option<i64> {
        self.max_completion_tokens.or(self.max_tokens)
    }

    #[must_use]
    pub fn include_usage(&self) -> bool {
        self.stream_options.as_ref().is_some_and(|o| o.include_usage)
    }

    /// With `logprobs: true`, how many alternatives each token lists (`top_logprobs`, 0 when absent);
    /// `None` when no log probabilities were asked for.
    #[must_use]
    pub fn wanted_logprobs(&self) -> Option<u32> {
        (self.logprobs == Some(true)).then(|| self.top_logprobs.unwrap_or(0))
    }
}

/// The most alternatives `top_logprobs` may ask for (OpenAI's limit).
pub const MAX_TOP_LOGPROBS: u32 = 20;

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct StreamOptions {
    /// Send a last chunk with `choices: []` and the request's `usage` (with `cost`) before `[DONE]`.
    #[serde(default)]
    pub include_usage: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum StopSequences {
    One(String),
    Many(Vec<String>),
}

impl StopSequences {
    #[must_use]
    pub fn into_vec(self) -> Vec<String> {
        match self {
            Self::One(s) => vec![s],
            Self::Many(v) => v,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ChatMessage {
    /// `system`, `developer`, `user`, `assistant` or `tool`.
    #[schema(pattern = "^(system|developer|user|assistant|tool)$", example = "user")]
    pub role: String,
    #[serde(default)]
    pub content: Option<MessageContent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// An assistant turn's calls, as a chat completion returned them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<ToolCall>>)]
    pub tool_calls: Option<Vec<Value>>,
    /// On a `tool` message: the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

/// Message content: a plain string or an array of typed parts.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum MessageContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

/// One part of a message's content. The models read text parts only.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ContentPart {
    /// `text`.
    #[serde(rename = "type")]
    #[schema(pattern = "^text$", example = "text")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(required = true, value_type = String)]
    pub text: Option<String>,
}

/// How the answer is constrained: free `text`, any `json_object`, or a `json_schema` the answer is
/// guaranteed to match (grammar-constrained decoding).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponseFormat {
    Text,
    JsonObject,
    JsonSchema { json_schema: JsonSchemaFormat },
}

/// The schema the answer must match. The gateway requires `name` and `schema` (the worker alone is
/// more lenient).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct JsonSchemaFormat {
    #[serde(default)]
    #[schema(required = true, value_type = String, pattern = "^[a-zA-Z0-9_-]{1,64}$", example = "invoice")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A JSON Schema (draft 2020-12) object.
    #[serde(default)]
    #[schema(required = true, value_type = Object)]
    pub schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// End of turn, end of grammar, or a stop sequence.
    Stop,
    /// `max_tokens` or the context window cut the answer.
    Length,
    ToolCalls,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    pub total_tokens: u32,
    /// Always sent, as OpenAI does: SDK code reads `usage.prompt_tokens_details.cached_tokens` without
    /// checking for null. Read as zero from a body that lacks it (an older worker).
    #[serde(default)]
    pub prompt_tokens_details: PromptTokensDetails,
}

/// How the prompt was read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PromptTokensDetails {
    /// Prompt tokens found in the worker's cache (a prefix an earlier request left in the KV cache) and
    /// not computed again; included in `prompt_tokens`.
    #[serde(default)]
    pub cached_tokens: u32,
}

impl Usage {
    #[must_use]
    pub fn new(prompt_tokens: u32, completion_tokens: u32) -> Self {
        Self {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens + completion_tokens,
            prompt_tokens_details: PromptTokensDetails::default(),
        }
    }

    /// The same counts, with `cached` of the prompt tokens read from the cache.
    #[must_use]
    pub fn with_cached(mut self, cached: u32) -> Self {
        self.prompt_tokens_details.cached_tokens = cached;
        self
    }

    /// Prompt tokens read from a cache.
    #[must_use]
    pub fn cached_tokens(&self) -> u32 {
        self.prompt_tokens_details.cached_tokens
    }
}

/// Where the time of one request went, in milliseconds (llama.cpp's `timings` extension, extended with
/// the time spent waiting for a slot).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Timings {
    pub queue_ms: f64,
    pub prompt_ms: f64,
    pub generation_ms: f64,
    /// Prompt tokens decoded for this request: the prompt less what the cache held.
    pub prompt_n: u32,
    /// Prompt tokens reused from the KV cache (llama-server's name).
    #[serde(default)]
    pub cache_n: u32,
    pub predicted_n: u32,
    pub predicted_per_second: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ChatCompletion {
    #[schema(example = "chatcmpl-0190b7a8c6f07d3e8a1b2c3d4e5f6a7b")]
    pub id: String,
    #[schema(pattern = "^chat\\.completion$")]
    pub object: String,
    /// Unix seconds.
    pub created: i64,
    pub model: String,
    pub choices: Vec<Choice>,
    pub usage: Usage,
    #[schema(required = true)]
    pub system_fingerprint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timings: Option<Timings>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Choice {
    pub index: u32,
    pub message: AssistantMessage,
    /// With `logprobs: true`, the answer's tokens with their log probabilities; otherwise null.
    #[schema(required = true)]
    pub logprobs: Option<ChoiceLogprobs>,
    pub finish_reason: FinishReason,
    /// Extension: the stop sequence that ended the answer (Anthropic's `stop_sequence`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_sequence: Option<String>,
}

/// The log probabilities of a choice's tokens.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ChoiceLogprobs {
    /// The content's tokens, in order.
    #[schema(required = true)]
    pub content: Option<Vec<TokenLogprob>>,
    /// Always null: the models write no refusals.
    #[schema(required = true)]
    pub refusal: Option<Vec<TokenLogprob>>,
}

/// One token of the answer: its text, its log probability, and the most likely tokens at its step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TokenLogprob {
    /// The token's text. A token that holds part of a character has it as U+FFFD here; `bytes` has the
    /// exact bytes.
    pub token: String,
    /// The natural log of the token's probability; at most 0.
    pub logprob: f32,
    /// The token's UTF-8 bytes: join them across tokens to rebuild characters a token split.
    #[schema(required = true)]
    pub bytes: Option<Vec<u8>>,
    /// The `top_logprobs` most likely tokens at this step, most likely first (fewer where the grammar
    /// allows fewer).
    pub top_logprobs: Vec<TopLogprob>,
}

/// One of the most likely tokens at a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TopLogprob {
    pub token: String,
    pub logprob: f32,
    #[schema(required = true)]
    pub bytes: Option<Vec<u8>>,
}

impl TopLogprob {
    /// A token given as its bytes (its text lossy where they are not whole characters).
    #[must_use]
    pub fn new(bytes: Vec<u8>, logprob: f32) -> Self {
        Self { token: String::from_utf8_lossy(&bytes).into_owned(), logprob, bytes: Some(bytes) }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AssistantMessage {
    #[schema(example = "assistant")]
    pub role: String,
    /// The answer's text (with a json_schema `response_format`: the JSON, as text); null when the model
    /// only called tools.
    #[schema(required = true)]
    pub content: Option<String>,
    #[schema(required = true)]
    pub refusal: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
}

/// One call the model made: `arguments` is a JSON text, as OpenAI sends it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ToolCall {
    pub id: String,
    /// `function`.
    #[serde(rename = "type")]
    #[schema(example = "function")]
    pub kind: String,
    pub function: FunctionCall,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FunctionCall {
    pub name: String,
    /// The arguments as a JSON text.
    pub arguments: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ChatCompletionChunk {
    pub id: String,
    #[schema(pattern = "^chat\\.completion\\.chunk$")]
    pub object: String,
    pub created: i64,
    pub model: String,
    #[schema(required = true)]
    pub system_fingerprint: Option<String>,
    pub choices: Vec<ChunkChoice>,
    /// Present (as null) on every chunk when usage was asked for, filled on the last one only.
    #[serde(default, skip_serializing_if = "UsageField::is_absent")]
    #[schema(value_type = Option<Usage>)]
    pub usage: UsageField,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timings: Option<Timings>,
    /// Extension: the request's usage so far, so a gateway can bill a stream the client abandons. The
    /// runaii gateway strips it before chunks reach its clients.
    #[serde(default, rename = "x_runaii_usage", skip_serializing_if = "Option::is_none")]
    #[schema(ignore)]
    pub running_usage: Option<Usage>,
}

/// `usage` on a chunk has three states: absent (not asked for), `null` (asked for, not the last chunk)
/// and filled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum UsageField {
    Filled(Usage),
    Null(Option<()>),
    #[default]
    Absent,
}

impl UsageField {
    #[must_use]
    pub fn is_absent(&self) -> bool {
        matches!(self, Self::Absent)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ChunkChoice {
    pub index: u32,
    pub delta: Delta,
    /// With `logprobs: true`, the tokens of this chunk's `delta.content`; otherwise null.
    #[schema(required = true)]
    pub logprobs: Option<ChoiceLogprobs>,
    /// Null until the last chunk of the choice.
    #[schema(required = true)]
    pub finish_reason: Option<FinishReason>,
    /// Extension, on the last chunk: the stop sequence that ended the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_sequence: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct Delta {
    /// In the first chunk only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// `[{index, id?, type?, function: {name?, arguments}}]`: a call's id and name in its first delta only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub tool_calls: Option<Vec<Value>>,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn floats_beyond_f32_are_refused_from_text_and_from_values_alike() {
        for field in ["temperature", "top_p", "frequency_penalty", "presence_penalty", "dry_multiplier", "dry_base"] {
            let body = serde_json::json!({"model": "m", "messages": [], field: 1e39});
            assert!(serde_json::from_str::<ChatCompletionRequest>(&body.to_string()).is_err(), "{field} from text");
            assert!(serde_json::from_value::<ChatCompletionRequest>(body).is_err(), "{field} from a Value");
            let fine = serde_json::json!({"model": "m", "messages": [], field: 0.5, "top_k": null});
            let request = serde_json::from_value::<ChatCompletionRequest>(fine).unwrap();
            assert_eq!(serde_json::to_value(&request).unwrap()[field], 0.5);
        }
        let absent =
            serde_json::from_value::<ChatCompletionRequest>(serde_json::json!({"model": "m", "messages": [], "temperature": null}))
                .unwrap();
        assert_eq!((absent.temperature, absent.top_p), (None, None));
    }
}
