//! `POST /v1/messages` (Anthropic).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;

use super::inference::{self, CallerOf};
use crate::inference::messages::Messages;
use crate::state::AppState;

#[utoipa::path(
    post,
    path = "/v1/messages",
    tag = "inference",
    operation_id = "createMessage",
    summary = "Create a message (Anthropic)",
    description = "Anthropic's Messages dialect over the same routing, credits and ledger as chat, with tools and \
structured output (`output_config.format`). Errors come in Anthropic's shape.",
    params(crate::apidoc::params::MessagesHeaders),
    request_body(content = crate::apidoc::messages::MessagesRequest, content_type = "application/json"),
    security(("x_api_key" = []), ("api_key" = [])),
    responses(
        (status = 200, description = "The message; with `stream: true`, its events as server-sent events",
            content(
                (crate::apidoc::messages::Message = "application/json"),
                (crate::apidoc::streams::MessagesSse = "text/event-stream"),
            ),
            headers(("idempotent-replayed" = String, description = "`true` on an answer replayed for a repeated `Idempotency-Key`"))),
        crate::apidoc::errors::MessagesErrors,
    )
)]
pub(super) async fn create(
    State(state): State<AppState>,
    caller: CallerOf<Messages>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    inference::serve::<Messages>(state, caller, &headers, body).await
}
