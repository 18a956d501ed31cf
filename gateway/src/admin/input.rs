//! Query strings and bodies of the admin API, with its errors (not axum's plain-text ones), and pages.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Json, Query};

use crate::error::ApiError;

/// # Errors
/// 400 with the parser's reason.
pub fn query<T>(query: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    query.map(|Query(q)| q).map_err(|e| ApiError::invalid(e.body_text(), "query"))
}

/// # Errors
/// 400 with the parser's reason; 413 or 408 for a body too large or too slow to arrive.
pub fn body<T>(body: Result<Json<T>, JsonRejection>, max_body_bytes: usize) -> Result<T, ApiError> {
    crate::extract::json_body(body, max_body_bytes)
}

/// `limit` between 1 and 1000, 100 by default.
#[must_use]
pub fn page_size(limit: Option<i64>) -> i64 {
    limit.unwrap_or(100).clamp(1, 1000)
}

/// One page of `rows`, which hold one more than a page when there is more: the page, whether there is
/// more, and the cursor of the next page.
pub fn paginate<T>(mut rows: Vec<T>, size: i64, cursor_of: impl Fn(&T) -> String) -> (Vec<T>, bool, Option<String>) {
    let has_more = rows.len() as i64 > size;
    rows.truncate(usize::try_from(size).unwrap_or(0));
    let next_cursor = if has_more { rows.last().map(cursor_of) } else { None };
    (rows, has_more, next_cursor)
}
