//! What one tenant can make the gateway keep or echo is bounded: `metadata` within OpenAI's limits on
//! chat completions and Responses (Anthropic's `metadata.user_id` on Messages), refused by name; and the
//! answers kept under `Idempotency-Key`s counted per tenant against a quota of keys and of bytes, with a
//! clear refusal past it while retries of kept keys still replay.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{spawn_app, spawn_app_with, TestApp, MODEL};
use serde_json::{json, Map, Value};

fn pairs(n: usize, value_len: usize) -> Value {
    Value::Object((0..n).map(|i| (format!("k{i}"), json!("v".repeat(value_len)))).collect::<Map<_, _>>())
}

async fn status_and_body(app: &TestApp, path: &str, body: &Value) -> (u16, Value) {
    let r = app.post_as(&app.key, path, body, &[("anthropic-version", "2023-06-01")]).await;
    (r.status().as_u16(), r.json().await.unwrap())
}

#[tokio::test]
async fn metadata_past_openai_s_limits_is_refused_by_name_on_every_endpoint_that_takes_it() {
    let app = spawn_app().await;
    let responses = |metadata: Value| json!({"model": MODEL, "input": "Hi", "max_output_tokens": 1, "metadata": metadata});
    let chat =
        |metadata: Value| json!({"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1, "metadata": metadata});
    let too_many = pairs(17, 1);
    let too_long_value = pairs(1, 513);
    let too_long_key = json!({"k".repeat(65): "v"});
    let not_a_string = json!({"k": 1});
    for bad in [&too_many, &too_long_value, &too_long_key, &not_a_string] {
        for (path, body) in [("/v1/responses", responses(bad.clone())), ("/v1/chat/completions", chat(bad.clone()))] {
            let (status, body) = status_and_body(&app, path, &body).await;
            assert_eq!(status, 400, "{path} accepted {bad}");
            assert_eq!(body["error"]["param"], "metadata", "{path}: {body}");
        }
    }
    // At the limits: accepted, and a Response repeats it back.
    let (status, body) = status_and_body(&app, "/v1/responses", &responses(pairs(16, 512))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["metadata"], pairs(16, 512));
    // Chat completions are not stored, so any metadata there is refused by name, within the limits too.
    let (status, body) = status_and_body(&app, "/v1/chat/completions", &chat(pairs(16, 512))).await;
    assert_eq!(
        (status, &body["error"]["code"], &body["error"]["param"]),
        (400, &json!("unsupported_parameter"), &json!("metadata")),
        "{body}"
    );

    let messages =
        |metadata: Value| json!({"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": "Hi"}], "metadata": metadata});
    for bad in [json!({"user_id": "u".repeat(257)}), json!({"user_id": 7}), json!({"other": "x"}), json!("x")] {
        let (status, body) = status_and_body(&app, "/v1/messages", &messages(bad.clone())).await;
        assert_eq!(status, 400, "/v1/messages accepted {bad}");
        assert_eq!(body["type"], "error", "{body}");
        assert!(body["error"]["message"].as_str().unwrap().contains("metadata"), "{body}");
    }
    let (status, body) = status_and_body(&app, "/v1/messages", &messages(json!({"user_id": "u".repeat(256)}))).await;
    assert_eq!(status, 200, "{body}");
    // Nothing refused was charged.
    assert_eq!(app.cost_rows().await.len(), 2);
}

async fn keyed(app: &TestApp, key: &str) -> reqwest::Response {
    let body = json!({"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1, "temperature": 0});
    app.post_as(&app.key, "/v1/chat/completions", &body, &[("Idempotency-Key", key)]).await
}

async fn usage(app: &TestApp) -> (i64, i64) {
    let row: Option<(i64, i64)> = sqlx::query_as("SELECT keys, bytes FROM idempotency_usage WHERE tenant_id = $1")
        .bind(app.tenant_id)
        .fetch_optional(&app.db)
        .await
        .unwrap();
    row.unwrap_or_default()
}

async fn counted(app: &TestApp) -> (i64, i64) {
    sqlx::query_as("SELECT count(*), coalesce(sum(octet_length(body)), 0)::bigint FROM idempotency_keys WHERE tenant_id = $1")
        .bind(app.tenant_id)
        .fetch_one(&app.db)
        .await
        .unwrap()
}

#[tokio::test]
async fn idempotent_answers_are_counted_per_tenant_and_refused_past_the_quota() {
    let app = spawn_app_with(|s| s.limits.idempotency_max_keys_per_tenant = 2).await;
    assert_eq!(keyed(&app, "a").await.status(), 200);
    assert_eq!(keyed(&app, "b").await.status(), 200);
    let (keys, bytes) = usage(&app).await;
    assert_eq!((keys, bytes), counted(&app).await, "the totals follow the rows");
    assert!(keys == 2 && bytes > 0);

    let refused = keyed(&app, "c").await;
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["x-should-retry"], "false");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "idempotency_quota_exceeded", "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("2 keys"), "{body}");
    // The refused key was given up and nothing ran for it; a kept key still replays.
    assert_eq!(usage(&app).await, (2, bytes));
    assert_eq!(app.cost_rows().await.len(), 2);
    let replay = keyed(&app, "a").await;
    assert_eq!((replay.status().as_u16(), replay.headers()["idempotent-replayed"].to_str().unwrap()), (200, "true"));
    // Without a key the tenant is served as ever.
    let plain = json!({"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1});
    assert_eq!(app.post("/v1/chat/completions", &plain).await.status(), 200);
    // Keys that expire give their room back.
    sqlx::query("DELETE FROM idempotency_keys WHERE key = 'a'").execute(&app.db).await.unwrap();
    assert_eq!(usage(&app).await, counted(&app).await);
    assert_eq!(keyed(&app, "c").await.status(), 200);
}

#[tokio::test]
async fn the_bytes_of_kept_answers_have_a_quota_too() {
    let app = spawn_app_with(|s| s.limits.idempotency_max_bytes_per_tenant = 1).await;
    // Nothing kept yet: the first runs and is kept; then the tenant is at its quota.
    assert_eq!(keyed(&app, "first").await.status(), 200);
    let refused = keyed(&app, "second").await;
    assert_eq!(refused.status(), 429);
    let body: Value = refused.json().await.unwrap();
    assert!(body["error"]["message"].as_str().unwrap().contains("1 bytes of answers"), "{body}");
    assert_eq!(usage(&app).await, counted(&app).await);
}
