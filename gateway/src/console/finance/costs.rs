//! Cost records: a filter form (month, tenant, model, status, key), one page at a time by cursor, and the
//! CSV export of everything the filter matches (the admin API's streamed export, passed through).

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use maud::{html, Markup};
use rust_decimal::Decimal;
use serde::Deserialize;
use uuid::Uuid;

use super::{name_of, tenants};
use crate::console::admin_api::{query, Page};
use crate::console::error::ConsoleError;
use crate::console::signed_in::SignedIn;
use crate::console::ui::format::{money, this_month, when_cell};
use crate::console::ui::layout::{self, Section};
use crate::console::ui::list::{pager, PAGE};
use crate::console::Console;

/// A cost record as the admin API gives it.
#[derive(Debug, Deserialize)]
struct Record {
    request_id: String,
    created_at: DateTime<Utc>,
    tenant_id: Uuid,
    model: String,
    endpoint: String,
    status: String,
    input_tokens: i64,
    cached_tokens: i64,
    output_tokens: i64,
    cost: Decimal,
    shortfall: Decimal,
}

/// The filters, as the form and the page links carry them.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Filters {
    month: Option<String>,
    tenant_id: Option<String>,
    model: Option<String>,
    status: Option<String>,
    api_key_id: Option<String>,
    cursor: Option<String>,
}

impl Filters {
    /// The month shown: the one asked for, this month by default, or every month (`all`, or cleared).
    fn month(&self) -> Option<String> {
        match self.month.as_deref() {
            None => Some(this_month()),
            Some("" | "all") => None,
            Some(m) => Some(m.to_owned()),
        }
    }

    /// The filters as the console's links carry them (without the cursor): every month is `all`, so
    /// that it stays every month on the next page.
    fn pairs(&self, month: &Option<String>) -> Vec<(&'static str, Option<String>)> {
        vec![
            ("month", Some(month.clone().unwrap_or_else(|| "all".to_owned()))),
            ("tenant_id", self.tenant_id.clone()),
            ("model", self.model.clone()),
            ("status", self.status.clone()),
            ("api_key_id", self.api_key_id.clone()),
        ]
    }
}

/// The admin API's path for these filters, with `extra` pairs.
fn api_path(month: &Option<String>, f: &Filters, extra: &[(&str, Option<&str>)]) -> String {
    let mut pairs: Vec<(&str, Option<&str>)> = vec![
        ("month", month.as_deref()),
        ("tenant_id", f.tenant_id.as_deref()),
        ("model", f.model.as_deref()),
        ("status", f.status.as_deref()),
        ("api_key_id", f.api_key_id.as_deref()),
    ];
    pairs.extend_from_slice(extra);
    format!("/admin/v1/cost-records{}", query(&pairs))
}

fn borrowed<'a>(pairs: &'a [(&'static str, Option<String>)]) -> Vec<(&'static str, Option<&'a str>)> {
    pairs.iter().map(|(k, v)| (*k, v.as_deref())).collect()
}

pub(super) async fn list(State(console): State<Console>, signed: SignedIn, Query(f): Query<Filters>) -> Response {
    let body = build(&console, &signed, &f).await;
    layout::page_or_error(&signed, Section::Costs, "Cost records", body)
}

async fn build(console: &Console, signed: &SignedIn, f: &Filters) -> Result<Markup, ConsoleError> {
    let staff = signed.staff()?;
    let month = f.month();
    let pairs = f.pairs(&month);
    let limit = PAGE.to_string();
    let page: Page<Record> =
        console.admin.get(staff.token(), &api_path(&month, f, &[("cursor", f.cursor.as_deref()), ("limit", Some(&limit))])).await?;
    let tenants = tenants(console, staff).await?;
    let selected = |v: &Option<String>, want: &str| v.as_deref() == Some(want);
    let csv = format!("/console/finance/costs.csv{}", query(&borrowed(&pairs)));
    Ok(html! {
        form.filters #cost-filters method="get" action="/console/finance/costs" {
            label { "Month " input type="month" name="month" value=(month.as_deref().unwrap_or("")); }
            label { "Tenant "
                select name="tenant_id" {
                    option value="" { "every tenant" }
                    @for t in &tenants { option value=(t.id) selected[selected(&f.tenant_id, &t.id.to_string())] { (t.name) } }
                }
            }
            label { "Model " input type="text" name="model" value=(f.model.as_deref().unwrap_or("")); }
            label { "Status "
                select name="status" {
                    option value="" { "any" }
                    @for s in ["succeeded", "failed", "rejected", "cancelled"] { option value=(s) selected[selected(&f.status, s)] { (s) } }
                }
            }
            label { "Key id " input type="text" name="api_key_id" value=(f.api_key_id.as_deref().unwrap_or("")) placeholder="uuid"; }
            button type="submit" { "Filter" }
            a.button #export-csv href=(csv) download { "Export CSV" }
        }
        p.hint { "Oldest first. Cost is what the client was told (USD, exact); shortfall is what the balance could not cover." }
        div.table-scroll {
            table.responsive #cost-records {
                thead {
                    tr {
                        th { "Time (UTC)" } th { "Request" } th { "Tenant" } th { "Model" } th { "Status" }
                        th.num { "Cost (USD)" } th.num { "Shortfall" } th.num { "Input" } th.num { "Cached" } th.num { "Output" }
                    }
                }
                tbody {
                    @for r in &page.data {
                        tr data-request=(r.request_id) {
                            td data-label="Time (UTC)" { (when_cell(r.created_at)) }
                            td data-label="Request" { code.id { (r.request_id) } }
                            td data-label="Tenant" { (name_of(&tenants, r.tenant_id)) }
                            td data-label="Model" { (r.model) br; span.sub { (r.endpoint) } }
                            td data-label="Status" { span class=(format!("status {}", r.status)) { (r.status) } }
                            td.num.cost data-label="Cost (USD)" { (money(r.cost)) }
                            td.num data-label="Shortfall" { (money(r.shortfall)) }
                            td.num data-label="Input" { (r.input_tokens) }
                            td.num data-label="Cached" { (r.cached_tokens) }
                            td.num data-label="Output" { (r.output_tokens) }
                        }
                    }
                }
            }
        }
        @if page.data.is_empty() { p.empty { "No records match." } }
        (pager("/console/finance/costs", &borrowed(&pairs), page.next_cursor.as_deref(), f.cursor.is_none()))
    })
}

/// `GET /console/finance/costs.csv`: every record the filters match, streamed from the admin API.
pub(super) async fn export(State(console): State<Console>, signed: SignedIn, Query(f): Query<Filters>) -> Response {
    let streamed = async {
        let staff = signed.staff()?;
        console.admin.stream(staff.token(), &api_path(&f.month(), &f, &[("format", Some("csv"))])).await
    }
    .await;
    match streamed {
        Ok(response) => response,
        Err(e @ ConsoleError::SignedOut(_)) => e.into_response(),
        Err(e) => layout::page_or_error(&signed, Section::Costs, "Cost records", Err(e)),
    }
}
