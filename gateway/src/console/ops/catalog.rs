//! The catalog: every model with its prices, flags and readiness; an edit form; a confirmation page that
//! shows each change (now → after) before anything is written; and the write itself, a `PATCH` of the
//! admin API (which validates it and writes the audit row).

use axum::extract::{Query, State};
use axum::http::header::LOCATION;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use maud::{html, Markup};
use rust_decimal::Decimal;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::console::admin_api::{query, segment, List};
use crate::console::error::ConsoleError;
use crate::console::form::Posted;
use crate::console::signed_in::{SignedIn, Staff};
use crate::console::ui::format::money;
use crate::console::ui::layout::{self, csrf, Section};
use crate::console::Console;

/// A catalog entry as `GET /admin/v1/models` gives it.
#[derive(Debug, Clone, Deserialize)]
struct Entry {
    id: String,
    owned_by: String,
    context_length: i32,
    input_price_per_mtok: Decimal,
    cached_input_price_per_mtok: Decimal,
    output_price_per_mtok: Decimal,
    batch_price_ratio: Decimal,
    supports_structured_outputs: bool,
    supports_tools: bool,
    schema_in_prompt: bool,
    public: bool,
    enabled: bool,
    workers: Vec<String>,
    is_ready: bool,
}

async fn catalog(console: &Console, staff: &Staff) -> Result<Vec<Entry>, ConsoleError> {
    Ok(console.admin.get::<List<Entry>>(staff.token(), "/admin/v1/models").await?.data)
}

async fn entry(console: &Console, staff: &Staff, id: &str) -> Result<Entry, ConsoleError> {
    catalog(console, staff).await?.into_iter().find(|e| e.id == id).ok_or_else(|| ConsoleError::NotFound(format!("model {id}")))
}

#[derive(Debug, Deserialize)]
pub(super) struct ListQuery {
    saved: Option<String>,
}

pub(super) async fn list(State(console): State<Console>, signed: SignedIn, Query(q): Query<ListQuery>) -> Response {
    let body = async {
        let entries = catalog(&console, signed.staff()?).await?;
        Ok(html! {
            @if let Some(id) = &q.saved { (layout::ok(&format!("Saved the changes to {id}. /v1/models shows them now."))) }
            p.hint { "Prices are USD per million tokens, exact. Changes go through a confirmation and are written to the audit log." }
            div.table-scroll {
                table.responsive #catalog {
                    thead {
                        tr {
                            th { "Model" } th.num { "Input" } th.num { "Cached input" } th.num { "Output" } th.num { "Batch" } th.num { "Context" }
                            th { "Enabled" } th { "Public" } th { "Capabilities" } th { "Ready" } th { "Workers" } th {}
                        }
                    }
                    tbody {
                        @for e in &entries {
                            tr data-model=(e.id) {
                                td data-label="Model" { strong { (e.id) } br; span.sub { (e.owned_by) } }
                                td.num.price-in data-label="Input" { (money(e.input_price_per_mtok)) }
                                td.num.price-cached data-label="Cached input" { (money(e.cached_input_price_per_mtok)) }
                                td.num.price-out data-label="Output" { (money(e.output_price_per_mtok)) }
                                td.num.batch-ratio data-label="Batch" { (ratio(e.batch_price_ratio)) }
                                td.num data-label="Context" { (e.context_length) }
                                td data-label="Enabled" { (yes_no(e.enabled)) }
                                td data-label="Public" { (yes_no(e.public)) }
                                td.wrap data-label="Capabilities" { (capabilities(e)) }
                                td data-label="Ready" { @if e.is_ready { span.status.succeeded { "ready" } } @else { span.status.failed { "not ready" } } }
                                td.wrap data-label="Workers" { @for w in &e.workers { code { (w) } br; } }
                                td data-label="" { a.button href=(format!("/console/ops/models/edit{}", query(&[("id", Some(&e.id))]))) { "Edit" } }
                            }
                        }
                    }
                }
            }
        })
    }
    .await;
    layout::page_or_error(&signed, Section::Catalog, "Catalog", body)
}

/// A batch price ratio as the catalog shows it: "0.5 ×".
fn ratio(r: Decimal) -> String {
    format!("{} ×", r.normalize())
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn capabilities(e: &Entry) -> String {
    let mut caps = Vec::new();
    if e.supports_structured_outputs {
        caps.push("structured outputs");
    }
    if e.supports_tools {
        caps.push("tools");
    }
    if e.schema_in_prompt {
        caps.push("schema in prompt");
    }
    if caps.is_empty() {
        "—".to_owned()
    } else {
        caps.join(", ")
    }
}

/// The edit form's fields, all text (a checkbox is present when ticked).
#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct EditForm {
    #[serde(default)]
    id: String,
    #[serde(default)]
    owned_by: String,
    #[serde(default)]
    context_length: String,
    #[serde(default)]
    input_price: String,
    #[serde(default)]
    cached_input_price: String,
    #[serde(default)]
    output_price: String,
    #[serde(default)]
    batch_price_ratio: String,
    enabled: Option<String>,
    public: Option<String>,
    structured: Option<String>,
    tools: Option<String>,
    schema_in_prompt: Option<String>,
}

fn ticked(field: Option<&String>) -> bool {
    field.is_some_and(|v| v != "false")
}

impl EditForm {
    fn of(e: &Entry) -> Self {
        let flag = |b: bool| Some(b.to_string());
        Self {
            id: e.id.clone(),
            owned_by: e.owned_by.clone(),
            context_length: e.context_length.to_string(),
            input_price: money(e.input_price_per_mtok),
            cached_input_price: money(e.cached_input_price_per_mtok),
            output_price: money(e.output_price_per_mtok),
            batch_price_ratio: e.batch_price_ratio.normalize().to_string(),
            enabled: flag(e.enabled),
            public: flag(e.public),
            structured: flag(e.supports_structured_outputs),
            tools: flag(e.supports_tools),
            schema_in_prompt: flag(e.schema_in_prompt),
        }
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct EditQuery {
    #[serde(default)]
    id: String,
}

pub(super) async fn edit(State(console): State<Console>, signed: SignedIn, Query(q): Query<EditQuery>) -> Response {
    let body = async {
        let e = entry(&console, signed.staff()?, &q.id).await?;
        Ok(edit_form(&signed, &EditForm::of(&e), None))
    }
    .await;
    layout::page_or_error(&signed, Section::Catalog, &format!("Edit {}", q.id), body)
}

fn edit_form(signed: &SignedIn, f: &EditForm, error: Option<&ConsoleError>) -> Markup {
    let checkbox = |name: &str, label: &str, on: bool| {
        html! { label.check { input type="checkbox" name=(name) value="true" checked[on]; " " (label) } }
    };
    html! {
        @if let Some(e) = error { (layout::error(e)) }
        form.stack #edit-model method="post" action="/console/ops/models/review" {
            (csrf(signed))
            input type="hidden" name="id" value=(f.id);
            label for="input_price" { "Input price (USD per million tokens)" }
            input #input_price type="text" inputmode="decimal" name="input_price" value=(f.input_price) required;
            label for="cached_input_price" { "Cached input price (USD per million prompt tokens read from the cache; left equal to the input price, it follows it)" }
            input #cached_input_price type="text" inputmode="decimal" name="cached_input_price" value=(f.cached_input_price) required;
            label for="output_price" { "Output price (USD per million tokens)" }
            input #output_price type="text" inputmode="decimal" name="output_price" value=(f.output_price) required;
            label for="batch_price_ratio" { "Batch price (a batch line pays every price above times this ratio: above 0, at most 1)" }
            input #batch_price_ratio type="text" inputmode="decimal" name="batch_price_ratio" value=(f.batch_price_ratio) required;
            label for="context_length" { "Context length (tokens)" }
            input #context_length type="number" min="1" name="context_length" value=(f.context_length) required;
            label for="owned_by" { "Owned by" }
            input #owned_by type="text" name="owned_by" value=(f.owned_by);
            fieldset {
                legend { "Flags" }
                (checkbox("enabled", "Enabled (served and listed)", ticked(f.enabled.as_ref())))
                (checkbox("public", "Public (every tenant; otherwise granted tenants only)", ticked(f.public.as_ref())))
                (checkbox("structured", "Structured outputs", ticked(f.structured.as_ref())))
                (checkbox("tools", "Tools", ticked(f.tools.as_ref())))
                (checkbox("schema_in_prompt", "Render the schema into the prompt", ticked(f.schema_in_prompt.as_ref())))
            }
            div.actions {
                button type="submit" { "Review the change" }
                a href="/console/ops/models" { "Cancel" }
            }
        }
    }
}

/// A form's changes against the catalog as it is.
struct Changes {
    /// The admin API's `PATCH` body: the fields that differ.
    body: Map<String, Value>,
    /// One (label, now, after) line per change, for the confirmation page.
    lines: Vec<(&'static str, String, String)>,
}

/// The fields of `f` that differ from `now`.
fn changes(now: &Entry, f: &EditForm) -> Result<Changes, ConsoleError> {
    let price = |text: &str, what: &str| {
        text.trim().parse::<Decimal>().map_err(|_| ConsoleError::Invalid(format!("{what} must be a decimal number of USD, e.g. 0.25")))
    };
    let input = price(&f.input_price, "the input price")?;
    // Left out (a form from before the field existed): unchanged.
    let cached = match f.cached_input_price.trim() {
        "" => now.cached_input_price_per_mtok,
        text => price(text, "the cached input price")?,
    };
    let output = price(&f.output_price, "the output price")?;
    // Left out (a form from before the field existed): unchanged. The API checks its range.
    let batch = match f.batch_price_ratio.trim() {
        "" => now.batch_price_ratio,
        text => text.parse::<Decimal>().map_err(|_| ConsoleError::Invalid("the batch price must be a decimal ratio, e.g. 0.5".into()))?,
    };
    let context: i32 =
        f.context_length.trim().parse().map_err(|_| ConsoleError::Invalid("the context length must be a whole number".into()))?;
    let mut body = Map::new();
    let mut lines = Vec::new();
    let mut note = |field: &'static str, label: &'static str, before: String, after: String, value: Value| {
        if before != after {
            body.insert(field.to_owned(), value);
            lines.push((label, before, after));
        }
    };
    // Prices compare as numbers (0.10 is 0.1) and go to the API as decimal strings, never floats.
    let (input_before, output_before) = (money(now.input_price_per_mtok), money(now.output_price_per_mtok));
    note("input_price_per_mtok", "Input price", input_before, money(input), Value::String(input.to_string()));
    // Sent only when changed: an untouched cached price keeps following the input price (the API's rule).
    let cached_before = money(now.cached_input_price_per_mtok);
    note("cached_input_price_per_mtok", "Cached input price", cached_before, money(cached), Value::String(cached.to_string()));
    note("output_price_per_mtok", "Output price", output_before, money(output), Value::String(output.to_string()));
    let (batch_before, batch_after) = (ratio(now.batch_price_ratio), ratio(batch));
    note("batch_price_ratio", "Batch price", batch_before, batch_after, Value::String(batch.normalize().to_string()));
    note("context_length", "Context length", now.context_length.to_string(), context.to_string(), Value::from(context));
    note("owned_by", "Owned by", now.owned_by.clone(), f.owned_by.trim().to_owned(), Value::from(f.owned_by.trim()));
    let flags = [
        ("enabled", "Enabled", now.enabled, ticked(f.enabled.as_ref())),
        ("public", "Public", now.public, ticked(f.public.as_ref())),
        ("supports_structured_outputs", "Structured outputs", now.supports_structured_outputs, ticked(f.structured.as_ref())),
        ("supports_tools", "Tools", now.supports_tools, ticked(f.tools.as_ref())),
        ("schema_in_prompt", "Schema in prompt", now.schema_in_prompt, ticked(f.schema_in_prompt.as_ref())),
    ];
    for (field, label, before, after) in flags {
        note(field, label, yes_no(before).to_owned(), yes_no(after).to_owned(), Value::Bool(after));
    }
    Ok(Changes { body, lines })
}

pub(super) async fn review(State(console): State<Console>, posted: Posted<EditForm>) -> Response {
    let (signed, f) = (posted.signed, posted.form);
    let title = format!("Confirm changes to {}", f.id);
    let body = async {
        let now = entry(&console, signed.staff()?, &f.id).await?;
        let lines = match changes(&now, &f) {
            Ok(c) => c.lines,
            Err(e) => return Ok((e.status(), edit_form(&signed, &f, Some(&e)))),
        };
        let hidden = |name: &str, value: &str| html! { input type="hidden" name=(name) value=(value); };
        let flag = |v: &Option<String>| ticked(v.as_ref()).to_string();
        Ok((
            StatusCode::OK,
            html! {
                @if lines.is_empty() {
                    p { "Nothing to change: every field is as it is now." }
                    p { a href="/console/ops/models" { "Back to the catalog" } }
                } @else {
                    p { "These changes take effect for every tenant as soon as you confirm:" }
                    div.table-scroll {
                        table #review {
                            thead { tr { th { "Field" } th { "Now" } th { "After" } } }
                            tbody { @for (label, before, after) in &lines { tr { th scope="row" { (label) } td { (before) } td.after { (after) } } } }
                        }
                    }
                    form.actions method="post" action="/console/ops/models/apply" {
                        (csrf(&signed))
                        (hidden("id", &f.id)) (hidden("owned_by", &f.owned_by)) (hidden("context_length", &f.context_length))
                        (hidden("input_price", &f.input_price)) (hidden("cached_input_price", &f.cached_input_price))
                        (hidden("output_price", &f.output_price)) (hidden("batch_price_ratio", &f.batch_price_ratio))
                        (hidden("enabled", &flag(&f.enabled))) (hidden("public", &flag(&f.public)))
                        (hidden("structured", &flag(&f.structured))) (hidden("tools", &flag(&f.tools)))
                        (hidden("schema_in_prompt", &flag(&f.schema_in_prompt)))
                        button #confirm type="submit" { "Confirm and save" }
                        a href=(format!("/console/ops/models/edit{}", query(&[("id", Some(&f.id))]))) { "Back to the form" }
                    }
                }
            },
        ))
    }
    .await;
    match body {
        Ok((status, markup)) => layout::respond(&signed, Section::Catalog, &title, status, Ok(markup)),
        Err(e) => layout::page_or_error(&signed, Section::Catalog, &title, Err(e)),
    }
}

pub(super) async fn apply(State(console): State<Console>, posted: Posted<EditForm>) -> Response {
    let (signed, f) = (posted.signed, posted.form);
    let saved = async {
        let staff = signed.staff()?;
        let now = entry(&console, staff, &f.id).await?;
        let body = changes(&now, &f)?.body;
        if !body.is_empty() {
            let path = format!("/admin/v1/models/{}", segment(&f.id));
            console.admin.send::<Value>(staff.token(), Method::PATCH, &path, &Value::Object(body)).await?;
        }
        Ok::<_, ConsoleError>(())
    }
    .await;
    match saved {
        Ok(()) => {
            let to = format!("/console/ops/models{}", query(&[("saved", Some(&f.id))]));
            (StatusCode::SEE_OTHER, [(LOCATION, to)]).into_response()
        }
        Err(e @ ConsoleError::SignedOut(_)) => e.into_response(),
        Err(e) => {
            let status = e.status();
            layout::respond(&signed, Section::Catalog, &format!("Edit {}", f.id), status, Ok(edit_form(&signed, &f, Some(&e))))
        }
    }
}
