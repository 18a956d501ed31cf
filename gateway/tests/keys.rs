//! What a wrong API key costs. A made-up key of today's shape fails its checksum and is refused without
//! a database read; an unknown key of the shape issued before the checksum is read once and then
//! remembered as unknown; keys issued before the checksum still work; the key cache evicts its least
//! recently used key when full and keeps the ones in use; an address past its allowance of failures gets
//! 429 in the route's dialect while another address, and a known key from the same address, do not.
//!
//! Database reads are counted where Postgres counts them: the scans of `api_keys` in
//! `pg_stat_user_tables` (nothing else in these tests reads that table).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use common::{client, create_key, spawn_app_with, TestApp};
use rand::distributions::{Alphanumeric, DistString};
use rand::Rng;
use serde_json::Value;

/// Index and sequential scans of `api_keys` that Postgres has recorded so far.
async fn key_reads(app: &TestApp) -> i64 {
    sqlx::query_scalar::<_, i64>(
        "SELECT (coalesce(seq_scan, 0) + coalesce(idx_scan, 0))::bigint FROM pg_stat_user_tables WHERE relname = 'api_keys'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap()
}

/// Backends report their counts to the statistics a little after each transaction: waits until the
/// count has grown past `above`, and a moment more for any late report, then returns it.
async fn settled_reads_above(app: &TestApp, above: i64) -> i64 {
    let started = Instant::now();
    while key_reads(app).await <= above {
        assert!(started.elapsed() < Duration::from_secs(20), "no read of api_keys reported in 20 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(2500)).await;
    key_reads(app).await
}

/// A gateway whose cached lookups last ten minutes, once its change listener has connected (connecting
/// empties the caches).
async fn spawn_with_lasting_cache(configure: impl FnOnce(&mut runaii_gateway::config::Settings)) -> TestApp {
    let app = spawn_app_with(|s| {
        s.key_cache_ms = 600_000;
        configure(s);
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    app
}

/// A key of the checksummed shape with random characters: its checksum is almost surely wrong.
fn made_up_key() -> String {
    let mut rng = rand::thread_rng();
    let public: String = (0..12).map(|_| char::from(b"0123456789abcdef"[rng.gen_range(0..16)])).collect();
    format!("rk-{public}-{}", Alphanumeric.sample_string(&mut rng, 46))
}

/// A key of the shape issued before the checksum: 48 lowercase hex digits of secret.
fn legacy_shaped_key() -> String {
    let mut rng = rand::thread_rng();
    let hex = |n: usize, rng: &mut rand::rngs::ThreadRng| -> String {
        (0..n).map(|_| char::from(b"0123456789abcdef"[rng.gen_range(0..16)])).collect()
    };
    let public = hex(12, &mut rng);
    format!("rk-{public}-{}", hex(48, &mut rng))
}

async fn account_status(base: &str, key: &str) -> u16 {
    client().get(format!("{base}/v1/account")).bearer_auth(key).send().await.unwrap().status().as_u16()
}

#[tokio::test]
async fn made_up_keys_cost_no_database_read_and_an_unknown_old_shaped_key_costs_one() {
    let app = spawn_with_lasting_cache(|_| {}).await;
    // One read to know the statistics are flowing, and where they stand.
    assert_eq!(account_status(&app.base, &app.key).await, 200);
    let before = settled_reads_above(&app, 0).await;

    for _ in 0..500 {
        let key = made_up_key();
        assert!(runaii_gateway::auth::parse(&key).is_none(), "a random checksum that verified: {key}");
        assert_eq!(account_status(&app.base, &key).await, 401);
    }
    // The control: one unknown key of the old shape, sent 50 times, is read once (the negative cache).
    let unknown = legacy_shaped_key();
    for _ in 0..50 {
        assert_eq!(account_status(&app.base, &unknown).await, 401);
    }
    let after = settled_reads_above(&app, before).await;
    assert_eq!(after - before, 1, "500 made-up keys and 50 tries of one unknown old-shaped key read api_keys {} times", after - before);
}

#[tokio::test]
async fn keys_issued_before_the_checksum_still_work() {
    let app = spawn_app_with(|_| {}).await;
    let secret = "0123456789abcdef".repeat(3);
    let public_id = "0a1b2c3d4e5f";
    sqlx::query("INSERT INTO api_keys (id, tenant_id, public_id, secret_hash, name) VALUES ($1, $2, $3, $4, 'old')")
        .bind(uuid::Uuid::now_v7())
        .bind(app.tenant_id)
        .bind(public_id)
        .bind(&runaii_gateway::auth::hash_secret(&secret)[..])
        .execute(&app.db)
        .await
        .unwrap();
    let old = format!("rk-{public_id}-{secret}");
    assert_eq!(account_status(&app.base, &old).await, 200);
    let wrong = format!("rk-{public_id}-{}", "f".repeat(48));
    assert_eq!(account_status(&app.base, &wrong).await, 401);
    // Today's keys carry the checksum.
    assert_eq!(runaii_gateway::auth::parse(&app.key).unwrap().shape, runaii_gateway::auth::Shape::Checked);
    assert_eq!(runaii_gateway::auth::parse(&old).unwrap().shape, runaii_gateway::auth::Shape::Legacy);
}

#[tokio::test]
async fn a_full_key_cache_evicts_the_least_recently_used_key_and_keeps_the_hot_one() {
    let app = spawn_with_lasting_cache(|s| s.key_cache_entries = std::num::NonZeroUsize::new(4).unwrap()).await;
    let others: Vec<String> = {
        let mut keys = Vec::new();
        for _ in 0..6 {
            keys.push(create_key(&app.db, &app.tenant).await);
        }
        keys
    };
    assert_eq!(account_status(&app.base, &app.key).await, 200);
    for key in &others {
        assert_eq!(account_status(&app.base, key).await, 200);
        assert_eq!(account_status(&app.base, &app.key).await, 200);
        // Unknown ids fill the other table, never this one.
        assert_eq!(account_status(&app.base, &legacy_shaped_key()).await, 401);
    }
    // Change the stored hashes behind the cache's back (no notification): a key answered from the cache
    // still works, one that was evicted is read again and refused.
    sqlx::query("UPDATE api_keys SET secret_hash = decode(repeat('00', 32), 'hex')").execute(&app.db).await.unwrap();
    assert_eq!(account_status(&app.base, &app.key).await, 200, "the hot key was evicted");
    assert_eq!(account_status(&app.base, &others[5]).await, 200, "a recent key was evicted");
    assert_eq!(account_status(&app.base, &others[0]).await, 401, "the least recently used key was kept past capacity");
}

/// A client whose connections come from `ip` (any 127.0.0.0/8 address reaches the gateway on 127.0.0.1).
fn client_from(ip: Ipv4Addr) -> reqwest::Client {
    reqwest::Client::builder().local_address(IpAddr::V4(ip)).timeout(Duration::from_secs(30)).build().unwrap()
}

#[tokio::test]
async fn repeated_failures_from_one_address_get_429_and_another_address_does_not() {
    let app = spawn_with_lasting_cache(|s| s.auth_failures_per_minute = std::num::NonZeroU32::new(5).unwrap()).await;
    let (guesser, neighbour) = (client_from(Ipv4Addr::new(127, 0, 0, 2)), client_from(Ipv4Addr::new(127, 0, 0, 3)));
    let account = format!("{}/v1/account", app.base);
    // The valid key is known to the replica before the guessing starts.
    assert_eq!(neighbour.get(&account).bearer_auth(&app.key).send().await.unwrap().status(), 200);

    for _ in 0..5 {
        assert_eq!(guesser.get(&account).bearer_auth(made_up_key()).send().await.unwrap().status(), 401);
    }
    let limited = guesser.get(&account).bearer_auth(legacy_shaped_key()).send().await.unwrap();
    assert_eq!(limited.status(), 429);
    let wait: u64 = limited.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait), "retry-after {wait}");
    let body: Value = limited.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_many_failed_authentications", "{body}");
    // In Anthropic's dialect on its route.
    let messages = guesser
        .post(format!("{}/v1/messages", app.base))
        .header("x-api-key", made_up_key())
        .header("anthropic-version", "2023-06-01")
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(messages.status(), 429);
    let body: Value = messages.json().await.unwrap();
    assert_eq!((body["type"].as_str(), body["error"]["type"].as_str()), (Some("error"), Some("rate_limit_error")), "{body}");
    // A key the replica already knows still works from the limited address.
    assert_eq!(guesser.get(&account).bearer_auth(&app.key).send().await.unwrap().status(), 200);

    // Another address keeps its own allowance.
    assert_eq!(neighbour.get(&account).bearer_auth(made_up_key()).send().await.unwrap().status(), 401);
    assert_eq!(neighbour.get(&account).bearer_auth(&app.key).send().await.unwrap().status(), 200);
}
