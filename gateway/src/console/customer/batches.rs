//! `GET /console/batches`: the tenant's batches, newest first, with their progress and cost so far;
//! `POST /console/batches/cancel`: cancel one (`batches::cancel`, scoped to the session key's tenant).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use maud::{html, Markup};
use serde::Deserialize;

use crate::console::error::ConsoleError;
use crate::console::form::Posted;
use crate::console::signed_in::{Customer, SignedIn};
use crate::console::ui::format::{money, when_cell};
use crate::console::ui::layout::{self, csrf, Section};
use crate::console::Console;
use crate::db::batches::BatchRow;

/// The batches one page shows.
const SHOWN: i64 = 100;
const CANCELLABLE: [&str; 2] = ["validating", "in_progress"];

pub(super) async fn list(State(console): State<Console>, signed: SignedIn) -> Response {
    let body = match signed.customer() {
        Ok(customer) => page(&console, &signed, customer, None).await,
        Err(e) => Err(e),
    };
    layout::page_or_error(&signed, Section::Batches, "Batches", body)
}

async fn page(
    console: &Console,
    signed: &SignedIn,
    customer: &Customer,
    outcome: Option<Result<String, ConsoleError>>,
) -> Result<Markup, ConsoleError> {
    let (rows, has_more) = crate::batches::list(&console.app, customer.caller.tenant_id, None, SHOWN).await?;
    Ok(html! {
        @match &outcome {
            Some(Ok(id)) => { (layout::ok(&format!("Batch {id} is being cancelled: lines not begun are cancelled, running ones finish."))) }
            Some(Err(e)) => { (layout::error(e)) }
            None => {}
        }
        p.hint { "Newest first. Lines run at the batch price; the cost is the exact sum of the lines run so far (USD). Submit batches with the API (" code { "POST /v1/batches" } ") or " code { "runaii batch" } "." }
        div.table-scroll {
            table.responsive #batches {
                thead { tr { th { "Created (UTC)" } th { "Batch" } th { "Status" } th { "Progress" } th.num { "Failed" } th.num { "Cost (USD)" } th {} } }
                tbody {
                    @for b in &rows {
                        (row(signed, b))
                    }
                }
            }
        }
        @if has_more { p.hint { "The " (SHOWN) " newest are shown." } }
    })
}

fn row(signed: &SignedIn, b: &BatchRow) -> Markup {
    let done = b.completed + b.failed;
    html! {
        tr data-batch=(b.id) {
            td data-label="Created (UTC)" { (when_cell(b.created_at)) }
            td data-label="Batch" { code.id { (b.id) } br; small { (b.endpoint) } }
            td data-label="Status" { span class=(format!("status {}", b.status)) { (b.status) } }
            td data-label="Progress" {
                progress value=(done) max=(b.total.max(1)) {}
                " " span.progress-text { (done) " / " (b.total) }
            }
            td.num data-label="Failed" { (b.failed) }
            td.num.cost data-label="Cost (USD)" { (money(b.cost)) }
            td data-label="" {
                @if CANCELLABLE.contains(&b.status.as_str()) {
                    form.inline method="post" action="/console/batches/cancel" data-confirm=(format!("Cancel {}? Lines not begun will not run.", b.id)) {
                        (csrf(signed))
                        input type="hidden" name="batch_id" value=(b.id);
                        button.danger type="submit" { "Cancel" }
                    }
                }
            }
        }
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct CancelForm {
    #[serde(default)]
    batch_id: String,
}

pub(super) async fn cancel(State(console): State<Console>, posted: Posted<CancelForm>) -> Response {
    let signed = posted.signed;
    let customer = match signed.customer() {
        Ok(c) => c,
        Err(e) => return layout::page_or_error(&signed, Section::Batches, "Batches", Err(e)),
    };
    let id = posted.form.batch_id;
    let outcome = crate::batches::cancel(&console.app, customer.caller.tenant_id, &id).await.map(|_| id).map_err(ConsoleError::from);
    let status = outcome.as_ref().err().map_or(StatusCode::OK, ConsoleError::status);
    let body = page(&console, &signed, customer, Some(outcome)).await;
    layout::respond(&signed, Section::Batches, "Batches", status, body)
}
