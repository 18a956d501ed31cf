//! `metadata` a client attaches to a request, bounded before anything runs: a Response repeats its
//! metadata back, and what a client may send is bounded whether or not it is kept.
//!
//! OpenAI (chat completions, Responses): an object of at most 16 pairs, keys of at most 64 characters,
//! values strings of at most 512. Anthropic (Messages): an object whose only field is `user_id`, a string
//! of at most 256 characters.

use serde_json::Value;

use crate::error::ApiError;

pub const MAX_PAIRS: usize = 16;
pub const MAX_KEY_CHARS: usize = 64;
pub const MAX_VALUE_CHARS: usize = 512;
pub const MAX_USER_ID_CHARS: usize = 256;

/// OpenAI's `metadata`; `code` is the dialect's code for a bad parameter.
///
/// # Errors
/// 400 naming `metadata` when it is not an object of string pairs within the limits.
pub fn check_openai(metadata: Option<&Value>, code: &'static str) -> Result<(), ApiError> {
    let invalid = |message: String| ApiError::InvalidRequest { message, param: Some("metadata"), code };
    let pairs = match metadata {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(pairs)) => pairs,
        Some(_) => return Err(invalid("`metadata` must be an object or null".into())),
    };
    if pairs.len() > MAX_PAIRS {
        return Err(invalid(format!("`metadata` has {} pairs; at most {MAX_PAIRS} are allowed", pairs.len())));
    }
    for (key, value) in pairs {
        if key.chars().count() > MAX_KEY_CHARS {
            return Err(invalid(format!("`metadata` keys must be at most {MAX_KEY_CHARS} characters")));
        }
        let Some(text) = value.as_str() else {
            return Err(invalid(format!("`metadata` values must be strings (`{}` is not)", truncated(key))));
        };
        if text.chars().count() > MAX_VALUE_CHARS {
            return Err(invalid(format!(
                "`metadata` values must be at most {MAX_VALUE_CHARS} characters (`{}` is longer)",
                truncated(key)
            )));
        }
    }
    Ok(())
}

/// Anthropic's `metadata`.
///
/// # Errors
/// 400 naming `metadata` (or `metadata.user_id`) for another shape or a `user_id` over the limit.
pub fn check_anthropic(metadata: Option<&Value>) -> Result<(), ApiError> {
    let invalid = |message: String, param| ApiError::InvalidRequest { message, param: Some(param), code: "invalid_request_error" };
    let fields = match metadata {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(fields)) => fields,
        Some(_) => return Err(invalid("metadata: Input should be an object".into(), "metadata")),
    };
    if let Some(extra) = fields.keys().find(|k| *k != "user_id") {
        return Err(invalid(format!("metadata.{}: Extra inputs are not permitted", truncated(extra)), "metadata"));
    }
    match fields.get("user_id") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(id)) if id.chars().count() <= MAX_USER_ID_CHARS => Ok(()),
        Some(Value::String(_)) => {
            Err(invalid(format!("metadata.user_id: String should have at most {MAX_USER_ID_CHARS} characters"), "metadata.user_id"))
        }
        Some(_) => Err(invalid("metadata.user_id: Input should be a valid string".into(), "metadata.user_id")),
    }
}

/// A client's key, short enough to quote in an error.
fn truncated(key: &str) -> String {
    key.chars().take(MAX_KEY_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn openai_limits() {
        let pairs = |n: usize| Value::Object((0..n).map(|i| (format!("k{i}"), json!("v"))).collect());
        assert!(check_openai(Some(&pairs(16)), "c").is_ok());
        assert!(check_openai(Some(&pairs(17)), "c").is_err());
        assert!(check_openai(Some(&json!({"k".repeat(64): "x".repeat(512)})), "c").is_ok());
        assert!(check_openai(Some(&json!({"k".repeat(65): "v"})), "c").is_err());
        assert!(check_openai(Some(&json!({"k": "é".repeat(513)})), "c").is_err());
        assert!(check_openai(Some(&json!({"k": 1})), "c").is_err());
        assert!(check_openai(Some(&json!("x")), "c").is_err());
        assert!(check_openai(None, "c").is_ok() && check_openai(Some(&Value::Null), "c").is_ok());
    }

    #[test]
    fn anthropic_limits() {
        assert!(check_anthropic(Some(&json!({"user_id": "u".repeat(256)}))).is_ok());
        assert!(check_anthropic(Some(&json!({"user_id": "u".repeat(257)}))).is_err());
        assert!(check_anthropic(Some(&json!({"other": "x"}))).is_err());
        assert!(check_anthropic(Some(&json!({"user_id": 5}))).is_err());
        assert!(check_anthropic(Some(&json!({}))).is_ok());
    }
}
