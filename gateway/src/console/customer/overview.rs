//! `GET /console/account`: the tenant's balance, this month's use, and its spend over the last 30 days
//! per day and per model.

use axum::extract::State;
use axum::response::Response;
use chrono::{Datelike, Duration, TimeZone, Utc};
use maud::{html, Markup};

use crate::console::error::ConsoleError;
use crate::console::signed_in::SignedIn;
use crate::console::ui::chart::{self, Bar};
use crate::console::ui::format::money;
use crate::console::ui::layout::{self, Section};
use crate::console::Console;
use crate::db::{reports, tenants, usage};

/// How far back the charts look.
const DAYS: i64 = 30;

pub(super) async fn show(State(console): State<Console>, signed: SignedIn) -> Response {
    let body = build(&console, &signed).await;
    layout::page_or_error(&signed, Section::Account, "Overview", body)
}

async fn build(console: &Console, signed: &SignedIn) -> Result<Markup, ConsoleError> {
    let tenant_id = signed.customer()?.caller.tenant_id;
    let db = &console.app.db;
    let tenant = tenants::list(db, Some(tenant_id)).await?.pop().ok_or_else(|| ConsoleError::NotFound("your tenant".into()))?;
    let now = Utc::now();
    let month_start = Utc.with_ymd_and_hms(now.year(), now.month(), 1, 0, 0, 0).single().unwrap_or(now);
    let until = now + Duration::seconds(1);
    let month = reports::totals(db, Some(tenant_id), month_start, until).await?.pop();
    let since = (now - Duration::days(DAYS - 1)).date_naive().and_hms_opt(0, 0, 0).map_or(now, |t| Utc.from_utc_datetime(&t));
    let usage::Spend { per_day: days, per_model: models } = usage::spend(db, tenant_id, since, until).await?;

    // Every day of the window, those without spend at zero, so the chart's x axis is time.
    let mut day_bars = Vec::with_capacity(usize::try_from(DAYS).unwrap_or(0));
    for offset in 0..DAYS {
        let day = since.date_naive() + Duration::days(offset);
        let spent = days.iter().find(|d| d.day == day);
        let value = spent.map_or(rust_decimal::Decimal::ZERO, |d| d.cost);
        let requests = spent.map_or(0, |d| d.requests);
        day_bars.push(Bar { label: day.to_string(), value, text: format!("{} USD · {requests} requests", money(value)) });
    }
    let model_bars: Vec<Bar> = models
        .iter()
        .map(|m| Bar { label: m.model.clone(), value: m.cost, text: format!("{} USD · {} requests", money(m.cost), m.requests) })
        .collect();

    Ok(html! {
        section.cards {
            div.card { h2 { "Tenant" } p.big { (tenant.name) } p.sub { code { (tenant.id) } } }
            div.card { h2 { "Balance" } p.big #balance { (money(tenant.balance)) " USD" } p.sub { "USD, exact" } }
            div.card { h2 { "Reserved" } p.big { (money(tenant.held())) " USD" } p.sub { "held for requests running now" } }
            div.card { h2 { "Available" } p.big #available { (money(tenant.balance - tenant.held())) " USD" } }
            div.card {
                h2 { "This month" }
                p.big #month-cost { (money(month.as_ref().map_or(rust_decimal::Decimal::ZERO, |m| m.cost))) " USD" }
                p.sub {
                    (month.as_ref().map_or(0, |m| m.requests)) " requests · "
                    (month.as_ref().map_or(0, |m| m.input_tokens)) " input / "
                    (month.as_ref().map_or(0, |m| m.output_tokens)) " output tokens"
                }
            }
        }
        section.charts {
            (chart::columns(&format!("Spend per day, last {DAYS} days (UTC)"), &day_bars))
            (chart::bars(&format!("Spend per model, last {DAYS} days"), &model_bars))
        }
        details {
            summary { "Spend per day, as numbers" }
            div.table-scroll {
                table {
                    thead { tr { th { "Day (UTC)" } th.num { "Requests" } th.num { "Cost (USD)" } } }
                    tbody {
                        @for d in days.iter().rev() {
                            tr { td { (d.day) } td.num { (d.requests) } td.num { (money(d.cost)) } }
                        }
                    }
                }
            }
        }
    })
}
