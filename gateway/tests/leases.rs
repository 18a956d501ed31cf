//! Credit held against a replica's lease: the request path holds in memory, the record takes the charge
//! out of the lease, and the books still explain every cent: balance = grants − charges, reserved =
//! what is leased, and a lease given back returns its credit.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::spawn_app;
use runaii_gateway::billing::leases::Leases;
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
    let tenant = common::grant(&app.db, "leaseholder", "1").await;
    let key: Uuid = sqlx::query_scalar("SELECT id FROM api_keys LIMIT 1").fetch_one(&app.db).await.unwrap();
    let replica = Uuid::now_v7();
    runaii_gateway::db::replicas::heartbeat(&app.db, replica).await.unwrap();
    let leases = Arc::new(Leases::new(app.db.clone(), replica));
    let worst = d("0.001");

    assert!(!leases.try_hold(tenant, worst), "no lease yet: the first request holds exactly while one is taken");
    let started = Instant::now();
    while money(&app.db, tenant).await.2.is_zero() {
        assert!(started.elapsed() < Duration::from_secs(5), "no lease taken");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Sized for 64 such requests, within a quarter of what was available.
    assert_eq!(money(&app.db, tenant).await, (d("1"), d("0.064"), d("0.064")));

    for _ in 0..10 {
        assert!(leases.try_hold(tenant, worst), "held against the lease");
    }
    assert_eq!(money(&app.db, tenant).await, (d("1"), d("0.064"), d("0.064")), "holding wrote nothing");

    let record = |i: usize, cost: &str| CostRecord {
        request_id: format!("leased-{i}"),
        tenant_id: tenant,
        api_key_id: key,
        model: common::MODEL.into(),
        endpoint: "chat.completions",
        input_tokens: 10,
        cached_tokens: 0,
        output_tokens: 10,
        cost: d(cost),
        status: "succeeded",
        http_status: 200,
        error_code: None,
        latency_ms: 1,
        leased: Some(Leased { replica, worst }),
    };
    // Nine within their worst case, one above it: its excess comes from credit nobody reserved.
    let mut records: Vec<CostRecord> = (0..9).map(|i| record(i, "0.0003")).collect();
    records.push(record(9, "0.0025"));
    let settled = costs::settle(&app.db, &records).await.unwrap();
    assert!(settled.iter().all(|s| s.shortfall.is_zero()), "{settled:?}");
    for s in &settled {
        leases.settled(tenant, worst, s.charged.min(worst));
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
    assert!(!leases.try_hold(tenant, d("0.00004")));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!leases.try_hold(tenant, d("0.00004")), "still no lease");
    assert_eq!(money(&app.db, tenant).await, (d("0.0001"), Decimal::ZERO, Decimal::ZERO));
}
