//! `POST /v1/files`: a multipart form (`file`, `purpose`, optionally `expires_after[anchor]` and
//! `expires_after[seconds]`), read as it arrives. The file's bytes go to a [`Writer`] and its lines are
//! checked on the way; nothing of a refused or abandoned upload is left behind.

use axum::extract::multipart::{Field, MultipartError};
use axum::extract::Multipart;
use uuid::Uuid;

use super::batch_input::Checker;
use super::writer::Writer;
use crate::db::files::{self as rows, FileRow};
use crate::error::ApiError;
use crate::extract::BodyDeadline;
use crate::state::AppState;

/// The purposes a client may upload for.
const PURPOSES: [&str; 1] = ["batch"];
/// How long a file is kept unless `expires_after` says otherwise: 30 days, OpenAI's default for a batch
/// input, and the longest `expires_after` may ask for.
pub const DEFAULT_EXPIRY_S: i64 = 30 * 24 * 3600;
const MIN_EXPIRY_S: i64 = 3600;
/// The longest text field (`purpose`, `expires_after[…]`) and file name, in bytes.
const MAX_TEXT: usize = 256;

/// Reads the form and keeps its file.
///
/// # Errors
/// 400 naming the form field at fault (a missing or repeated field, a purpose not offered, an expiry out
/// of range, a file that is not a batch input, naming its line), `unsupported_parameter` for a field the
/// API does not take, 413 past `--files-max-bytes`, 400 `storage_quota_exceeded` past the tenant's quota,
/// 408 for a form that does not arrive within `--files-upload-timeout-ms`.
pub async fn upload(state: &AppState, tenant: Uuid, mut form: Multipart) -> Result<FileRow, ApiError> {
    let mut pending: Option<Writer> = None;
    let (mut purpose, mut seconds, mut requests) = (None, None, None);
    while let Some(field) = form.next_field().await.map_err(|e| form_error(state, &e))? {
        match field.name().unwrap_or_default() {
            "file" => {
                if pending.is_some() {
                    return Err(ApiError::invalid("the form holds more than one file", "file"));
                }
                let filename = field.file_name().unwrap_or_default().to_owned();
                if filename.is_empty() || filename.len() > MAX_TEXT {
                    return Err(ApiError::invalid(format!("file must be a file part with a name of 1 to {MAX_TEXT} bytes"), "file"));
                }
                let quota = rows::max_stored_bytes(&state.db, tenant, state.settings.files.max_stored_bytes).await?;
                let writer = pending.insert(Writer::begin(state, tenant, &filename, quota).await?);
                requests = Some(receive(state, writer, field).await?);
            }
            "purpose" => {
                let text = once(purpose.is_some(), field, "purpose").await?;
                if !PURPOSES.contains(&text.as_str()) {
                    return Err(ApiError::invalid(
                        format!("purpose '{text}' is not offered: files here are Batch API inputs (purpose 'batch')"),
                        "purpose",
                    ));
                }
                purpose = Some(text);
            }
            "expires_after[anchor]" => {
                if once(false, field, "expires_after[anchor]").await? != "created_at" {
                    return Err(ApiError::invalid("expires_after[anchor] must be created_at", "expires_after[anchor]"));
                }
            }
            "expires_after[seconds]" => {
                let text = once(seconds.is_some(), field, "expires_after[seconds]").await?;
                let value = text.parse::<i64>().ok().filter(|s| (MIN_EXPIRY_S..=DEFAULT_EXPIRY_S).contains(s)).ok_or_else(|| {
                    ApiError::invalid(
                        format!("expires_after[seconds] must be an integer from {MIN_EXPIRY_S} to {DEFAULT_EXPIRY_S}"),
                        "expires_after[seconds]",
                    )
                })?;
                seconds = Some(value);
            }
            other => {
                return Err(ApiError::UnsupportedParameter {
                    name: other.to_owned(),
                    why: "the Files API takes file, purpose and expires_after",
                    code: "unsupported_parameter",
                })
            }
        }
    }
    let (Some(writer), Some(requests)) = (pending, requests) else {
        return Err(ApiError::invalid("the form has no file part", "file"));
    };
    let purpose = purpose.ok_or_else(|| ApiError::invalid("purpose is required: batch", "purpose"))?;
    let lines = i32::try_from(requests).map_err(|_| ApiError::invalid("the file holds too many lines", "file"))?;
    writer.finish(&purpose, Some(lines), seconds.unwrap_or(DEFAULT_EXPIRY_S)).await
}

/// The file part, checked and kept; the number of requests it holds.
async fn receive(state: &AppState, writer: &mut Writer, mut field: Field<'_>) -> Result<usize, ApiError> {
    let mut checker = Checker::new(state.settings.max_body_bytes);
    let mut total: u64 = 0;
    while let Some(chunk) = field.chunk().await.map_err(|e| form_error(state, &e))? {
        total += chunk.len() as u64;
        if total > state.settings.files.max_bytes {
            return Err(too_large(state));
        }
        checker.feed(&chunk).map_err(not_an_input)?;
        writer.write(&chunk).await?;
    }
    checker.finish().map_err(not_an_input)
}

fn not_an_input(why: String) -> ApiError {
    ApiError::invalid(format!("the file is not a batch input: {why}"), "file")
}

fn too_large(state: &AppState) -> ApiError {
    ApiError::PayloadTooLarge(usize::try_from(state.settings.files.max_bytes).unwrap_or(usize::MAX))
}

/// A text field sent once, of at most [`MAX_TEXT`] bytes.
async fn once(seen: bool, mut field: Field<'_>, name: &'static str) -> Result<String, ApiError> {
    if seen {
        return Err(ApiError::invalid(format!("{name} is sent more than once"), name));
    }
    let mut text = Vec::new();
    while let Some(chunk) =
        field.chunk().await.map_err(|e| ApiError::invalid(format!("{name} could not be read: {}", e.body_text()), name))?
    {
        text.extend_from_slice(&chunk);
        if text.len() > MAX_TEXT {
            return Err(ApiError::invalid(format!("{name} is longer than {MAX_TEXT} bytes"), name));
        }
    }
    String::from_utf8(text).map_err(|_| ApiError::invalid(format!("{name} is not UTF-8 text"), name))
}

/// A form that could not be read: too slow (408), too large (413), or malformed (400).
fn form_error(state: &AppState, e: &MultipartError) -> ApiError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(cause) = source {
        if let Some(BodyDeadline(ms)) = cause.downcast_ref::<BodyDeadline>() {
            return ApiError::BodyTimeout(*ms);
        }
        source = cause.source();
    }
    if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        return too_large(state);
    }
    ApiError::invalid(format!("the multipart form could not be read: {}", e.body_text()), "file")
}
