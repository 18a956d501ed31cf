//! Monthly totals per tenant: requests, tokens, cost, shortfall and what was charged, summed exactly by
//! the database (the admin API's totals), with a chart and the month's grand total.

use axum::extract::{Query, State};
use axum::response::Response;
use maud::{html, Markup};
use rust_decimal::Decimal;
use serde::Deserialize;
use uuid::Uuid;

use super::{name_of, tenants};
use crate::console::admin_api::{query, List};
use crate::console::error::ConsoleError;
use crate::console::signed_in::SignedIn;
use crate::console::ui::chart::{self, Bar};
use crate::console::ui::format::{money, this_month};
use crate::console::ui::layout::{self, Section};
use crate::console::Console;

#[derive(Debug, Deserialize)]
struct Total {
    tenant_id: Uuid,
    requests: i64,
    input_tokens: i64,
    cached_tokens: i64,
    output_tokens: i64,
    cost: Decimal,
    shortfall: Decimal,
    batch_cost: Decimal,
}

#[derive(Debug, Deserialize)]
pub(super) struct TotalsQuery {
    month: Option<String>,
}

pub(super) async fn show(State(console): State<Console>, signed: SignedIn, Query(q): Query<TotalsQuery>) -> Response {
    let month = q.month.filter(|m| !m.is_empty()).unwrap_or_else(this_month);
    let body = build(&console, &signed, &month).await;
    layout::page_or_error(&signed, Section::Totals, &format!("Monthly totals, {month}"), body)
}

async fn build(console: &Console, signed: &SignedIn, month: &str) -> Result<Markup, ConsoleError> {
    let staff = signed.staff()?;
    let path = format!("/admin/v1/monthly-totals{}", query(&[("month", Some(month))]));
    let totals = console.admin.get::<List<Total>>(staff.token(), &path).await?.data;
    let tenants = tenants(console, staff).await?;
    let sum = |pick: fn(&Total) -> Decimal| totals.iter().map(pick).sum::<Decimal>();
    let (cost, shortfall) = (sum(|t| t.cost), sum(|t| t.shortfall));
    let requests: i64 = totals.iter().map(|t| t.requests).sum();
    let bars: Vec<Bar> = totals
        .iter()
        .map(|t| Bar { label: name_of(&tenants, t.tenant_id), value: t.cost, text: format!("{} USD", money(t.cost)) })
        .collect();
    let csv = format!("/console/finance/costs.csv{}", query(&[("month", Some(month))]));
    Ok(html! {
        form.filters method="get" action="/console/finance/totals" {
            label { "Month " input type="month" name="month" value=(month); }
            button type="submit" { "Show" }
            a.button href=(csv) download { "Export the month's records (CSV)" }
        }
        (chart::bars(&format!("Cost per tenant, {month} (UTC)"), &bars))
        div.table-scroll {
            table.responsive #totals {
                thead {
                    tr {
                        th { "Tenant" } th.num { "Requests" } th.num { "Input tokens" } th.num { "Cached input" } th.num { "Output tokens" }
                        th.num { "Cost (USD)" } th.num { "Shortfall" } th.num { "Charged" } th.num { "Of which batches" }
                    }
                }
                tbody {
                    @for t in &totals {
                        tr data-tenant=(t.tenant_id) {
                            td data-label="Tenant" { (name_of(&tenants, t.tenant_id)) }
                            td.num data-label="Requests" { (t.requests) }
                            td.num data-label="Input tokens" { (t.input_tokens) }
                            td.num data-label="Cached input" { (t.cached_tokens) }
                            td.num data-label="Output tokens" { (t.output_tokens) }
                            td.num.cost data-label="Cost (USD)" { (money(t.cost)) }
                            td.num data-label="Shortfall" { (money(t.shortfall)) }
                            td.num data-label="Charged" { (money(t.cost - t.shortfall)) }
                            td.num data-label="Of which batches" { (money(t.batch_cost)) }
                        }
                    }
                }
                tfoot {
                    tr {
                        th { "All tenants" } td.num data-label="Requests" { (requests) } td {} td {} td {}
                        td.num.cost #grand-total data-label="Cost (USD)" { (money(cost)) }
                        td.num data-label="Shortfall" { (money(shortfall)) }
                        td.num data-label="Charged" { (money(cost - shortfall)) }
                        td.num data-label="Of which batches" { (money(sum(|t| t.batch_cost))) }
                    }
                }
            }
        }
        p.hint { "Sums of the month's cost records, exact to the last digit: the CSV export of the month adds up to these." }
    })
}
