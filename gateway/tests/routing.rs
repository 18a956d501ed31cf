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

/// Requests a worker has admitted so far (its own counter).
async fn admitted(worker_url: &str) -> u64 {
    let text = client().get(format!("{worker_url}/metrics")).send().await.unwrap().text().await.unwrap();
    text.lines().find_map(|l| l.strip_prefix("runaii_worker_admitted_total ")).and_then(|n| n.trim().parse().ok()).unwrap_or(0)
}

async fn admitted_both(a: &str, b: &str) -> (u64, u64) {
    (admitted(a).await, admitted(b).await)
}

/// Two real workers of one model, one slot each, configured in the catalog; both ready in the gateway.
async fn two_workers(app: &common::TestApp, model: &str) -> (runaii_testkit::WorkerProcess, runaii_testkit::WorkerProcess) {
    let extra = ["--model-id", model, "--slots", "1", "--threads", "1"];
    let (a, b) = (start_worker(&extra), start_worker(&extra));
    let price = |s: &str| s.parse().unwrap();
    app.upsert_model(model, (price("0.1"), price("0.3")), Some(&a.url)).await;
    app.upsert_model(model, (price("0.1"), price("0.3")), Some(&b.url)).await;
    let token = common::admin_token(&["ops"], None);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, workers) = app.admin(reqwest::Method::GET, "/admin/v1/workers", &token, None).await;
        let ready = workers["data"].as_array().unwrap().iter().filter(|w| w["model"] == model && w["ready"] == true).count();
        if ready == 2 {
            break;
        }
        assert!(Instant::now() < deadline, "both workers never became ready: {workers}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    (a, b)
}

#[tokio::test]
async fn requests_sharing_a_prefix_or_a_cache_key_meet_on_one_worker_unless_it_is_busy() {
    let app = spawn_app().await;
    let model = format!("affinity-{}", uuid::Uuid::now_v7().simple());
    let (a, b) = two_workers(&app, &model).await;
    let system = "You extract invoices into JSON. ".repeat(80); // past the 2 KB that choose the worker
    let ask = |user: String| json!({"model": model, "max_tokens": 2, "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]});

    // The same long system prompt, different documents: one worker takes them all.
    let before = admitted_both(&a.url, &b.url).await;
    for i in 0..4 {
        let (status, body, _) = app.post_json("/v1/chat/completions", &ask(format!("Invoice #{i}"))).await;
        assert_eq!(status, 200, "{body}");
        // No pause for the next probe: a probe taken while this request ran still shows its slot busy,
        // but the gateway knows the request has ended since (upstream/load.rs).
    }
    let after = admitted_both(&a.url, &b.url).await;
    let (on_a, on_b) = (after.0 - before.0, after.1 - before.1);
    assert!((on_a, on_b) == (4, 0) || (on_a, on_b) == (0, 4), "a shared prefix was split over the workers: {on_a} and {on_b}");
    let (home, other) = if on_a == 4 { (&a, &b) } else { (&b, &a) };

    // Unrelated short prompts with their own prompt_cache_key spread over both.
    let before = admitted_both(&a.url, &b.url).await;
    for i in 0..12 {
        let req = json!({"model": model, "max_tokens": 2, "prompt_cache_key": format!("user-{i}"),
                         "messages": [{"role": "user", "content": "hi"}]});
        let (status, body, _) = app.post_json("/v1/chat/completions", &req).await;
        assert_eq!(status, 200, "{body}");
    }
    let after = admitted_both(&a.url, &b.url).await;
    assert!(after.0 > before.0 && after.1 > before.1, "12 cache keys all went to one worker: {before:?} → {after:?}");

    // Busy: the home worker's one slot holds a long stream; the next request with the shared prefix
    // goes to the other worker rather than queue.
    let mut long = ask("Invoice #long".into());
    long["max_tokens"] = json!(400);
    long["stream"] = json!(true);
    long["response_format"] = json!({"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "array", "items": {"type": "integer"}, "minItems": 300}}});
    let mut running = app.post("/v1/chat/completions", &long).await;
    assert_eq!(running.status(), 200);
    running.chunk().await.unwrap();
    // No wait for a probe to see the slot busy: the gateway counts its own request in flight.
    let other_before = admitted(&other.url).await;
    let (status, body, _) = app.post_json("/v1/chat/completions", &ask("Invoice #while-busy".into())).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(admitted(&other.url).await, other_before + 1, "sent to the other worker while {} was busy", home.url);
    drop(running);
}
