//! `GET/POST /console/playground`: one chat request with a JSON Schema, sent as the signed-in key
//! through what `POST /v1/chat/completions` runs (the key's rate limit, then the inference driver in the
//! chat dialect: credit hold, the worker's constrained decoding, the cost record), then shown: the answer, whether it validates against the
//! schema (checked again here, independently of the worker), its tokens and its exact cost.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use maud::{html, Markup};
use rust_decimal::Decimal;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::console::admin_api::segment;
use crate::console::error::ConsoleError;
use crate::console::form::Posted;
use crate::console::signed_in::{Customer, SignedIn};
use crate::console::ui::format::money;
use crate::console::ui::layout::{self, csrf, Section};
use crate::console::Console;
use crate::error::ApiError;
use crate::inference::{self, chat::Chat};
use crate::ratelimit::Admission;

/// The README's invoice example, as the form's starting point.
const SYSTEM: &str = "Extract the invoice fields.";
const USER: &str = "Invoice #A-1024, due 2026-11-01, total 420.00 USD.";
const SCHEMA: &str = r#"{
  "type": "object",
  "properties": {
    "invoice_number": {"type": "string"},
    "due_date": {"type": "string"},
    "total": {"type": "number"},
    "currency": {"type": "string"}
  },
  "required": ["invoice_number", "due_date", "total", "currency"],
  "additionalProperties": false
}"#;

/// The largest answer the playground reads.
const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;

#[derive(Debug, Default, Deserialize)]
pub(super) struct Ask {
    #[serde(default)]
    model: String,
    #[serde(default)]
    system: String,
    #[serde(default)]
    user: String,
    #[serde(default)]
    schema: String,
    #[serde(default)]
    max_tokens: String,
    #[serde(default)]
    temperature: String,
}

impl Ask {
    fn example() -> Self {
        Self {
            system: SYSTEM.into(),
            user: USER.into(),
            schema: SCHEMA.into(),
            max_tokens: "200".into(),
            temperature: "0".into(),
            ..Self::default()
        }
    }
}

/// What came back, as the page shows it.
struct Answered {
    request_id: String,
    /// The answer as the model wrote it (not re-encoded: a number like `420.00` stays as written).
    content: String,
    finish_reason: String,
    /// `None` when there was no schema; otherwise the validation errors (empty when valid).
    violations: Option<Vec<String>>,
    input_tokens: u64,
    output_tokens: u64,
    cost: Decimal,
}

pub(super) async fn form(State(console): State<Console>, signed: SignedIn) -> Response {
    let body = match signed.customer() {
        Ok(customer) => page(&console, &signed, customer, &Ask::example(), None).await,
        Err(e) => Err(e),
    };
    layout::page_or_error(&signed, Section::Playground, "Playground", body)
}

pub(super) async fn run(State(console): State<Console>, posted: Posted<Ask>) -> Response {
    let signed = posted.signed;
    let customer = match signed.customer() {
        Ok(c) => c,
        Err(e) => return layout::page_or_error(&signed, Section::Playground, "Playground", Err(e)),
    };
    let result = ask(&console, customer, &posted.form).await;
    let status = result.as_ref().map_or_else(ConsoleError::status, |_| StatusCode::OK);
    let body = page(&console, &signed, customer, &posted.form, Some(result)).await;
    layout::respond(&signed, Section::Playground, "Playground", status, body)
}

async fn page(
    console: &Console,
    signed: &SignedIn,
    customer: &Customer,
    ask: &Ask,
    result: Option<Result<Answered, ConsoleError>>,
) -> Result<Markup, ConsoleError> {
    let models = console.app.catalog.list_visible(Some(customer.caller.tenant_id));
    Ok(html! {
        form.stack.playground method="post" action="/console/playground" data-busy="Running…" {
            (csrf(signed))
            label for="model" { "Model" }
            select #model name="model" {
                @for m in &models {
                    option value=(m.id) selected[m.id == ask.model] {
                        (m.id) " — " (money(m.input_price_per_mtok)) " / " (money(m.output_price_per_mtok)) " USD per million tokens in / out"
                    }
                }
            }
            label for="system" { "System" }
            textarea #system name="system" rows="2" { (ask.system) }
            label for="user" { "User message" }
            textarea #user name="user" rows="3" required { (ask.user) }
            label for="schema" { "JSON Schema of the answer (empty for free text)" }
            textarea #schema.code name="schema" rows="12" spellcheck="false" { (ask.schema) }
            div.row {
                div { label for="max_tokens" { "Max tokens" } input #max_tokens type="number" name="max_tokens" min="1" max="4096" value=(ask.max_tokens); }
                div { label for="temperature" { "Temperature" } input #temperature type="text" inputmode="decimal" name="temperature" value=(ask.temperature); }
            }
            button type="submit" { "Run" }
        }
        @match &result {
            Some(Ok(a)) => { (answer(a)) }
            Some(Err(e)) => { (layout::error(e)) }
            None => {}
        }
    })
}

fn answer(a: &Answered) -> Markup {
    html! {
        section.answer #answer {
            h2 { "Answer" }
            @match &a.violations {
                None => { p { "Free text (no schema)." } }
                Some(v) if v.is_empty() && a.finish_reason != "length" => { p.valid #validity { "✓ Valid against the schema." } }
                Some(v) => {
                    div.notice.error #validity {
                        @if a.finish_reason == "length" { p { "The answer was cut at max_tokens, so it is incomplete." } }
                        @for violation in v { p { (violation) } }
                    }
                }
            }
            pre.code #answer-content { (a.content) }
            dl.detail {
                dt { "Request" } dd { a href=(format!("/console/requests/{}", segment(&a.request_id))) { code #answer-id { (a.request_id) } } }
                dt { "Tokens" } dd { (a.input_tokens) " in · " (a.output_tokens) " out" }
                dt { "Cost" } dd { span.cost #answer-cost { (money(a.cost)) } " USD" }
                dt { "Finish" } dd { (a.finish_reason) }
            }
        }
    }
}

/// Sends the request as the key and reads the answer.
async fn ask(console: &Console, customer: &Customer, ask: &Ask) -> Result<Answered, ConsoleError> {
    let (body, schema) = request_body(ask)?;
    let caller = customer.caller;
    let app = &console.app;
    // What every inference route does first: the key's rate limit (and its tenant's caps), then the
    // tenant's cap in flight.
    if let Admission::Limited { retry_after_ms, by_tokens, by_tenant, .. } = app.limiter.admit(caller.budgets()).await? {
        return Err(ApiError::RateLimited { retry_after_ms, by_tokens, by_tenant }.into());
    }
    let slot = app.concurrency.acquire(caller.tenant_id, caller.max_concurrent).await?;
    let response = inference::run::<Chat>(app, caller, slot, body).await;
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), MAX_ANSWER_BYTES)
        .await
        .map_err(|e| ConsoleError::Internal(format!("reading a playground answer: {e}")))?;
    if !status.is_success() {
        // The API's own error, with the message an API client would get.
        let message = serde_json::from_slice::<runaii_wire::ErrorBody>(&bytes)
            .map_or_else(|_| status.canonical_reason().unwrap_or("error").to_owned(), |b| b.error.message);
        return Err(ConsoleError::Api { status, message });
    }
    let reply: Reply =
        serde_json::from_slice(&bytes).map_err(|e| ConsoleError::Internal(format!("a chat answer the console cannot read: {e}")))?;
    let choice = reply.choices.into_iter().next().ok_or_else(|| ConsoleError::Internal("a chat answer without a choice".into()))?;
    let content = choice.message.content.unwrap_or_default();
    // The cost as the API wrote it, digit for digit (a JSON number read as f64 could lose digits).
    let cost: Decimal =
        reply.usage.cost.get().parse().map_err(|e| ConsoleError::Internal(format!("a cost the console cannot read: {e}")))?;
    let violations = schema.map(|schema| violations(&schema, &content));
    Ok(Answered {
        request_id: reply.id,
        content,
        finish_reason: choice.finish_reason.unwrap_or_default(),
        violations,
        input_tokens: reply.usage.prompt_tokens,
        output_tokens: reply.usage.completion_tokens,
        cost,
    })
}

/// The chat request the form describes, and its schema.
fn request_body(ask: &Ask) -> Result<(Value, Option<Value>), ConsoleError> {
    let invalid = |m: &str| ConsoleError::Invalid(m.to_owned());
    if ask.user.trim().is_empty() {
        return Err(invalid("write a user message"));
    }
    let max_tokens: u32 = ask.max_tokens.trim().parse().map_err(|_| invalid("max tokens must be a whole number"))?;
    let temperature: f64 = ask.temperature.trim().parse().map_err(|_| invalid("temperature must be a number, e.g. 0 or 0.7"))?;
    let mut messages = Vec::new();
    if !ask.system.trim().is_empty() {
        messages.push(json!({"role": "system", "content": ask.system}));
    }
    messages.push(json!({"role": "user", "content": ask.user}));
    let mut body = json!({"model": ask.model, "messages": messages, "max_tokens": max_tokens, "temperature": temperature});
    let schema = if ask.schema.trim().is_empty() {
        None
    } else {
        let schema: Value =
            serde_json::from_str(&ask.schema).map_err(|e| ConsoleError::Invalid(format!("the JSON Schema is not valid JSON: {e}")))?;
        body["response_format"] = json!({"type": "json_schema", "json_schema": {"name": "playground", "strict": true, "schema": schema}});
        Some(schema)
    };
    Ok((body, schema))
}

/// Why `content` does not match `schema` (empty when it does).
fn violations(schema: &Value, content: &str) -> Vec<String> {
    let instance: Value = match serde_json::from_str(content) {
        Ok(v) => v,
        Err(e) => return vec![format!("the answer is not JSON: {e}")],
    };
    match jsonschema::validator_for(schema) {
        Ok(validator) => validator.iter_errors(&instance).map(|e| format!("{}: {e}", e.instance_path())).collect(),
        Err(e) => vec![format!("the schema cannot be used to validate: {e}")],
    }
}

#[derive(Deserialize)]
struct Reply {
    id: String,
    choices: Vec<Choice>,
    usage: Usage,
}

#[derive(Deserialize)]
struct Choice {
    message: Message,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Message {
    content: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    prompt_tokens: u64,
    completion_tokens: u64,
    cost: Box<RawValue>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_makes_a_json_schema_request() {
        let (body, schema) = request_body(&Ask { model: "m".into(), ..Ask::example() }).unwrap();
        assert_eq!(body["response_format"]["type"], "json_schema");
        assert_eq!(body["messages"][0]["role"], "system");
        let schema = schema.unwrap();
        assert!(violations(&schema, r#"{"invoice_number":"A","due_date":"d","total":1,"currency":"USD"}"#).is_empty());
        assert!(!violations(&schema, r#"{"invoice_number":"A"}"#).is_empty());
        assert!(!violations(&schema, "not json").is_empty());
    }

    #[test]
    fn bad_fields_are_named() {
        let bad = Ask { max_tokens: "lots".into(), ..Ask::example() };
        assert!(request_body(&bad).unwrap_err().to_string().contains("max tokens"));
        let bad = Ask { schema: "{".into(), ..Ask::example() };
        assert!(request_body(&bad).unwrap_err().to_string().contains("not valid JSON"));
    }
}
