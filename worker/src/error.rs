//! The worker's one error type, answered in OpenAI's error shape.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use runaii_wire::ErrorBody;

use crate::constraint::{OutputViolation, Refusal};
use crate::engine::EngineFailure;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("the request body is not valid JSON: {0}")]
    InvalidJson(String),
    #[error("{message}")]
    InvalidRequest { message: String, param: Option<&'static str>, code: &'static str },
    #[error("the model `{0}` does not exist or is not served by this worker")]
    ModelNotFound(String),
    /// `param` is what to shorten: `messages` when the prompt alone fills the window, else `max_tokens`.
    #[error("{message}")]
    ContextLengthExceeded { message: String, param: &'static str },
    #[error("{refusal}")]
    Refused { refusal: Refusal, param: &'static str },
    #[error("the request body is larger than {0} bytes")]
    PayloadTooLarge(usize),
    #[error("the model is still loading; retry shortly")]
    Loading,
    #[error("all slots are busy and the queue is full; retry shortly")]
    Overloaded,
    #[error("the answer failed validation against the requested schema: {0}")]
    OutputInvalid(#[from] OutputViolation),
    #[error("{0}")]
    Engine(#[from] EngineFailure),
    #[error("this worker serves only its gateways: requests must be signed with the fleet's worker secret")]
    Unauthorized,
    #[error("no route for this path")]
    NoRoute,
    #[error("no request `{0}` of this scope is known here")]
    UnknownRequest(String),
    #[error("internal error")]
    Internal(String),
}

impl ApiError {
    pub fn invalid(message: impl Into<String>, param: &'static str) -> Self {
        Self::InvalidRequest { message: message.into(), param: Some(param), code: "invalid_value" }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Self::InvalidJson(_) | Self::InvalidRequest { .. } | Self::ContextLengthExceeded { .. } | Self::Refused { .. } => {
                StatusCode::BAD_REQUEST
            }
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::ModelNotFound(_) | Self::NoRoute | Self::UnknownRequest(_) => StatusCode::NOT_FOUND,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Loading | Self::Overloaded => StatusCode::SERVICE_UNAVAILABLE,
            Self::OutputInvalid(_) | Self::Engine(_) | Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The stable machine-readable code clients (and the gateway) branch on.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidJson(_) => "invalid_json",
            Self::InvalidRequest { code, .. } => code,
            Self::ModelNotFound(_) => "model_not_found",
            Self::UnknownRequest(_) => "request_not_found",
            Self::ContextLengthExceeded { .. } => "context_length_exceeded",
            Self::Refused { refusal: Refusal::InvalidSchema(_), .. } => "invalid_schema",
            Self::Refused { refusal: Refusal::Unenforceable(_), .. } => "grammar_rejected",
            Self::PayloadTooLarge(_) => "payload_too_large",
            Self::Loading => "model_loading",
            Self::Overloaded => "worker_overloaded",
            Self::OutputInvalid(_) => "output_validation_failed",
            Self::Engine(_) => "engine_error",
            Self::Unauthorized => "invalid_worker_credential",
            Self::NoRoute => "not_found",
            Self::Internal(_) => "internal_error",
        }
    }

    fn param(&self) -> Option<&'static str> {
        match self {
            Self::InvalidRequest { param, .. } => *param,
            Self::ContextLengthExceeded { param, .. } => Some(param),
            Self::Refused { param, .. } => Some(param),
            _ => None,
        }
    }

    pub fn body(&self) -> ErrorBody {
        let status = self.status();
        let kind = if status.is_server_error() { "server_error" } else { "invalid_request_error" };
        let message = match self {
            // The detail of an internal error goes to the log, not to the client.
            Self::Internal(detail) => {
                tracing::error!(%detail, "internal error");
                self.to_string()
            }
            _ => self.to_string(),
        };
        ErrorBody::new(message, kind, self.param(), Some(self.code()))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut response = (status, Json(self.body())).into_response();
        if status == StatusCode::SERVICE_UNAVAILABLE {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}
