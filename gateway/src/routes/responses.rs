//! `POST /v1/responses`.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;

use super::inference::{self, CallerOf};
use crate::inference::responses::Responses;
use crate::state::AppState;

#[utoipa::path(
    post,
    path = "/v1/responses",
    tag = "inference",
    operation_id = "createResponse",
    summary = "Create a response",
    description = "OpenAI's Responses dialect over the same routing, credits and ledger as chat. Responses are stored \
unless `store` is false, and `previous_response_id` continues a stored one; `text.format` carries structured outputs. \
A parameter that is not honoured is refused by name.",
    params(crate::apidoc::params::IdempotencyHeader),
    request_body(content = crate::apidoc::responses::ResponsesRequest, content_type = "application/json"),
    security(("api_key" = []), ("x_api_key" = [])),
    responses(
        (status = 200, description = "The Response; with `stream: true`, its events as server-sent events",
            content(
                (crate::apidoc::responses::ResponseObject = "application/json"),
                (crate::apidoc::streams::ResponsesSse = "text/event-stream"),
            ),
            headers(("idempotent-replayed" = String, description = "`true` on an answer replayed for a repeated `Idempotency-Key`"))),
        crate::apidoc::errors::InferenceErrors,
    )
)]
pub(super) async fn create(
    State(state): State<AppState>,
    caller: CallerOf<Responses>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    inference::serve::<Responses>(state, caller, &headers, body).await
}
