//! Request headers the inference routes read.

use utoipa::IntoParams;

/// `Idempotency-Key` on the OpenAI inference routes.
#[derive(IntoParams)]
#[into_params(parameter_in = Header)]
pub struct IdempotencyHeader {
    /// A retry with the same key and the same body gets the first answer again (with
    /// `idempotent-replayed: true`) and is not charged again; the same key with another body is refused
    /// (422); while the first runs, 409. 1 to 255 visible ASCII characters, kept 24 hours per tenant.
    #[param(rename = "Idempotency-Key", nullable = false, min_length = 1, max_length = 255)]
    pub idempotency_key: Option<String>,
}

/// The headers `/v1/messages` reads.
#[derive(IntoParams)]
#[into_params(parameter_in = Header)]
pub struct MessagesHeaders {
    /// Any version is accepted.
    #[param(rename = "anthropic-version", nullable = false, example = "2023-06-01")]
    pub anthropic_version: Option<String>,
    /// Accepted and ignored.
    #[param(rename = "anthropic-beta", nullable = false)]
    pub anthropic_beta: Option<String>,
    /// As on the OpenAI routes: a retry with the same key and body gets the first answer, uncharged.
    #[param(rename = "Idempotency-Key", nullable = false, min_length = 1, max_length = 255)]
    pub idempotency_key: Option<String>,
}
