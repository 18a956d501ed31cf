//! Talking to a gateway over HTTP: one client, the API key (or an admin token) on each request, and every
//! non-2xx answer read as the OpenAI error body it carries.
//!
//! Bodies are parsed from their text, not through `serde_json::Value`, so that a cost written as a JSON
//! number keeps every digit (see [`crate::money`]).

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::config::Secret;

/// How long to wait for a connection, and for the next byte of an answer (a worker may queue a request
/// for a while before its first token).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const READ_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error(
        "no API key: pass --api-key, set RUNAII_API_KEY, put api_key in the config file, or run this from \
         a checkout where scripts/run.sh wrote .data/demo-api-key"
    )]
    NoKey,
    #[error(
        "this needs the admin API: pass --admin-token, set RUNAII_ADMIN_TOKEN, put admin_token in the config \
         file, or run this from a checkout where scripts/run.sh wrote .data/demo-admin-token"
    )]
    AdminTokenMissing,
    #[error("cannot reach the gateway: {0}")]
    Transport(String),
    #[error("the gateway's answer is unreadable: {0}")]
    Protocol(String),
    #[error(transparent)]
    Status(StatusError),
}

/// A non-2xx answer: its status and the error body's fields.
#[derive(Debug, thiserror::Error)]
#[error("{message} (HTTP {status}{})", code.as_deref().map(|c| format!(", {c}")).unwrap_or_default())]
pub struct StatusError {
    pub status: u16,
    pub code: Option<String>,
    pub param: Option<String>,
    pub message: String,
}

impl StatusError {
    /// The gateway (or its engine) refused the schema or the grammar, rather than the rest of the request.
    #[must_use]
    pub fn is_schema_refusal(&self) -> bool {
        let by_code =
            matches!(self.code.as_deref(), Some("upstream_rejected" | "schema_too_complex" | "grammar_rejected" | "invalid_schema"));
        let by_param = matches!(self.param.as_deref(), Some("response_format" | "grammar"));
        self.status == 400 && (by_code || by_param)
    }
}

/// The OpenAI error body, `{"error": {message, type, param, code}}`; also how a stream reports a failure.
#[derive(Debug, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Deserialize)]
pub struct ErrorDetail {
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub param: Option<String>,
    #[serde(default)]
    pub code: Option<String>,
}

/// Which credential a request carries.
#[derive(Debug, Clone, Copy)]
pub enum Auth {
    Key,
    /// The key when there is one (public routes such as `/v1/models`).
    KeyIfAny,
    Admin,
}

/// A gateway at `base` (`http://host:port`, without `/v1`).
#[derive(Debug, Clone)]
pub struct Gateway {
    client: reqwest::Client,
    base: String,
    key: Option<Secret>,
    admin_token: Option<Secret>,
}

impl Gateway {
    /// # Errors
    /// When the HTTP client cannot be built (no TLS backend).
    pub fn new(base: String, key: Option<Secret>, admin_token: Option<Secret>) -> Result<Self, GatewayError> {
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .read_timeout(READ_TIMEOUT)
            .user_agent(concat!("runaii-cli/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| GatewayError::Transport(chain(&e)))?;
        Ok(Self { client, base, key, admin_token })
    }

    #[must_use]
    pub fn base(&self) -> &str {
        &self.base
    }

    #[must_use]
    pub fn has_admin_token(&self) -> bool {
        self.admin_token.is_some()
    }

    fn request(&self, method: reqwest::Method, path: &str, auth: Auth) -> Result<reqwest::RequestBuilder, GatewayError> {
        let secret = match auth {
            Auth::Key => Some(self.key.as_ref().ok_or(GatewayError::NoKey)?),
            Auth::KeyIfAny => self.key.as_ref(),
            Auth::Admin => Some(self.admin_token.as_ref().ok_or(GatewayError::AdminTokenMissing)?),
        };
        let request = self.client.request(method, format!("{}{path}", self.base));
        Ok(match secret {
            Some(secret) => request.bearer_auth(secret.expose()),
            None => request,
        })
    }

    /// # Errors
    /// As [`send`](Self::send), or an answer that is not the expected JSON.
    pub async fn get<T: DeserializeOwned>(&self, path: &str, auth: Auth) -> Result<T, GatewayError> {
        read_json(self.send(self.request(reqwest::Method::GET, path, auth)?).await?).await
    }

    /// # Errors
    /// As [`get`](Self::get).
    pub async fn post<B: Serialize + ?Sized, T: DeserializeOwned>(&self, path: &str, body: &B, auth: Auth) -> Result<T, GatewayError> {
        read_json(self.send(self.request(reqwest::Method::POST, path, auth)?.json(body)).await?).await
    }

    /// # Errors
    /// As [`get`](Self::get).
    pub async fn delete<T: DeserializeOwned>(&self, path: &str, auth: Auth) -> Result<T, GatewayError> {
        read_json(self.send(self.request(reqwest::Method::DELETE, path, auth)?).await?).await
    }

    /// Uploads `bytes` as a file named `filename` (`POST /v1/files`, a multipart form).
    ///
    /// # Errors
    /// As [`get`](Self::get).
    pub async fn upload<T: DeserializeOwned>(&self, filename: &str, bytes: Vec<u8>, purpose: &str) -> Result<T, GatewayError> {
        let file = reqwest::multipart::Part::bytes(bytes).file_name(filename.to_owned());
        let form = reqwest::multipart::Form::new().text("purpose", purpose.to_owned()).part("file", file);
        read_json(self.send(self.request(reqwest::Method::POST, "/v1/files", Auth::Key)?.multipart(form)).await?).await
    }

    /// A file's bytes (`GET /v1/files/{id}/content`).
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub async fn file_content(&self, id: &str) -> Result<Vec<u8>, GatewayError> {
        let response = self.send(self.request(reqwest::Method::GET, &format!("/v1/files/{id}/content"), Auth::Key)?).await?;
        Ok(response.bytes().await.map_err(|e| GatewayError::Transport(chain(&e)))?.to_vec())
    }

    /// A POST whose 2xx answer the caller reads itself (a stream).
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub async fn post_raw<B: Serialize + ?Sized>(&self, path: &str, body: &B) -> Result<reqwest::Response, GatewayError> {
        self.send(self.request(reqwest::Method::POST, path, Auth::Key)?.json(body)).await
    }

    /// Sends the request; a non-2xx answer becomes [`GatewayError::Status`].
    ///
    /// # Errors
    /// No connection, a timeout, or a non-2xx status.
    async fn send(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Response, GatewayError> {
        let response = request.send().await.map_err(|e| GatewayError::Transport(chain(&e)))?;
        if response.status().is_success() {
            return Ok(response);
        }
        Err(status_error(response).await)
    }
}

async fn read_json<T: DeserializeOwned>(response: reqwest::Response) -> Result<T, GatewayError> {
    let text = response.text().await.map_err(|e| GatewayError::Transport(chain(&e)))?;
    serde_json::from_str(&text).map_err(|e| GatewayError::Protocol(format!("{e}: {}", excerpt(&text))))
}

async fn status_error(response: reqwest::Response) -> GatewayError {
    let status = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    GatewayError::Status(match serde_json::from_str::<ErrorBody>(&text) {
        Ok(ErrorBody { error }) => StatusError { status, code: error.code, param: error.param, message: error.message },
        Err(_) => StatusError { status, code: None, param: None, message: excerpt(&text) },
    })
}

/// An error and its causes on one line: reqwest's own message rarely says what went wrong.
#[must_use]
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The start of a body, for error messages.
fn excerpt(text: &str) -> String {
    let cut: String = text.chars().take(300).collect();
    if cut.is_empty() {
        "(empty body)".into()
    } else {
        cut
    }
}
