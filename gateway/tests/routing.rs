//! Routing: workers announced in Redis, readiness that follows them, and the retry elsewhere when a
//! worker fails before answering.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{client, invoice_request, spawn_app, start_worker, MODEL};
use redis::AsyncCommands;
use runaii_wire::announcement::{self, WorkerStatus, REGISTRY_KEY};
use runaii_wire::worker_auth::WorkerSecrets;
use serde_json::{json, Value};

fn test_secrets() -> WorkerSecrets {
    WorkerSecrets::load(None, Some(&common::WORKER_SECRET.into())).unwrap()
}

async fn is_ready(base: &str, model: &str) -> bool {
    let m: Value = client().get(format!("{base}/v1/models/{model}")).send().await.unwrap().json().await.unwrap();
    m["is_ready"] == true
}

#[tokio::test]
async fn announced_worker_serves_and_drops_out_when_it_dies() {
    let app = spawn_app().await;
    let model = format!("announced-{}", uuid::Uuid::now_v7().simple());
    let price = |s: &str| s.parse().unwrap();
    app.upsert_model(&model, (price("0.1"), price("0.3")), None).await;
    assert!(!is_ready(&app.base, &model).await);
    let worker = start_worker(&["--model-id", &model, "--announce-redis-url", "redis://127.0.0.1:6379"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !is_ready(&app.base, &model).await {
        assert!(Instant::now() < deadline, "announced worker never became ready");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut req = invoice_request();
    req["model"] = json!(model);
    let (status, body, _) = app.post_json("/v1/chat/completions", &req).await;
    assert_eq!(status, 200, "{body}");

    drop(worker); // closes its stdin: the worker exits and stops announcing
    let deadline = Instant::now() + Duration::from_secs(15);
    while is_ready(&app.base, &model).await {
        assert!(Instant::now() < deadline, "a dead worker stayed ready");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (status, body, _) = app.post_json("/v1/chat/completions", &req).await;
    assert_eq!(status, 503);
    assert_eq!(body["error"]["code"], "model_unavailable");
}

#[tokio::test]
async fn a_worker_that_fails_before_answering_is_retried_elsewhere() {
    let app = spawn_app().await;
    // A worker that is announced but not listening: chosen first (least loaded), then retried elsewhere.
    let dead_port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dead = format!("http://127.0.0.1:{dead_port}");
    let mut redis = redis::Client::open("redis://127.0.0.1:6379").unwrap().get_multiplexed_async_connection().await.unwrap();
    let field = announcement::field(MODEL, &dead);
    let status = WorkerStatus { url: dead.clone(), model: MODEL.into(), slots: 8, slots_busy: 0, queue_depth: 0 };
    let sealed = announcement::seal(&test_secrets(), status, announcement::now_ms() + 30_000);
    let _: () = redis.hset(REGISTRY_KEY, &field, sealed).await.unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await; // the gateway's view refreshes every 200 ms
    let (status, body, _) = app.post_json("/v1/chat/completions", &invoice_request()).await;
    let _: () = redis.hdel(REGISTRY_KEY, &field).await.unwrap();
    assert_eq!(status, 200, "retried on the live worker: {body}");
    assert_eq!(app.cost_rows().await.len(), 1);
}
