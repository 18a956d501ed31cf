//! Tenants with their credit (balance, reserved, available), links to each one's ledger, and the credit
//! grant form for admins. A grant is the admin API's: only an unconfined admin token may mint credit, the
//! amount is refused rather than rounded, and the grant is in the ledger and the audit log.

use axum::extract::State;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::{json, Value};

use super::tenants;
use crate::auth::staff::Role;
use crate::console::admin_api::{query, segment};
use crate::console::error::ConsoleError;
use crate::console::form::Posted;
use crate::console::signed_in::{SignedIn, Staff};
use crate::console::ui::format::money;
use crate::console::ui::layout::{self, csrf, Section};
use crate::console::Console;

pub(super) async fn list(State(console): State<Console>, signed: SignedIn) -> Response {
    let body = async { page(&console, &signed, signed.staff()?, None).await }.await;
    layout::page_or_error(&signed, Section::Tenants, "Tenants & credit", body)
}

/// What the grant form did.
enum Granted {
    Done(String),
    Failed(ConsoleError),
}

async fn page(console: &Console, signed: &SignedIn, staff: &Staff, outcome: Option<Granted>) -> Result<Markup, ConsoleError> {
    let rows = tenants(console, staff).await?;
    let can_grant = staff.has_unconfined(Role::Admin);
    let can_read_ledger = staff.has(Role::Finance);
    Ok(html! {
        @match &outcome {
            Some(Granted::Done(text)) => { (layout::ok(text)) }
            Some(Granted::Failed(e)) => { (layout::error(e)) }
            None => {}
        }
        div.table-scroll {
            table.responsive #tenants {
                thead { tr { th { "Tenant" } th.num { "Balance" } th.num { "Reserved" } th.num { "Available" } th {} } }
                tbody {
                    @for t in &rows {
                        tr data-tenant=(t.id) {
                            td data-label="Tenant" { strong { (t.name) } br; code.sub { (t.id) } }
                            td.num.balance data-label="Balance" { (money(t.balance)) }
                            td.num data-label="Reserved" { (money(t.reserved)) }
                            td.num data-label="Available" { (money(t.available)) }
                            td data-label="" {
                                @if can_read_ledger {
                                    a href=(format!("/console/finance/ledger{}", query(&[("tenant_id", Some(&t.id.to_string()))]))) { "Ledger" }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if can_grant {
            form.stack #grant method="post" action="/console/finance/grants"
                data-confirm="Grant this credit? It is added to the balance at once and recorded in the ledger and the audit log." {
                (csrf(signed))
                h2 { "Grant credit" }
                label for="grant-tenant" { "Tenant" }
                select #grant-tenant name="tenant_id" { @for t in &rows { option value=(t.id) { (t.name) } } }
                label for="grant-amount" { "Amount (USD; negative for an adjustment)" }
                input #grant-amount type="text" inputmode="decimal" name="amount" required placeholder="10.00";
                label for="grant-note" { "Note" }
                input #grant-note type="text" name="note" maxlength="500";
                button type="submit" { "Grant" }
            }
        } @else {
            p.hint { "Granting credit needs an admin token that is not confined to a tenant." }
        }
    })
}

#[derive(Debug, Deserialize)]
pub(super) struct GrantForm {
    #[serde(default)]
    tenant_id: String,
    #[serde(default)]
    amount: String,
    #[serde(default)]
    note: String,
}

pub(super) async fn grant(State(console): State<Console>, posted: Posted<GrantForm>) -> Response {
    let (signed, f) = (posted.signed, posted.form);
    let staff = match signed.staff() {
        Ok(s) => s,
        Err(e) => return layout::page_or_error(&signed, Section::Tenants, "Tenants & credit", Err(e)),
    };
    let (outcome, status) = match send(&console, staff, &f).await {
        Ok(text) => (Granted::Done(text), StatusCode::OK),
        Err(e @ ConsoleError::SignedOut(_)) => return layout::page_or_error(&signed, Section::Tenants, "", Err(e)),
        Err(e) => {
            let status = e.status();
            (Granted::Failed(e), status)
        }
    };
    let body = page(&console, &signed, staff, Some(outcome)).await;
    layout::respond(&signed, Section::Tenants, "Tenants & credit", status, body)
}

async fn send(console: &Console, staff: &Staff, f: &GrantForm) -> Result<String, ConsoleError> {
    let amount = f.amount.trim();
    // The amount goes to the API as the text typed, a decimal string: never through a float.
    if amount.parse::<rust_decimal::Decimal>().is_err() {
        return Err(ConsoleError::Invalid(format!("{amount:?} is not an amount of USD, e.g. 10.00")));
    }
    let path = format!("/admin/v1/tenants/{}/credits", segment(f.tenant_id.trim()));
    let answer: Value = console.admin.send(staff.token(), Method::POST, &path, &json!({"amount": amount, "note": f.note})).await?;
    let balance = answer["balance"].as_str().unwrap_or("?");
    Ok(format!("Granted {amount} USD. The tenant's balance is now {balance} USD."))
}
