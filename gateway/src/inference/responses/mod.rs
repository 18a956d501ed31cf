//! `POST /v1/responses`: OpenAI's Responses dialect over the same route, meter and ledger as chat.
//! Stateless: responses are not stored.

mod events;
mod object;
/// Public for the fuzz harness; the dialect is the only other caller.
pub mod translate;

use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::Dialect;
use crate::error::ApiError;

pub const ENDPOINT_RESPONSES: &str = "responses";

/// A Responses request: the answer's shell (id, model, the request's fields a Response echoes).
#[derive(Debug)]
pub struct Responses {
    shell: object::Shell,
}

impl Dialect for Responses {
    const ENDPOINT: &'static str = ENDPOINT_RESPONSES;
    type Events = events::ResponseEvents;

    fn new_id() -> String {
        format!("resp_{}", uuid::Uuid::now_v7().simple())
    }

    fn read(request: Value, id: String) -> Result<(Self, Value), ApiError> {
        let chat = translate::to_chat(&request)?;
        Ok((Self { shell: object::Shell::new(id, request) }, chat))
    }

    fn events(self, _include_usage: bool) -> events::ResponseEvents {
        events::ResponseEvents::new(self.shell)
    }

    fn whole(self, answer: Value) -> Value {
        let choice = &answer["choices"][0];
        let text = choice["message"]["content"].as_str().unwrap_or_default();
        let cut = choice["finish_reason"] == "length";
        self.shell.response(Some((text, cut, &answer["usage"])))
    }

    fn error(error: ApiError) -> Response {
        error.into_response()
    }
}
