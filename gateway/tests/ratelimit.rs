//! Per-key rate limits on real Redis: requests and tokens per minute, the OpenAI headers, and what
//! happens while Redis is down (fail-closed and fail-open) and after it comes back.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{spawn_app, spawn_app_with, MODEL};
use runaii_gateway::ratelimit::RedisFailure;
use serde_json::{json, Value};

fn tiny() -> Value {
    json!({"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "temperature": 0})
}

async fn set_limits(app: &common::TestApp, rpm: Option<i32>, tpm: Option<i32>) {
    sqlx::query("UPDATE api_keys SET rpm_limit = $1, tpm_limit = $2").bind(rpm).bind(tpm).execute(&app.db).await.unwrap();
    // The key cache lives 300 ms in tests.
    tokio::time::sleep(Duration::from_millis(400)).await;
}

fn header(r: &reqwest::Response, name: &str) -> Option<String> {
    r.headers().get(name).map(|v| v.to_str().unwrap().to_owned())
}

#[tokio::test]
async fn requests_per_minute_are_enforced_with_openai_headers() {
    let app = spawn_app().await;
    set_limits(&app, Some(2), None).await;
    let first = app.post("/v1/chat/completions", &tiny()).await;
    assert_eq!(first.status(), 200);
    assert_eq!(header(&first, "x-ratelimit-limit-requests").as_deref(), Some("2"));
    assert_eq!(header(&first, "x-ratelimit-remaining-requests").as_deref(), Some("1"));
    assert!(header(&first, "x-ratelimit-reset-requests").unwrap().ends_with('s'));
    assert!(header(&first, "x-ratelimit-limit-tokens").is_some());
    assert!(header(&first, "x-ratelimit-remaining-tokens").is_some());
    assert!(header(&first, "x-request-id").is_some());
    let second = app.post("/v1/chat/completions", &tiny()).await;
    assert_eq!(second.status(), 200);
    assert_eq!(header(&second, "x-ratelimit-remaining-requests").as_deref(), Some("0"));

    let third = app.post("/v1/chat/completions", &tiny()).await;
    assert_eq!(third.status(), 429);
    let retry: u64 = header(&third, "retry-after").unwrap().parse().unwrap();
    assert!((1..=30).contains(&retry), "one request refills in 30 s at 2/min: {retry}");
    assert!(header(&third, "retry-after-ms").is_some());
    assert!(header(&third, "x-request-id").is_some());
    let body: Value = third.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");
    assert_eq!(body["error"]["type"], "requests");
    assert_eq!(app.cost_rows().await.len(), 2, "a refused request is neither run nor recorded");
}

#[tokio::test]
async fn tokens_per_minute_hold_back_a_key_in_debt() {
    let app = spawn_app().await;
    set_limits(&app, None, Some(20)).await;
    let first = app.post("/v1/chat/completions", &tiny()).await;
    assert_eq!(first.status(), 200);
    let body: Value = first.json().await.unwrap();
    assert!(body["usage"]["total_tokens"].as_u64().unwrap() > 20, "the prompt alone exceeds 20 tokens");
    // No pause: the first request's tokens go to Redis with the key's next admission, in the same call.
    let second = app.post("/v1/chat/completions", &tiny()).await;
    assert_eq!(second.status(), 429);
    assert_eq!(header(&second, "x-ratelimit-remaining-tokens").as_deref(), Some("0"));
    let body: Value = second.json().await.unwrap();
    assert_eq!(body["error"]["type"], "tokens");
}

#[tokio::test]
async fn another_replica_sees_a_key_s_tokens_within_the_flush_interval() {
    let app = spawn_app().await;
    let other = common::spawn_replica(&app, |_| {}).await;
    set_limits(&app, None, Some(20)).await;
    let first = app.post("/v1/chat/completions", &tiny()).await;
    assert_eq!(first.status(), 200);
    // Nothing more on the first replica: its flusher sends the tokens on their own within 200 ms.
    tokio::time::sleep(runaii_gateway::ratelimit::SPEND_FLUSH * 2).await;
    let second = common::client().post(format!("{other}/v1/chat/completions")).bearer_auth(&app.key).json(&tiny()).send().await.unwrap();
    assert_eq!(second.status(), 429, "the other replica admitted a key in debt");
    let body: Value = second.json().await.unwrap();
    assert_eq!(body["error"]["type"], "tokens");
}

/// A private redis-server on its own port, so stopping it touches nothing else.
struct PrivateRedis {
    port: u16,
    child: Option<Child>,
}

impl PrivateRedis {
    fn start(port: u16) -> Self {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server on PATH");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Self { port, child: Some(child) }
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn status_of(app: &common::TestApp) -> (u16, Value, Option<String>) {
    let r = app.post("/v1/chat/completions", &tiny()).await;
    let remaining = header(&r, "x-ratelimit-remaining-requests");
    (r.status().as_u16(), r.json().await.unwrap(), remaining)
}

#[tokio::test]
async fn redis_restarted_mid_run_fail_closed_then_recovers() {
    let mut redis = PrivateRedis::start(runaii_testkit::free_port());
    let url = redis.url();
    let app = spawn_app_with(|s| {
        s.redis_url = url.into();
        s.limits.on_redis_failure = RedisFailure::Closed;
    })
    .await;
    let (status, body, remaining) = status_of(&app).await;
    assert_eq!(status, 200, "{body}");
    assert!(remaining.is_some());

    redis.stop();
    let (status, body, _) = status_of(&app).await;
    assert_eq!(status, 503, "fail-closed refuses while Redis is down: {body}");
    assert_eq!(body["error"]["code"], "rate_limiter_unavailable");
    let rows = app.cost_rows().await;
    assert_eq!(rows.len(), 1, "the refusal ran nothing and costs nothing");

    let port = redis.port;
    let _redis = PrivateRedis::start(port);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (status, _, remaining) = status_of(&app).await;
        if status == 200 {
            assert!(remaining.is_some(), "limits are checked again");
            break;
        }
        assert!(Instant::now() < deadline, "the gateway did not reconnect to Redis");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test]
async fn redis_down_fail_open_serves_without_limits() {
    let mut redis = PrivateRedis::start(runaii_testkit::free_port());
    let url = redis.url();
    let app = spawn_app_with(|s| {
        s.redis_url = url.into();
        s.limits.on_redis_failure = RedisFailure::Open;
    })
    .await;
    redis.stop();
    let started = Instant::now();
    let (status, body, remaining) = status_of(&app).await;
    assert_eq!(status, 200, "fail-open serves: {body}");
    assert!(remaining.is_none(), "the remaining budget is unknown, so it is not invented");
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(app.cost_rows().await.len(), 1, "and still bills");
}
