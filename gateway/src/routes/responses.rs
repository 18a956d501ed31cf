//! `POST /v1/responses`.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;

use super::inference;
use crate::auth::Caller;
use crate::responses::{self, ENDPOINT_RESPONSES};
use crate::state::AppState;

#[utoipa::path(
    post,
    path = "/v1/responses",
    tag = "inference",
    operation_id = "createResponse",
    summary = "Create a response",
    description = "OpenAI's Responses dialect over the same routing, credits and ledger as chat. Stateless: nothing \
is stored, so `previous_response_id` is refused; `text.format` carries structured outputs.",
    params(crate::openapi::params::IdempotencyHeader),
    request_body(content = crate::openapi::responses::ResponsesRequest, content_type = "application/json"),
    security(("api_key" = []), ("x_api_key" = [])),
    responses(
        (status = 200, description = "The Response; with `stream: true`, its events as server-sent events",
            content(
                (crate::openapi::responses::ResponseObject = "application/json"),
                (crate::openapi::streams::ResponsesSse = "text/event-stream"),
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
    inference::serve(state, caller, &headers, ENDPOINT_RESPONSES, body, |state, caller, body| async move {
        responses::create(&state, caller, body).await
    })
    .await
}
