//! `POST /v1/responses`: the Responses dialect over the same route, meter and ledger as chat.
//! Stateless: responses are not stored.

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

pub const ENDPOINT_RESPONSES: &str = "responses";

/// # Errors
/// Any [`ApiError`], in OpenAI's error shape.
pub async fn create(state: &AppState, caller: Caller, request: Value) -> Result<Response, ApiError> {
    let chat = translate::to_chat(&request)?;
    let shell = object::Shell::new(format!("resp_{}", uuid::Uuid::now_v7().simple()), &request);
    let prepared = prepare(state, caller, chat, ENDPOINT_RESPONSES, shell.id.clone()).await?;
    if prepared.stream {
        let (ledger, upstream) = open(state, prepared).await?;
        return Ok(completions::stream::relay(ledger, upstream, events::ResponseEvents::new(shell)));
    }
    let (ledger, answer, cost) = finish_whole(state, prepared).await?;
    let choice = &answer["choices"][0];
    let text = choice["message"]["content"].as_str().unwrap_or_default();
    let cut = choice["finish_reason"] == "length";
    let response = shell.response(Some((text, cut, &answer["usage"])));
    let mut http = json_response(json_with_cost(&response, cost));
    with_request_id(&mut http, &ledger.request_id);
    Ok(http)
}
