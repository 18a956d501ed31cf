//! The audit log, from the admin API (admins with an unconfined token): every change, oldest first, by
//! target, paged by cursor.

use axum::extract::{Query, State};
use axum::response::Response;
use chrono::{DateTime, Utc};
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::Value;

use crate::console::admin_api::{query, Page};
use crate::console::error::ConsoleError;
use crate::console::signed_in::SignedIn;
use crate::console::ui::format::when;
use crate::console::ui::layout::{self, Section};
use crate::console::ui::list::{pager, PAGE};
use crate::console::Console;

#[derive(Debug, Deserialize)]
struct Entry {
    id: i64,
    at: DateTime<Utc>,
    actor: String,
    action: String,
    target_type: String,
    target_id: String,
    before: Option<Value>,
    after: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct AuditQuery {
    target_type: Option<String>,
    target_id: Option<String>,
    cursor: Option<String>,
}

pub(super) async fn list(State(console): State<Console>, signed: SignedIn, Query(q): Query<AuditQuery>) -> Response {
    let body = build(&console, &signed, &q).await;
    layout::page_or_error(&signed, Section::Audit, "Audit log", body)
}

async fn build(console: &Console, signed: &SignedIn, q: &AuditQuery) -> Result<Markup, ConsoleError> {
    let staff = signed.staff()?;
    let (target_type, target_id) = (q.target_type.as_deref(), q.target_id.as_deref());
    let limit = PAGE.to_string();
    let path = format!(
        "/admin/v1/audit-log{}",
        query(&[("target_type", target_type), ("target_id", target_id), ("cursor", q.cursor.as_deref()), ("limit", Some(&limit))])
    );
    let page: Page<Entry> = console.admin.get(staff.token(), &path).await?;
    let json = |v: &Option<Value>| v.as_ref().map_or_else(|| "—".to_owned(), |v| serde_json::to_string_pretty(v).unwrap_or_default());
    Ok(html! {
        form.filters method="get" action="/console/ops/audit" {
            label { "Target type " input type="text" name="target_type" value=(target_type.unwrap_or("")) placeholder="model, tenant, api_key"; }
            label { "Target id " input type="text" name="target_id" value=(target_id.unwrap_or("")); }
            button type="submit" { "Filter" }
        }
        p.hint { "Oldest first. Every change made through the admin API, the console and the command line." }
        div.table-scroll {
            table #audit {
                thead { tr { th { "#" } th { "When" } th { "Actor" } th { "Action" } th { "Target" } th { "Before → after" } } }
                tbody {
                    @for e in &page.data {
                        tr {
                            td.num { (e.id) }
                            td { (when(e.at)) }
                            td { (e.actor) }
                            td { code { (e.action) } }
                            td { (e.target_type) " " code { (e.target_id) } }
                            td {
                                details {
                                    summary { "show" }
                                    div.diff { pre { (json(&e.before)) } pre { (json(&e.after)) } }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if page.data.is_empty() { p.empty { "No entries." } }
        (pager("/console/ops/audit", &[("target_type", target_type), ("target_id", target_id)], page.next_cursor.as_deref(), q.cursor.is_none()))
    })
}
