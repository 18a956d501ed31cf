//! `/v1/files`: upload, list, retrieve, read and delete a tenant's files (`files`). Another tenant's id,
//! a deleted or an expired one is a 404.

use std::collections::HashMap;

use axum::body::Body;
use axum::extract::multipart::MultipartRejection;
use axum::extract::{Multipart, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::TryStreamExt as _;

use super::query::{self, no_query};
use crate::apidoc::files::{DeletedFile, FileList, FileObject};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::Path;
use crate::files::{self, ListQuery};
use crate::state::AppState;

#[utoipa::path(
    post,
    path = "/v1/files",
    tag = "files",
    operation_id = "createFile",
    summary = "Upload a file",
    description = "A multipart form: `file` and `purpose` (`batch`: a Batch API input, JSON Lines of at most 50,000 \
requests `{custom_id, method: POST, url, body}` with unique `custom_id`s and `url` `/v1/chat/completions` or \
`/v1/responses`), optionally `expires_after[anchor]=created_at` and `expires_after[seconds]` (3600 to 2592000; 30 \
days by default). The file is checked as it arrives and refused naming its first bad line; it counts against the \
tenant's file storage quota.",
    request_body(content = crate::apidoc::files::FileUpload, content_type = "multipart/form-data"),
    security(("api_key" = []), ("x_api_key" = [])),
    responses(
        (status = 200, description = "The file, whole and checked", body = FileObject),
        crate::apidoc::errors::FileUploadErrors,
    )
)]
pub(super) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    form: Result<Multipart, MultipartRejection>,
) -> Result<Json<FileObject>, ApiError> {
    let form =
        form.map_err(|e| ApiError::invalid(format!("POST /v1/files takes a multipart/form-data body: {}", e.body_text()), "file"))?;
    Ok(Json(files::upload(&state, caller.tenant_id, form).await?.into()))
}

#[utoipa::path(
    get,
    path = "/v1/files",
    tag = "files",
    operation_id = "listFiles",
    summary = "List files",
    description = "The tenant's files, newest first unless `order=asc`.",
    params(
        ("purpose" = Option<String>, Query, description = "Only files of this purpose"),
        ("limit" = Option<u32>, Query, description = "1 to 10000; 10000 by default", minimum = 1, maximum = 10000),
        ("order" = Option<String>, Query, description = "`desc` (the default) or `asc`", pattern = "^(asc|desc)$"),
        ("after" = Option<String>, Query, description = "A file id: list the files after it"),
    ),
    security(("api_key" = []), ("x_api_key" = [])),
    responses(
        (status = 200, description = "A page of files", body = FileList),
        crate::apidoc::errors::FileErrors,
    )
)]
pub(super) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<FileList>, ApiError> {
    no_query(&query, &["purpose", "limit", "order", "after"])?;
    let max = usize::try_from(files::MAX_LIST).unwrap_or(usize::MAX);
    let wanted = ListQuery {
        purpose: query.get("purpose").cloned(),
        after: query.get("after").cloned(),
        ascending: query::ascending(&query)?,
        limit: i64::try_from(query::limit(&query, max, max)?).unwrap_or(files::MAX_LIST),
    };
    let page = files::list(&state, caller.tenant_id, &wanted).await?;
    let data: Vec<FileObject> = page.files.into_iter().map(FileObject::from).collect();
    Ok(Json(FileList {
        object: "list",
        first_id: data.first().map(|f| f.id.clone()),
        last_id: data.last().map(|f| f.id.clone()),
        has_more: page.has_more,
        data,
    }))
}

#[utoipa::path(
    get,
    path = "/v1/files/{id}",
    tag = "files",
    operation_id = "retrieveFile",
    summary = "Retrieve a file's description",
    params(("id" = String, Path, description = "The file id")),
    security(("api_key" = []), ("x_api_key" = [])),
    responses((status = 200, description = "The file", body = FileObject), crate::apidoc::errors::FileErrors)
)]
pub(super) async fn retrieve(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Json<FileObject>, ApiError> {
    Ok(Json(files::get(&state, caller.tenant_id, &id).await?.into()))
}

#[utoipa::path(
    get,
    path = "/v1/files/{id}/content",
    tag = "files",
    operation_id = "downloadFile",
    summary = "Read a file",
    description = "The file's bytes as uploaded (or as the gateway wrote them), streamed.",
    params(("id" = String, Path, description = "The file id")),
    security(("api_key" = []), ("x_api_key" = [])),
    responses(
        (status = 200, description = "The file's bytes", body = String, content_type = "application/octet-stream"),
        crate::apidoc::errors::FileErrors,
    )
)]
pub(super) async fn content(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    let (file, bytes) = files::content(&state, caller.tenant_id, &id).await?;
    let body = Body::from_stream(bytes.map_err(|e| {
        tracing::error!(error = %e, "a file's bytes could not be read; its download is cut");
        std::io::Error::other(e)
    }));
    let disposition = format!("attachment; filename=\"{}\"", file.filename.replace(['"', '\\', '\r', '\n'], "_"));
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/octet-stream"));
    headers.insert(header::CONTENT_LENGTH, header::HeaderValue::from(file.bytes));
    if let Ok(value) = header::HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    Ok(response)
}

#[utoipa::path(
    delete,
    path = "/v1/files/{id}",
    tag = "files",
    operation_id = "deleteFile",
    summary = "Delete a file",
    description = "Deletes the file and its bytes; its storage no longer counts against the tenant's quota.",
    params(("id" = String, Path, description = "The file id")),
    security(("api_key" = []), ("x_api_key" = [])),
    responses((status = 200, description = "Deleted", body = DeletedFile), crate::apidoc::errors::FileErrors)
)]
pub(super) async fn delete(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Json<DeletedFile>, ApiError> {
    files::delete(&state, caller.tenant_id, &id).await?;
    Ok(Json(DeletedFile { id, object: "file", deleted: true }))
}
