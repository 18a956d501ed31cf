//! Keys and the catalog come from in-process caches, not from a Postgres read per request; every replica
//! keeps them fresh from Postgres notifications sent in the transaction of each change. The bounds, on
//! two replicas with the key cache's TTL set to ten minutes (so only a notification can do it): a price
//! changed through one replica bills the next request on the other within a second, and a key revoked
//! through one is refused by the other within a second.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{admin_token, client, spawn_app_with, spawn_replica, MODEL};
use reqwest::Method;
use rust_decimal::Decimal;
use serde_json::{json, Value};

const BOUND: Duration = Duration::from_secs(1);
const TEN_MINUTES_MS: u64 = 600_000;

/// Polls `probe` until it is true; how long that took.
async fn within<F, Fut>(what: &str, mut probe: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !probe().await {
        assert!(started.elapsed() < Duration::from_secs(10), "{what}: not seen in 10 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    started.elapsed()
}

#[tokio::test]
async fn a_price_change_and_a_revoked_key_reach_every_replica_within_a_second() {
    let app = spawn_app_with(|s| s.key_cache_ms = TEN_MINUTES_MS).await;
    let other = spawn_replica(&app, |s| s.key_cache_ms = TEN_MINUTES_MS).await;
    let request = json!({"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "temperature": 0});
    let post = |base: &str| client().post(format!("{base}/v1/chat/completions")).bearer_auth(&app.key).json(&request).send();
    // The other replica has the key and the model cached.
    assert_eq!(post(&other).await.unwrap().status(), 200);

    let ops = admin_token(&["ops"], None);
    let (status, _) =
        app.admin(Method::PATCH, &format!("/admin/v1/models/{MODEL}"), &ops, Some(&json!({"output_price_per_mtok": "7"}))).await;
    assert_eq!(status, 200);
    let seen = within("the price change on the other replica", || async {
        let model: Value = client().get(format!("{other}/v1/models/{MODEL}")).send().await.unwrap().json().await.unwrap();
        model["pricing"]["output_per_million_tokens"] == "7"
    })
    .await;
    assert!(seen < BOUND, "the other replica served the old price for {seen:?}");
    let answer: Value = post(&other).await.unwrap().json().await.unwrap();
    let (input, output) = (answer["usage"]["prompt_tokens"].as_u64().unwrap(), answer["usage"]["completion_tokens"].as_u64().unwrap());
    let expected = (Decimal::from(input) * Decimal::new(1, 1) + Decimal::from(output) * Decimal::from(7)) / Decimal::from(1_000_000);
    let billed: Decimal = serde_json::to_string(&answer["usage"]["cost"]).unwrap().parse().unwrap();
    assert_eq!(billed, expected.normalize(), "the next request on the other replica is billed at the new price");

    let admin = admin_token(&["admin"], None);
    let (_, keys) = app.admin(Method::GET, &format!("/admin/v1/tenants/{}/keys", app.tenant_id), &admin, None).await;
    let key_id = keys["data"][0]["id"].as_str().unwrap().to_owned();
    let (status, _) = app.admin(Method::DELETE, &format!("/admin/v1/keys/{key_id}"), &admin, None).await;
    assert_eq!(status, 200);
    let refused = within("the revocation on the other replica", || async {
        client().get(format!("{other}/v1/account")).bearer_auth(&app.key).send().await.unwrap().status() == 401
    })
    .await;
    assert!(refused < BOUND, "the other replica accepted the revoked key for {refused:?}");
    assert_eq!(post(&other).await.unwrap().status(), 401);
}
