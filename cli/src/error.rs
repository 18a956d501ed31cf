//! The CLI's one error type and the exit status of each failure: the only place where a failure becomes
//! a number, so scripts can rely on the table in `docs/cli.md`.

use std::process::ExitCode;

use crate::config::ConfigError;
use crate::http::GatewayError;
use crate::mcp::ToolError;

/// Exit statuses. 0 is a valid answer; clap's own usage errors also exit with 2.
pub mod code {
    pub const OTHER: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const SCHEMA_REFUSED: u8 = 3;
    pub const CUT: u8 = 4;
    pub const INVALID_ANSWER: u8 = 5;
    pub const AUTH: u8 = 6;
    pub const REFUSED: u8 = 7;
    pub const TRANSPORT: u8 = 8;
    pub const TOOLS: u8 = 9;
}

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Flags that cannot work together, an unreadable schema file: found before any request.
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Gateway(#[from] GatewayError),
    /// `finish_reason: length`: the answer stopped at the token limit, so it is incomplete.
    #[error("answer cut at max_tokens {limit}: raise --max-tokens, or bound the schema (maxItems, maxLength)")]
    Cut { limit: u64 },
    /// The answer is not JSON matching the schema (a gateway that does not constrain decoding).
    #[error("the answer does not match the schema: {0}")]
    InvalidAnswer(String),
    #[error(transparent)]
    Tools(#[from] ToolError),
    /// The model still called tools after the last round `--max-tool-rounds` allows.
    #[error("the model still calls tools after {0} rounds: stopped at --max-tool-rounds {0}")]
    ToolRounds(u32),
    #[error("{context}: {source}")]
    Io { context: String, source: std::io::Error },
    /// A batch that did not end `completed` with every line answered 2xx.
    #[error("batch {id} ended {status}: {failed} of {total} lines failed or never ran")]
    Batch { id: String, status: String, failed: i64, total: i64 },
}

impl CliError {
    pub fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let context = context.into();
        move |source| Self::Io { context, source }
    }

    #[must_use]
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) | Self::Config(_) => code::USAGE,
            Self::Gateway(e) => gateway_code(e),
            Self::Cut { .. } => code::CUT,
            Self::InvalidAnswer(_) => code::INVALID_ANSWER,
            Self::Tools(_) | Self::ToolRounds(_) => code::TOOLS,
            Self::Io { .. } | Self::Batch { .. } => code::OTHER,
        }
    }

    #[must_use]
    pub fn exit(&self) -> ExitCode {
        ExitCode::from(self.exit_code())
    }
}

/// A refused schema or grammar is its own status (the fix is the schema); auth and credit are the
/// caller's to fix; 408, 429 and 5xx may pass on retry, like a broken connection.
fn gateway_code(e: &GatewayError) -> u8 {
    match e {
        GatewayError::NoKey | GatewayError::AdminTokenMissing => code::AUTH,
        GatewayError::Transport(_) | GatewayError::Protocol(_) => code::TRANSPORT,
        GatewayError::Status(s) if s.is_schema_refusal() => code::SCHEMA_REFUSED,
        GatewayError::Status(s) => match s.status {
            401..=403 => code::AUTH,
            408 | 429 => code::TRANSPORT,
            400..=499 => code::REFUSED,
            _ => code::TRANSPORT,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::StatusError;

    fn status(status: u16, code: Option<&str>, param: Option<&str>) -> CliError {
        CliError::Gateway(GatewayError::Status(StatusError {
            status,
            code: code.map(str::to_owned),
            param: param.map(str::to_owned),
            message: "m".into(),
        }))
    }

    #[test]
    fn every_failure_has_its_documented_status() {
        assert_eq!(status(400, Some("upstream_rejected"), Some("response_format")).exit_code(), 3);
        assert_eq!(status(400, Some("schema_too_complex"), Some("tools")).exit_code(), 3);
        assert_eq!(status(400, Some("invalid_request_error"), Some("response_format")).exit_code(), 3);
        assert_eq!(status(400, Some("context_length_exceeded"), None).exit_code(), 7);
        assert_eq!(status(404, Some("model_not_found"), None).exit_code(), 7);
        assert_eq!(status(401, Some("invalid_api_key"), None).exit_code(), 6);
        assert_eq!(status(402, Some("insufficient_credits"), None).exit_code(), 6);
        assert_eq!(status(429, Some("rate_limit_exceeded"), None).exit_code(), 8);
        assert_eq!(status(503, Some("model_unavailable"), None).exit_code(), 8);
        assert_eq!(CliError::Gateway(GatewayError::Transport("refused".into())).exit_code(), 8);
        assert_eq!(CliError::Cut { limit: 5 }.exit_code(), 4);
        assert_eq!(CliError::InvalidAnswer("x".into()).exit_code(), 5);
        assert_eq!(CliError::ToolRounds(8).exit_code(), 9);
        assert_eq!(CliError::Usage("x".into()).exit_code(), 2);
        assert!(CliError::Cut { limit: 5 }.to_string().starts_with("answer cut at max_tokens 5"));
    }
}
