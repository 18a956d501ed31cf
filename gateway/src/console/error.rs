//! The console's errors: what a person is shown when something fails, with the HTTP status that goes
//! with it. How one becomes a page is the layout's business (`ui/layout.rs`): a page that fails inside a
//! signed-in session is drawn in the session's layout, the rest (a missing session, a bad form) on a bare
//! page. This module draws nothing, so everything above it may use it.

use axum::http::StatusCode;

use crate::error::ApiError;

/// Why a session is gone, named in the sign-in page's query (a fixed word, never a secret).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// No session cookie, or one Redis does not know (idle, past its end, signed out).
    NoSession,
    /// The API refused the session's credential: the key was revoked or expired, the token expired.
    CredentialRefused,
    /// The session reached its hard end: 12 hours, or its admin token's expiry.
    Expired,
}

impl Ended {
    pub(crate) fn word(self) -> &'static str {
        match self {
            Self::NoSession => "none",
            Self::CredentialRefused => "refused",
            Self::Expired => "expired",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ConsoleError {
    #[error("sign in to continue")]
    SignedOut(Ended),
    /// What the API answered (the same message it gives API clients).
    #[error("{message}")]
    Api { status: StatusCode, message: String },
    #[error("this form has expired or did not come from this console: reload the page and try again")]
    Csrf,
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0} not found")]
    NotFound(String),
    #[error(transparent)]
    Sessions(#[from] super::session::SessionError),
    /// A bug or an unexpected answer; the detail is logged, not shown.
    #[error("something went wrong on our side; it has been logged")]
    Internal(String),
}

impl ConsoleError {
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Self::SignedOut(_) => StatusCode::SEE_OTHER,
            Self::Api { status, .. } => *status,
            Self::Csrf | Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::Invalid(_) => StatusCode::BAD_REQUEST,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Sessions(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The message for the page, logging what must not be shown.
    pub(crate) fn message(&self) -> String {
        if let Self::Internal(detail) = self {
            tracing::error!(%detail, "console error");
        }
        self.to_string()
    }
}

/// The API's own answer: its status and the message API clients get (5xx details are logged by
/// `ApiError::body`, not shown).
impl From<ApiError> for ConsoleError {
    fn from(e: ApiError) -> Self {
        let status = e.status();
        Self::Api { status, message: e.body().error.message }
    }
}

impl From<sqlx::Error> for ConsoleError {
    fn from(e: sqlx::Error) -> Self {
        ApiError::from(e).into()
    }
}
