//! `POST /v1/chat/completions`.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;

use super::inference;
use crate::auth::Caller;
use crate::completions::{self, ENDPOINT_CHAT};
use crate::state::AppState;

#[utoipa::path(
    post,
    path = "/v1/chat/completions",
    tag = "inference",
    operation_id = "createChatCompletion",
    summary = "Create a chat completion",
    description = "OpenAI's chat completions, streamed or not. With a `json_schema` `response_format` the answer is \
guaranteed to match the schema (grammar-constrained decoding). `usage.cost` is the exact charge.",
    params(crate::openapi::params::IdempotencyHeader),
    request_body(content = runaii_wire::ChatCompletionRequest, content_type = "application/json"),
    security(("api_key" = []), ("x_api_key" = [])),
    responses(
        (status = 200, description = "The completion; with `stream: true`, its chunks as server-sent events",
            content(
                (crate::openapi::chat::BilledChatCompletion = "application/json"),
                (crate::openapi::streams::ChatCompletionsSse = "text/event-stream"),
            ),
            headers(("idempotent-replayed" = String, description = "`true` on an answer replayed for a repeated `Idempotency-Key`"))),
        (status = 400, response = crate::openapi::errors::BadRequest),
        (status = 401, response = crate::openapi::errors::Unauthorized),
        (status = 402, response = crate::openapi::errors::PaymentRequired),
        (status = 404, response = crate::openapi::errors::NotFound),
        (status = 409, response = crate::openapi::errors::IdempotencyInProgress),
        (status = 413, response = crate::openapi::errors::PayloadTooLarge),
        (status = 422, response = crate::openapi::errors::IdempotencyKeyReused),
        (status = 429, response = crate::openapi::errors::RateLimited),
        (status = 502, response = crate::openapi::errors::BadGateway),
        (status = 503, response = crate::openapi::errors::Unavailable),
    )
)]
pub(super) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    inference::serve(state, caller, &headers, ENDPOINT_CHAT, body, |state, caller, body| async move {
        completions::chat(&state, caller, body).await
    })
    .await
}
