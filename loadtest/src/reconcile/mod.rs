//! Reconciliation: what the clients were told against what the ledger holds.
//!
//! After a run the client knows, for every request, its `x-request-id`, its HTTP status and error code,
//! and (for completed answers) the `usage.cost` it was told. The ledger (read from Postgres or the admin
//! API, see [`postgres`] and [`admin_api`]) gives the tenant's cost records and credit-ledger entries since
//! the run began, and its balance before and after. [`check`] holds one to the other, exactly:
//!
//! - every accepted (2xx) request has exactly one record under the tenant, with the gateway's price
//!   formula applied to its tokens;
//! - completed: status `succeeded`, cost equal to the cost told, tokens equal to the usage told;
//! - abandoned streams: `cancelled` (or `succeeded` when the answer had ended before the gateway saw the
//!   client leave), at least the chunks received and at most `max_tokens`, at most the worst case;
//! - streams cut by an error chunk (the worker failed): `failed`, billed for tokens delivered only;
//! - refusals: 400/401/402/404/429 before admission have no record; refusals after admission
//!   (`upstream_rejected`, `model_unavailable`, `upstream_error`) have one `rejected` record at cost 0,
//!   found by the answer's `x-request-id`; a record no answer names is paired by status and error code
//!   with a refusal whose answer named none;
//! - every record with a cost has one charge of minus that cost, and no other charge appeared;
//! - Σ ledger = Σ told (completed) + Σ charged (abandoned) + Σ charged (failed), and the balance moved by
//!   exactly the grants in the window minus that sum, with nothing left reserved.

pub mod admin_api;
mod ledger;
pub mod postgres;
mod report;
mod source;

pub use ledger::{Balance, Charge, Ledger, Record};
pub use report::{Discrepancy, Report, Totals};
pub use source::{Source, SourceError};

use std::collections::{HashMap, HashSet};

use rust_decimal::Decimal;

use crate::money::Prices;
use crate::observe::{Observation, Outcome, LEDGER_UNAVAILABLE};

/// What the run asked for, to bound what a request may cost.
#[derive(Debug, Clone)]
pub struct Expect {
    pub model: String,
    pub prices: Prices,
    pub max_tokens: u32,
    /// A gateway replica is killed during the run: a stream it was sending breaks with no record, which
    /// is then a note (nothing was charged, its hold is recovered), not a discrepancy. Every completed
    /// answer must still have its record: a replica sends the last byte only once the record is durable.
    pub replica_loss: bool,
}

/// Refusals the gateway answers after holding credit, and so records (`rejected`, cost 0).
const RECORDED_REFUSALS: [&str; 3] = ["upstream_rejected", "model_unavailable", "upstream_error"];

/// Holds the clients' observations to the ledger. Pure: every discrepancy is returned, none panics.
#[must_use]
pub fn check(observations: &[Observation], ledger: &Ledger, expect: &Expect) -> Report {
    let mut r = Report::default();
    let by_id: HashMap<&str, &Record> = ledger.records.iter().map(|rec| (rec.request_id.as_str(), rec)).collect();
    let client_ids: HashSet<&str> = observations.iter().filter_map(|o| o.request_id.as_deref()).collect();
    let worst = expect.prices.worst_case(expect.max_tokens);
    let mut refusals: Vec<(u16, Option<String>)> = Vec::new();
    let mut unanswered = 0usize;
    let mut abandoned_as_succeeded = 0usize;

    for o in observations {
        let id = o.request_id.as_deref().unwrap_or("-");
        let rec = o.request_id.as_deref().and_then(|id| by_id.get(id)).copied();
        if let Some(rec) = rec {
            if rec.tenant_id != ledger.tenant_id {
                r.fail("wrong_tenant", format!("{id}: recorded under tenant {}, not {}", rec.tenant_id, ledger.tenant_id));
            }
        }
        match (&o.outcome, rec) {
            (Outcome::Completed { cost, prompt_tokens, completion_tokens }, Some(rec)) => {
                expect_status(&mut r, rec, &["succeeded"]);
                match cost {
                    Some(cost) if *cost != rec.cost => {
                        r.fail("told_cost_differs", format!("{id}: told {} but recorded {}", cost.normalize(), rec.cost.normalize()));
                    }
                    Some(_) => {}
                    None => r.fail("cost_not_told", format!("{id}: answered without usage.cost (recorded {})", rec.cost.normalize())),
                }
                // A missing cost is a discrepancy already; the ledger's stands in so the sums below name
                // only disagreements not yet reported.
                r.totals.told_completed += cost.unwrap_or(rec.cost);
                if (i64::from(rec.input_tokens), i64::from(rec.output_tokens)) != (i64::from(*prompt_tokens), i64::from(*completion_tokens))
                {
                    r.fail(
                        "tokens_differ",
                        format!(
                            "{id}: told {prompt_tokens}+{completion_tokens} tokens, recorded {}+{}",
                            rec.input_tokens, rec.output_tokens
                        ),
                    );
                }
            }
            (Outcome::Abandoned, Some(rec)) => {
                r.totals.charged_abandoned += rec.cost;
                expect_status(&mut r, rec, &["cancelled", "succeeded"]);
                if rec.status == "succeeded" {
                    abandoned_as_succeeded += 1;
                }
                expect_delivered(&mut r, rec, o, expect, worst);
            }
            (Outcome::StreamFailed { .. }, Some(rec)) => {
                r.totals.charged_failed += rec.cost;
                expect_status(&mut r, rec, &["failed"]);
                expect_delivered(&mut r, rec, o, expect, worst);
            }
            (Outcome::Refused | Outcome::ServerError, Some(rec)) => {
                // A worker that failed before answering is recorded `failed`, at cost 0.
                expect_status(&mut r, rec, &["rejected", "failed"]);
                if !rec.cost.is_zero() {
                    r.fail("refusal_charged", format!("{id}: refused ({}) but charged {}", rec.http_status, rec.cost.normalize()));
                }
            }
            (Outcome::Refused | Outcome::ServerError, None) => {
                refusals.push((o.status.unwrap_or(0), o.error_code.clone()));
            }
            (Outcome::Broken { why }, Some(rec)) => {
                r.totals.charged_unread += rec.cost;
                r.notes.push(format!("{id}: answer unreadable ({why}); recorded {} at {}", rec.status, rec.cost.normalize()));
                expect_delivered(&mut r, rec, o, expect, worst);
            }
            (Outcome::Broken { .. }, None) if !o.is_accepted() => unanswered += 1,
            (Outcome::Broken { why }, None) if expect.replica_loss && o.kind.is_stream() => {
                r.totals.cut_unrecorded += 1;
                r.notes.push(format!(
                    "{id} ({}): cut after {} content chunks ({why}) with no record and nothing charged: its replica died",
                    o.kind, o.content_chunks
                ));
            }
            (Outcome::StreamFailed { .. }, None) if o.error_code.as_deref() == Some(LEDGER_UNAVAILABLE) => {
                r.fail(
                    "unbilled_stream",
                    format!(
                        "{id}: {} content chunks delivered, then the stream ended with ledger_unavailable: never recorded or charged",
                        o.content_chunks
                    ),
                );
            }
            (_, None) => {
                r.fail("missing_record", format!("{id} ({}): accepted ({}) but has no cost record", o.kind, o.status.unwrap_or(0)));
            }
        }
    }
    if abandoned_as_succeeded > 0 {
        r.notes.push(format!(
            "{abandoned_as_succeeded} abandoned streams settled as succeeded: the answer had ended before the gateway saw the client leave"
        ));
    }

    // Records no request id names: refusals after admission whose answer carried another id, or
    // requests that never got an answer to the client.
    let mut unnamed: Vec<&Record> =
        ledger.records.iter().filter(|rec| rec.tenant_id == ledger.tenant_id && !client_ids.contains(rec.request_id.as_str())).collect();
    unnamed.sort_by_key(|rec| rec.created_at);
    let mut paired = 0usize;
    for rec in unnamed {
        let twin = refusals.iter().position(|(status, code)| i32::from(*status) == rec.http_status && *code == rec.error_code);
        if let Some(i) = twin {
            refusals.swap_remove(i);
            paired += 1;
            expect_status(&mut r, rec, &["rejected", "failed"]);
            if !rec.cost.is_zero() {
                r.fail("refusal_charged", format!("{}: refusal recorded at {}, not 0", rec.request_id, rec.cost.normalize()));
            }
        } else if unanswered > 0 {
            unanswered -= 1;
            r.totals.charged_unread += rec.cost;
            r.notes.push(format!(
                "{}: {} at {}, the record of a request that got no answer",
                rec.request_id,
                rec.status,
                rec.cost.normalize()
            ));
        } else {
            r.fail(
                "unknown_record",
                format!(
                    "{}: record ({} {}, {}) of no request the client sent",
                    rec.request_id,
                    rec.status,
                    rec.http_status,
                    rec.cost.normalize()
                ),
            );
        }
    }
    if paired > 0 {
        r.notes.push(format!("{paired} refusals after admission matched to their zero-cost records by status and error code"));
    }
    let (mut before_admission, mut ledger_down) = (0usize, 0usize);
    for (status, code) in refusals {
        match code.as_deref() {
            Some(c) if RECORDED_REFUSALS.contains(&c) => {
                r.fail("refusal_without_record", format!("refusal {status} {c} has no zero-cost record"));
            }
            Some(LEDGER_UNAVAILABLE) => ledger_down += 1,
            _ => before_admission += 1,
        }
    }
    if before_admission > 0 {
        r.notes.push(format!("{before_admission} refusals before admission (400/401/402/404/429), without a record as documented"));
    }
    if ledger_down > 0 {
        // Refused whole answers are not charged, rightly; a hold taken before the ledger failed stays
        // reserved until the gateway's hold expiry, which the `reserved` check below shows.
        r.notes.push(format!("{ledger_down} answered 503 ledger_unavailable: no record could be written, nothing charged"));
    }

    ledger_sums(&mut r, ledger, expect);
    r
}

fn expect_status(r: &mut Report, rec: &Record, allowed: &[&str]) {
    if !allowed.contains(&rec.status.as_str()) {
        r.fail("wrong_status", format!("{}: status {}, expected {}", rec.request_id, rec.status, allowed.join(" or ")));
    }
}

/// A request billed for what it delivered: at least the content chunks the client got, at most
/// `max_tokens`, at most the worst case.
fn expect_delivered(r: &mut Report, rec: &Record, o: &Observation, expect: &Expect, worst: Decimal) {
    let id = &rec.request_id;
    let output = u32::try_from(rec.output_tokens).unwrap_or(0);
    if output < o.content_chunks {
        r.fail("underbilled", format!("{id}: billed {output} output tokens but {} content chunks were delivered", o.content_chunks));
    }
    if output > expect.max_tokens {
        r.fail("over_max_tokens", format!("{id}: billed {output} output tokens, above max_tokens {}", expect.max_tokens));
    }
    if rec.cost > worst {
        r.fail("over_worst_case", format!("{id}: cost {} above the worst case {}", rec.cost.normalize(), worst.normalize()));
    }
}

/// The formula on every record, one charge per costed record, and the balance.
fn ledger_sums(r: &mut Report, ledger: &Ledger, expect: &Expect) {
    let mine: Vec<&Record> = ledger.records.iter().filter(|rec| rec.tenant_id == ledger.tenant_id).collect();
    let charges: HashMap<&str, Decimal> = ledger.charges.iter().map(|c| (c.request_id.as_str(), c.amount)).collect();
    for rec in &mine {
        *r.totals.by_status.entry(rec.status.clone()).or_insert(0) += 1;
        r.totals.ledger += rec.cost;
        if rec.created_at < ledger.window_start {
            r.fail("before_window", format!("{}: recorded at {}, before the run began", rec.request_id, rec.created_at));
        }
        if rec.model == expect.model {
            let count = |n: i32| u32::try_from(n).unwrap_or(0);
            let priced = expect.prices.cost_with_cache(count(rec.input_tokens), count(rec.cached_tokens), count(rec.output_tokens));
            if rec.cost != priced {
                r.fail(
                    "formula",
                    format!("{}: cost {} but its tokens price at {}", rec.request_id, rec.cost.normalize(), priced.normalize()),
                );
            }
        }
        match charges.get(rec.request_id.as_str()) {
            Some(amount) if *amount != -rec.cost => {
                r.fail(
                    "wrong_charge",
                    format!("{}: charged {} for a cost of {}", rec.request_id, amount.normalize(), rec.cost.normalize()),
                );
            }
            None if !rec.cost.is_zero() => r.fail("uncharged", format!("{}: cost {} never charged", rec.request_id, rec.cost.normalize())),
            _ => {}
        }
    }
    let recorded: HashSet<&str> = mine.iter().map(|rec| rec.request_id.as_str()).collect();
    for c in &ledger.charges {
        if !recorded.contains(c.request_id.as_str()) {
            r.fail("stray_charge", format!("{}: charge of {} without a record in the window", c.request_id, c.amount.normalize()));
        }
    }
    let t = &mut r.totals;
    t.records = mine.len();
    t.charged = -ledger.charges.iter().map(|c| c.amount).sum::<Decimal>();
    t.grants = ledger.grants;
    t.balance_change = ledger.after.balance - ledger.before.balance;
    t.reserved_after = ledger.after.reserved;
    let explained = t.told_completed + t.charged_abandoned + t.charged_failed + t.charged_unread;
    let (ledger_sum, charged, change, grants, reserved) = (t.ledger, t.charged, t.balance_change, t.grants, t.reserved_after);
    if ledger_sum != explained {
        r.fail("sums", format!("ledger Σ {} ≠ Σ told and charged {}", ledger_sum.normalize(), explained.normalize()));
    }
    if charged != ledger_sum {
        r.fail("sums", format!("credit-ledger charges {} ≠ Σ cost {}", charged.normalize(), ledger_sum.normalize()));
    }
    if change != grants - ledger_sum {
        r.fail("balance", format!("balance moved {} but grants − costs = {}", change.normalize(), (grants - ledger_sum).normalize()));
    }
    if !reserved.is_zero() {
        r.fail("reserved", format!("{} still reserved after every request ended", reserved.normalize()));
    }
    // Same values, fewest digits, for the JSON report.
    let t = &mut r.totals;
    for amount in [
        &mut t.told_completed,
        &mut t.charged_abandoned,
        &mut t.charged_failed,
        &mut t.charged_unread,
        &mut t.ledger,
        &mut t.charged,
        &mut t.grants,
        &mut t.balance_change,
        &mut t.reserved_after,
    ] {
        *amount = amount.normalize();
    }
}

#[cfg(test)]
mod tests;
