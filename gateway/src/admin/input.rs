//! Query strings and bodies of the admin API, with its errors (not axum's plain-text ones), and the
//! list envelope.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Json, Query};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::error::ApiError;

/// # Errors
/// 400 with the parser's reason.
pub fn query<T>(query: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    query.map(|Query(q)| q).map_err(|e| ApiError::invalid(e.body_text(), "query"))
}

/// # Errors
/// 400 with the parser's reason; 413 or 408 for a body too large or too slow to arrive.
pub fn body<T>(body: Result<Json<T>, JsonRejection>, max_body_bytes: usize) -> Result<T, ApiError> {
    body.map(|Json(b)| b).map_err(|e| match e {
        JsonRejection::BytesRejection(r) => crate::extract::body_error(&r, max_body_bytes),
        e => ApiError::InvalidJson(e.body_text()),
    })
}

/// `limit` between 1 and 1000, 100 by default.
#[must_use]
pub fn page_size(limit: Option<i64>) -> i64 {
    limit.unwrap_or(100).clamp(1, 1000)
}

/// `{"object": "list", "data": […], "has_more": …, "next_cursor": …}`; `rows` holds one more than a
/// page when there is more.
pub fn page<T: Serialize>(mut rows: Vec<T>, size: i64, cursor_of: impl Fn(&T) -> String) -> Value {
    let has_more = rows.len() as i64 > size;
    rows.truncate(usize::try_from(size).unwrap_or(0));
    let next_cursor = if has_more { rows.last().map(cursor_of) } else { None };
    json!({"object": "list", "data": rows, "has_more": has_more, "next_cursor": next_cursor})
}

/// Serializes a row for the audit log.
pub fn snapshot<T: Serialize>(row: &T) -> Option<Value> {
    serde_json::to_value(row).ok()
}

/// Maps constraint violations of an admin change to 409/400 instead of 500.
pub fn db_error(e: sqlx::Error) -> ApiError {
    if let sqlx::Error::Database(db) = &e {
        match db.code().as_deref() {
            Some("23505") => return ApiError::Conflict("it already exists".into()),
            Some("23503") => return ApiError::NotFound("a referenced tenant or model".into()),
            Some("23514") => return ApiError::Conflict(format!("the change breaks a rule: {}", db.message())),
            Some("22P02" | "22003" | "23502") => return ApiError::invalid(db.message().to_owned(), "body"),
            _ => {}
        }
    }
    ApiError::from(e)
}

/// For `Option<Option<T>>` fields: absent stays `None` (through `#[serde(default)]`), `null` becomes
/// `Some(None)`, a value `Some(Some(v))`.
///
/// # Errors
/// The inner value's deserialization errors.
pub fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}
