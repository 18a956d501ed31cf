//! The error answers, one reusable response per status and dialect: OpenAI's shape (`ErrorBody`) on the
//! OpenAI routes and the admin API, Anthropic's (`AnthropicError`) on `/v1/messages`, which rewrites
//! every gateway error on the way out. Each description lists the `code`s that status carries. The sets
//! at the end are what a kind of route can answer; each route names its set once in `responses(...)`.

use runaii_wire::ErrorBody;
use utoipa::{IntoResponses, ToResponse};

use super::messages::AnthropicError;

/// One unit-like response type per entry; the doc comment is the response's description.
macro_rules! error_responses {
    ($($(#[doc = $doc:literal])* $name:ident($body:ty) $([$($headers:tt)*])?;)*) => {
        $(
            $(#[doc = $doc])*
            #[derive(ToResponse)]
            $(#[response(headers($($headers)*))])?
            pub struct $name(pub $body);
        )*
    };
}

error_responses! {
    /// The request is malformed or asks for what the gateway or the engine refuses: `invalid_json`,
    /// `invalid_request_error` or `invalid_request` (the field is in `param`), `unsupported_parameter` or
    /// `unknown_parameter` (a parameter not honoured, named in `param`), `previous_response_not_found`,
    /// `storage_quota_exceeded`, `schema_too_complex` (a schema over the gateway's budget for the model),
    /// or `upstream_rejected`: the engine refused the request, `param` names the field it checked
    /// (`messages`, `max_tokens`, `tools`, `response_format`, `grammar`, …) and the message the check
    /// (`context_length_exceeded`, `grammar_rejected`, `invalid_schema`, `conflicting_constraints`, …). A
    /// malformed `Idempotency-Key` is refused here too. Refusals are not charged.
    BadRequest(ErrorBody);
    /// `invalid_api_key`: the key is missing, malformed, unknown, revoked or expired.
    Unauthorized(ErrorBody);
    /// `insufficient_credits`: the tenant's available credit does not cover the request's worst case.
    PaymentRequired(ErrorBody) [("x-should-retry" = String, description = "`false`: more credit does not appear by retrying")];
    /// `model_not_found`: no such model, or a private one this key's tenant may not use.
    NotFound(ErrorBody);
    /// `idempotency_key_in_use`: a request with this `Idempotency-Key` is still running.
    IdempotencyInProgress(ErrorBody) [("retry-after" = String, description = "Seconds to wait: `1`")];
    /// `payload_too_large`: the body is larger than the gateway accepts (`--max-body-bytes`, 4 MiB by default).
    PayloadTooLarge(ErrorBody);
    /// `request_timeout`: the request body did not arrive within `--body-read-timeout-ms` (30 s by default).
    RequestTimeout(ErrorBody);
    /// `idempotency_key_reused`: this `Idempotency-Key` came with another body before; or
    /// `idempotent_answer_not_stored`: the request with this key ran and was delivered once, but its answer
    /// was larger than the gateway keeps (`RUNAII_IDEMPOTENCY_MAX_STORED_BYTES`), so it is not run again.
    IdempotencyKeyReused(ErrorBody) [("x-should-retry" = String, description = "`false`")];
    /// `rate_limit_exceeded`: the key's requests or tokens per minute are spent (`type` says which);
    /// `too_many_failed_authentications`: too many wrong keys from this address (`retry-after` says how
    /// long); `idempotency_quota_exceeded` (`x-should-retry: false`): the tenant keeps as many
    /// `Idempotency-Key`s, or bytes of their answers, as it may.
    RateLimited(ErrorBody) [
        ("retry-after" = String, description = "Seconds until the bucket allows the request, rounded up"),
        ("retry-after-ms" = String, description = "The same wait in milliseconds")
    ];
    /// `upstream_error`: the worker failed, after one retry on another worker when there is one.
    BadGateway(ErrorBody);
    /// `model_unavailable` (no ready worker serves the model), `model_overloaded` (every worker serving it
    /// is at capacity), `ledger_unavailable` (the cost ledger cannot be written),
    /// `rate_limiter_unavailable` (Redis is down and the gateway fails closed) or
    /// `file_storage_unavailable` (the object store keeping files' bytes did not answer).
    Unavailable(ErrorBody) [("retry-after" = String, description = "Seconds to wait: `1`")];
    /// `upstream_timeout`: a whole (non-streamed) answer did not begin within its deadline (the base
    /// headers timeout plus `max_tokens` at the model's speed). Recorded `failed`; stream it instead.
    /// `request_time_limit` (`x-should-retry: false`): a stream ran past the longest a request may run;
    /// as the last event of the stream.
    GatewayTimeout(ErrorBody);

    /// `invalid_request_error`: the request is malformed or asks for what the gateway or the engine
    /// refuses (see the OpenAI routes' 400).
    MessagesBadRequest(AnthropicError);
    /// `authentication_error`: the key is missing, malformed, unknown, revoked or expired.
    MessagesUnauthorized(AnthropicError);
    /// `billing_error`: the tenant's available credit does not cover the request's worst case.
    MessagesPaymentRequired(AnthropicError) [("x-should-retry" = String, description = "`false`")];
    /// `not_found_error`: no such model, or a private one this key's tenant may not use.
    MessagesNotFound(AnthropicError);
    /// `invalid_request_error`: a request with this `Idempotency-Key` is still running.
    MessagesIdempotencyInProgress(AnthropicError) [("retry-after" = String, description = "Seconds to wait: `1`")];
    /// `request_too_large`: the body is larger than the gateway accepts.
    MessagesPayloadTooLarge(AnthropicError);
    /// `invalid_request_error`: the request body did not arrive within the gateway's deadline.
    MessagesRequestTimeout(AnthropicError);
    /// `invalid_request_error`: this `Idempotency-Key` came with another body before, or its request ran
    /// once and its answer was too large to keep for replay.
    MessagesIdempotencyKeyReused(AnthropicError) [("x-should-retry" = String, description = "`false`")];
    /// `rate_limit_error`: the key's requests or tokens per minute are spent, too many wrong keys came from
    /// this address, or the tenant keeps as many `Idempotency-Key`s as it may.
    MessagesRateLimited(AnthropicError) [
        ("retry-after" = String, description = "Seconds until the bucket allows the request, rounded up"),
        ("retry-after-ms" = String, description = "The same wait in milliseconds")
    ];
    /// `api_error`: the worker failed.
    MessagesBadGateway(AnthropicError);
    /// `overloaded_error`: no ready worker, every worker at capacity, the cost ledger unavailable, or the
    /// rate limiter unavailable.
    MessagesUnavailable(AnthropicError) [("retry-after" = String, description = "Seconds to wait: `1`")];
    /// `timeout_error`: a whole (non-streamed) answer did not begin within its deadline.
    MessagesGatewayTimeout(AnthropicError);

    /// `not_found`: the key's tenant has no stored response with this id (another tenant's, a deleted or
    /// an expired one, or one sent with `store: false`).
    ResponseNotFound(ErrorBody);
    /// `not_found`: the key's tenant has no file with this id (another tenant's, a deleted or an expired one).
    FileNotFound(ErrorBody);
    /// `not_found`: the key's tenant has no batch with this id.
    BatchNotFound(ErrorBody);
    /// `invalid_request_error` with the form field at fault in `param` (`file` for a file that is not a
    /// batch input, naming its line; `purpose`; `expires_after[seconds]`), `unsupported_parameter` for a
    /// form field the API does not take, or `storage_quota_exceeded`: the tenant's files would take more
    /// than its quota. Nothing of a refused upload is kept.
    FileRefused(ErrorBody);
    /// `payload_too_large`: the file is larger than `--files-max-bytes` (200 MB by default).
    FileTooLarge(ErrorBody);
    /// `request_timeout`: the form did not arrive within `--files-upload-timeout-ms` (10 minutes by default).
    FileUploadTimeout(ErrorBody);
    /// `invalid_json`, or `invalid_request_error` with the path, query parameter or field at fault in
    /// `param` when there is one (a malformed id, text with a NUL character).
    InvalidRequest(ErrorBody);
    /// `invalid_admin_token`: the JWT is missing, malformed, expired, badly signed, or has no `exp`.
    AdminUnauthorized(ErrorBody);
    /// `insufficient_role`: the token lacks the route's role (or is confined to a tenant where the route
    /// needs an unconfined one).
    AdminForbidden(ErrorBody);
    /// `not_found` or `model_not_found`: no such tenant, key or model, or one outside the token's tenant.
    AdminNotFound(ErrorBody);
    /// `conflict`: it exists already, or the change breaks a rule (a balance below what is reserved, a
    /// limit that is not positive).
    AdminConflict(ErrorBody);
    /// `admin_api_disabled` (no JWT secret or public key is configured) or `ledger_unavailable`.
    AdminUnavailable(ErrorBody) [("retry-after" = String, description = "Seconds to wait: `1`")];
}

/// A named set of the reusable responses above, by status, for a route's `responses(...)`.
macro_rules! error_sets {
    ($($(#[doc = $doc:literal])* $set:ident { $($status:tt => $response:ident),* $(,)? })*) => {
        $(
            $(#[doc = $doc])*
            #[derive(IntoResponses)]
            pub enum $set {
                $(#[response(status = $status)] $response(#[ref_response] $response),)*
            }
        )*
    };
}

error_sets! {
    /// What the OpenAI inference routes answer besides their answer.
    InferenceErrors {
        400 => BadRequest, 401 => Unauthorized, 402 => PaymentRequired, 404 => NotFound,
        409 => IdempotencyInProgress, 413 => PayloadTooLarge, 422 => IdempotencyKeyReused,
        429 => RateLimited, 502 => BadGateway, 503 => Unavailable, 504 => GatewayTimeout,
    }
    /// What `/v1/messages` answers besides its answer, in Anthropic's shape.
    MessagesErrors {
        400 => MessagesBadRequest, 401 => MessagesUnauthorized, 402 => MessagesPaymentRequired,
        404 => MessagesNotFound, 409 => MessagesIdempotencyInProgress, 413 => MessagesPayloadTooLarge,
        422 => MessagesIdempotencyKeyReused, 429 => MessagesRateLimited, 502 => MessagesBadGateway,
        503 => MessagesUnavailable, 504 => MessagesGatewayTimeout,
    }
    /// The stored responses' routes.
    StoredResponseErrors { 400 => InvalidRequest, 401 => Unauthorized, 404 => ResponseNotFound, 503 => Unavailable }
    /// `POST /v1/files`.
    FileUploadErrors { 400 => FileRefused, 401 => Unauthorized, 408 => FileUploadTimeout, 413 => FileTooLarge, 503 => Unavailable }
    /// The Batch API's routes.
    BatchErrors { 400 => InvalidRequest, 401 => Unauthorized, 404 => BatchNotFound, 503 => Unavailable }
    /// The routes that read a tenant's files.
    FileErrors { 400 => InvalidRequest, 401 => Unauthorized, 404 => FileNotFound, 503 => Unavailable }
    /// An admin route that reads no path or query: only the token and the database can fail it.
    AdminErrors { 401 => AdminUnauthorized, 403 => AdminForbidden, 503 => AdminUnavailable }
    /// An admin route that reads a query or a body but names nothing that must exist.
    AdminQueryErrors { 400 => InvalidRequest, 401 => AdminUnauthorized, 403 => AdminForbidden, 503 => AdminUnavailable }
    /// An admin route that reads or changes one tenant, key or model named in its path.
    AdminLookupErrors {
        400 => InvalidRequest, 401 => AdminUnauthorized, 403 => AdminForbidden, 404 => AdminNotFound,
        503 => AdminUnavailable,
    }
    /// An admin route that creates what may exist already.
    AdminCreateErrors {
        400 => InvalidRequest, 401 => AdminUnauthorized, 403 => AdminForbidden, 409 => AdminConflict,
        503 => AdminUnavailable,
    }
    /// An admin route that changes what its path names, under rules the change may break.
    AdminChangeErrors {
        400 => InvalidRequest, 401 => AdminUnauthorized, 403 => AdminForbidden, 404 => AdminNotFound,
        409 => AdminConflict, 503 => AdminUnavailable,
    }
}
