//! Trust boundaries around workers (issue 12): only signed announcements are routed to, customer errors
//! never name internal hosts, an answer about one request never takes a worker out of rotation for
//! everyone else, and the registry costs O(workers) however many keys Redis holds.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{client, configure_worker, invoice_request, spawn_app, spawn_app_with, stand_in_worker, start_worker, MODEL};
use futures::StreamExt;
use redis::AsyncCommands;
use runaii_wire::announcement::{self, WorkerStatus, REGISTRY_KEY};
use runaii_wire::worker_auth::WorkerSecrets;
use serde_json::{json, Value};

async fn redis() -> redis::aio::MultiplexedConnection {
    redis::Client::open("redis://127.0.0.1:6379").unwrap().get_multiplexed_async_connection().await.unwrap()
}

/// A TCP listener that counts the connections made to it and never answers: where a forged
/// announcement would send a customer's prompt.
async fn eavesdropper() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            drop(socket);
        }
    });
    (url, seen)
}

fn rejected(reason: &str) -> u64 {
    runaii_gateway::metrics::global().announcements_rejected.get(&[reason])
}

#[tokio::test]
async fn forged_announcements_get_no_prompts_and_are_counted() {
    let app = spawn_app().await;
    let (url, seen) = eavesdropper().await;
    let mut redis = redis().await;
    let busy_free = WorkerStatus { url: url.clone(), model: MODEL.into(), slots: 999, slots_busy: 0, queue_depth: 0 };
    // The reproduction: a plain status under the old per-worker key ...
    let old_key = format!("runaii:worker:{MODEL}:x");
    let _: () = redis.set_ex(&old_key, serde_json::to_string(&busy_free).unwrap(), 30).await.unwrap();
    // ... an unsigned one in the registry hash, and one signed with a secret the fleet does not hold.
    let plain_field = announcement::field(MODEL, &url);
    let _: () = redis.hset(REGISTRY_KEY, &plain_field, serde_json::to_string(&busy_free).unwrap()).await.unwrap();
    let stranger = WorkerSecrets::load(None, Some(&"someone-elses-secret-of-thirty-two-bytes".into())).unwrap();
    let (forged_url, forged_seen) = eavesdropper().await;
    let forged_field = announcement::field(MODEL, &forged_url);
    let forged_status = WorkerStatus { url: forged_url.clone(), ..busy_free.clone() };
    let forged = announcement::seal(&stranger, forged_status, announcement::now_ms() + 30_000);
    let _: () = redis.hset(REGISTRY_KEY, &forged_field, forged).await.unwrap();
    let (malformed_before, bad_signature_before) = (rejected("malformed"), rejected("bad_signature"));
    tokio::time::sleep(Duration::from_millis(600)).await; // three refreshes of the gateway's view

    for _ in 0..4 {
        let (status, body, _) = app.post_json("/v1/chat/completions", &invoice_request()).await;
        assert_eq!(status, 200, "served by the real worker: {body}");
    }
    let _: () = redis.del(&old_key).await.unwrap();
    let _: () = redis.hdel(REGISTRY_KEY, &[&plain_field, &forged_field]).await.unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), 0, "an unsigned announcement received a customer request");
    assert_eq!(forged_seen.load(Ordering::SeqCst), 0, "an announcement signed with another secret received a request");
    assert!(rejected("malformed") > malformed_before, "the unsigned announcement is counted");
    assert!(rejected("bad_signature") > bad_signature_before, "the forged signature is counted");
    // Every record was billed at the real worker's usage, never at a listener's zero.
    for row in app.cost_rows().await {
        assert!(row.2 > 0 && row.3 > 0, "billed from the real worker's usage: {row:?}");
    }
}

#[tokio::test]
async fn a_worker_that_dies_is_not_named_to_the_customer() {
    // Probed once at start, then not again: the gateway still believes in the worker when it is gone.
    let app = spawn_app_with(|s| s.probe_ms = 3_600_000).await;
    let model = format!("doomed-{}", uuid::Uuid::now_v7().simple());
    let worker = start_worker(&["--model-id", &model]);
    let port = worker.url.rsplit(':').next().unwrap().to_owned();
    let price = |s: &str| s.parse().unwrap();
    app.upsert_model(&model, (price("0.1"), price("0.3")), None).await;
    configure_worker(&app, &model, &worker.url).await;
    let mut req = invoice_request();
    req["model"] = json!(model);
    worker.kill();
    let (status, body, request_id) = app.post_json("/v1/chat/completions", &req).await;
    assert_eq!(status, 502, "{body}");
    assert_eq!(body["error"]["code"], "upstream_error");
    let message = body["error"]["message"].as_str().unwrap();
    for internal in ["127.0.0.1", "localhost", port.as_str(), "http://"] {
        assert!(!message.contains(internal), "the error names an internal host ({internal}): {message}");
    }
    assert!(!body.to_string().contains(&port), "no internal port anywhere in the body: {body}");
    assert!(!request_id.is_empty(), "the request id ties the error to the logged detail");
}

/// A stand-in worker that answers its first chat request with a 500 about that request, and every
/// later one with a valid completion. A real worker cannot be made to fail one request on demand (the
/// schema cases that did so are fixed), so this is a fake at the process boundary, used only to test
/// what the gateway does with such an answer.
async fn worker_failing_once() -> (String, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let bearer = common::worker_bearer();
    let chat = axum::routing::post(move |headers: axum::http::HeaderMap| {
        let counter = Arc::clone(&counter);
        let bearer = bearer.clone();
        async move {
            assert_eq!(headers.get("authorization").unwrap().to_str().unwrap(), bearer, "a configured worker gets the static bearer");
            assert!(headers.contains_key(runaii_wire::request_signature::HEADER), "and every worker a signed request");
            if counter.fetch_add(1, Ordering::SeqCst) == 0 {
                let error = json!({"error": {"message": "the answer failed validation against the requested schema", "type": "server_error", "param": null, "code": "output_validation_failed"}});
                return (axum::http::StatusCode::INTERNAL_SERVER_ERROR, axum::Json(error));
            }
            let answer = json!({
                "id": "x", "object": "chat.completion", "created": 0, "model": "stand-in",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "{}"}, "finish_reason": "stop", "logprobs": null}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
            });
            (axum::http::StatusCode::OK, axum::Json(answer))
        }
    });
    (stand_in_worker("stand-in", chat).await, calls)
}

#[tokio::test]
async fn an_answer_about_one_request_does_not_take_the_worker_out() {
    // Probed only when ops change the catalog: nothing but the request path can change the view.
    let app = spawn_app_with(|s| s.probe_ms = 3_600_000).await;
    let (url, calls) = worker_failing_once().await;
    let price = |s: &str| s.parse().unwrap();
    app.upsert_model("stand-in", (price("0.1"), price("0.3")), None).await;
    configure_worker(&app, "stand-in", &url).await;
    let req = json!({"model": "stand-in", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4});
    let (status, body, _) = app.post_json("/v1/chat/completions", &req).await;
    assert_eq!(status, 502, "{body}");
    assert_eq!(calls.load(Ordering::SeqCst), 1, "sent once, not retried after the worker had the request");
    // Straight after, before any probe could restore it: the worker still serves everyone else.
    for _ in 0..3 {
        let (status, body, _) = app.post_json("/v1/chat/completions", &req).await;
        assert_eq!(status, 200, "one request's failure took the worker out of rotation: {body}");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 4);
}

/// A worker that answers with a redirect is not followed: the customer's prompt stays between the
/// gateway and the worker it chose, the request fails as the worker's failure, and it is recorded at no
/// cost. (Followed, as the HTTP client did by default, a 307 re-sent the prompt to the redirect's host,
/// and a 303 made the gateway fetch any address a worker named.) A real worker never redirects, so this is
/// a stand-in at the process boundary.
#[tokio::test]
async fn a_worker_redirect_is_not_followed() {
    let app = spawn_app_with(|s| s.probe_ms = 3_600_000).await;
    let (elsewhere, seen) = eavesdropper().await;
    for code in [307u16, 303] {
        let location = format!("{elsewhere}/v1/chat/completions");
        let chat =
            axum::routing::post(move || async move { (axum::http::StatusCode::from_u16(code).unwrap(), [("location", location)], "") });
        let model: &'static str = if code == 307 { "redirecting-307" } else { "redirecting-303" };
        let url = stand_in_worker(model, chat).await;
        let price = |s: &str| s.parse().unwrap();
        app.upsert_model(model, (price("0.1"), price("0.3")), None).await;
        configure_worker(&app, model, &url).await;
        let req = json!({"model": model, "messages": [{"role": "user", "content": "a secret prompt"}], "max_tokens": 4});
        let (status, body, request_id) = app.post_json("/v1/chat/completions", &req).await;
        assert_eq!(status, 502, "{code}: {body}");
        assert!(!body.to_string().contains(&elsewhere), "{code}: the redirect's target is not named: {body}");
        let rows = app.cost_rows().await;
        let row = rows.iter().find(|r| r.0 == request_id).unwrap_or_else(|| panic!("{code}: no record for {request_id}: {rows:?}"));
        assert_eq!((row.1.as_str(), row.4), ("failed", rust_decimal::Decimal::ZERO), "{code}: {row:?}");
    }
    assert_eq!(seen.load(Ordering::SeqCst), 0, "the gateway followed a worker's redirect");
}

/// The reproduction on the real worker: `oneOf` branches that overlap (every integer is a
/// number) used to pass the grammar as `anyOf`, fail the second layer with a 500, and take the worker
/// out for everyone. Now such a schema is refused before a token, the worker keeps serving, and a `oneOf`
/// whose branches can be told apart is enforced exactly.
#[tokio::test]
async fn an_ambiguous_one_of_is_refused_before_generating_and_harms_no_one() {
    let app = spawn_app().await;
    let with_schema = |schema: Value| {
        let mut req = invoice_request();
        req["response_format"] = json!({"type": "json_schema", "json_schema": {"name": "n", "schema": schema}});
        req["max_tokens"] = json!(40);
        req
    };
    let ambiguous = with_schema(
        json!({"type": "object", "properties": {"n": {"oneOf": [{"type": "integer"}, {"type": "number"}]}}, "required": ["n"]}),
    );
    for _ in 0..4 {
        let (status, body, _) = app.post_json("/v1/chat/completions", &ambiguous).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(body["error"]["code"], "upstream_rejected", "{body}");
        assert!(body["error"]["message"].as_str().unwrap().contains("oneOf"), "the refusal names the keyword: {body}");
    }
    let exclusive = json!({"type": "object", "properties": {"total": {"oneOf": [{"type": "number"}, {"type": "string", "maxLength": 12}]}},
                           "required": ["total"]});
    let (status, body, _) = app.post_json("/v1/chat/completions", &with_schema(exclusive.clone())).await;
    assert_eq!(status, 200, "the worker still serves, and an exclusive oneOf is enforced: {body}");
    let choice = &body["choices"][0];
    if choice["finish_reason"] == "stop" {
        let answer: Value = serde_json::from_str(choice["message"]["content"].as_str().unwrap()).unwrap();
        assert!(jsonschema::is_valid(&exclusive, &answer), "{answer}");
    }
    let refused: Vec<_> = app.cost_rows().await.into_iter().filter(|row| row.1 == "rejected").collect();
    assert_eq!(refused.len(), 4, "each refusal is recorded, at no cost");
    assert!(refused.iter().all(|row| row.4.is_zero()));
}

#[tokio::test]
async fn the_registry_does_not_scan_redis_however_many_keys_it_holds() {
    let mut redis = redis().await;
    let prefix = format!("runaii-test-junk:{}:", uuid::Uuid::now_v7().simple());
    // 300,000 unrelated keys in the same database, written in pipelined batches.
    for batch in 0..30 {
        let pairs: Vec<(String, u8)> = (0..10_000).map(|i| (format!("{prefix}{batch}:{i}"), 1)).collect();
        let _: () = redis.mset(&pairs).await.unwrap();
    }
    let app = spawn_app().await;
    let scans_before = scan_calls(&mut redis).await;
    for _ in 0..10 {
        let response = app
            .post("/v1/chat/completions", &json!({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}))
            .await;
        assert_eq!(response.status(), 200);
        // Rate limiting did not fail open on a timed-out Redis: its headers are there.
        assert!(response.headers().contains_key("x-ratelimit-remaining-requests"), "rate limit headers missing: Redis timed out?");
    }
    let scans = scan_calls(&mut redis).await - scans_before;
    for batch in 0..30 {
        let keys: Vec<String> = (0..10_000).map(|i| format!("{prefix}{batch}:{i}")).collect();
        let _: () = redis::cmd("UNLINK").arg(&keys).query_async(&mut redis).await.unwrap();
    }
    assert_eq!(scans, 0, "requests scanned the keyspace {scans} times");
}

/// How many SCAN commands the Redis server has run since its start.
async fn scan_calls(redis: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query_async(redis).await.unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_scan:calls="))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

/// The exposition names private models and sums revenue: on the public listener only staff read it; the
/// private listener serves Prometheus without a token.
#[tokio::test]
async fn only_staff_or_the_private_listener_read_metrics() {
    let app = spawn_app_with(|s| s.metrics_listen = Some("127.0.0.1:0".parse().unwrap())).await;
    let (status, body, _) = app.post_json("/v1/chat/completions", &invoice_request()).await;
    assert_eq!(status, 200, "{body}");
    let public = format!("{}/metrics", app.base);

    let anonymous = client().get(&public).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    let text = anonymous.text().await.unwrap();
    assert!(!text.contains(MODEL) && !text.contains("runaii_gateway_cost_usd_total"), "{text}");
    assert_eq!(client().get(&public).bearer_auth(&app.key).send().await.unwrap().status(), 401, "a customer's key is no admin token");
    let confined = common::admin_token(&["ops", "finance", "admin"], Some(app.tenant_id));
    assert_eq!(client().get(&public).bearer_auth(&confined).send().await.unwrap().status(), 403, "a tenant's token sees no fleet figures");
    let admin_only = common::admin_token(&["admin"], None);
    assert_eq!(client().get(&public).bearer_auth(&admin_only).send().await.unwrap().status(), 403);

    let ops = common::admin_token(&["ops"], None);
    let staff = client().get(&public).bearer_auth(&ops).send().await.unwrap();
    assert_eq!(staff.status(), 200);
    assert!(staff.text().await.unwrap().contains("runaii_gateway_cost_usd_total"));

    let private = app.metrics_base.as_deref().expect("a private listener was configured");
    let scrape = client().get(format!("{private}/metrics")).send().await.unwrap();
    assert_eq!(scrape.status(), 200);
    assert!(scrape
        .text()
        .await
        .unwrap()
        .contains(&format!("runaii_gateway_requests_total{{endpoint=\"chat.completions\",model=\"{MODEL}\"")));
    assert_eq!(
        client().get(format!("{private}/v1/models")).send().await.unwrap().status(),
        404,
        "the private listener serves metrics only"
    );
}

/// The reproduction: a client string equal to the old placeholder once took the cost's place.
/// Whatever the client writes, `usage.cost` is the ledger's number and the client's text stays text.
#[tokio::test]
async fn no_client_string_takes_the_place_of_the_cost() {
    let app = spawn_app().await;
    for placeholder in ["__runaii_exact_cost__", "\"__runaii_exact_cost__\""] {
        let request = json!({"model": MODEL, "input": "Say hi.", "max_output_tokens": 4, "instructions": placeholder});
        let (status, body, request_id) = app.post_json("/v1/responses", &request).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["instructions"], placeholder, "the client's text comes back as it was sent");
        let cost = body["usage"]["cost"].as_number().unwrap_or_else(|| panic!("usage.cost is not a number: {body}"));
        let recorded: rust_decimal::Decimal =
            sqlx::query_scalar("SELECT cost FROM cost_records WHERE request_id = $1").bind(&request_id).fetch_one(&app.db).await.unwrap();
        assert_eq!(cost.to_string().parse::<rust_decimal::Decimal>().unwrap(), recorded, "the answer's cost is the ledger's");
    }
}

/// Raw HTTP/1.1: the request head and `sent` bytes of a body announced as `length` bytes long; the
/// answer's first line and how long it took.
async fn answer_to_partial_body(app: &common::TestApp, path: &str, auth: Option<&str>, length: usize, sent: usize) -> (String, Duration) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = app.base.trim_start_matches("http://");
    let mut socket = tokio::net::TcpStream::connect(address).await.unwrap();
    let auth = auth.map(|a| format!("Authorization: Bearer {a}\r\n")).unwrap_or_default();
    let head =
        format!("POST {path} HTTP/1.1\r\nHost: {address}\r\n{auth}Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n");
    socket.write_all(head.as_bytes()).await.unwrap();
    socket.write_all(&vec![b' '; sent]).await.unwrap();
    let started = Instant::now();
    let mut answer = vec![0; 4096];
    let n = tokio::time::timeout(Duration::from_secs(20), socket.read(&mut answer)).await.expect("no answer at all").unwrap();
    let first = String::from_utf8_lossy(&answer[..n]).lines().next().unwrap_or_default().to_owned();
    (first, started.elapsed())
}

/// The body is read only after the credential is checked: a client without a valid key gets its 401
/// while its (large, slow) body is still on the wire, instead of the gateway buffering it first.
#[tokio::test]
async fn an_unauthenticated_body_is_never_read() {
    let app = spawn_app_with(|s| s.body_read_timeout_ms = 10_000).await;
    let cases = [
        ("/v1/chat/completions", None),
        ("/v1/chat/completions", Some("rk-000000000000-not-a-real-key")),
        ("/v1/responses", None),
        ("/v1/messages", None),
        ("/admin/v1/tenants", None),
        ("/admin/v1/tenants", Some("not-a-jwt")),
    ];
    for (path, auth) in cases {
        let (first, took) = answer_to_partial_body(&app, path, auth, 900_000, 1000).await;
        assert!(first.contains(" 401 "), "{path} {auth:?}: {first}");
        assert!(took < Duration::from_secs(5), "{path} {auth:?}: the answer waited {took:?} for a body it did not need");
    }
    // With a valid key the body is read, under the deadline.
    let (first, took) = answer_to_partial_body(&app, "/v1/chat/completions", Some(&app.key), 900_000, 1000).await;
    assert!(first.contains(" 408 "), "{first}");
    assert!(took >= Duration::from_secs(8), "cut at the body deadline, not before: {took:?}");
    assert!(app.cost_rows().await.is_empty());
}

/// A client that stops reading a stream is cut after the write timeout and billed for what it was
/// given. A socket with a tiny receive buffer stands for a client that reads nothing; a stand-in worker
/// that streams megabytes at once fills every buffer between them (the real model would need minutes).
#[tokio::test]
async fn a_client_that_stops_reading_is_cut_and_billed_for_what_it_got() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = spawn_app_with(|s| {
        s.probe_ms = 3_600_000;
        s.client_write_timeout_ms = 1000;
    })
    .await;
    let chunks = 2000;
    let url = worker_streaming_fast("firehose", chunks).await;
    let price = |s: &str| s.parse().unwrap();
    app.upsert_model("firehose", (price("0.1"), price("0.3")), None).await;
    configure_worker(&app, "firehose", &url).await;

    let body =
        json!({"model": "firehose", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4000, "stream": true}).to_string();
    let address: std::net::SocketAddr = app.base.trim_start_matches("http://").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(2048).unwrap();
    let mut socket = socket.connect(address).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        app.key,
        body.len()
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    socket.write_all(body.as_bytes()).await.unwrap();
    let mut first = vec![0; 512];
    let n = socket.read(&mut first).await.unwrap();
    assert!(String::from_utf8_lossy(&first[..n]).starts_with("HTTP/1.1 200"), "{}", String::from_utf8_lossy(&first[..n]));

    // Then nothing is read. The record comes once the gateway gives up on the client.
    let started = Instant::now();
    let row = loop {
        if let Some(row) = app.cost_rows().await.pop() {
            break row;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "a client that reads nothing still holds its stream open");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(row.1, "cancelled", "{row:?}");
    assert!(row.3 > 0 && row.3 < chunks, "billed for what was delivered, not the whole answer: {row:?}");
    drop(socket);
}

fn sse_chunk(content: &str, completion_tokens: i32) -> bytes::Bytes {
    let chunk = json!({"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
                       "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}],
                       "x_runaii_usage": {"prompt_tokens": 5, "completion_tokens": completion_tokens}});
    bytes::Bytes::from(format!("data: {chunk}\n\n"))
}

/// A stand-in worker that streams `chunks` chunks of 2 KB as fast as the connection takes them.
async fn worker_streaming_fast(model: &'static str, chunks: i32) -> String {
    let chat = axum::routing::post(move || async move {
        let text = "x".repeat(2048);
        let body = futures::stream::iter(1..=chunks).map(move |i| Ok::<_, std::io::Error>(sse_chunk(&text, i)));
        ([("content-type", "text/event-stream")], axum::body::Body::from_stream(body))
    });
    stand_in_worker(model, chat).await
}

/// A stand-in worker that starts its answer and then goes silent (headers and a first chunk, then
/// nothing, connection open): what a hung worker does. A real worker cannot be made to hang on demand.
async fn worker_going_silent(model: &'static str) -> String {
    let chat = axum::routing::post(|| async {
        let first = futures::stream::once(async { Ok::<_, std::io::Error>(sse_chunk("{", 1)) });
        ([("content-type", "text/event-stream")], axum::body::Body::from_stream(first.chain(futures::stream::pending())))
    });
    stand_in_worker(model, chat).await
}

#[tokio::test]
async fn a_worker_that_goes_silent_mid_answer_is_cut_at_the_idle_limit() {
    let app = spawn_app_with(|s| {
        s.probe_ms = 3_600_000;
        s.workers.worker_idle_timeout_ms = 1000;
    })
    .await;
    let url = worker_going_silent("silent").await;
    let price = |s: &str| s.parse().unwrap();
    app.upsert_model("silent", (price("0.1"), price("0.3")), None).await;
    configure_worker(&app, "silent", &url).await;

    // Streamed: the client gets one clean error event, soon.
    let request = json!({"model": "silent", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "stream": true});
    let started = Instant::now();
    let response = app.post("/v1/chat/completions", &request).await;
    assert_eq!(response.status(), 200);
    let text = tokio::time::timeout(Duration::from_secs(20), response.text()).await.expect("the stream never ended").unwrap();
    let events = runaii_testkit::sse_data(&text);
    let last: Value = serde_json::from_str(events.last().unwrap()).unwrap();
    assert_eq!(last["error"]["code"], "upstream_error", "{text}");
    assert!(!text.contains("127.0.0.1"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(10));

    // Whole: a 502 at the idle limit, not at the (300 s) headers limit.
    let mut whole = request.clone();
    whole["stream"] = json!(false);
    let started = Instant::now();
    let (status, body, _) = app.post_json("/v1/chat/completions", &whole).await;
    assert_eq!(status, 502, "{body}");
    assert!(started.elapsed() < Duration::from_secs(10));
    let rows = app.cost_rows().await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.iter().all(|r| r.1 == "failed"), "{rows:?}");
}
