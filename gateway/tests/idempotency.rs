//! `Idempotency-Key`: a retry returns the original answer and is charged once; another body is refused;
//! a retry while the first runs is refused; a client that leaves does not lose the answer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{spawn_app, MODEL};
use futures::StreamExt;
use serde_json::{json, Value};

fn request(stream: bool) -> Value {
    json!({"model": MODEL, "messages": [{"role": "user", "content": "Name a colour."}], "max_tokens": 12, "temperature": 0.9, "stream": stream})
}

async fn charged(app: &common::TestApp) -> usize {
    app.cost_rows().await.len()
}

#[tokio::test]
async fn a_retry_returns_the_original_answer_and_is_charged_once() {
    let app = spawn_app().await;
    let key = [("Idempotency-Key", "order-1")];
    let first = app.post_as(&app.key, "/v1/chat/completions", &request(false), &key).await;
    assert_eq!(first.status(), 200);
    let first_id = first.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert!(first.headers().get("idempotent-replayed").is_none());
    let first_body = first.text().await.unwrap();

    let retry = app.post_as(&app.key, "/v1/chat/completions", &request(false), &key).await;
    assert_eq!(retry.status(), 200);
    assert_eq!(retry.headers()["idempotent-replayed"], "true");
    assert_eq!(retry.headers()["x-request-id"].to_str().unwrap(), first_id);
    assert_eq!(retry.text().await.unwrap(), first_body, "the very same answer, byte for byte");
    assert_eq!(charged(&app).await, 1, "charged once");

    // The same key with another body is refused, and costs nothing.
    let mut other = request(false);
    other["max_tokens"] = json!(13);
    let refused = app.post_as(&app.key, "/v1/chat/completions", &other, &key).await;
    assert_eq!(refused.status(), 422);
    assert_eq!(refused.headers()["x-should-retry"], "false");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "idempotency_key_reused");
    // Keys belong to a tenant: another tenant's identical key is its own.
    let stranger = common::create_key(&app.db, "stranger").await;
    common::grant(&app.db, "stranger", "1").await;
    let theirs = app.post_as(&stranger, "/v1/chat/completions", &request(false), &key).await;
    assert_eq!(theirs.status(), 200);
    assert!(theirs.headers().get("idempotent-replayed").is_none());
    assert_eq!(charged(&app).await, 2);
}

#[tokio::test]
async fn a_retry_while_the_first_runs_is_refused_never_run_twice() {
    let app = spawn_app().await;
    let long = runaii_testkit::long_answer_request(300, 900, false);
    let key = [("Idempotency-Key", "slow-1")];
    let first = {
        let (base, api_key, long) = (app.base.clone(), app.key.clone(), long.clone());
        tokio::spawn(async move {
            common::client()
                .post(format!("{base}/v1/chat/completions"))
                .bearer_auth(api_key)
                .header("Idempotency-Key", "slow-1")
                .json(&long)
                .send()
                .await
                .unwrap()
                .status()
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let during = app.post_as(&app.key, "/v1/chat/completions", &long, &key).await;
    assert_eq!(during.status(), 409);
    assert_eq!(during.headers()["retry-after"], "1");
    let body: Value = during.json().await.unwrap();
    assert_eq!(body["error"]["code"], "idempotency_key_in_use");
    assert_eq!(first.await.unwrap(), 200);
    let after = app.post_as(&app.key, "/v1/chat/completions", &long, &key).await;
    assert_eq!(after.headers()["idempotent-replayed"], "true");
    assert_eq!(charged(&app).await, 1);
}

#[tokio::test]
async fn a_stream_is_replayed_and_a_client_that_left_still_gets_its_answer() {
    let app = spawn_app().await;
    let key = [("Idempotency-Key", "stream-1")];
    let first = app.post_as(&app.key, "/v1/chat/completions", &request(true), &key).await;
    let first_text = first.text().await.unwrap();
    assert!(first_text.contains("[DONE]"));
    let retry = app.post_as(&app.key, "/v1/chat/completions", &request(true), &key).await;
    assert_eq!(retry.headers()["idempotent-replayed"], "true");
    assert!(retry.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    assert_eq!(retry.text().await.unwrap(), first_text);
    assert_eq!(charged(&app).await, 1);

    // A client drops a stream after its first bytes: with a key, the answer runs to its end anyway, and
    // the retry gets all of it, charged once.
    let long = runaii_testkit::long_answer_request(100, 400, true);
    let key = [("Idempotency-Key", "stream-2")];
    let response = app.post_as(&app.key, "/v1/chat/completions", &long, &key).await;
    let mut body = response.bytes_stream();
    body.next().await.unwrap().unwrap();
    drop(body);
    let deadline = Instant::now() + Duration::from_secs(120);
    let replay = loop {
        let r = app.post_as(&app.key, "/v1/chat/completions", &long, &key).await;
        if r.status() == 200 {
            break r;
        }
        assert_eq!(r.status(), 409, "still running");
        assert!(Instant::now() < deadline, "the abandoned stream never finished");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    let events = runaii_testkit::sse_data(&replay.text().await.unwrap());
    assert_eq!(events.last().unwrap(), "[DONE]", "the whole answer, not the part the client saw");
    let rows = app.cost_rows().await;
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1].1, "succeeded");
}

#[tokio::test]
async fn a_malformed_key_is_a_clear_400() {
    let app = spawn_app().await;
    let long_key = "k".repeat(300);
    let r = app.post_as(&app.key, "/v1/chat/completions", &request(false), &[("Idempotency-Key", &long_key)]).await;
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["param"], "Idempotency-Key");
    assert!(app.cost_rows().await.is_empty());
}

/// What is kept for a key is capped: an answer past the cap is delivered once, billed once, and the key
/// then answers 422 `idempotent_answer_not_stored` — it is never run (and billed) again, and the gateway
/// never holds an unbounded answer in memory for it.
#[tokio::test]
async fn an_answer_too_large_to_keep_is_delivered_once_and_never_rerun() {
    let app = common::spawn_app_with(|s| s.limits.idempotency_max_stored_bytes = 300).await;
    for (stream, key) in [(false, "big-whole"), (true, "big-stream")] {
        let key = [("Idempotency-Key", key)];
        let first = app.post_as(&app.key, "/v1/chat/completions", &request(stream), &key).await;
        assert_eq!(first.status(), 200);
        let first = first.text().await.unwrap();
        assert!(first.len() > 300, "the answer is larger than the cap: {first}");
        if stream {
            assert!(first.trim_end().ends_with("data: [DONE]"), "the client still gets the whole stream: {first}");
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        let retry = loop {
            let retry = app.post_as(&app.key, "/v1/chat/completions", &request(stream), &key).await;
            // A stream's key is closed once it has drained: until then a retry is told to wait.
            if retry.status() != 409 || Instant::now() > deadline {
                break retry;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert_eq!(retry.status(), 422);
        assert_eq!(retry.headers()["idempotent-replayed"], "true");
        let body: Value = retry.json().await.unwrap();
        assert_eq!(body["error"]["code"], "idempotent_answer_not_stored", "{body}");
    }
    assert_eq!(charged(&app).await, 2, "each request ran and was billed exactly once");
}
