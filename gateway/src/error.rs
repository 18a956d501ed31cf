//! The gateway's one error type, answered in OpenAI's error shape with `x-request-id`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use runaii_wire::ErrorBody;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("Incorrect API key provided. Send a valid key as `Authorization: Bearer <key>`.")]
    InvalidApiKey,
    #[error("the request body is not valid JSON: {0}")]
    InvalidJson(String),
    #[error("{message}")]
    InvalidRequest { message: String, param: Option<&'static str>, code: &'static str },
    #[error("The model `{0}` does not exist or you do not have access to it.")]
    ModelNotFound(String),
    #[error("Previous response with id '{0}' not found.")]
    PreviousResponseNotFound(String),
    /// The engine refused the constraint; passed on as a 400, not charged.
    #[error("the inference engine rejected the request: {0}")]
    UpstreamRejected(String),
    /// A 4xx from the worker other than a constraint refusal (context too long, bad field), passed on.
    #[error("{message}")]
    UpstreamInvalid { message: String, param: Option<String>, code: Option<String> },
    #[error("no worker serving `{0}` is ready; retry shortly")]
    NoReadyWorker(String),
    #[error("the worker failed: {0}")]
    UpstreamFailed(String),
    #[error("the cost ledger is unavailable, so no request can be served")]
    LedgerUnavailable,
    #[error("the request body is larger than {0} bytes")]
    PayloadTooLarge(usize),
    #[error("no route for this path")]
    NoRoute,
    #[error("internal error")]
    Internal(String),
}

impl ApiError {
    pub fn invalid(message: impl Into<String>, param: &'static str) -> Self {
        Self::InvalidRequest { message: message.into(), param: Some(param), code: "invalid_request_error" }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Self::InvalidApiKey => StatusCode::UNAUTHORIZED,
            Self::InvalidJson(_)
            | Self::InvalidRequest { .. }
            | Self::PreviousResponseNotFound(_)
            | Self::UpstreamRejected(_)
            | Self::UpstreamInvalid { .. } => StatusCode::BAD_REQUEST,
            Self::ModelNotFound(_) | Self::NoRoute => StatusCode::NOT_FOUND,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::NoReadyWorker(_) | Self::LedgerUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::UpstreamFailed(_) => StatusCode::BAD_GATEWAY,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The stable machine-readable code.
    pub fn code(&self) -> Option<String> {
        let code = match self {
            Self::InvalidApiKey => "invalid_api_key",
            Self::InvalidJson(_) => "invalid_json",
            Self::InvalidRequest { code, .. } => code,
            Self::ModelNotFound(_) => "model_not_found",
            Self::PreviousResponseNotFound(_) => "previous_response_not_found",
            Self::UpstreamRejected(_) => "upstream_rejected",
            Self::UpstreamInvalid { code, .. } => return code.clone(),
            Self::NoReadyWorker(_) => "model_unavailable",
            Self::UpstreamFailed(_) => "upstream_error",
            Self::LedgerUnavailable => "ledger_unavailable",
            Self::PayloadTooLarge(_) => "payload_too_large",
            Self::NoRoute => "not_found",
            Self::Internal(_) => "internal_error",
        };
        Some(code.to_owned())
    }

    fn param(&self) -> Option<String> {
        match self {
            Self::InvalidRequest { param, .. } => param.map(str::to_owned),
            Self::PreviousResponseNotFound(_) => Some("previous_response_id".into()),
            Self::UpstreamRejected(_) => Some("response_format".into()),
            Self::UpstreamInvalid { param, .. } => param.clone(),
            _ => None,
        }
    }

    pub fn body(&self) -> ErrorBody {
        let status = self.status();
        let kind = match status {
            StatusCode::UNAUTHORIZED | StatusCode::BAD_REQUEST | StatusCode::NOT_FOUND | StatusCode::PAYLOAD_TOO_LARGE => {
                "invalid_request_error"
            }
            _ => "server_error",
        };
        if let Self::Internal(detail) = self {
            tracing::error!(%detail, "internal error");
        }
        let mut body = ErrorBody::new(self.to_string(), kind, None, None);
        body.error.param = self.param();
        body.error.code = self.code();
        body
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

impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        if database_unavailable(&e) {
            tracing::error!(error = %e, "database unavailable");
            Self::LedgerUnavailable
        } else {
            Self::Internal(e.to_string())
        }
    }
}

/// Postgres down, restarting (57P…), or out of connections (53…): the ledger cannot be written, which is
/// a 503, not a bug.
fn database_unavailable(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::PoolClosed => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|c| c.starts_with("53") || c.starts_with("57P")),
        _ => false,
    }
}
