//! `POST /v1/messages`: Anthropic's Messages dialect over the same route, meter and ledger as chat. Tool
//! use, structured output (`output_config.format`), streaming events, and errors in Anthropic's shape.

pub mod errors;
mod events;
mod object;
/// Public for the fuzz harness; the dialect is the only other caller.
pub mod translate;

use axum::response::Response;
use rust_decimal::Decimal;
use serde_json::Value;

use super::Dialect;
use crate::auth::Caller;
use crate::billing::json_with_cost;
use crate::error::ApiError;
use crate::state::AppState;

pub const ENDPOINT_MESSAGES: &str = "messages";

/// A Messages request: the answer's id and the model it names.
#[derive(Debug)]
pub struct Messages {
    id: String,
    model: String,
}

impl Dialect for Messages {
    const ENDPOINT: &'static str = ENDPOINT_MESSAGES;
    type Events = events::MessageEvents;

    fn new_id() -> String {
        format!("msg_{}", uuid::Uuid::now_v7().simple())
    }

    async fn read(_: &AppState, _: &Caller, request: Value, id: String) -> Result<(Self, Value), ApiError> {
        let chat = translate::to_chat(&request)?;
        let model = chat["model"].as_str().unwrap_or_default().to_owned();
        Ok((Self { id, model }, chat))
    }

    fn events(self, _include_usage: bool) -> events::MessageEvents {
        events::MessageEvents::new(self.id, self.model)
    }

    async fn whole(self, answer: Value, cost: Decimal) -> String {
        json_with_cost(&object::message(&self.id, &self.model, &answer), cost)
    }

    fn error(error: ApiError) -> Response {
        errors::response(error)
    }
}
