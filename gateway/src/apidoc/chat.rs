//! `POST /v1/chat/completions` as the gateway answers it: the worker's `chat.completion` (see
//! `runaii-wire`) with the gateway's id and the exact cost in `usage`.

use runaii_wire::{ChatCompletion, PromptTokensDetails};
use serde::Serialize;
use utoipa::ToSchema;

/// A chat completion: the worker's answer with the gateway's id and `usage.cost`.
#[derive(Serialize, ToSchema)]
pub struct BilledChatCompletion {
    #[serde(flatten)]
    pub completion: ChatCompletion,
    pub usage: BilledUsage,
}

/// Token counts and what the request cost, exactly as the ledger recorded it.
#[derive(Serialize, ToSchema)]
pub struct BilledUsage {
    /// The prompt's tokens, cached ones included.
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    pub total_tokens: u32,
    /// `cached_tokens`: the part of `prompt_tokens` a worker read from its cache, billed at the model's
    /// cached-input price (0 when none was).
    pub prompt_tokens_details: PromptTokensDetails,
    /// USD, a JSON number written with the ledger's exact digits (parse it as a decimal to keep them).
    #[schema(minimum = 0, example = 0.0000196)]
    pub cost: f64,
}
