//! The Files API's objects, as OpenAI shapes them.

use serde::Serialize;
use utoipa::ToSchema;

use crate::db::files::FileRow;

/// A file: an upload (`purpose: batch`, a Batch API input) or what the gateway wrote for the tenant.
#[derive(Serialize, ToSchema)]
pub struct FileObject {
    #[schema(example = "file-0190b7a8c6f07d3e8a1b2c3d4e5f6a7b")]
    pub id: String,
    #[schema(pattern = "^file$")]
    pub object: &'static str,
    /// Its size in bytes.
    pub bytes: i64,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds: when it is deleted (30 days after it was created unless `expires_after` said sooner).
    pub expires_at: i64,
    pub filename: String,
    #[schema(example = "batch")]
    pub purpose: String,
    /// Always `processed`: a file is listed only once it is whole and checked.
    #[schema(pattern = "^processed$")]
    pub status: &'static str,
    /// Always null (OpenAI's deprecated field).
    #[schema(value_type = Option<String>)]
    pub status_details: Option<()>,
}

impl From<FileRow> for FileObject {
    fn from(file: FileRow) -> Self {
        Self {
            id: file.id,
            object: "file",
            bytes: file.bytes,
            created_at: file.created_at.timestamp(),
            expires_at: file.expires_at.timestamp(),
            filename: file.filename,
            purpose: file.purpose,
            status: "processed",
            status_details: None,
        }
    }
}

/// A page of the tenant's files.
#[derive(Serialize, ToSchema)]
pub struct FileList {
    #[schema(pattern = "^list$")]
    pub object: &'static str,
    pub data: Vec<FileObject>,
    pub first_id: Option<String>,
    pub last_id: Option<String>,
    pub has_more: bool,
}

/// What `DELETE /v1/files/{id}` answers.
#[derive(Serialize, ToSchema)]
pub struct DeletedFile {
    pub id: String,
    #[schema(pattern = "^file$")]
    pub object: &'static str,
    pub deleted: bool,
}

/// The form `POST /v1/files` takes.
#[derive(ToSchema)]
#[expect(dead_code, reason = "documents the multipart form; never built")]
pub struct FileUpload {
    /// The file, with a name.
    #[schema(value_type = String, format = Binary)]
    file: Vec<u8>,
    /// `batch`.
    purpose: String,
    /// `created_at`.
    #[schema(rename = "expires_after[anchor]")]
    expires_after_anchor: Option<String>,
    /// 3600 to 2592000.
    #[schema(rename = "expires_after[seconds]")]
    expires_after_seconds: Option<i64>,
}
