//! Faults, each as it happens in production: a worker killed mid-stream, Postgres restarted under the
//! gateway, oversized and slow requests, and schema bombs. Every test checks what the client sees, what
//! the ledger holds, and that the stack serves normally afterwards.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{client, invoice_request, spawn_app, spawn_app_on, spawn_app_with, start_worker, TestApp, MODEL, TEST_CREDIT};
use futures::StreamExt;
use rust_decimal::Decimal;
use serde_json::{json, Value};

/// The tenant's balance as the ledger holds it.
async fn balance(app: &TestApp) -> Decimal {
    sqlx::query_scalar("SELECT balance FROM tenants WHERE id = $1").bind(app.tenant_id).fetch_one(&app.db).await.unwrap()
}

async fn is_ready(base: &str, model: &str) -> bool {
    let m: Value = client().get(format!("{base}/v1/models/{model}")).send().await.unwrap().json().await.unwrap();
    m["is_ready"] == true
}

async fn wait_until_ready(base: &str, model: &str, ready: bool, within: Duration) {
    let deadline = Instant::now() + within;
    while is_ready(base, model).await != ready {
        assert!(Instant::now() < deadline, "is_ready of {model} did not become {ready} within {within:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The exact price of a request on the test catalog's model (0.10 and 0.30 USD per million tokens).
fn price(input_tokens: i32, output_tokens: i32) -> Decimal {
    (Decimal::from(input_tokens) * Decimal::new(10, 2) + Decimal::from(output_tokens) * Decimal::new(30, 2)) / Decimal::from(1_000_000)
}

/// Chunks of a chat stream that carry answer text (the first one only names the role).
fn content_chunks(sse: &str) -> usize {
    let chunks = runaii_testkit::sse_data(sse).into_iter().filter_map(|d| serde_json::from_str::<Value>(&d).ok());
    chunks.filter(|c| c["choices"][0]["delta"]["content"].as_str().is_some_and(|t| !t.is_empty())).count()
}

#[tokio::test]
async fn worker_killed_mid_stream_bills_what_was_delivered_and_traffic_moves_on() {
    let app = spawn_app().await;
    let model = format!("doomed-{}", uuid::Uuid::now_v7().simple());
    let catalog_price = |s: &str| s.parse().unwrap();
    app.upsert_model(&model, (catalog_price("0.10"), catalog_price("0.30")), None).await;
    let announce = ["--model-id", model.as_str(), "--announce-redis-url", "redis://127.0.0.1:6379"];
    let doomed = start_worker(&announce);
    wait_until_ready(&app.base, &model, true, Duration::from_secs(30)).await;

    let mut request = runaii_testkit::long_answer_request(400, 600, true);
    request["model"] = json!(model);
    let response = client().post(format!("{}/v1/chat/completions", app.base)).bearer_auth(&app.key).json(&request).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    let mut text = String::new();
    let mut killed = false;
    while let Some(bytes) = body.next().await {
        text.push_str(&String::from_utf8_lossy(&bytes.unwrap()));
        if !killed && content_chunks(&text) >= 5 {
            doomed.kill();
            killed = true;
        }
    }
    assert!(killed, "the stream ended before five chunks: {text}");

    let events = runaii_testkit::sse_data(&text);
    let last: Value = serde_json::from_str(events.last().unwrap()).unwrap();
    assert_eq!(last["error"]["code"], "upstream_error", "the stream ends with one clean error: {text}");
    assert!(!events.iter().any(|e| e == "[DONE]"), "a broken answer is not presented as complete");
    let delivered = content_chunks(&text);

    let rows = app.cost_rows().await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    let (_, status, input_tokens, output_tokens, cost, _) = rows[0].clone();
    assert_eq!(status, "failed");
    assert!(input_tokens > 0);
    let delivered = i32::try_from(delivered).unwrap();
    assert!(output_tokens >= delivered && output_tokens < 600, "billed {output_tokens} tokens, {delivered} chunks delivered");
    assert_eq!(cost, price(input_tokens, output_tokens));
    assert_eq!(
        balance(&app).await,
        TEST_CREDIT.parse::<Decimal>().unwrap() - cost,
        "the hold is released, only the delivered tokens are paid"
    );

    wait_until_ready(&app.base, &model, false, Duration::from_secs(15)).await;
    let (status, body, _) = app
        .post_json("/v1/chat/completions", &json!({"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}))
        .await;
    assert_eq!((status, body["error"]["code"].as_str()), (503, Some("model_unavailable")), "{body}");

    let _survivor = start_worker(&announce);
    wait_until_ready(&app.base, &model, true, Duration::from_secs(30)).await;
    let (status, body, _) = app
        .post_json("/v1/chat/completions", &json!({"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}))
        .await;
    assert_eq!(status, 200, "the live worker serves: {body}");
}

/// A Postgres server of this test's own, so it can be stopped and started under a running gateway.
struct PrivatePostgres {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
}

impl PrivatePostgres {
    fn start() -> Self {
        let bin = postgres_bin_dir();
        let dir = std::env::temp_dir().join(format!("runaii-pg-{}", uuid::Uuid::now_v7().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        if running_as_root() {
            // initdb refuses to run as root: the cluster belongs to the postgres user.
            assert!(Command::new("chown").args(["postgres:postgres"]).arg(&dir).status().unwrap().success());
        }
        let pg = Self { bin, dir, port: runaii_testkit::free_port() };
        pg.run("initdb", &["-D", pg.dir.to_str().unwrap(), "-A", "trust", "-U", "postgres", "--no-sync"]);
        pg.up();
        pg
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}", self.port)
    }

    fn up(&self) {
        let options = format!("-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off", self.port, self.dir.display());
        let log = self.dir.join("server.log");
        self.run("pg_ctl", &["-D", self.dir.to_str().unwrap(), "-o", &options, "-l", log.to_str().unwrap(), "-w", "start"]);
    }

    fn down(&self) {
        self.run("pg_ctl", &["-D", self.dir.to_str().unwrap(), "-m", "fast", "-w", "stop"]);
    }

    fn run(&self, program: &str, args: &[&str]) {
        let program = self.bin.join(program);
        let mut command = if running_as_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&program);
            c
        } else {
            Command::new(&program)
        };
        let out = command.args(args).output().unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()));
        assert!(out.status.success(), "{} failed: {}", program.display(), String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let _ = Command::new(self.bin.join("pg_ctl")).args(["-D", self.dir.to_str().unwrap(), "-m", "immediate", "stop"]).output();
        if running_as_root() {
            let _ = Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(self.bin.join("pg_ctl"))
                .args(["-D", self.dir.to_str().unwrap(), "-m", "immediate", "stop"])
                .output();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn running_as_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

/// The newest Debian-installed server binaries, or whatever `initdb` is on the PATH.
fn postgres_bin_dir() -> PathBuf {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|dirs| dirs.filter_map(Result::ok).map(|d| d.path().join("bin")).filter(|b| b.join("initdb").exists()).collect())
        .unwrap_or_default();
    versions.sort_by_key(|b| b.parent().and_then(Path::file_name).and_then(|v| v.to_str()).and_then(|v| v.parse::<u32>().ok()));
    if let Some(newest) = versions.pop() {
        return newest;
    }
    let which = Command::new("sh").args(["-c", "command -v initdb"]).output().unwrap();
    let path = String::from_utf8_lossy(&which.stdout).trim().to_owned();
    assert!(!path.is_empty(), "PostgreSQL server binaries (initdb, pg_ctl) are needed: apt-get install -y postgresql");
    Path::new(&path).parent().unwrap().to_path_buf()
}

#[tokio::test]
async fn postgres_restart_answers_503_then_recovers_without_unbilled_work() {
    let pg = PrivatePostgres::start();
    let app = spawn_app_on(&pg.url(), |_| {}).await;
    let tiny = json!({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4});
    let (status, body, _) = app.post_json("/v1/chat/completions", &tiny).await;
    assert_eq!(status, 200, "{body}");

    pg.down();
    let mut served_while_down = 0;
    for _ in 0..5 {
        let started = Instant::now();
        let (status, body, _) = app.post_json("/v1/chat/completions", &tiny).await;
        assert_eq!(status, 503, "no ledger, no answer: {body}");
        assert_eq!(body["error"]["code"], "ledger_unavailable", "{body}");
        assert!(started.elapsed() < Duration::from_secs(10), "the 503 comes without hanging");
        served_while_down += usize::from(status == 200);
    }
    assert_eq!(served_while_down, 0);

    pg.up();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body, _) = app.post_json("/v1/chat/completions", &tiny).await;
        if status == 200 {
            break;
        }
        assert_eq!(status, 503, "{body}");
        assert!(Instant::now() < deadline, "the gateway did not recover after Postgres came back");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // The pool reconnects by itself: the test's own pool too, for the checks.
    let rows = app.cost_rows().await;
    assert_eq!(rows.len(), 2, "one record per served request and none for the refused ones: {rows:?}");
    assert!(rows.iter().all(|r| r.1 == "succeeded"));
    let spent: Decimal = rows.iter().map(|r| r.4).sum();
    assert_eq!(balance(&app).await, TEST_CREDIT.parse::<Decimal>().unwrap() - spent);
}

#[tokio::test]
async fn oversized_bodies_get_413_in_each_dialect_and_cost_nothing() {
    let app = spawn_app().await;
    let huge = "x".repeat(2 * 1024 * 1024);
    let chat = json!({"model": MODEL, "messages": [{"role": "user", "content": huge}]});
    let (status, body, _) = app.post_json("/v1/chat/completions", &chat).await;
    assert_eq!(status, 413);
    assert_eq!(body["error"]["code"], "payload_too_large", "{body}");

    let messages = json!({"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": huge}]});
    let response = app.post_as(&app.key, "/v1/messages", &messages, &[("anthropic-version", "2023-06-01")]).await;
    assert_eq!(response.status(), 413);
    let body: Value = response.json().await.unwrap();
    assert_eq!((body["type"].as_str(), body["error"]["type"].as_str()), (Some("error"), Some("request_too_large")), "{body}");

    assert!(app.cost_rows().await.is_empty());
    assert_eq!(balance(&app).await, TEST_CREDIT.parse::<Decimal>().unwrap());
}

#[tokio::test]
async fn a_client_that_stops_reading_delays_nobody_and_is_billed_once() {
    let app = spawn_app().await;
    let mut request = runaii_testkit::long_answer_request(20, 80, true);
    request["stream"] = json!(true);
    let slow = client().post(format!("{}/v1/chat/completions", app.base)).bearer_auth(&app.key).json(&request).send().await.unwrap();
    assert_eq!(slow.status(), 200);
    let mut slow = slow.bytes_stream();
    let first = slow.next().await.unwrap().unwrap();
    assert!(!first.is_empty());

    // The slow client reads nothing for a while; another client is served meanwhile.
    let (status, body, _) = app.post_json("/v1/chat/completions", &invoice_request()).await;
    assert_eq!(status, 200, "{body}");
    tokio::time::sleep(Duration::from_secs(2)).await;

    let mut rest = String::from_utf8_lossy(&first).into_owned();
    while let Some(bytes) = slow.next().await {
        rest.push_str(&String::from_utf8_lossy(&bytes.unwrap()));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let events = runaii_testkit::sse_data(&rest);
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"), "the slow client still gets the whole answer");
    let rows = app.cost_rows().await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.iter().all(|r| r.1 == "succeeded"));
}

#[tokio::test]
async fn a_body_that_never_finishes_arriving_is_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = spawn_app_with(|s| s.body_read_timeout_ms = 1000).await;
    let address = app.base.trim_start_matches("http://");
    let mut socket = tokio::net::TcpStream::connect(address).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"model\":",
        app.key
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(15), socket.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the gateway kept waiting for the body");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("request_timeout"), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(app.cost_rows().await.is_empty());
}

/// A body that keeps arriving, a byte every 200 ms, is still cut when the deadline counted from the
/// request's arrival passes (a timer restarted by every read would wait for all 1000 bytes: 200 s), with
/// 408 in each dialect's error shape.
#[tokio::test]
async fn a_body_that_trickles_in_steadily_is_cut_at_the_deadline() {
    let app = spawn_app_with(|s| s.body_read_timeout_ms = 1000).await;
    let chat = trickled(&app, "/v1/chat/completions", "").await;
    assert_eq!(chat["error"]["code"], "request_timeout", "{chat}");
    let messages = trickled(&app, "/v1/messages", "anthropic-version: 2023-06-01\r\n").await;
    assert_eq!(
        (messages["type"].as_str(), messages["error"]["type"].as_str()),
        (Some("error"), Some("invalid_request_error")),
        "{messages}"
    );
    assert!(app.cost_rows().await.is_empty());
}

/// Sends `path` a 1000-byte body one byte every 200 ms; the answer's JSON body, which must be a 408
/// within 5 s.
async fn trickled(app: &TestApp, path: &str, headers: &str) -> Value {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = app.base.trim_start_matches("http://");
    let socket = tokio::net::TcpStream::connect(address).await.unwrap();
    let (mut reader, mut writer) = socket.into_split();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {}\r\n{headers}Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n",
        app.key
    );
    writer.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let sender = tokio::spawn(async move {
        for _ in 0..1000 {
            if writer.write_all(b" ").await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    let text = loop {
        let n = tokio::time::timeout(Duration::from_secs(10), reader.read(&mut buf)).await.expect("no answer in 10 s").unwrap();
        assert!(n > 0, "closed without a whole answer: {}", String::from_utf8_lossy(&answer));
        answer.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&answer).into_owned();
        let Some((head, body)) = text.split_once("\r\n\r\n") else { continue };
        let length = head.lines().find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length: ").map(str::to_owned));
        if length.is_some_and(|l| body.len() >= l.trim().parse::<usize>().unwrap()) {
            break text;
        }
    };
    sender.abort();
    let took = started.elapsed();
    assert!(text.starts_with("HTTP/1.1 408"), "{path}: {text}");
    assert!(took < Duration::from_secs(5), "{path}: answered after {took:?}");
    serde_json::from_str(text.split_once("\r\n\r\n").unwrap().1).unwrap()
}

/// `levels` of nested anyOf written out in full: 2^levels leaves.
fn nested_any_of(levels: usize) -> Value {
    let mut s = json!({"type": "string"});
    for _ in 0..levels {
        s = json!({"anyOf": [{"type": "array", "items": s.clone()}, {"type": "object", "properties": {"a": s}}]});
    }
    s
}

fn with_schema(schema: Value) -> Value {
    json!({
        "model": MODEL,
        "messages": [{"role": "user", "content": "Answer."}],
        "max_tokens": 16,
        "response_format": {"type": "json_schema", "json_schema": {"name": "bomb", "schema": schema}}
    })
}

#[tokio::test]
async fn schema_bombs_get_a_fast_400_and_leave_the_worker_serving() {
    let app = spawn_app_with(|s| s.max_body_bytes = 16 * 1024 * 1024).await;
    let enum_values: Vec<Value> = (0..20_000).map(|i| json!(format!("value-{i}"))).collect();
    let all_of_any_of: Vec<Value> = (0..24)
        .map(|i| json!({"anyOf": [{"type": "object", "properties": {format!("a{i}"): {"type": "string"}}, "required": [format!("a{i}")]},
                                   {"type": "object", "properties": {format!("b{i}"): {"type": "integer"}}, "required": [format!("b{i}")]}]}))
        .collect();
    let mut tools_bomb = runaii_testkit::weather_request(&json!("auto"), false);
    tools_bomb["tools"][0]["function"]["parameters"] = json!({"type": "object", "properties": {"x": nested_any_of(15)}});
    let cases = [
        ("exponential anyOf", with_schema(nested_any_of(15)), "schema_too_complex"),
        (
            "minItems 1e9",
            with_schema(json!({"type": "array", "items": {"type": "integer"}, "minItems": 1_000_000_000})),
            "schema_too_complex",
        ),
        ("minLength 1e9", with_schema(json!({"type": "string", "minLength": 1_000_000_000})), "schema_too_complex"),
        ("huge enum", with_schema(json!({"enum": enum_values})), "schema_too_complex"),
        ("allOf of anyOf", with_schema(json!({"allOf": all_of_any_of})), "upstream_rejected"),
        ("tool parameters", tools_bomb, "schema_too_complex"),
    ];
    for (name, body, code) in cases {
        let started = Instant::now();
        let (status, answer, _) = app.post_json("/v1/chat/completions", &body).await;
        // Not a speed target: a bound far above a refusal's milliseconds that catches a compile that runs away.
        assert!(started.elapsed() < Duration::from_secs(10), "{name}: refused after {:?}", started.elapsed());
        assert_eq!(status, 400, "{name}: {answer}");
        assert_eq!(answer["error"]["code"], code, "{name}: {answer}");
    }

    // 10,000 levels of nesting, as raw text: refused by the JSON parser's depth limit.
    let deep = format!("{}{}", "{\"items\":".repeat(10_000), "}".repeat(10_000));
    let raw = format!(
        r#"{{"model":"{MODEL}","messages":[{{"role":"user","content":"x"}}],"response_format":{{"type":"json_schema","json_schema":{{"name":"deep","schema":{deep}}}}}}}"#
    );
    let started = Instant::now();
    let response = client()
        .post(format!("{}/v1/chat/completions", app.base))
        .bearer_auth(&app.key)
        .header("content-type", "application/json")
        .body(raw)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert!(started.elapsed() < Duration::from_secs(10));

    // The worker, asked directly, refuses the bomb itself.
    let bomb = serde_json::to_vec(&with_schema(nested_any_of(15))).unwrap();
    let direct = client()
        .post(format!("{}/v1/chat/completions", common::worker().url))
        .header(runaii_wire::request_signature::HEADER, runaii_testkit::worker_signature("POST", "/v1/chat/completions", "", "", &bomb))
        .header("content-type", "application/json")
        .body(bomb)
        .send()
        .await
        .unwrap();
    assert_eq!(direct.status(), 400);
    let direct: Value = direct.json().await.unwrap();
    assert_eq!(direct["error"]["code"], "grammar_rejected", "{direct}");

    let health = client().get(format!("{}/health", common::worker().url)).send().await.unwrap();
    assert_eq!(health.status(), 200, "the worker is unharmed");
    let (status, body, _) = app.post_json("/v1/chat/completions", &invoice_request()).await;
    assert_eq!(status, 200, "{body}");
    let charged: Vec<_> = app.cost_rows().await.into_iter().filter(|r| r.4 > Decimal::ZERO).collect();
    assert_eq!(charged.len(), 1, "only the real request costs anything: {charged:?}");
}
