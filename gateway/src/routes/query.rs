//! Query strings, read as maps so that a parameter the route does not read is refused by name.

use std::collections::HashMap;

use crate::error::ApiError;

/// Refuses query parameters outside `allowed`: a parameter ignored is worse than a refusal.
pub(super) fn no_query(query: &HashMap<String, String>, allowed: &[&str]) -> Result<(), ApiError> {
    match query.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(name) => {
            Err(ApiError::UnsupportedParameter { name: name.clone(), why: "this route does not take it", code: "unsupported_parameter" })
        }
        None => Ok(()),
    }
}

/// The `order` parameter: ascending or not (`desc`, the default).
pub(super) fn ascending(query: &HashMap<String, String>) -> Result<bool, ApiError> {
    match query.get("order").map(String::as_str) {
        None | Some("desc") => Ok(false),
        Some("asc") => Ok(true),
        Some(_) => Err(ApiError::invalid("order must be asc or desc", "order")),
    }
}

/// The `limit` parameter: 1 to `max`, `default` when absent.
pub(super) fn limit(query: &HashMap<String, String>, default: usize, max: usize) -> Result<usize, ApiError> {
    match query.get("limit") {
        None => Ok(default),
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| ApiError::invalid(format!("limit must be an integer from 1 to {max}"), "limit")),
    }
}
