//! The Responses store: with `store` (OpenAI's default, true) a response is kept under its tenant, for
//! `GET`/`DELETE /v1/responses/{id}`, its `input_items`, and continuing the conversation with
//! `previous_response_id`. `store: false` leaves nothing behind.
//!
//! A response is written before its answer goes out (`Keeper::keep`), so a client that continues at once
//! finds it. Each tenant keeps its responses for its retention period and within its byte quota (its
//! own terms, or the gateway's `--responses-retention-hours` and `--responses-max-stored-bytes`): past
//! the quota, a new request asking to store is refused before it runs, so the quota is exceeded by at
//! most the one answer that crossed it.

use serde_json::{json, Value};
use sqlx::PgPool;
use uuid::Uuid;

use crate::db::responses::{self as rows, NewStored};
use crate::error::ApiError;
use crate::state::AppState;

/// What storing one response needs, gathered when its request is read.
#[derive(Debug, Clone)]
pub struct Keeper {
    db: PgPool,
    tenant: Uuid,
    retention_hours: i32,
    previous: Option<String>,
    /// This request's input items, with ids.
    input_items: Value,
    /// The conversation before this response's output: the previous response's, then this input.
    conversation: Vec<Value>,
    background: bool,
}

/// The conversation a request continues from, and how to keep its answer.
#[derive(Debug)]
pub struct Continued {
    /// Every item the model reads before the answer (earlier turns, then this input).
    pub conversation: Vec<Value>,
    /// `None` with `store: false`.
    pub keeper: Option<Keeper>,
}

/// Resolves `previous_response_id` under the caller's tenant and, when the request is to be stored,
/// checks the tenant's quota.
///
/// # Errors
/// 400 `previous_response_not_found` for an id the tenant does not have (another tenant's included);
/// 400 `storage_quota_exceeded` when the tenant's stored responses already fill its quota.
pub async fn continue_from(state: &AppState, tenant: Uuid, request: &Value) -> Result<Continued, ApiError> {
    let mut conversation = Vec::new();
    let previous = request.get("previous_response_id").and_then(Value::as_str).map(str::to_owned);
    if let Some(previous) = &previous {
        let stored = rows::get(&state.db, tenant, previous).await?.ok_or_else(|| ApiError::PreviousResponseNotFound(previous.clone()))?;
        conversation = stored.conversation.as_array().cloned().unwrap_or_default();
    }
    let input_items = input_items(request.get("input"));
    conversation.extend(input_items.iter().cloned());
    let store = request.get("store").and_then(Value::as_bool).unwrap_or(true);
    if !store {
        return Ok(Continued { conversation, keeper: None });
    }
    let (retention_hours, max_bytes) = terms(state, tenant).await?;
    let used = rows::stored_bytes(&state.db, tenant).await?;
    if used >= max_bytes {
        return Err(ApiError::StorageQuotaExceeded { used, max: max_bytes });
    }
    let background = request.get("background").and_then(Value::as_bool).unwrap_or(false);
    let keeper = Keeper {
        db: state.db.clone(),
        tenant,
        retention_hours,
        previous,
        input_items: Value::Array(input_items),
        conversation: conversation.clone(),
        background,
    };
    Ok(Continued { conversation, keeper: Some(keeper) })
}

/// The tenant's retention (hours) and quota (bytes): its own terms, or the gateway's.
///
/// # Errors
/// Database errors.
pub async fn terms(state: &AppState, tenant: Uuid) -> Result<(i32, i64), ApiError> {
    let settings = &state.settings.responses;
    Ok(rows::terms(&state.db, tenant, (settings.retention_hours, settings.max_stored_bytes)).await?)
}

impl Keeper {
    /// This request's input items, with ids.
    #[must_use]
    pub fn input_items(&self) -> &Value {
        &self.input_items
    }

    /// Keeps the response `id` as answered (`response`, cost included) with its `output` items. A store
    /// that fails is logged: the answer was served and billed, and goes out; only its continuation is lost.
    pub async fn keep(&self, id: &str, status: &str, output: &Value, response: &str) {
        let mut conversation = self.conversation.clone();
        conversation.extend(output.as_array().into_iter().flatten().cloned());
        let row = NewStored {
            id,
            tenant: self.tenant,
            previous_response_id: self.previous.as_deref(),
            status,
            background: self.background,
            input_items: &self.input_items,
            conversation: &Value::Array(conversation),
            response,
            retention_hours: self.retention_hours,
        };
        if let Err(e) = rows::put(&self.db, &row).await {
            tracing::error!(response_id = id, error = %e, "response not stored");
        }
    }
}

/// The request's `input` as items, each with an id and its content as a list of parts (the shape
/// `input_items` lists): a string is one user message.
fn input_items(input: Option<&Value>) -> Vec<Value> {
    match input {
        Some(Value::String(text)) => vec![message_item("user", &json!(text))],
        Some(Value::Array(items)) => items.iter().map(item).collect(),
        _ => Vec::new(),
    }
}

fn item(item: &Value) -> Value {
    let kind = item.get("type").and_then(Value::as_str).unwrap_or("message");
    if kind == "message" {
        let role = item.get("role").and_then(Value::as_str).unwrap_or("user");
        let mut message = message_item(role, item.get("content").unwrap_or(&Value::Null));
        if let Some(id) = item.get("id").filter(|id| id.is_string()) {
            message["id"] = id.clone();
        }
        return message;
    }
    let mut item = item.clone();
    if item.get("id").is_none_or(Value::is_null) {
        item["id"] = json!(format!("item_{}", Uuid::now_v7().simple()));
    }
    item
}

fn message_item(role: &str, content: &Value) -> Value {
    let part = if role == "assistant" { "output_text" } else { "input_text" };
    let content = match content {
        Value::String(text) => json!([text_part(part, text)]),
        other => other.clone(),
    };
    json!({"id": format!("msg_{}", Uuid::now_v7().simple()), "type": "message", "role": role, "status": "completed", "content": content})
}

fn text_part(kind: &str, text: &str) -> Value {
    if kind == "output_text" {
        json!({"type": kind, "text": text, "annotations": []})
    } else {
        json!({"type": kind, "text": text})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_becomes_items_with_ids_and_parts() {
        let items = input_items(Some(&json!("Hi")));
        assert_eq!(items.len(), 1);
        assert_eq!(items[0]["content"], json!([{"type": "input_text", "text": "Hi"}]));
        assert!(items[0]["id"].as_str().unwrap().starts_with("msg_"));
        let items = input_items(Some(&json!([
            {"role": "assistant", "content": "Earlier."},
            {"type": "message", "id": "msg_kept", "role": "user", "content": [{"type": "input_text", "text": "Now?"}]},
            {"type": "function_call_output", "call_id": "call_1", "output": "21C"}
        ])));
        assert_eq!(items[0]["content"][0]["type"], "output_text");
        assert_eq!(items[1]["id"], "msg_kept");
        assert!(items[2]["id"].as_str().unwrap().starts_with("item_"));
        assert_eq!(items[2]["call_id"], "call_1");
    }
}
