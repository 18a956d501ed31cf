//! `GET /console/requests`: the tenant's requests, newest first, paged by cursor; and
//! `GET /console/requests/{id}`: one of them. Both read only the signed-in key's tenant.

use axum::extract::{Query, State};
use axum::response::Response;
use chrono::DateTime;
use maud::{html, Markup};
use serde::Deserialize;

use crate::console::admin_api::segment;
use crate::console::error::ConsoleError;
use crate::console::signed_in::SignedIn;
use crate::console::ui::format::{money, when, when_cell};
use crate::console::ui::layout::{self, Section};
use crate::console::ui::list::{pager, PAGE};
use crate::console::Console;
use crate::db::reports::CostRow;
use crate::db::{keys, usage};
use crate::extract::Path;

#[derive(Debug, Deserialize)]
pub(super) struct ListQuery {
    cursor: Option<String>,
}

pub(super) async fn list(State(console): State<Console>, signed: SignedIn, Query(q): Query<ListQuery>) -> Response {
    let body = build_list(&console, &signed, q.cursor.as_deref().filter(|c| !c.is_empty())).await;
    layout::page_or_error(&signed, Section::Requests, "Requests", body)
}

async fn build_list(console: &Console, signed: &SignedIn, cursor: Option<&str>) -> Result<Markup, ConsoleError> {
    let tenant = signed.customer()?.caller.tenant_id;
    let before = cursor.map(parse_cursor).transpose()?;
    let mut rows = usage::recent(&console.app.db, tenant, before, PAGE + 1).await?;
    let has_more = rows.len() > usize::try_from(PAGE).unwrap_or(0);
    rows.truncate(usize::try_from(PAGE).unwrap_or(0));
    let next = if has_more { rows.last().map(cursor_of) } else { None };
    Ok(html! {
        p.hint { "Newest first. Costs are exact (USD), as the API returned them in " code { "usage.cost" } "." }
        div.table-scroll {
            table.responsive #requests {
                thead {
                    tr {
                        th { "Time (UTC)" } th { "Request" } th { "Model" } th { "Status" } th.num { "Cost (USD)" }
                        th.num { "Input" } th.num { "Cached" } th.num { "Output" } th.num { "ms" }
                    }
                }
                tbody {
                    @for r in &rows {
                        tr {
                            td data-label="Time (UTC)" { (when_cell(r.created_at)) }
                            td data-label="Request" { a href=(format!("/console/requests/{}", segment(&r.request_id))) { code.id { (r.request_id) } } }
                            td data-label="Model" { (r.model) }
                            td data-label="Status" { span class=(format!("status {}", r.status)) { (r.status) } }
                            td.num.cost data-label="Cost (USD)" { (money(r.cost)) }
                            td.num data-label="Input" { (r.input_tokens) }
                            td.num data-label="Cached" { (r.cached_tokens) }
                            td.num data-label="Output" { (r.output_tokens) }
                            td.num data-label="ms" { (r.latency_ms) }
                        }
                    }
                }
            }
        }
        @if rows.is_empty() { p.empty { "No requests yet. Try the " a href="/console/playground" { "playground" } "." } }
        (pager("/console/requests", &[], next.as_deref(), cursor.is_none()))
    })
}

/// The cursor is the last row's time (µs since the epoch) and request id.
fn cursor_of(row: &CostRow) -> String {
    format!("{}:{}", row.created_at.timestamp_micros(), row.request_id)
}

fn parse_cursor(cursor: &str) -> Result<(DateTime<chrono::Utc>, String), ConsoleError> {
    let bad = || ConsoleError::Invalid("the page link is not one this console made; start from the first page".into());
    let (micros, id) = cursor.split_once(':').ok_or_else(bad)?;
    let at = DateTime::from_timestamp_micros(micros.parse().map_err(|_| bad())?).ok_or_else(bad)?;
    Ok((at, id.to_owned()))
}

pub(super) async fn detail(State(console): State<Console>, signed: SignedIn, Path(id): Path<String>) -> Response {
    let body = build_detail(&console, &signed, &id).await;
    layout::page_or_error(&signed, Section::Requests, "Request", body)
}

async fn build_detail(console: &Console, signed: &SignedIn, id: &str) -> Result<Markup, ConsoleError> {
    let tenant = signed.customer()?.caller.tenant_id;
    // Another tenant's request is "not found", exactly like one that does not exist.
    let r = usage::one(&console.app.db, tenant, id).await?.ok_or_else(|| ConsoleError::NotFound(format!("request {id}")))?;
    let key = keys::list(&console.app.db, tenant).await?.into_iter().find(|k| k.id == r.api_key_id);
    let key_text = key.map_or_else(|| r.api_key_id.to_string(), |k| format!("rk-{}-… {}", k.public_id, k.name));
    Ok(html! {
        dl.detail #request-detail {
            dt { "Request id" } dd { code { (r.request_id) } }
            dt { "Time" } dd { (when(r.created_at)) }
            dt { "Model" } dd { (r.model) }
            dt { "Endpoint" } dd { (r.endpoint) }
            dt { "Status" } dd { span class=(format!("status {}", r.status)) { (r.status) } " (HTTP " (r.http_status) ")" }
            @if let Some(code) = &r.error_code { dt { "Error code" } dd { code { (code) } } }
            dt { "Input tokens" } dd { (r.input_tokens) }
            dt { "Cached input tokens" } dd { (r.cached_tokens) }
            dt { "Output tokens" } dd { (r.output_tokens) }
            dt { "Cost" } dd.cost { (money(r.cost)) " USD" }
            @if !r.shortfall.is_zero() {
                dt { "Unpaid (shortfall)" } dd { (money(r.shortfall)) " USD: the balance could not cover it all" }
            }
            dt { "Latency" } dd { (r.latency_ms) " ms" }
            dt { "Key" } dd { code { (key_text) } }
        }
        p { a href="/console/requests" { "← All requests" } }
    })
}
