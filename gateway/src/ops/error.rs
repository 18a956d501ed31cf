//! Why an operation was refused or failed; each becomes the admin API's answer (an [`ApiError`], here)
//! and the command line prints it.

use crate::error::ApiError;

/// An operation's failure.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// The input breaks a rule the operation checks before touching the database; `param` names it.
    #[error("{message}")]
    Invalid { message: String, param: &'static str },
    #[error("{0} not found")]
    NotFound(String),
    /// A catalog model that does not exist.
    #[error("The model `{0}` does not exist or you do not have access to it.")]
    ModelNotFound(String),
    /// It exists already, or the change breaks a rule the database enforces.
    #[error("{0}")]
    Conflict(String),
    #[error("database error: {0}")]
    Database(#[source] sqlx::Error),
}

impl OpError {
    pub(super) fn invalid(message: impl Into<String>, param: &'static str) -> Self {
        Self::Invalid { message: message.into(), param }
    }
}

impl From<sqlx::Error> for OpError {
    /// Constraint violations are the caller's to fix (409, 404, 400), not the service's failure.
    fn from(e: sqlx::Error) -> Self {
        if let sqlx::Error::Database(db) = &e {
            match db.code().as_deref() {
                Some("23505") => return Self::Conflict("it already exists".into()),
                Some("23503") => return Self::NotFound("a referenced tenant or model".into()),
                Some("23514") => return Self::Conflict(format!("the change breaks a rule: {}", db.message())),
                Some("22P02" | "22003" | "23502") => return Self::invalid(db.message().to_owned(), "body"),
                _ => {}
            }
        }
        Self::Database(e)
    }
}

/// The admin API's answer to a failed operation.
impl From<OpError> for ApiError {
    fn from(e: OpError) -> Self {
        match e {
            OpError::Invalid { message, param } => ApiError::invalid(message, param),
            OpError::NotFound(what) => ApiError::NotFound(what),
            OpError::ModelNotFound(id) => ApiError::ModelNotFound(id),
            OpError::Conflict(why) => ApiError::Conflict(why),
            OpError::Database(e) => ApiError::from(e),
        }
    }
}
