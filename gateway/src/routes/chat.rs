//! `POST /v1/chat/completions`.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;

use super::inference::{self, CallerOf};
use crate::inference::chat::Chat;
use crate::state::AppState;

#[utoipa::path(
    post,
    path = "/v1/chat/completions",
    tag = "inference",
    operation_id = "createChatCompletion",
    summary = "Create a chat completion",
    description = "OpenAI's chat completions, streamed or not. With a `json_schema` `response_format` the answer is \
guaranteed to match the schema (grammar-constrained decoding). `usage.cost` is the exact charge.",
    params(crate::apidoc::params::IdempotencyHeader),
    request_body(content = runaii_wire::ChatCompletionRequest, content_type = "application/json"),
    security(("api_key" = []), ("x_api_key" = [])),
    responses(
        (status = 200, description = "The completion; with `stream: true`, its chunks as server-sent events",
            content(
                (crate::apidoc::chat::BilledChatCompletion = "application/json"),
                (crate::apidoc::streams::ChatCompletionsSse = "text/event-stream"),
            ),
            headers(("idempotent-replayed" = String, description = "`true` on an answer replayed for a repeated `Idempotency-Key`"))),
        crate::apidoc::errors::InferenceErrors,
    )
)]
pub(super) async fn create(
    State(state): State<AppState>,
    caller: CallerOf<Chat>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    inference::serve::<Chat>(state, caller, &headers, body).await
}
