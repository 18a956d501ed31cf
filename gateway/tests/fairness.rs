//! Tenants sharing a model: a request past its deadline is its own 504 and never takes the worker from
//! the others; one tenant's queue of long requests does not stand in front of another's short one; and a
//! tenant's cap on requests in flight holds over two replicas.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{admin_token, client, create_key, grant, spawn_app, spawn_app_with, spawn_replica, start_worker, TestApp, MODEL};
use runaii_testkit::long_answer_request;
use serde_json::{json, Value};

/// A second tenant of the app's database with a key and credit.
async fn other_tenant(app: &TestApp) -> String {
    let name = format!("other-{}", uuid::Uuid::now_v7().simple());
    let key = create_key(&app.db, &name).await;
    grant(&app.db, &name, common::TEST_CREDIT).await;
    key
}

fn short_request(model: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4, "temperature": 0})
}

#[tokio::test]
async fn a_request_past_its_deadline_is_its_own_504_and_other_tenants_are_still_served() {
    // A gateway whose deadline for a whole answer is 3 s whatever it asks (a floor no model reaches).
    let app = spawn_app_with(|s| {
        s.workers.worker_headers_timeout_ms = 3_000;
        s.workers.worker_min_tokens_per_second = 1_000_000;
    })
    .await;
    let other = other_tenant(&app).await;
    let (status, body, request_id) = app.post_json("/v1/chat/completions", &long_answer_request(400, 2000, false)).await;
    assert_eq!(status, 504, "{body}");
    assert_eq!(body["error"]["code"], "upstream_timeout");
    // Recorded failed, as a request the gateway cut, and billed for the work the worker reports it did
    // (the prompt it read, the tokens it generated in 3 s): a tenant's requests that outlive their
    // deadline are not free compute.
    let rows = app.cost_rows().await;
    let row = rows.iter().find(|r| r.0 == request_id).unwrap_or_else(|| panic!("no record for {request_id}: {rows:?}"));
    assert_eq!((row.1.as_str(), row.5.as_deref()), ("failed", Some("upstream_timeout")));
    assert!(row.2 > 0 && row.3 > 0 && row.3 < 2000 && row.4 > rust_decimal::Decimal::ZERO, "the work done is billed: {row:?}");
    // The worker was not set aside: the other tenant's next requests are served at once, not 503.
    // (Streamed: their headers come before their first token, so the 3 s deadline cannot cut them on a
    // busy machine.)
    let mut streamed = short_request(MODEL);
    streamed["stream"] = json!(true);
    for _ in 0..3 {
        let response = app.post_as(&other, "/v1/chat/completions", &streamed, &[]).await;
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        assert_eq!(status, 200, "{text}");
        assert!(text.contains("[DONE]"), "{text}");
    }
}

#[tokio::test]
async fn a_tenants_short_request_goes_before_another_tenants_queue_of_long_ones() {
    let app = spawn_app().await;
    // A worker of its own with two sequences, so a queue forms at once.
    let model = format!("fair-{}", uuid::Uuid::now_v7().simple());
    let worker = start_worker(&["--model-id", &model, "--slots", "2"]);
    let price = |s: &str| s.parse().unwrap();
    app.upsert_model(&model, (price("0.1"), price("0.3")), Some(&worker.url)).await;
    common::wait_ready(&app, &model).await;
    let other = other_tenant(&app).await;

    // Tenant A: eight long answers, two decoding and six queued.
    const FLOOD: usize = 8;
    let started = Instant::now();
    let mut flood = Vec::new();
    for _ in 0..FLOOD {
        let mut long = long_answer_request(200, 150, false);
        long["model"] = json!(model);
        let (base, key) = (app.base.clone(), app.key.clone());
        flood.push(tokio::spawn(async move {
            let r = client().post(format!("{base}/v1/chat/completions")).bearer_auth(key).json(&long).send().await.unwrap();
            assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
            started.elapsed()
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let health: Value = client().get(format!("{}/health", worker.url)).send().await.unwrap().json().await.unwrap();
        if health["queue_depth"].as_u64().unwrap_or(0) >= (FLOOD - 2) as u64 {
            break;
        }
        assert!(Instant::now() < deadline, "the flood never queued: {health}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Tenant B: one short request, behind all of A's in arrival order.
    let response = app.post_as(&other, "/v1/chat/completions", &short_request(&model), &[]).await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    let b_done = started.elapsed();
    let mut a_done = Vec::new();
    for task in flood {
        a_done.push(task.await.unwrap());
    }
    // In arrival order B would finish after all eight; taken in fair turns it takes the first free
    // sequence, so most of A's queue finishes after it.
    let after_b = a_done.iter().filter(|&&t| t > b_done).count();
    assert!(after_b >= FLOOD / 2, "only {after_b} of A's {FLOOD} long requests finished after B's short one ({b_done:?}; A: {a_done:?})");
}

/// A long stream, opened and left unread: in flight until dropped.
async fn open_stream(base: &str, key: &str) -> reqwest::Response {
    let response = client()
        .post(format!("{base}/v1/chat/completions"))
        .bearer_auth(key)
        .json(&long_answer_request(400, 2000, true))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response
}

#[tokio::test]
async fn a_tenants_cap_on_requests_in_flight_holds_across_replicas() {
    let app = spawn_app().await;
    let replica = spawn_replica(&app, |_| {}).await;
    let path = format!("/admin/v1/tenants/{}", app.tenant_id);
    // A token confined to the tenant cannot change its own cap; an unconfined admin can.
    let confined = admin_token(&["admin"], Some(app.tenant_id));
    let (status, body) = app.admin(reqwest::Method::PATCH, &path, &confined, Some(&json!({"max_concurrent_requests": 1000}))).await;
    assert_eq!(status, 403, "{body}");
    let admin = admin_token(&["admin"], None);
    let (status, body) = app.admin(reqwest::Method::PATCH, &path, &admin, Some(&json!({"max_concurrent_requests": 0}))).await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = app.admin(reqwest::Method::PATCH, &path, &admin, Some(&json!({"max_concurrent_requests": 2}))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["max_concurrent_requests"], 2);

    // One request in flight on each replica: the tenant's two.
    let first = open_stream(&app.base, &app.key).await;
    let second = open_stream(&replica, &app.key).await;
    let refused = app.post_as(&app.key, "/v1/chat/completions", &short_request(MODEL), &[]).await;
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "1");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "concurrency_limit_exceeded", "{body}");
    // In each dialect's own shape, on the other replica too.
    let messages = json!({"model": MODEL, "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]});
    let refused = client().post(format!("{replica}/v1/messages")).header("x-api-key", &app.key).json(&messages).send().await.unwrap();
    assert_eq!(refused.status(), 429);
    assert!(refused.headers().contains_key("retry-after"));
    let body: Value = refused.json().await.unwrap();
    assert_eq!((body["type"].as_str(), body["error"]["type"].as_str()), (Some("error"), Some("rate_limit_error")), "{body}");
    // Another tenant is not counted with this one.
    let other = other_tenant(&app).await;
    let response = app.post_as(&other, "/v1/chat/completions", &short_request(MODEL), &[]).await;
    assert_eq!(response.status(), 200);

    // When the streams end their places are given back.
    drop((first, second));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let response = app.post_as(&app.key, "/v1/chat/completions", &short_request(MODEL), &[]).await;
        if response.status() == 200 {
            break;
        }
        assert_eq!(response.status(), 429);
        assert!(Instant::now() < deadline, "the tenant's places were not given back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
