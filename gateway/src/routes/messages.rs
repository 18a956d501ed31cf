//! `POST /v1/messages` (Anthropic).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;

use super::inference;
use crate::auth::Caller;
use crate::messages::{self, ENDPOINT_MESSAGES};
use crate::state::AppState;

#[utoipa::path(
    post,
    path = "/v1/messages",
    tag = "inference",
    operation_id = "createMessage",
    summary = "Create a message (Anthropic)",
    description = "Anthropic's Messages dialect over the same routing, credits and ledger as chat, with tools and \
structured output (`output_config.format`). Errors come in Anthropic's shape.",
    params(crate::openapi::params::MessagesHeaders),
    request_body(content = crate::openapi::messages::MessagesRequest, content_type = "application/json"),
    security(("x_api_key" = []), ("api_key" = [])),
    responses(
        (status = 200, description = "The message; with `stream: true`, its events as server-sent events",
            content(
                (crate::openapi::messages::Message = "application/json"),
                (crate::openapi::streams::MessagesSse = "text/event-stream"),
            ),
            headers(("idempotent-replayed" = String, description = "`true` on an answer replayed for a repeated `Idempotency-Key`"))),
        (status = 400, response = crate::openapi::errors::MessagesBadRequest),
        (status = 401, response = crate::openapi::errors::MessagesUnauthorized),
        (status = 402, response = crate::openapi::errors::MessagesPaymentRequired),
        (status = 404, response = crate::openapi::errors::MessagesNotFound),
        (status = 409, response = crate::openapi::errors::MessagesIdempotencyInProgress),
        (status = 413, response = crate::openapi::errors::MessagesPayloadTooLarge),
        (status = 422, response = crate::openapi::errors::MessagesIdempotencyKeyReused),
        (status = 429, response = crate::openapi::errors::MessagesRateLimited),
        (status = 502, response = crate::openapi::errors::MessagesBadGateway),
        (status = 503, response = crate::openapi::errors::MessagesUnavailable),
    )
)]
pub(super) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    inference::serve(state, caller, &headers, ENDPOINT_MESSAGES, body, |state, caller, body| async move {
        messages::create(&state, caller, body).await
    })
    .await
}
