//! `GET` and `DELETE /v1/responses/{id}`, `GET /v1/responses/{id}/input_items`, `POST
//! /v1/responses/{id}/cancel`: a tenant's stored responses (`inference::responses::store`, `background`).
//! Another tenant's id, a deleted or an expired one is a 404. A background response's events are streamed
//! from `GET ...?stream=true` (`inference::responses::replay`).

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::Value;

use crate::apidoc::responses::{DeletedResponse, InputItemList};
use crate::auth::Caller;
use crate::db::responses as rows;
use crate::error::ApiError;
use crate::extract::Path;
use crate::inference::responses::{background, replay};
use crate::request_id;
use crate::state::AppState;

use super::query::{self, no_query};

fn not_found(id: &str) -> ApiError {
    ApiError::NotFound(format!("response '{id}'"))
}

/// How `GET /v1/responses/{id}` answers: the Response, or a background response's events after
/// sequence number `after` (from the first, for `None`).
#[derive(Debug, PartialEq, Eq)]
enum Retrieval {
    Whole,
    Events { after: Option<u64> },
}

impl Retrieval {
    fn of(query: &HashMap<String, String>) -> Result<Self, ApiError> {
        no_query(query, &["stream", "starting_after"])?;
        let stream = match query.get("stream").map(String::as_str) {
            None | Some("false") => false,
            Some("true") => true,
            Some(_) => return Err(ApiError::invalid("stream must be true or false", "stream")),
        };
        let Some(after) = query.get("starting_after") else {
            return Ok(if stream { Self::Events { after: None } } else { Self::Whole });
        };
        if !stream {
            return Err(ApiError::invalid("starting_after is read only with stream=true", "starting_after"));
        }
        let after = after
            .parse::<u64>()
            .map_err(|_| ApiError::invalid("starting_after must be an event's sequence number: an integer from 0", "starting_after"))?;
        Ok(Self::Events { after: Some(after) })
    }
}

#[utoipa::path(
    get,
    path = "/v1/responses/{id}",
    tag = "inference",
    operation_id = "getResponse",
    summary = "Retrieve a stored response",
    description = "The Response as it was answered (cost included), while it is kept: `store` was not false, and the \
tenant's retention period has not passed. With `stream=true`, a background response's events as server-sent events: \
those after `starting_after` (all kept, without it), then the live ones until the response ends; a client that leaves \
the stream leaves the response running. The last 10,000 events of each response are kept, for 24 hours after the \
last one (or the tenant's retention, if shorter). Streaming a response that was not run in the background is a 400.",
    params(
        ("id" = String, Path, description = "The response id", example = "resp_0190b7a8c6f07d3e8a1b2c3d4e5f6a7b"),
        ("stream" = Option<bool>, Query, description = "`true`: the events of a background response, as server-sent events"),
        ("starting_after" = Option<u64>, Query, description = "With `stream=true`: stream the events whose `sequence_number` is greater", minimum = 0),
    ),
    security(("api_key" = []), ("x_api_key" = [])),
    responses(
        (status = 200, description = "The stored Response; with `stream=true`, its events",
            content(
                (crate::apidoc::responses::ResponseObject = "application/json"),
                (crate::apidoc::streams::ResponsesSse = "text/event-stream"),
            )),
        crate::apidoc::errors::StoredResponseErrors,
    )
)]
pub(super) async fn retrieve(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let retrieval = Retrieval::of(&query)?;
    let stored = rows::get(&state.db, caller.tenant_id, &id).await?.ok_or_else(|| not_found(&id))?;
    if let Retrieval::Events { after } = retrieval {
        if !stored.background {
            return Err(ApiError::invalid("only a background response can be streamed; GET it without stream", "stream"));
        }
        return Ok(replay::stream(state, caller.tenant_id, stored.id, after, None));
    }
    let mut response = ([(header::CONTENT_TYPE, "application/json")], stored.response).into_response();
    request_id::attach(&mut response, &stored.id);
    Ok(response)
}

#[utoipa::path(
    delete,
    path = "/v1/responses/{id}",
    tag = "inference",
    operation_id = "deleteResponse",
    summary = "Delete a stored response",
    description = "Deletes the response and what it kept (its input, its conversation); a continuation from it is then \
refused. Its cost record stays.",
    params(("id" = String, Path, description = "The response id")),
    security(("api_key" = []), ("x_api_key" = [])),
    responses(
        (status = 200, description = "Deleted", body = DeletedResponse),
        crate::apidoc::errors::StoredResponseErrors,
    )
)]
pub(super) async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<DeletedResponse>, ApiError> {
    if !rows::delete(&state.db, caller.tenant_id, &id).await? {
        return Err(not_found(&id));
    }
    Ok(Json(DeletedResponse { id, object: "response", deleted: true }))
}

#[utoipa::path(
    get,
    path = "/v1/responses/{id}/input_items",
    tag = "inference",
    operation_id = "listInputItems",
    summary = "The input items of a stored response",
    description = "The items the request sent as `input` (a string becomes one user message), each with an id; \
newest first unless `order=asc`.",
    params(
        ("id" = String, Path, description = "The response id"),
        ("limit" = Option<u32>, Query, description = "1 to 100; 20 by default", minimum = 1, maximum = 100),
        ("order" = Option<String>, Query, description = "`desc` (the default) or `asc`", pattern = "^(asc|desc)$"),
        ("after" = Option<String>, Query, description = "An item id: list the items after it"),
    ),
    security(("api_key" = []), ("x_api_key" = [])),
    responses(
        (status = 200, description = "The input items", body = InputItemList),
        crate::apidoc::errors::StoredResponseErrors,
    )
)]
pub(super) async fn input_items(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<InputItemList>, ApiError> {
    no_query(&query, &["limit", "order", "after"])?;
    let limit = query::limit(&query, 20, 100)?;
    let ascending = query::ascending(&query)?;
    let stored = rows::get(&state.db, caller.tenant_id, &id).await?.ok_or_else(|| not_found(&id))?;
    let mut items: Vec<Value> = stored.input_items.as_array().cloned().unwrap_or_default();
    if !ascending {
        items.reverse();
    }
    if let Some(after) = query.get("after") {
        let at = items
            .iter()
            .position(|i| i["id"] == after.as_str())
            .ok_or_else(|| ApiError::invalid("after names no item of this response", "after"))?;
        items.drain(..=at);
    }
    let has_more = items.len() > limit;
    items.truncate(limit);
    let id_of = |item: Option<&Value>| item.and_then(|i| i["id"].as_str()).map(str::to_owned);
    Ok(Json(InputItemList { object: "list", first_id: id_of(items.first()), last_id: id_of(items.last()), has_more, data: items }))
}

#[utoipa::path(
    post,
    path = "/v1/responses/{id}/cancel",
    tag = "inference",
    operation_id = "cancelResponse",
    summary = "Cancel a background response",
    description = "A queued or running background response becomes `cancelled`: its worker stops, and the tokens \
generated until then are billed (as for a client that leaves a stream). One that has finished is answered as it \
stands. A response not run in the background cannot be cancelled (400).",
    params(("id" = String, Path, description = "The response id")),
    security(("api_key" = []), ("x_api_key" = [])),
    responses(
        (status = 200, description = "The Response as it now stands", body = crate::apidoc::responses::ResponseObject),
        crate::apidoc::errors::StoredResponseErrors,
    )
)]
pub(super) async fn cancel(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    let text = background::cancel(&state, caller.tenant_id, &id).await?;
    let mut response = ([(header::CONTENT_TYPE, "application/json")], text).into_response();
    request_id::attach(&mut response, &id);
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn param(result: Result<Retrieval, ApiError>) -> Option<&'static str> {
        match result {
            Err(ApiError::InvalidRequest { param, .. }) => param,
            other => panic!("not a 400: {other:?}"),
        }
    }

    #[test]
    fn stream_and_starting_after_are_read_together() {
        assert_eq!(Retrieval::of(&query(&[])).unwrap(), Retrieval::Whole);
        assert_eq!(Retrieval::of(&query(&[("stream", "false")])).unwrap(), Retrieval::Whole);
        assert_eq!(Retrieval::of(&query(&[("stream", "true")])).unwrap(), Retrieval::Events { after: None });
        assert_eq!(Retrieval::of(&query(&[("stream", "true"), ("starting_after", "7")])).unwrap(), Retrieval::Events { after: Some(7) });
        assert_eq!(param(Retrieval::of(&query(&[("stream", "yes")]))), Some("stream"));
        for bad in ["-1", "1.5", "x", ""] {
            assert_eq!(param(Retrieval::of(&query(&[("stream", "true"), ("starting_after", bad)]))), Some("starting_after"), "{bad}");
        }
        assert_eq!(param(Retrieval::of(&query(&[("starting_after", "3")]))), Some("starting_after"));
    }
}
