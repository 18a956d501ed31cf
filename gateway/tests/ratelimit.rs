//! Per-key rate limits on real Redis: requests and tokens per minute, the OpenAI headers, and what
//! happens while Redis is down (each replica's share from memory, fail-closed, fail-open) or fails
//! another use of it (the registry), and after it comes back.

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

/// Sends requests with a body that is not JSON from `clients` concurrent clients to `base` for `lasting`,
/// each client stopping early once it has been refused `refusals` times: each request is admitted or
/// refused by the limiter first (then answered 400, costing nothing). The statuses.
async fn burst(base: &str, key: &str, refusals: usize, clients: usize, lasting: Duration) -> Vec<u16> {
    let until = Instant::now() + lasting;
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (url, key) = (format!("{base}/v1/chat/completions"), key.to_owned());
        tasks.push(tokio::spawn(async move {
            let client = common::client();
            let (mut statuses, mut refused) = (Vec::new(), 0);
            while Instant::now() < until && refused < refusals {
                let r =
                    client.post(&url).bearer_auth(&key).header("content-type", "application/json").body("{not json").send().await.unwrap();
                refused += usize::from(r.status() == 429);
                statuses.push(r.status().as_u16());
            }
            statuses
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    all
}

#[tokio::test]
async fn a_busy_key_is_admitted_from_slices_not_one_redis_call_per_request() {
    let app = spawn_app().await;
    set_limits(&app, Some(100_000_000), None).await;
    let metrics = runaii_gateway::metrics::global();
    let calls_before = metrics.rate_limit_calls.get(&["admit"]);
    // For two seconds: the first quarter second is measured one call per request; after that a call
    // takes what the key was admitted in the quarter second before.
    let statuses = burst(&app.base, &app.key, usize::MAX, 4, Duration::from_secs(2)).await;
    let calls = metrics.rate_limit_calls.get(&["admit"]) - calls_before;
    assert!(statuses.iter().all(|s| *s == 400), "every request admitted, then refused as not JSON");
    // Other tests of this binary add a few calls of their own.
    assert!(calls * 3 < statuses.len() as u64, "{} admissions took {calls} Redis calls", statuses.len());
    assert!(app.cost_rows().await.is_empty());
}

#[tokio::test]
async fn slices_taken_by_two_replicas_never_admit_past_the_limit() {
    let app = spawn_app().await;
    let other = common::spawn_replica(&app, |_| {}).await;
    // 6,000 a minute: slices of up to 25 (what refills in 250 ms), 100 a second refilled. Both replicas
    // send as fast as they are answered until each client has been refused 20 times (or 60 s passed).
    set_limits(&app, Some(6000), None).await;
    let from_slices = || runaii_gateway::metrics::global().rate_limit_admissions.get(&["slice"]);
    let before = from_slices();
    let started = Instant::now();
    let lasting = Duration::from_secs(60);
    let (here, there) = tokio::join!(burst(&app.base, &app.key, 20, 4, lasting), burst(&other, &app.key, 20, 4, lasting));
    let elapsed = started.elapsed().as_secs_f64();
    let admitted = here.iter().chain(&there).filter(|s| **s == 400).count();
    let refused = here.iter().chain(&there).filter(|s| **s == 429).count();
    assert_eq!(admitted + refused, here.len() + there.len(), "only admissions (400: not JSON) and refusals");
    assert!(refused > 0, "the test asked for more than the limit: {admitted} admitted in {elapsed:.1} s");
    // The bucket holds 6,000 and refills 100 a second: no more can be taken, however it is sliced.
    let most = 6000.0 + 100.0 * elapsed;
    assert!((admitted as f64) <= most.ceil(), "{admitted} admitted in {elapsed:.1} s, at most {most:.0} allowed");
    // At most a slice per replica can be left unused when the bucket runs dry.
    assert!(admitted >= 6000 - 2 * 25, "{admitted} admitted of 6,000");
    assert!(from_slices() > before, "busy, the key was admitted from slices");
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

/// Sends `n` requests with a body that is not JSON, `every` apart: each is admitted (then answered 400,
/// costing nothing) or refused (429). The statuses, and whether each answer carried the remaining budget.
async fn spaced(base: &str, key: &str, n: usize, every: Duration) -> Vec<(u16, bool)> {
    let client = common::client();
    let mut seen = Vec::new();
    for _ in 0..n {
        let r = client
            .post(format!("{base}/v1/chat/completions"))
            .bearer_auth(key)
            .header("content-type", "application/json")
            .body("{not json")
            .send()
            .await
            .unwrap();
        seen.push((r.status().as_u16(), header(&r, "x-ratelimit-remaining-requests").is_some()));
        tokio::time::sleep(every).await;
    }
    seen
}

#[tokio::test]
async fn a_registry_that_cannot_read_redis_does_not_switch_the_limits_off() {
    let redis = PrivateRedis::start(runaii_testkit::free_port());
    // The workers' hash made unreadable: every refresh of the registry fails with WRONGTYPE.
    let client = redis::Client::open(redis.url()).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("SET").arg("runaii:{registry}:workers").arg("junk").query_async(&mut connection).await.unwrap();
    let url = redis.url();
    // The default answer to a Redis failure, and the test worker configured in Postgres (no announcements).
    let app = spawn_app_with(|s| s.redis_url = url.into()).await;
    set_limits(&app, Some(3), None).await;
    let seen = spaced(&app.base, &app.key, 10, Duration::from_millis(300)).await;
    let admitted = seen.iter().filter(|(status, _)| *status == 400).count();
    assert_eq!(admitted, 3, "a key limited to 3 a minute: {seen:?}");
    assert!(seen.iter().all(|(status, remaining)| *remaining && [400, 429].contains(status)), "every answer carries the budget: {seen:?}");
}

#[tokio::test]
async fn without_redis_each_replica_enforces_its_share_from_memory() {
    // Nothing listens on this port: Redis is unreachable from the start.
    let url = format!("redis://127.0.0.1:{}", runaii_testkit::free_port());
    let app = spawn_app_with(|s| s.redis_url = url.clone().into()).await;
    let other = common::spawn_replica(&app, |s| s.redis_url = url.clone().into()).await;
    set_limits(&app, Some(4), None).await;
    // Each replica counts the live ones at its heartbeat (500 ms in tests).
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let (here, there) =
        tokio::join!(spaced(&app.base, &app.key, 5, Duration::from_millis(50)), spaced(&other, &app.key, 5, Duration::from_millis(50)));
    for (replica, seen) in [("first", &here), ("second", &there)] {
        let admitted = seen.iter().filter(|(status, _)| *status == 400).count();
        assert_eq!(admitted, 2, "the {replica} replica admits half of 4 a minute: {seen:?}");
        assert!(seen.iter().all(|(_, remaining)| *remaining), "the share's budget is in the headers: {seen:?}");
    }
    let r = common::client().post(format!("{}/v1/chat/completions", app.base)).bearer_auth(&app.key).json(&tiny()).send().await.unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(header(&r, "x-ratelimit-limit-requests").as_deref(), Some("2"), "the share this replica enforces");
    let retry: u64 = header(&r, "retry-after").unwrap().parse().unwrap();
    assert!((1..=30).contains(&retry), "one request of a share of 2 a minute refills in 30 s: {retry}");
    assert!(app.cost_rows().await.is_empty(), "nothing ran");
}
