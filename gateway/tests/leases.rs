//! Credit held against a replica's lease: the request path holds in memory, the record takes the charge
//! out of the lease, and the books still explain every cent: balance = grants − charges, reserved =
//! what is leased, and a lease given back returns its credit.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::spawn_app;
use runaii_gateway::billing::leases::{Held, Leases};
use runaii_gateway::db::costs::{self, CostRecord, Leased};
use rust_decimal::Decimal;
use sqlx::PgPool;
use uuid::Uuid;

fn d(s: &str) -> Decimal {
    s.parse().unwrap()
}

async fn money(db: &PgPool, tenant: Uuid) -> (Decimal, Decimal, Decimal) {
    sqlx::query_as(
        "SELECT balance, reserved, COALESCE((SELECT sum(amount) FROM credit_leases WHERE tenant_id = t.id), 0) FROM tenants t WHERE id = $1",
    )
    .bind(tenant)
    .fetch_one(db)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_lease_holds_without_a_round_trip_and_its_charges_reconcile() {
    let app = spawn_app().await;
    let (tenant, key, replica, leases) = leased_tenant(&app, "leaseholder").await;
    let worst = d("0.001");
    // Sized for 64 such requests, within a quarter of what was available.
    assert_eq!(money(&app.db, tenant).await, (d("1"), d("0.064"), d("0.064")));

    for _ in 0..10 {
        assert!(leases.try_hold(tenant, worst).is_some(), "held against the lease");
    }
    assert_eq!(money(&app.db, tenant).await, (d("1"), d("0.064"), d("0.064")), "holding wrote nothing");

    let record = |i: usize, cost: &str| leased_record(tenant, key, format!("leased-{i}"), d(cost), replica, worst);
    // Nine within their worst case, one above it: its excess comes from credit nobody reserved.
    let mut records: Vec<CostRecord> = (0..9).map(|i| record(i, "0.0003")).collect();
    records.push(record(9, "0.0025"));
    let settled = costs::settle(&app.db, &records).await.unwrap();
    assert!(settled.iter().all(|s| s.shortfall.is_zero()), "{settled:?}");
    for s in &settled {
        leases.settled(tenant, Held::Leased { worst, epoch: 0 }, s.charged.min(worst));
    }
    let spent = d("0.0003") * Decimal::from(9) + d("0.0025");
    let from_lease = d("0.0003") * Decimal::from(9) + worst;
    let (balance, reserved, leased) = money(&app.db, tenant).await;
    assert_eq!(balance, d("1") - spent);
    assert_eq!((reserved, leased), (d("0.064") - from_lease, d("0.064") - from_lease), "what was charged left the lease");
    let ledger: Decimal =
        sqlx::query_scalar("SELECT sum(amount) FROM credit_ledger WHERE tenant_id = $1").bind(tenant).fetch_one(&app.db).await.unwrap();
    assert_eq!(ledger, balance, "the ledger explains the balance");

    leases.give_back_all().await.unwrap();
    assert_eq!(money(&app.db, tenant).await, (balance, Decimal::ZERO, Decimal::ZERO), "a lease given back returns its credit");
}

#[tokio::test]
async fn a_balance_too_small_for_a_lease_is_held_exactly() {
    let app = spawn_app().await;
    let tenant = common::grant(&app.db, "thin", "0.0001").await;
    let replica = Uuid::now_v7();
    runaii_gateway::db::replicas::heartbeat(&app.db, replica).await.unwrap();
    let leases = Arc::new(Leases::new(app.db.clone(), replica));
    // A quarter of what is available (0.000025) is less than two such requests.
    assert!(leases.try_hold(tenant, d("0.00004")).is_none());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(leases.try_hold(tenant, d("0.00004")).is_none(), "still no lease");
    assert_eq!(money(&app.db, tenant).await, (d("0.0001"), Decimal::ZERO, Decimal::ZERO));
}

/// A record of `cost` for a request held against `replica`'s lease for `worst`.
fn leased_record(tenant: Uuid, key: Uuid, id: String, cost: Decimal, replica: Uuid, worst: Decimal) -> CostRecord {
    CostRecord {
        request_id: id,
        tenant_id: tenant,
        api_key_id: key,
        model: common::MODEL.into(),
        endpoint: "chat.completions",
        input_tokens: 10,
        cached_tokens: 0,
        output_tokens: 10,
        cost,
        status: "succeeded",
        http_status: 200,
        error_code: None,
        latency_ms: 1,
        leased: Some(Leased { replica, worst }),
    }
}

async fn leased_tenant(app: &common::TestApp, name: &str) -> (Uuid, Uuid, Uuid, Arc<Leases>) {
    let tenant = common::grant(&app.db, name, "1").await;
    let key: Uuid = sqlx::query_scalar("SELECT id FROM api_keys LIMIT 1").fetch_one(&app.db).await.unwrap();
    let replica = Uuid::now_v7();
    runaii_gateway::db::replicas::heartbeat(&app.db, replica).await.unwrap();
    let leases = Arc::new(Leases::new(app.db.clone(), replica));
    assert!(leases.try_hold(tenant, d("0.001")).is_none());
    let started = Instant::now();
    while money(&app.db, tenant).await.2.is_zero() {
        assert!(started.elapsed() < Duration::from_secs(5), "no lease taken");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The top-up's task adds the lease to the slice right after its commit, which this may have seen
    // first: it runs while this sleeps.
    tokio::time::sleep(Duration::from_millis(50)).await;
    (tenant, key, replica, leases)
}

async fn ledger_sum(db: &PgPool, tenant: Uuid) -> Decimal {
    sqlx::query_scalar("SELECT sum(amount) FROM credit_ledger WHERE tenant_id = $1").bind(tenant).fetch_one(db).await.unwrap()
}

#[tokio::test]
async fn records_within_their_worst_case_settle_from_the_lease_alone() {
    let app = spawn_app().await;
    let (tenant, key, replica, _leases) = leased_tenant(&app, "lean").await;
    let worst = d("0.001");
    let (_, reserved0, leased0) = money(&app.db, tenant).await;
    let costs = ["0.0003", "0.001", "0", "0.0000001"];
    let records: Vec<CostRecord> =
        costs.iter().enumerate().map(|(i, c)| leased_record(tenant, key, format!("lean-{i}"), d(c), replica, worst)).collect();
    let settled = costs::settle(&app.db, &records).await.unwrap();
    let spent: Decimal = costs.iter().map(|c| d(c)).sum();
    assert_eq!(settled.iter().map(|s| s.charged).collect::<Vec<_>>(), costs.iter().map(|c| d(c)).collect::<Vec<_>>());
    assert!(settled.iter().all(|s| s.shortfall.is_zero()));
    assert_eq!(money(&app.db, tenant).await, (d("1") - spent, reserved0 - spent, leased0 - spent));
    assert_eq!(ledger_sum(&app.db, tenant).await, d("1") - spent, "the ledger explains the balance");
    let entries: i64 = sqlx::query_scalar("SELECT count(*) FROM credit_ledger WHERE kind = 'charge' AND tenant_id = $1")
        .bind(tenant)
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(entries, 3, "a charge entry for each record that cost something");

    // The same request id again: nothing of the group is written, and the books do not move.
    let again = vec![leased_record(tenant, key, "lean-new".into(), d("0.0001"), replica, worst), records[0].clone()];
    assert!(costs::settle(&app.db, &again).await.is_err());
    assert_eq!(money(&app.db, tenant).await, (d("1") - spent, reserved0 - spent, leased0 - spent));
}

#[tokio::test]
async fn a_replica_presumed_dead_still_records_what_it_served_without_counting_its_lease_twice() {
    let app = spawn_app().await;
    let (tenant, key, replica, leases) = leased_tenant(&app, "presumed-dead").await;
    let worst = d("0.001");
    let held: Vec<Held> = (0..3).map(|_| leases.try_hold(tenant, worst).expect("held against the lease")).collect();

    // The replica loses the database for longer than the timeout: another one forgets it and releases
    // its leases, while its three requests are still running.
    let released = runaii_gateway::db::replicas::release_orphaned_holds(&app.db, 0).await.unwrap();
    assert!(released >= 1);
    assert_eq!(money(&app.db, tenant).await, (d("1"), Decimal::ZERO, Decimal::ZERO), "its lease went back");

    // Its requests end: each is charged from what is available, and `reserved` is not lowered again.
    let records: Vec<CostRecord> = (0..3).map(|i| leased_record(tenant, key, format!("late-{i}"), d("0.0004"), replica, worst)).collect();
    let settled = costs::settle(&app.db, &records).await.expect("recorded although the lease is gone");
    assert!(settled.iter().all(|s| s.charged == d("0.0004") && s.shortfall.is_zero()), "{settled:?}");
    assert_eq!(money(&app.db, tenant).await, (d("0.9988"), Decimal::ZERO, Decimal::ZERO));
    assert_eq!(ledger_sum(&app.db, tenant).await, d("0.9988"));

    // Back, the replica finds its row gone and forgets its slices: the old holds no longer count, and
    // the next request waits for a new lease.
    assert!(runaii_gateway::db::replicas::heartbeat(&app.db, replica).await.unwrap(), "the row was written anew");
    leases.forget().await.unwrap();
    for h in &held {
        let Held::Leased { epoch, .. } = *h else { panic!("leased") };
        assert!(!leases.holds(epoch));
        leases.settled(tenant, *h, worst);
    }
    assert!(leases.try_hold(tenant, worst).is_none(), "a new slice starts empty");
    let started = Instant::now();
    while money(&app.db, tenant).await.2.is_zero() {
        assert!(started.elapsed() < Duration::from_secs(5), "no new lease taken");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(money(&app.db, tenant).await.1, d("0.064"), "the new lease is the only credit reserved");
}

#[tokio::test]
async fn a_busy_tenant_tops_its_lease_up_by_time_not_every_few_requests() {
    let app = spawn_app().await;
    let tenant = common::grant(&app.db, "busy", "1000").await;
    let replica = Uuid::now_v7();
    runaii_gateway::db::replicas::heartbeat(&app.db, replica).await.unwrap();
    let leases = Arc::new(Leases::new(app.db.clone(), replica));
    let worst = d("0.0001");
    // 4,000 requests over about 1.5 s, each charged its worst case as soon as it is held.
    let (mut held, started) = (0u32, Instant::now());
    for i in 0..4_000u32 {
        if let Some(h) = leases.try_hold(tenant, worst) {
            held += 1;
            leases.settled(tenant, h, worst);
        }
        while started.elapsed() < Duration::from_micros(u64::from(i) * 375) {
            tokio::task::yield_now().await;
        }
    }
    // Sized by count (64 requests a slice, topped up at half), this took a lease every 32 requests: 125.
    assert!(leases.top_ups() <= 30, "{} top-ups for 4,000 requests", leases.top_ups());
    assert!(held >= 3_900, "only {held} of 4,000 held against the lease");
}
