//! `POST /v1/messages`: the Anthropic dialect over the same route, meter and ledger as chat. Tool use,
//! structured output (`output_config.format`), streaming events, and errors in Anthropic's shape.

pub mod errors;
mod events;
mod object;
/// Public for the fuzz harness ([`crate::fuzzing`]); the route is the only other caller.
pub mod translate;

use axum::response::Response;
use serde_json::Value;

use crate::auth::Caller;
use crate::billing::json_with_cost;
use crate::completions::{self, finish_whole, json_response, open, prepare, with_request_id};
use crate::error::ApiError;
use crate::state::AppState;

pub const ENDPOINT_MESSAGES: &str = "messages";

/// # Errors
/// Any [`ApiError`]; the route rewrites it into Anthropic's shape.
pub async fn create(state: &AppState, caller: Caller, request: Value) -> Result<Response, ApiError> {
    let chat = translate::to_chat(&request)?;
    let model = chat["model"].as_str().unwrap_or_default().to_owned();
    let id = format!("msg_{}", uuid::Uuid::now_v7().simple());
    let prepared = prepare(state, caller, chat, ENDPOINT_MESSAGES, id.clone()).await?;
    if prepared.stream {
        let (ledger, upstream) = open(state, prepared).await?;
        return Ok(completions::stream::relay(ledger, upstream, events::MessageEvents::new(id, model)));
    }
    let (ledger, answer, cost) = finish_whole(state, prepared).await?;
    let message = object::message(&id, &model, &answer);
    let mut http = json_response(json_with_cost(&message, cost));
    with_request_id(&mut http, &ledger.request_id);
    Ok(http)
}
