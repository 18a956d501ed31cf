//! Live workers (announced or configured) with readiness, slots and queue depth, from the admin API; and
//! per model, the last 15 minutes' requests and how many failed, from the cost records. The page
//! refreshes itself every few seconds when the script runs.

use axum::extract::State;
use axum::response::Response;
use maud::{html, Markup};
use rust_decimal::Decimal;
use serde::Deserialize;

use crate::auth::staff::Role;
use crate::console::admin_api::List;
use crate::console::error::ConsoleError;
use crate::console::signed_in::SignedIn;
use crate::console::ui::layout::{self, Section};
use crate::console::Console;
use crate::db::outcomes;

/// The error-rate window.
const WINDOW_MINUTES: i64 = 15;

#[derive(Debug, Deserialize)]
struct Worker {
    model: String,
    url: String,
    ready: bool,
    #[serde(default)]
    slots: u64,
    #[serde(default)]
    slots_busy: u64,
    #[serde(default)]
    queue_depth: u64,
}

pub(super) async fn show(State(console): State<Console>, signed: SignedIn) -> Response {
    let body = build(&console, &signed).await;
    layout::page_or_error(&signed, Section::Workers, "Workers", body)
}

/// `part / whole` as a percentage with one decimal, exact to that digit.
fn percent(part: i64, whole: i64) -> String {
    if whole <= 0 {
        return "—".to_owned();
    }
    let p = (Decimal::from(part) * Decimal::from(100)).checked_div(Decimal::from(whole)).unwrap_or_default().round_dp(1);
    format!("{}%", p.normalize())
}

async fn build(console: &Console, signed: &SignedIn) -> Result<Markup, ConsoleError> {
    let staff = signed.staff()?;
    let mut workers = console.admin.get::<List<Worker>>(staff.token(), "/admin/v1/workers").await?.data;
    workers.sort_by(|a, b| (&a.model, &a.url).cmp(&(&b.model, &b.url)));
    // Not an admin API route: the same rule as the workers route, checked here, before the query.
    staff.claims.require_unconfined(Role::Ops)?;
    let outcomes = outcomes::recent(&console.app.db, WINDOW_MINUTES * 60).await?;
    Ok(html! {
        section #live data-refresh="5000" {
            div.table-scroll {
                table #workers {
                    thead { tr { th { "Model" } th { "Worker" } th { "Ready" } th.num { "Slots busy / total" } th.num { "Queued" } } }
                    tbody {
                        @for w in &workers {
                            tr {
                                td { (w.model) }
                                td { code { (w.url) } }
                                td { @if w.ready { span.status.succeeded { "ready" } } @else { span.status.failed { "down" } } }
                                td.num { @if w.ready { (w.slots_busy) " / " (w.slots) } @else { "—" } }
                                td.num { @if w.ready { (w.queue_depth) } @else { "—" } }
                            }
                        }
                    }
                }
            }
            @if workers.is_empty() { p.empty { "No worker is configured or announced." } }
            h2 { "Last " (WINDOW_MINUTES) " minutes, per model" }
            p.hint {
                "Failed: the worker broke or went silent (the error rate). Rejected: the request was refused before a token "
                "(a bad schema, a context too long), which is the request's fault. From the cost records of every gateway replica."
            }
            div.table-scroll {
                table #error-rates {
                    thead { tr { th { "Model" } th.num { "Requests" } th.num { "Failed" } th.num { "Error rate" } th.num { "Rejected" } } }
                    tbody {
                        @for o in &outcomes {
                            tr {
                                td { (o.model) }
                                td.num { (o.requests) }
                                td.num { (o.failed) }
                                td.num { (percent(o.failed, o.requests)) }
                                td.num { (o.rejected) }
                            }
                        }
                    }
                }
            }
            @if outcomes.is_empty() { p.empty { "No requests in the window." } }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_are_exact_to_a_tenth() {
        assert_eq!(percent(1, 3), "33.3%");
        assert_eq!(percent(0, 5), "0%");
        assert_eq!(percent(2, 2), "100%");
        assert_eq!(percent(1, 0), "—");
    }
}
