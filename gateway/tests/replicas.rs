//! A gateway replica that dies leaves no credit hold stuck: a real `runaii-gateway serve` process is killed
//! (SIGKILL) in the middle of a stream, and another replica on the same database releases that request's
//! hold once the dead one's heartbeat is stale — and touches no other hold. A replica stopped with SIGTERM
//! first lets the work of clients that already left record its cost.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{spawn_app, spawn_app_with, MODEL};
use rust_decimal::Decimal;
use serde_json::json;
use uuid::Uuid;

/// How long the in-process replica waits before it declares another dead.
const TIMEOUT_MS: u64 = 2000;

/// Kills the child when the test ends, however it ends.
struct Gateway(Child);

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The real `runaii-gateway serve` binary on the test's database, with `env` added; waits until it answers.
async fn spawn_binary(app: &common::TestApp, env: &[(&str, &str)]) -> (Gateway, String) {
    let database = app.db.connect_options().get_database().unwrap().to_owned();
    let port = runaii_testkit::free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_runaii-gateway"))
        .arg("serve")
        .env("DATABASE_URL", format!("postgres://postgres@127.0.0.1:5432/{database}"))
        .env("RUNAII_GATEWAY_ADDR", format!("127.0.0.1:{port}"))
        .env("RUNAII_WORKER_SECRET", runaii_testkit::WORKER_SECRET)
        .envs(env.iter().copied())
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let gateway = Gateway(child);
    let base = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    while common::client().get(format!("{base}/health")).send().await.is_err() {
        assert!(started.elapsed() < Duration::from_secs(30), "the gateway binary did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (gateway, base)
}

async fn replicas(db: &sqlx::PgPool) -> Vec<Uuid> {
    sqlx::query_scalar("SELECT id FROM gateway_replicas ORDER BY started_at").fetch_all(db).await.unwrap()
}

#[tokio::test]
async fn a_killed_replicas_holds_are_released_by_another_within_the_timeout() {
    let app = spawn_app_with(|s| {
        s.limits.replica_heartbeat_ms = 200;
        s.limits.replica_timeout_ms = TIMEOUT_MS;
    })
    .await;
    let live_replica = replicas(&app.db).await;
    assert_eq!(live_replica.len(), 1, "the in-process replica registered before serving");
    let live_replica = live_replica[0];

    // Holds that must survive: another tenant's request in flight on the live replica, and a hold taken
    // before replicas were recorded (left to the age limit).
    let other = common::grant(&app.db, "other-tenant", "1").await;
    let d = |s: &str| s.parse::<Decimal>().unwrap();
    assert!(runaii_gateway::db::credits::hold(&app.db, other, "live-request", d("0.01"), live_replica).await.unwrap());
    sqlx::query(
        "WITH t AS (UPDATE tenants SET reserved = reserved + 0.02 WHERE id = $1 RETURNING id)
                 INSERT INTO credit_holds (request_id, tenant_id, amount) SELECT 'legacy-request', id, 0.02 FROM t",
    )
    .bind(other)
    .execute(&app.db)
    .await
    .unwrap();

    // A second replica: the real binary, on the same database.
    let (mut doomed, base) = spawn_binary(&app, &[("RUNAII_REPLICA_HEARTBEAT_MS", "200")]).await;
    let doomed_replica = *replicas(&app.db).await.iter().find(|id| **id != live_replica).expect("the binary registered");

    // A long stream through it; once the first chunk arrives the hold is taken.
    let body = json!({"model": MODEL, "messages": [{"role": "user", "content": "Count from one to one thousand in words."}],
                      "max_tokens": 2000, "temperature": 0, "stream": true});
    let mut stream = common::client().post(format!("{base}/v1/chat/completions")).bearer_auth(&app.key).json(&body).send().await.unwrap();
    assert_eq!(stream.status(), 200);
    assert!(stream.chunk().await.unwrap().is_some(), "the stream started");
    let holds: i64 = sqlx::query_scalar("SELECT count(*) FROM credit_holds WHERE replica_id = $1")
        .bind(doomed_replica)
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(holds, 1, "the stream's hold names the replica that took it (its first request: no lease yet)");
    let tenant_reserved = || async {
        sqlx::query_scalar::<_, Decimal>("SELECT reserved FROM tenants WHERE id = $1").bind(app.tenant_id).fetch_one(&app.db).await.unwrap()
    };
    // The replica also leased a slice of the tenant's credit for its next requests.
    let leased = || async {
        sqlx::query_scalar::<_, Decimal>("SELECT COALESCE(sum(amount), 0) FROM credit_leases WHERE replica_id = $1")
            .bind(doomed_replica)
            .fetch_one(&app.db)
            .await
            .unwrap()
    };
    let start = Instant::now();
    while leased().await.is_zero() {
        assert!(start.elapsed() < Duration::from_secs(10), "the replica took no lease");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(tenant_reserved().await > leased().await, "the tenant's reserved credit is the hold and the lease");

    doomed.0.kill().unwrap();
    doomed.0.wait().unwrap();
    let killed = Instant::now();
    drop(stream);

    // Released once its heartbeat is older than the timeout, on the live replica's next beat.
    loop {
        let left: i64 = sqlx::query_scalar("SELECT count(*) FROM credit_holds WHERE replica_id = $1")
            .bind(doomed_replica)
            .fetch_one(&app.db)
            .await
            .unwrap();
        if left == 0 {
            break;
        }
        assert!(
            killed.elapsed() < Duration::from_millis(TIMEOUT_MS + 3000),
            "the dead replica's hold is still there after {:?}",
            killed.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(tenant_reserved().await, Decimal::ZERO, "the tenant has its credit back, the lease too");
    assert!(leased().await.is_zero());
    assert!(!replicas(&app.db).await.contains(&doomed_replica), "and the dead replica is forgotten");

    // Nothing else was touched: the live replica's hold, the legacy hold, the other tenant's reservation.
    let survivors: Vec<String> =
        sqlx::query_scalar("SELECT request_id FROM credit_holds ORDER BY request_id").fetch_all(&app.db).await.unwrap();
    assert_eq!(survivors, ["legacy-request", "live-request"]);
    let other_reserved: Decimal =
        sqlx::query_scalar("SELECT reserved FROM tenants WHERE id = $1").bind(other).fetch_one(&app.db).await.unwrap();
    assert_eq!(other_reserved, d("0.03"));
    assert_eq!(replicas(&app.db).await, [live_replica]);
}

/// SIGTERM lets the work that outlived its HTTP exchange finish: a request whose client already left is
/// still recorded, with its hold settled, before the process exits and its replica row goes.
#[tokio::test]
async fn graceful_shutdown_waits_for_work_whose_client_left() {
    let app = spawn_app().await;
    let (mut gateway, base) = spawn_binary(&app, &[]).await;
    let body = runaii_testkit::long_answer_request(60, 200, false);
    let request = common::client().post(format!("{base}/v1/chat/completions")).bearer_auth(&app.key).json(&body).send();
    // The client gives up once the request is running (its hold is taken), long before the answer.
    let started = Instant::now();
    let running = tokio::spawn(request);
    loop {
        let holds: i64 = sqlx::query_scalar("SELECT count(*) FROM credit_holds").fetch_one(&app.db).await.unwrap();
        if holds == 1 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "the request never took its hold");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    running.abort();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let status = Command::new("kill").args(["-TERM", &gateway.0.id().to_string()]).status().unwrap();
    assert!(status.success());
    let exited = tokio::task::spawn_blocking(move || gateway.0.wait().unwrap());
    let exit = tokio::time::timeout(Duration::from_secs(120), exited).await.expect("the gateway never exited").unwrap();
    assert!(exit.success(), "{exit:?}");

    let rows = app.cost_rows().await;
    assert_eq!(rows.len(), 1, "the request whose client left was recorded before the exit: {rows:?}");
    assert_eq!(rows[0].1, "succeeded", "{rows:?}");
    let holds: i64 = sqlx::query_scalar("SELECT count(*) FROM credit_holds").fetch_one(&app.db).await.unwrap();
    assert_eq!(holds, 0, "its hold was settled, not left for another replica to release");
}
