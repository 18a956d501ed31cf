//! The ledger writer's groups: records it was told to expect share one commit; a record nobody is
//! expected beside is committed at once; the linger bounds how long a group waits; a group waits for two
//! waves of expected records, not more; and a request whose worker is still generating is not waited for.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::spawn_app;
use runaii_gateway::billing::writer::LedgerWriter;
use runaii_gateway::db::costs::CostRecord;
use rust_decimal::Decimal;
use uuid::Uuid;

/// A free record of the tenant (nothing to charge, so no hold is needed).
async fn records_of(app: &common::TestApp, tenant: &str) -> (Uuid, impl Fn(&str) -> CostRecord) {
    let tenant_id = common::grant(&app.db, tenant, "1").await;
    let key_id: Uuid = sqlx::query_scalar("SELECT id FROM api_keys LIMIT 1").fetch_one(&app.db).await.unwrap();
    let record = move |request_id: &str| common::cost_record(request_id, tenant_id, key_id, Decimal::ZERO);
    (tenant_id, record)
}

/// The distinct transaction start times of the tenant's records: one per commit.
async fn commits_of(app: &common::TestApp, tenant_id: Uuid) -> i64 {
    sqlx::query_scalar("SELECT count(DISTINCT created_at) FROM cost_records WHERE tenant_id = $1")
        .bind(tenant_id)
        .fetch_one(&app.db)
        .await
        .unwrap()
}

#[tokio::test]
async fn expected_records_share_one_commit() {
    let app = spawn_app().await;
    let (tenant_id, record) = records_of(&app, "expected").await;
    // A long linger: the group must end because every expected record arrived, not because time ran out.
    let writer = LedgerWriter::start(app.db.clone(), Duration::from_secs(5));
    let started = Instant::now();
    let mut requests = Vec::new();
    for i in 0..4u64 {
        let (writer, record, expected) = (writer.clone(), record(&format!("x-{i}")), writer.expect());
        requests.push(tokio::spawn(async move {
            // Far apart: without the wait, each would be committed alone.
            tokio::time::sleep(Duration::from_millis(40 * i)).await;
            drop(expected);
            writer.settle(record).await
        }));
    }
    for request in requests {
        request.await.unwrap().unwrap();
    }
    assert!(started.elapsed() < Duration::from_secs(2), "waited {:?}: past the last arrival", started.elapsed());
    assert_eq!(commits_of(&app, tenant_id).await, 1, "four expected records, one transaction");
}

#[tokio::test]
async fn a_record_nobody_is_expected_beside_is_committed_at_once() {
    let app = spawn_app().await;
    let (tenant_id, record) = records_of(&app, "alone").await;
    let writer = LedgerWriter::start(app.db.clone(), Duration::from_secs(5));
    for i in 0..3 {
        let started = Instant::now();
        writer.settle(record(&format!("a-{i}"))).await.unwrap();
        assert!(started.elapsed() < Duration::from_secs(2), "a lone record waited {:?}", started.elapsed());
    }
    assert_eq!(commits_of(&app, tenant_id).await, 3);
}

#[tokio::test]
async fn the_linger_bounds_the_wait_for_a_record_that_does_not_come() {
    let app = spawn_app().await;
    let (_, record) = records_of(&app, "late").await;
    let linger = Duration::from_millis(300);
    let writer = LedgerWriter::start(app.db.clone(), linger);
    let waits = || runaii_gateway::metrics::global().ledger_waits.get(&["linger"]);
    let before = waits();
    // Expected, and still on its way when the other record is queued.
    let late = writer.expect();
    let started = Instant::now();
    writer.settle(record("l-1")).await.unwrap();
    let waited = started.elapsed();
    assert!(waited >= linger, "committed after {waited:?}, before the linger");
    assert!(waited < linger + Duration::from_secs(2), "committed after {waited:?}");
    assert!(waits() > before, "the wait ended with the linger");
    drop(late);
}

/// A group waits for two waves of expected records at most: those expected before it began, then those
/// expected while it waited for them. Under a steady stream of requests one more is always on its way;
/// waiting until none was held every group to the linger (before this, the records below waited the
/// whole 3 s for one expected during the second wave).
#[tokio::test]
async fn a_group_waits_for_two_waves_of_expected_records_not_more() {
    let app = spawn_app().await;
    let (tenant_id, record) = records_of(&app, "waves").await;
    let writer = LedgerWriter::start(app.db.clone(), Duration::from_secs(3));
    let settle = |request_id: &str| {
        let (writer, record) = (writer.clone(), record(request_id));
        tokio::spawn(async move { writer.settle(record).await })
    };
    // Each sleep lets the writer take the record just queued and start waiting for the next wave.
    let pause = || tokio::time::sleep(Duration::from_millis(200));
    let started = Instant::now();
    let first_wave = writer.expect();
    let w0 = settle("w-0");
    pause().await;
    let second_wave = writer.expect();
    drop(first_wave);
    let w1 = settle("w-1");
    pause().await;
    let third_wave = writer.expect();
    drop(second_wave);
    let w2 = settle("w-2");
    for w in [w0, w1, w2] {
        w.await.unwrap().unwrap();
    }
    let took = started.elapsed();
    assert!(took < Duration::from_secs(2), "the group waited {took:?} for a third wave");
    assert_eq!(commits_of(&app, tenant_id).await, 1, "both waves in the group");
    // The third wave's record is committed at once: nothing else was expected before its own group.
    drop(third_wave);
    let started = Instant::now();
    settle("w-3").await.unwrap().unwrap();
    assert!(started.elapsed() < Duration::from_secs(2), "w-3 waited {:?}", started.elapsed());
    assert_eq!(commits_of(&app, tenant_id).await, 2);
}

/// A request whose worker is still generating is not expected yet: another request's record does not
/// wait for it. (Expected from the moment it was sent, as before, a worker taking seconds held every
/// other record to the linger.) A real worker cannot be made to take a chosen time, so a stand-in at the
/// process boundary answers "slow" after 4 s and anything else at once.
#[tokio::test]
async fn a_record_does_not_wait_for_a_worker_still_generating() {
    let linger = Duration::from_secs(3);
    let app = common::spawn_app_with(|s| {
        s.probe_ms = 3_600_000;
        s.ledger_linger_us = u64::try_from(linger.as_micros()).unwrap();
    })
    .await;
    let chat = axum::routing::post(|axum::Json(request): axum::Json<serde_json::Value>| async move {
        if request["messages"][0]["content"] == "slow" {
            tokio::time::sleep(Duration::from_secs(4)).await;
        }
        axum::Json(serde_json::json!({
            "id": "x", "object": "chat.completion", "created": 0, "model": "stand-in",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "{}"}, "finish_reason": "stop", "logprobs": null}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
        }))
    });
    let url = common::stand_in_worker("stand-in", chat).await;
    let price = |s: &str| s.parse().unwrap();
    app.upsert_model("stand-in", (price("0.1"), price("0.3")), None).await;
    common::configure_worker(&app, "stand-in", &url).await;
    let ask = |content: &str| serde_json::json!({"model": "stand-in", "messages": [{"role": "user", "content": content}], "max_tokens": 4});
    let slow = {
        let (base, key, body) = (app.base.clone(), app.key.clone(), ask("slow"));
        tokio::spawn(async move { common::client().post(format!("{base}/v1/chat/completions")).bearer_auth(key).json(&body).send().await })
    };
    // The slow request is at its worker.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    let (status, body, _) = app.post_json("/v1/chat/completions", &ask("fast")).await;
    let took = started.elapsed();
    assert_eq!(status, 200, "{body}");
    assert!(took < Duration::from_secs(1), "the fast request's record waited {took:?} for the slow request's worker");
    let slow = slow.await.unwrap().unwrap();
    assert_eq!(slow.status(), 200);
    assert_eq!(app.cost_rows().await.len(), 2, "both recorded");
}

/// A request is expected from its send only while its model's answers come within the linger: never for
/// a model not yet seen, and no longer once its answers slow down.
#[tokio::test]
async fn requests_are_expected_from_their_send_only_while_their_model_answers_quickly() {
    let app = spawn_app().await;
    let writer = LedgerWriter::start(app.db.clone(), Duration::from_millis(2));
    assert!(writer.sent("quick").is_none(), "a model with no answers yet is not waited for");
    writer.answered("quick", Duration::from_micros(300));
    assert!(writer.sent("quick").is_some(), "answers within the linger: expected from the send");
    assert!(writer.sent("other").is_none(), "per model");
    for _ in 0..30 {
        writer.answered("quick", Duration::from_secs(2));
    }
    assert!(writer.sent("quick").is_none(), "a model whose answers take seconds is no longer waited for");
}
