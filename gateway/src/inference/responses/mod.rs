//! `POST /v1/responses`: OpenAI's Responses dialect over the same route, meter and ledger as chat, with
//! stored responses (`store`, `previous_response_id`; see [`store`]).

pub mod background;
mod events;
mod object;
mod parameters;
pub mod replay;
pub mod store;
mod tools;
/// Public for the fuzz harness; the dialect is the only other caller.
pub mod translate;

use axum::response::{IntoResponse, Response};
use rust_decimal::Decimal;
use serde_json::Value;

use super::Dialect;
use crate::auth::Caller;
use crate::billing::json_with_cost;
use crate::error::ApiError;
use crate::state::AppState;

pub const ENDPOINT_RESPONSES: &str = "responses";

/// A Responses request: the answer's shell (id, model, the request's fields a Response echoes) and, when
/// it is to be stored, its keeper.
#[derive(Debug)]
pub struct Responses {
    shell: object::Shell,
    keeper: Option<store::Keeper>,
}

impl Dialect for Responses {
    const ENDPOINT: &'static str = ENDPOINT_RESPONSES;
    type Events = events::ResponseEvents;

    fn new_id() -> String {
        format!("resp_{}", uuid::Uuid::now_v7().simple())
    }

    async fn read(state: &AppState, caller: &Caller, request: Value, id: String) -> Result<(Self, Value), ApiError> {
        // Checked before anything is looked up: a request refused for its own fields touches no store.
        translate::to_chat(&request)?;
        let continued = store::continue_from(state, caller.tenant_id, &request).await?;
        let mut whole = request.clone();
        whole["input"] = Value::Array(continued.conversation);
        let chat = translate::to_chat(&whole)?;
        Ok((Self { shell: object::Shell::new(id, request), keeper: continued.keeper }, chat))
    }

    fn events(self, _include_usage: bool) -> events::ResponseEvents {
        events::ResponseEvents::new(self.shell, self.keeper)
    }

    async fn whole(self, answer: Value, cost: Decimal) -> String {
        let choice = &answer["choices"][0];
        let calls = choice["message"]["tool_calls"].as_array().map_or(&[][..], Vec::as_slice);
        let text = choice["message"]["content"].as_str().unwrap_or_default();
        let logprobs = choice["logprobs"]["content"].as_array().map_or(&[][..], Vec::as_slice);
        let cut = choice["finish_reason"] == "length";
        let response = self.shell.response(Some(object::Answer { text, logprobs, calls, cut, usage: &answer["usage"] }));
        let body = json_with_cost(&response, cost);
        if let Some(keeper) = &self.keeper {
            keeper.keep(&self.shell.id, response["status"].as_str().unwrap_or("completed"), &response["output"], &body).await;
        }
        body
    }

    fn error(error: ApiError) -> Response {
        in_responses_terms(error).into_response()
    }

    async fn start(state: &AppState, caller: Caller, slot: crate::concurrency::Slot, request: Value) -> Response {
        if request.get("background").and_then(Value::as_bool) == Some(true) {
            return background::start(state, caller, slot, request).await;
        }
        super::run::<Self>(state, caller, slot, request).await
    }
}

/// A worker names the chat field it refused; a Responses client sent that field under another name.
fn in_responses_terms(error: ApiError) -> ApiError {
    let ApiError::UpstreamRejected { message, param, check } = error else { return error };
    let param = param.map(|field| match field.as_str() {
        "max_tokens" | "max_completion_tokens" => "max_output_tokens".to_owned(),
        "messages" => "input".to_owned(),
        "response_format" => "text.format".to_owned(),
        "logprobs" => "include".to_owned(),
        _ => field,
    });
    ApiError::UpstreamRejected { message, param, check }
}
