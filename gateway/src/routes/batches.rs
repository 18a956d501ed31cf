//! `/v1/batches`: create, retrieve, list and cancel a tenant's batches (`batches`). Another tenant's id
//! is a 404.

use std::collections::HashMap;

use axum::extract::rejection::JsonRejection;
use axum::extract::{Query, State};
use axum::Json;

use super::query::{self, no_query};
use crate::apidoc::batches::{BatchList, BatchObject};
use crate::auth::Caller;
use crate::batches::{self, NewBatchRequest};
use crate::error::ApiError;
use crate::extract::Path;
use crate::state::AppState;

#[utoipa::path(
    post,
    path = "/v1/batches",
    tag = "batches",
    operation_id = "createBatch",
    summary = "Create a batch",
    description = "Runs every request of an uploaded batch input once, at the model's batch price (half the online \
price unless ops set otherwise), on worker capacity online requests leave free, outside the key's online rate \
limits. Answered `validating`; poll it until `completed`, `expired`, `cancelled` or `failed`.",
    request_body(content = crate::apidoc::batches::CreateBatch, content_type = "application/json"),
    security(("api_key" = []), ("x_api_key" = [])),
    responses((status = 200, description = "The batch", body = BatchObject), crate::apidoc::errors::BatchErrors)
)]
pub(super) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    request: Result<Json<NewBatchRequest>, JsonRejection>,
) -> Result<Json<BatchObject>, ApiError> {
    let request = crate::extract::json_body(request, state.settings.max_body_bytes)?;
    Ok(Json(batches::create(&state, &caller, &request).await?.into()))
}

#[utoipa::path(
    get,
    path = "/v1/batches/{id}",
    tag = "batches",
    operation_id = "retrieveBatch",
    summary = "Retrieve a batch",
    params(("id" = String, Path, description = "The batch id")),
    security(("api_key" = []), ("x_api_key" = [])),
    responses((status = 200, description = "The batch", body = BatchObject), crate::apidoc::errors::BatchErrors)
)]
pub(super) async fn retrieve(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Json<BatchObject>, ApiError> {
    Ok(Json(batches::get(&state, caller.tenant_id, &id).await?.into()))
}

#[utoipa::path(
    get,
    path = "/v1/batches",
    tag = "batches",
    operation_id = "listBatches",
    summary = "List batches",
    description = "The tenant's batches, newest first.",
    params(
        ("limit" = Option<u32>, Query, description = "1 to 100; 20 by default", minimum = 1, maximum = 100),
        ("after" = Option<String>, Query, description = "A batch id: list the batches after it"),
    ),
    security(("api_key" = []), ("x_api_key" = [])),
    responses((status = 200, description = "A page of batches", body = BatchList), crate::apidoc::errors::BatchErrors)
)]
pub(super) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<BatchList>, ApiError> {
    no_query(&query, &["limit", "after"])?;
    let max = usize::try_from(batches::MAX_LIST).unwrap_or(100);
    let limit = i64::try_from(query::limit(&query, 20, max)?).unwrap_or(20);
    let (rows, has_more) = batches::list(&state, caller.tenant_id, query.get("after").map(String::as_str), limit).await?;
    let data: Vec<BatchObject> = rows.into_iter().map(BatchObject::from).collect();
    Ok(Json(BatchList {
        object: "list",
        first_id: data.first().map(|b| b.id.clone()),
        last_id: data.last().map(|b| b.id.clone()),
        has_more,
        data,
    }))
}

#[utoipa::path(
    post,
    path = "/v1/batches/{id}/cancel",
    tag = "batches",
    operation_id = "cancelBatch",
    summary = "Cancel a batch",
    description = "Requests not begun are cancelled at once; those running finish and are billed; then the finished \
ones are delivered in the output and error files and the batch is `cancelled`. Answered `cancelling`; a batch \
that has already ended is answered as it stands.",
    params(("id" = String, Path, description = "The batch id")),
    security(("api_key" = []), ("x_api_key" = [])),
    responses((status = 200, description = "The batch", body = BatchObject), crate::apidoc::errors::BatchErrors)
)]
pub(super) async fn cancel(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Json<BatchObject>, ApiError> {
    Ok(Json(batches::cancel(&state, caller.tenant_id, &id).await?.into()))
}
