//! OpenAI's error body: `{"error":{"message","type","param","code"}}`, all four keys always present.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// An error, in OpenAI's shape.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// For people: what went wrong and what to do.
    pub message: String,
    /// `invalid_request_error`, `insufficient_credits`, `requests` or `tokens` (on a 429), `server_error`.
    #[serde(rename = "type")]
    #[schema(example = "invalid_request_error")]
    pub kind: String,
    /// The request field at fault, when there is one.
    #[schema(required = true)]
    pub param: Option<String>,
    /// The stable machine-readable code (`invalid_api_key`, `model_not_found`, `rate_limit_exceeded`, …).
    #[schema(required = true)]
    pub code: Option<String>,
}

impl ErrorBody {
    pub fn new(message: impl Into<String>, kind: &str, param: Option<&str>, code: Option<&str>) -> Self {
        Self {
            error: ErrorDetail {
                message: message.into(),
                kind: kind.to_owned(),
                param: param.map(str::to_owned),
                code: code.map(str::to_owned),
            },
        }
    }
}
