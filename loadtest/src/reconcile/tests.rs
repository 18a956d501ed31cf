use std::str::FromStr;
use std::time::Duration;

use chrono::DateTime;
use uuid::Uuid;

use super::*;
use crate::mix::Kind;

fn d(text: &str) -> Decimal {
    Decimal::from_str(text).unwrap()
}

const TENANT: Uuid = Uuid::from_u128(7);

fn expect() -> Expect {
    Expect {
        model: "m".into(),
        prices: Prices {
            per_mtok: runaii_wire::money::Prices {
                input_per_mtok: d("0.10"),
                cached_input_per_mtok: d("0.10"),
                output_per_mtok: d("0.30"),
            },
            context_length: 4096,
        },
        max_tokens: 16,
        replica_loss: false,
    }
}

fn seen(n: u64, kind: Kind, status: u16, id: &str, outcome: Outcome) -> Observation {
    Observation {
        n,
        kind,
        status: Some(status),
        request_id: Some(id.into()),
        error_code: None,
        outcome,
        latency: Duration::from_millis(5),
        first_token: None,
        content_chunks: u32::from(kind.is_stream()),
    }
}

fn record(id: &str, status: &str, http_status: i32, input: i32, output: i32) -> Record {
    let cost = expect().prices.cost(u32::try_from(input).unwrap(), u32::try_from(output).unwrap());
    Record {
        request_id: id.into(),
        tenant_id: TENANT,
        model: "m".into(),
        status: status.into(),
        http_status,
        error_code: None,
        input_tokens: input,
        cached_tokens: 0,
        output_tokens: output,
        cost,
        created_at: DateTime::from_timestamp(1_800_000_100, 0).unwrap(),
    }
}

/// A run with one of everything, and a ledger that agrees with it to the last digit.
fn agreeing() -> (Vec<Observation>, Ledger) {
    let told = expect().prices.cost(52, 16);
    let mut refused_after = seen(4, Kind::Plain, 503, "req_b", Outcome::ServerError);
    refused_after.error_code = Some("model_unavailable".into());
    let mut refused_before = seen(5, Kind::Plain, 402, "req_c", Outcome::Refused);
    refused_before.error_code = Some("insufficient_credits".into());
    let observations = vec![
        seen(0, Kind::Plain, 200, "chatcmpl-a", Outcome::Completed { cost: Some(told), prompt_tokens: 52, completion_tokens: 16 }),
        seen(1, Kind::Stream, 200, "chatcmpl-s", Outcome::Completed { cost: Some(told), prompt_tokens: 52, completion_tokens: 16 }),
        seen(2, Kind::Abandon, 200, "chatcmpl-x", Outcome::Abandoned),
        seen(3, Kind::Stream, 200, "chatcmpl-f", Outcome::StreamFailed { message: "worker died".into() }),
        refused_after,
        refused_before,
    ];
    let mut rejected = record("chatcmpl-hidden", "rejected", 503, 0, 0);
    rejected.error_code = Some("model_unavailable".into());
    let records = vec![
        record("chatcmpl-a", "succeeded", 200, 52, 16),
        record("chatcmpl-s", "succeeded", 200, 52, 16),
        record("chatcmpl-x", "cancelled", 499, 40, 3),
        record("chatcmpl-f", "failed", 502, 40, 5),
        rejected,
    ];
    let charges: Vec<Charge> =
        records.iter().filter(|r| !r.cost.is_zero()).map(|r| Charge { request_id: r.request_id.clone(), amount: -r.cost }).collect();
    let spent: Decimal = records.iter().map(|r| r.cost).sum();
    let before = Balance { balance: d("10"), reserved: Decimal::ZERO };
    let ledger = Ledger {
        tenant_id: TENANT,
        window_start: DateTime::from_timestamp(1_800_000_000, 0).unwrap(),
        records,
        charges,
        grants: Decimal::ZERO,
        before,
        after: Balance { balance: d("10") - spent, reserved: Decimal::ZERO },
    };
    (observations, ledger)
}

#[test]
fn an_agreeing_ledger_passes_with_exact_sums() {
    let (observations, ledger) = agreeing();
    let report = check(&observations, &ledger, &expect());
    assert!(report.passed(), "{}", report.render());
    let t = &report.totals;
    assert_eq!(t.told_completed, d("0.00002"));
    assert_eq!(t.charged_abandoned, d("0.0000049"));
    assert_eq!(t.charged_failed, d("0.0000055"));
    assert_eq!(t.ledger, d("0.0000304"));
    assert_eq!(t.balance_change, d("-0.0000304"));
    assert_eq!(t.by_status["rejected"], 1);
}

#[test]
fn one_unit_in_the_last_place_is_a_discrepancy() {
    let (observations, mut ledger) = agreeing();
    ledger.after.balance -= d("0.0000000000000001");
    let report = check(&observations, &ledger, &expect());
    assert_eq!(report.discrepancies.len(), 1, "{}", report.render());
    assert_eq!(report.discrepancies[0].kind, "balance");
}

#[test]
fn each_kind_of_disagreement_is_named() {
    let (mut observations, mut ledger) = agreeing();
    // Told one cost, recorded another.
    observations[0].outcome = Outcome::Completed { cost: Some(d("0.0000209")), prompt_tokens: 52, completion_tokens: 16 };
    // An abandoned stream billed past max_tokens.
    let over = record("chatcmpl-x", "cancelled", 499, 40, 17);
    ledger.records[2] = over.clone();
    ledger.charges[2] = Charge { request_id: over.request_id.clone(), amount: -over.cost };
    // An accepted request without a record.
    observations.push(seen(6, Kind::Plain, 200, "chatcmpl-lost", Outcome::Abandoned));
    // The refusal after admission lost its record.
    ledger.records.retain(|r| r.request_id != "chatcmpl-hidden");
    let spent: Decimal = ledger.records.iter().map(|r| r.cost).sum();
    ledger.after.balance = ledger.before.balance - spent;
    let report = check(&observations, &ledger, &expect());
    let all: Vec<String> = report.discrepancies.iter().map(|d| d.detail.clone()).collect();
    let all = all.join("\n");
    assert!(all.contains("chatcmpl-a: told 0.0000209 but recorded 0.00001"), "{all}");
    assert!(all.contains("chatcmpl-x: billed 17 output tokens, above max_tokens 16"), "{all}");
    assert!(all.contains("chatcmpl-lost (plain): accepted (200) but has no cost record"), "{all}");
    assert!(all.contains("refusal 503 model_unavailable has no zero-cost record"), "{all}");
    assert!(all.contains("ledger Σ"), "{all}");
}

#[test]
fn records_and_charges_nobody_asked_for_are_found() {
    let (observations, mut ledger) = agreeing();
    let stray = record("chatcmpl-stray", "succeeded", 200, 10, 10);
    ledger.charges.push(Charge { request_id: "chatcmpl-ghost".into(), amount: d("-0.01") });
    ledger.after.balance -= stray.cost;
    ledger.records.push(stray);
    let report = check(&observations, &ledger, &expect());
    let all: Vec<String> = report.discrepancies.iter().map(|d| d.detail.clone()).collect();
    let all = all.join("\n");
    assert!(all.contains("chatcmpl-stray: record (succeeded 200, 0.000004) of no request the client sent"), "{all}");
    assert!(all.contains("chatcmpl-stray: cost 0.000004 never charged"), "{all}");
    assert!(all.contains("chatcmpl-ghost: charge of -0.01 without a record in the window"), "{all}");
}

#[test]
fn a_stream_cut_by_a_dead_replica_is_a_note_only_when_a_replica_was_killed() {
    let (mut observations, ledger) = agreeing();
    let why = "error decoding response body".to_owned();
    observations.push(seen(6, Kind::Stream, 200, "chatcmpl-cut", Outcome::Broken { why }));
    let report = check(&observations, &ledger, &expect());
    assert_eq!(report.discrepancies.len(), 1, "{}", report.render());
    assert_eq!(report.discrepancies[0].kind, "missing_record");

    let replica_loss = Expect { replica_loss: true, ..expect() };
    let report = check(&observations, &ledger, &replica_loss);
    assert!(report.passed(), "{}", report.render());
    assert_eq!(report.totals.cut_unrecorded, 1);
    // A whole answer is sent only once recorded: one without a record is never excused.
    observations.push(seen(7, Kind::Plain, 200, "chatcmpl-lost", Outcome::Broken { why: "reset".into() }));
    let report = check(&observations, &ledger, &replica_loss);
    assert_eq!(report.discrepancies.len(), 1, "{}", report.render());
}
