//! A tenant's credit ledger: grants (with who granted and why) and charges (with their request), oldest
//! first, paged by cursor.

use axum::extract::{Query, State};
use axum::response::Response;
use chrono::{DateTime, Utc};
use maud::{html, Markup};
use rust_decimal::Decimal;
use serde::Deserialize;
use uuid::Uuid;

use super::{name_of, tenants};
use crate::console::admin_api::{query, segment, Page};
use crate::console::error::ConsoleError;
use crate::console::signed_in::SignedIn;
use crate::console::ui::format::{money, when};
use crate::console::ui::layout::{self, Section};
use crate::console::ui::list::{pager, PAGE};
use crate::console::Console;

#[derive(Debug, Deserialize)]
struct Entry {
    id: i64,
    kind: String,
    amount: Decimal,
    request_id: Option<String>,
    actor: Option<String>,
    note: String,
    created_at: DateTime<Utc>,
}

#[derive(Debug, Deserialize)]
pub(super) struct LedgerQuery {
    tenant_id: Option<String>,
    cursor: Option<String>,
}

pub(super) async fn list(State(console): State<Console>, signed: SignedIn, Query(q): Query<LedgerQuery>) -> Response {
    let body = build(&console, &signed, &q).await;
    layout::page_or_error(&signed, Section::Tenants, "Credit ledger", body)
}

async fn build(console: &Console, signed: &SignedIn, q: &LedgerQuery) -> Result<Markup, ConsoleError> {
    let staff = signed.staff()?;
    let tenants = tenants(console, staff).await?;
    let chosen = q.tenant_id.as_deref().filter(|t| !t.is_empty()).map(str::to_owned).or_else(|| tenants.first().map(|t| t.id.to_string()));
    let chooser = html! {
        form.filters method="get" action="/console/finance/ledger" {
            label { "Tenant "
                select name="tenant_id" {
                    @for t in &tenants { option value=(t.id) selected[chosen.as_deref() == Some(t.id.to_string().as_str())] { (t.name) } }
                }
            }
            button type="submit" { "Show" }
        }
    };
    let Some(tenant) = chosen else { return Ok(html! { (chooser) p.empty { "No tenants." } }) };
    let limit = PAGE.to_string();
    let path = format!(
        "/admin/v1/tenants/{}/credit-ledger{}",
        segment(&tenant),
        query(&[("cursor", q.cursor.as_deref()), ("limit", Some(&limit))])
    );
    let page: Page<Entry> = console.admin.get(staff.token(), &path).await?;
    let name = tenant.parse::<Uuid>().map_or_else(|_| tenant.clone(), |id| name_of(&tenants, id));
    Ok(html! {
        (chooser)
        h2 { (name) }
        p.hint { "Oldest first. Grants add to the balance (an adjustment may be negative); each charge settles one request." }
        div.table-scroll {
            table #ledger {
                thead { tr { th { "#" } th { "When" } th { "Kind" } th.num { "Amount (USD)" } th { "Request" } th { "By" } th { "Note" } } }
                tbody {
                    @for e in &page.data {
                        tr class=(e.kind) {
                            td.num { (e.id) }
                            td { (when(e.created_at)) }
                            td { (e.kind) }
                            td.num { (money(e.amount)) }
                            td { @if let Some(r) = &e.request_id { code { (r) } } }
                            td { (e.actor.as_deref().unwrap_or("")) }
                            td { (e.note) }
                        }
                    }
                }
            }
        }
        @if page.data.is_empty() { p.empty { "No entries." } }
        (pager("/console/finance/ledger", &[("tenant_id", Some(&tenant))], page.next_cursor.as_deref(), q.cursor.is_none()))
    })
}
