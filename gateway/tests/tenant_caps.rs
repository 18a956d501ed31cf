//! Tenant-wide caps on the real app (real Postgres, Redis and worker): requests and tokens per minute
//! held across every key and replica of the tenant, the monthly spend cap refused in each dialect's shape,
//! only unconfined admins setting caps, keys held to them, and revoking a key with the keys minted from it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::{admin_token, create_key, spawn_app, spawn_replica, TestApp, MODEL};
use reqwest::Method;
use serde_json::{json, Value};

fn tiny() -> Value {
    json!({"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "temperature": 0})
}

/// Sets the tenant's caps as an unconfined admin, then waits out the key cache (300 ms in tests; the
/// change also evicts the tenant's keys at once).
async fn set_caps(app: &TestApp, caps: Value) -> Value {
    let token = admin_token(&["admin"], None);
    let (status, body) = app.admin(Method::PATCH, &format!("/admin/v1/tenants/{}", app.tenant_id), &token, Some(&caps)).await;
    assert_eq!(status, 200, "{body}");
    tokio::time::sleep(Duration::from_millis(400)).await;
    body
}

/// One request with a body that is not JSON: 400 when the limiter admitted it, 429 when it refused.
async fn knock(base: &str, key: &str) -> (u16, Value) {
    let r = common::client()
        .post(format!("{base}/v1/chat/completions"))
        .bearer_auth(key)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or_default())
}

#[tokio::test]
async fn requests_per_minute_hold_across_two_keys_and_two_replicas() {
    let app = spawn_app().await;
    let other = spawn_replica(&app, |_| {}).await;
    let second = create_key(&app.db, &app.tenant).await;
    let tenant = set_caps(&app, json!({"rpm_limit": 4})).await;
    assert_eq!(tenant["rpm_limit"], 4);
    // Each key alone may send 10,000 a minute; together, on two replicas, the tenant gets 4.
    let mut statuses = Vec::new();
    let mut refusal = Value::Null;
    for _ in 0..4 {
        for (base, key) in [(&app.base, &app.key), (&other, &second)] {
            let (status, body) = knock(base, key).await;
            statuses.push(status);
            if status == 429 {
                refusal = body;
            }
        }
    }
    assert_eq!(statuses.iter().filter(|s| **s == 400).count(), 4, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 429).count(), 4, "{statuses:?}");
    assert_eq!(refusal["error"]["code"], "rate_limit_exceeded");
    assert!(refusal["error"]["message"].as_str().unwrap().contains("organization"), "{refusal}");
    // Another tenant is not held by these caps.
    let stranger = create_key(&app.db, "another-tenant").await;
    assert_eq!(knock(&app.base, &stranger).await.0, 400);
}

#[tokio::test]
async fn tokens_per_minute_hold_across_keys_and_replicas() {
    let app = spawn_app().await;
    let other = spawn_replica(&app, |_| {}).await;
    let second = create_key(&app.db, &app.tenant).await;
    set_caps(&app, json!({"tpm_limit": 20})).await;
    let first = app.post("/v1/chat/completions", &tiny()).await;
    assert_eq!(first.status(), 200);
    let tokens = first.json::<Value>().await.unwrap()["usage"]["total_tokens"].as_u64().unwrap();
    assert!(tokens > 20, "the prompt alone exceeds 20 tokens");
    // The first replica sends the tenant's tokens within the flush interval.
    tokio::time::sleep(runaii_gateway::ratelimit::SPEND_FLUSH * 2).await;
    let r = common::client().post(format!("{other}/v1/chat/completions")).bearer_auth(&second).json(&tiny()).send().await.unwrap();
    assert_eq!(r.status(), 429, "another key on another replica is held by the tenant's tokens");
    assert_eq!(r.headers()["x-ratelimit-remaining-tokens"], "0");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["type"], "tokens");
}

#[tokio::test]
async fn the_monthly_spend_cap_refuses_in_each_dialect_once_reached() {
    let app = spawn_app().await;
    let tenant = set_caps(&app, json!({"monthly_spend_cap": "0.0000001"})).await;
    assert_eq!(tenant["monthly_spend_cap"], "0.0000001");
    let (status, body, _) = app.post_json("/v1/chat/completions", &tiny()).await;
    assert_eq!(status, 200, "nothing spent yet: {body}");
    // The month's spend is read again after a second.
    tokio::time::sleep(runaii_gateway::ratelimit::spend_cap::FRESH_FOR + Duration::from_millis(100)).await;
    let r = app.post("/v1/chat/completions", &tiny()).await;
    assert_eq!(r.status(), 402);
    assert_eq!(r.headers()["x-should-retry"], "false");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "spend_cap_reached", "{body}");
    assert_eq!(body["error"]["type"], "insufficient_quota");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("0.0000001 USD") && message.contains(&chrono::Utc::now().format("%Y-%m").to_string()), "{message}");
    let messages = json!({"model": MODEL, "max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}]});
    let r = app.post_as(&app.key, "/v1/messages", &messages, &[("anthropic-version", "2023-06-01")]).await;
    assert_eq!(r.status(), 402);
    let body: Value = r.json().await.unwrap();
    assert_eq!((body["type"].as_str(), body["error"]["type"].as_str()), (Some("error"), Some("billing_error")), "{body}");
    assert_eq!(app.cost_rows().await.len(), 1, "refusals are neither run nor recorded");

    // Raised by an admin, the tenant is served again.
    set_caps(&app, json!({"monthly_spend_cap": null})).await;
    assert_eq!(app.post("/v1/chat/completions", &tiny()).await.status(), 200);
}

#[tokio::test]
async fn a_confined_token_cannot_raise_a_cap_and_keys_stay_within_them() {
    let app = spawn_app().await;
    let confined = admin_token(&["admin"], Some(app.tenant_id));
    let tenant_path = format!("/admin/v1/tenants/{}", app.tenant_id);
    let (status, body) = app.admin(Method::PATCH, &tenant_path, &confined, Some(&json!({"rpm_limit": 1_000_000}))).await;
    assert_eq!((status, body["error"]["code"].as_str()), (403, Some("insufficient_role")), "{body}");
    let (status, _) = app.admin(Method::PATCH, &tenant_path, &confined, Some(&json!({"monthly_spend_cap": null}))).await;
    assert_eq!(status, 403, "removing a cap is raising it");
    set_caps(&app, json!({"rpm_limit": 100, "tpm_limit": 5000})).await;

    // Keys: above a cap is refused by name; at or under it is fine.
    let keys_path = format!("/admin/v1/tenants/{}/keys", app.tenant_id);
    let (status, body) = app.admin(Method::POST, &keys_path, &confined, Some(&json!({"rpm_limit": 101}))).await;
    assert_eq!((status, body["error"]["param"].as_str()), (400, Some("rpm_limit")), "{body}");
    let (status, key) = app.admin(Method::POST, &keys_path, &confined, Some(&json!({"rpm_limit": 100, "tpm_limit": 10}))).await;
    assert_eq!(status, 200, "{key}");
    let key_path = format!("/admin/v1/keys/{}", key["id"].as_str().unwrap());
    let (status, body) = app.admin(Method::PATCH, &key_path, &confined, Some(&json!({"tpm_limit": 5001}))).await;
    assert_eq!((status, body["error"]["param"].as_str()), (400, Some("tpm_limit")), "{body}");

    // A key left at the gateway's defaults (10,000 a minute in tests) is held to the tenant's cap.
    let r = app.post("/v1/chat/completions", &tiny()).await;
    assert_eq!(r.headers()["x-ratelimit-limit-requests"], "100");
    let audit: i64 = sqlx::query_scalar("SELECT count(*) FROM audit_log WHERE action = 'tenant.caps'").fetch_one(&app.db).await.unwrap();
    assert_eq!(audit, 1, "only the unconfined change happened");
}

#[tokio::test]
async fn revoking_a_key_with_cascade_revokes_the_keys_minted_from_it() {
    let app = spawn_app().await;
    let parent: uuid::Uuid =
        sqlx::query_scalar("SELECT id FROM api_keys WHERE tenant_id = $1").bind(app.tenant_id).fetch_one(&app.db).await.unwrap();
    let actor = runaii_gateway::ops::Actor("test");
    let spec = runaii_gateway::ops::keys::KeySpec::default();
    let child = runaii_gateway::ops::keys::create_from_key(&app.db, actor, parent, &spec).await.unwrap();
    let grandchild = runaii_gateway::ops::keys::create_from_key(&app.db, actor, child.info.id, &spec).await.unwrap();
    let sibling = create_key(&app.db, &app.tenant).await;
    let token = admin_token(&["admin"], Some(app.tenant_id));

    let (status, body) = app.admin(Method::DELETE, &format!("/admin/v1/keys/{}", child.info.id), &token, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["also_revoked"], json!([]), "without cascade only the key itself");
    let (status, body) = app.admin(Method::DELETE, &format!("/admin/v1/keys/{parent}?cascade=true"), &token, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["also_revoked"], json!([grandchild.info.id]), "the child was revoked already; its child goes now");
    tokio::time::sleep(Duration::from_millis(400)).await;
    for key in [&app.key, &child.key, &grandchild.key] {
        assert_eq!(app.post_as(key, "/v1/chat/completions", &tiny(), &[]).await.status(), 401);
    }
    assert_eq!(app.post_as(&sibling, "/v1/chat/completions", &tiny(), &[]).await.status(), 200, "a key not minted from it works");
}
