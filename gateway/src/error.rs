//! The gateway's one error type, answered in OpenAI's error shape with `x-request-id`.

use axum::http::{header, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use runaii_wire::ErrorBody;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("Incorrect API key provided. Send a valid key as `Authorization: Bearer <key>`.")]
    InvalidApiKey,
    /// Too many wrong keys from this address: refused without looking anything up.
    #[error("Too many failed authentications from this address; retry after {} s.", .retry_after.as_secs().max(1))]
    TooManyFailedAuthentications { retry_after: std::time::Duration },
    #[error("the request body is not valid JSON: {0}")]
    InvalidJson(String),
    #[error("{message}")]
    InvalidRequest { message: String, param: Option<&'static str>, code: &'static str },
    /// A parameter runaii does not honour at the value sent (or does not know): refused, never ignored.
    #[error("Unsupported parameter: '{name}': {why}.")]
    UnsupportedParameter { name: String, why: &'static str, code: &'static str },
    #[error("The model `{0}` does not exist or you do not have access to it.")]
    ModelNotFound(String),
    #[error("Previous response with id '{0}' not found.")]
    PreviousResponseNotFound(String),
    /// The tenant's stored responses fill its quota: a request asking to store is refused before it runs.
    #[error(
        "Stored responses take {used} of this tenant's {max} bytes: delete some (DELETE /v1/responses/{{id}}) or send `store: false`."
    )]
    StorageQuotaExceeded { used: i64, max: i64 },
    /// The tenant's files would take more than its quota: the upload is refused and nothing of it kept.
    #[error("Files take {used} of this tenant's {max} bytes, and this file does not fit: delete some (DELETE /v1/files/{{id}}).")]
    FileQuotaExceeded { used: i64, max: i64 },
    /// The engine refused the request (a constraint it cannot enforce, a context too long, a field it
    /// will not take): a 400 naming the field and the check that failed, not charged.
    #[error("the inference engine rejected the request ({check}): {message}")]
    UpstreamRejected { message: String, param: Option<String>, check: String },
    #[error("no worker serving `{0}` is ready; retry shortly")]
    NoReadyWorker(String),
    #[error("every worker serving `{0}` is at capacity; retry shortly")]
    WorkersBusy(String),
    /// The worker broke or went silent. The detail (which worker, what it said) is logged, never sent:
    /// customers must not learn internal addresses.
    #[error("the model's worker failed while serving this request; retry it")]
    UpstreamFailed(String),
    /// The answer did not begin within the request's deadline (`upstream::pace`): load, not a fault.
    #[error("the answer did not begin within {0} ms; retry with a smaller max_tokens, or stream it")]
    UpstreamTimeout(u128),
    /// The request ran past `--max-request-s`: ended, and billed for the work done.
    #[error("the request ran past the longest a request may run ({0} s) and was ended; ask for fewer tokens")]
    RequestTimeLimit(u32),
    #[error("the cost ledger is unavailable, so no request can be served")]
    LedgerUnavailable,
    /// The store of files' bytes did not answer; the detail is logged, never sent.
    #[error("file storage is unavailable; retry shortly")]
    FileStorageUnavailable,
    #[error("the request body is larger than {0} bytes")]
    PayloadTooLarge(usize),
    #[error("the request body did not arrive within {0} ms")]
    BodyTimeout(u64),
    #[error("no route for this path")]
    NoRoute,
    #[error("Rate limit reached{} on {} per minute; retry after {retry_after_ms} ms.",
        if *.by_tenant { " for your organization (all its keys together)" } else { "" },
        if *.by_tokens { "tokens" } else { "requests" })]
    RateLimited { retry_after_ms: u64, by_tokens: bool, by_tenant: bool },
    #[error("Too many requests in flight: this organization may have {limit} at once. Retry when one has finished.")]
    ConcurrencyLimited { limit: u32 },
    #[error("the rate limiter is unavailable, so requests are refused until it is back")]
    RateLimiterUnavailable,
    #[error("Insufficient credits: this request may cost up to {needed} USD and {available} USD is available. Add credits to continue.")]
    InsufficientCredits { needed: String, available: String },
    #[error("Monthly spend cap reached: your organization's requests in {month} cost {spent} USD and its cap is {cap} USD. Requests are refused until the month ends (UTC) or an admin raises the cap.")]
    SpendCapReached { cap: String, spent: String, month: String },
    #[error("This Idempotency-Key was used with a different request; use a new key for a new request.")]
    IdempotencyKeyReused,
    #[error("A request with this Idempotency-Key is still running; retry when it has finished.")]
    IdempotencyInProgress,
    /// The keyed request ran and was billed once; its answer was larger than the store keeps.
    #[error("The request with this Idempotency-Key completed and was delivered, but its answer was larger than {0} bytes and is not kept for replay; it is not run again.")]
    IdempotentAnswerNotStored(usize),
    /// The tenant keeps as many idempotent answers as it may; nothing ran.
    #[error("This account keeps {0} under Idempotency-Keys, the most it may; send the request without an Idempotency-Key, or with one once older keys expire.")]
    IdempotencyQuotaExceeded(QuotaKind),
    #[error("{0}")]
    AdminUnauthorized(String),
    #[error("this token lacks the `{0}` role")]
    Forbidden(&'static str),
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("the admin API is not configured: set RUNAII_ADMIN_JWT_SECRET or RUNAII_ADMIN_JWT_PUBLIC_KEY")]
    AdminDisabled,
    #[error("internal error")]
    Internal(String),
}

/// Which per-tenant bound of the idempotency store was reached.
#[derive(Debug, Clone, Copy)]
pub enum QuotaKind {
    Keys(i64),
    Bytes(i64),
}

impl std::fmt::Display for QuotaKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Keys(n) => write!(f, "{n} keys"),
            Self::Bytes(n) => write!(f, "{n} bytes of answers"),
        }
    }
}

impl ApiError {
    pub fn invalid(message: impl Into<String>, param: &'static str) -> Self {
        Self::InvalidRequest { message: message.into(), param: Some(param), code: "invalid_request_error" }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Self::InvalidApiKey | Self::AdminUnauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::RateLimited { .. }
            | Self::ConcurrencyLimited { .. }
            | Self::TooManyFailedAuthentications { .. }
            | Self::IdempotencyQuotaExceeded(_) => StatusCode::TOO_MANY_REQUESTS,
            Self::InsufficientCredits { .. } | Self::SpendCapReached { .. } => StatusCode::PAYMENT_REQUIRED,
            Self::IdempotencyKeyReused | Self::IdempotentAnswerNotStored(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::IdempotencyInProgress | Self::Conflict(_) => StatusCode::CONFLICT,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::InvalidJson(_)
            | Self::InvalidRequest { .. }
            | Self::UnsupportedParameter { .. }
            | Self::PreviousResponseNotFound(_)
            | Self::StorageQuotaExceeded { .. }
            | Self::FileQuotaExceeded { .. }
            | Self::UpstreamRejected { .. } => StatusCode::BAD_REQUEST,
            Self::ModelNotFound(_) | Self::NoRoute => StatusCode::NOT_FOUND,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            Self::NoReadyWorker(_)
            | Self::WorkersBusy(_)
            | Self::LedgerUnavailable
            | Self::FileStorageUnavailable
            | Self::RateLimiterUnavailable
            | Self::AdminDisabled => StatusCode::SERVICE_UNAVAILABLE,
            Self::UpstreamFailed(_) => StatusCode::BAD_GATEWAY,
            Self::UpstreamTimeout(_) | Self::RequestTimeLimit(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The stable machine-readable code.
    pub fn code(&self) -> Option<String> {
        let code = match self {
            Self::InvalidApiKey => "invalid_api_key",
            Self::TooManyFailedAuthentications { .. } => "too_many_failed_authentications",
            Self::InvalidJson(_) => "invalid_json",
            Self::InvalidRequest { code, .. } | Self::UnsupportedParameter { code, .. } => code,
            Self::ModelNotFound(_) => "model_not_found",
            Self::PreviousResponseNotFound(_) => "previous_response_not_found",
            Self::StorageQuotaExceeded { .. } | Self::FileQuotaExceeded { .. } => "storage_quota_exceeded",
            Self::UpstreamRejected { .. } => "upstream_rejected",
            Self::NoReadyWorker(_) => "model_unavailable",
            Self::WorkersBusy(_) => "model_overloaded",
            Self::UpstreamFailed(_) => "upstream_error",
            Self::UpstreamTimeout(_) => "upstream_timeout",
            Self::RequestTimeLimit(_) => "request_time_limit",
            Self::LedgerUnavailable => "ledger_unavailable",
            Self::FileStorageUnavailable => "file_storage_unavailable",
            Self::PayloadTooLarge(_) => "payload_too_large",
            Self::BodyTimeout(_) => "request_timeout",
            Self::NoRoute | Self::NotFound(_) => "not_found",
            Self::RateLimited { .. } => "rate_limit_exceeded",
            Self::ConcurrencyLimited { .. } => "concurrency_limit_exceeded",
            Self::RateLimiterUnavailable => "rate_limiter_unavailable",
            Self::InsufficientCredits { .. } => "insufficient_credits",
            Self::SpendCapReached { .. } => "spend_cap_reached",
            Self::IdempotencyKeyReused => "idempotency_key_reused",
            Self::IdempotencyInProgress => "idempotency_key_in_use",
            Self::IdempotentAnswerNotStored(_) => "idempotent_answer_not_stored",
            Self::IdempotencyQuotaExceeded(_) => "idempotency_quota_exceeded",
            Self::AdminUnauthorized(_) => "invalid_admin_token",
            Self::Forbidden(_) => "insufficient_role",
            Self::Conflict(_) => "conflict",
            Self::AdminDisabled => "admin_api_disabled",
            Self::Internal(_) => "internal_error",
        };
        Some(code.to_owned())
    }

    fn param(&self) -> Option<String> {
        match self {
            Self::InvalidRequest { param, .. } => param.map(str::to_owned),
            Self::UnsupportedParameter { name, .. } => Some(name.clone()),
            Self::PreviousResponseNotFound(_) => Some("previous_response_id".into()),
            Self::StorageQuotaExceeded { .. } => Some("store".into()),
            Self::FileQuotaExceeded { .. } => Some("file".into()),
            Self::UpstreamRejected { param, .. } => param.clone(),
            _ => None,
        }
    }

    pub fn body(&self) -> ErrorBody {
        let status = self.status();
        let kind = match self {
            // OpenAI's 429s name what ran out.
            Self::RateLimited { by_tokens: true, .. } => "tokens",
            Self::RateLimited { by_tokens: false, .. }
            | Self::ConcurrencyLimited { .. }
            | Self::TooManyFailedAuthentications { .. }
            | Self::IdempotencyQuotaExceeded(_) => "requests",
            Self::InsufficientCredits { .. } => "insufficient_credits",
            // OpenAI's name for a quota that retrying will not restore.
            Self::SpendCapReached { .. } => "insufficient_quota",
            _ if status.is_client_error() => "invalid_request_error",
            _ => "server_error",
        };
        match self {
            Self::Internal(detail) => tracing::error!(%detail, "internal error"),
            Self::UpstreamFailed(detail) => tracing::warn!(%detail, "worker failed"),
            _ => {}
        }
        let mut body = ErrorBody::new(self.to_string(), kind, None, None);
        body.error.param = self.param();
        body.error.code = self.code();
        body
    }
}

impl ApiError {
    /// This error's status and headers around `body`: the same whatever dialect writes the body.
    pub fn respond_with(self, body: &impl serde::Serialize) -> Response {
        let status = self.status();
        let mut response = (status, Json(body)).into_response();
        let headers = response.headers_mut();
        match self {
            // The rate limiter's 429 sets its own retry-after with the bucket's real wait.
            Self::RateLimited { .. } => {}
            Self::TooManyFailedAuthentications { retry_after } => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after.as_secs().max(1)));
            }
            // A request in flight ends when it ends; a second is a fair first wait.
            Self::IdempotencyInProgress | Self::ConcurrencyLimited { .. } => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            // More credit does not appear by retrying: tell the SDKs not to.
            Self::InsufficientCredits { .. }
            | Self::SpendCapReached { .. }
            | Self::IdempotencyKeyReused
            | Self::IdempotencyQuotaExceeded(_)
            | Self::StorageQuotaExceeded { .. }
            | Self::FileQuotaExceeded { .. }
            | Self::RequestTimeLimit(_) => {
                headers.insert(HeaderName::from_static("x-should-retry"), HeaderValue::from_static("false"));
            }
            _ if status == StatusCode::SERVICE_UNAVAILABLE => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            _ => {}
        }
        response
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = self.body();
        self.respond_with(&body)
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        if database_unavailable(&e) {
            tracing::error!(error = %e, "database unavailable");
            Self::LedgerUnavailable
        } else if is_nul_in_text(&e) {
            // Postgres text cannot hold U+0000; only client text (a name, a note, an id) ever carries it.
            Self::InvalidRequest {
                message: "text must not contain NUL (U+0000) characters".into(),
                param: None,
                code: "invalid_request_error",
            }
        } else {
            Self::Internal(e.to_string())
        }
    }
}

/// 22021 `character_not_in_repertoire`: what Postgres answers for a NUL character in text.
fn is_nul_in_text(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.code().as_deref() == Some("22021"))
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
