//! Prompt caching, gateway side (issue 15): the catalog's cached-input price, cached tokens billed at it
//! exactly, recorded in their own column, reported in each dialect's usage (whole and streamed), and
//! shown in finance's exports and totals.
//!
//! Two kinds of worker serve these tests:
//! - the real worker on the real model, for what it reports today and after its prefix cache lands: the
//!   record and the answer agree on the cached count, and the cost is the formula for whatever came back;
//!   the `#[ignore]`d test requires a cache hit and is for after the worker's prefix cache is merged;
//! - a stand-in worker at the process boundary that reports a fixed cached count, because until then no
//!   real worker reports one: it drives the gateway's own arithmetic and shapes with cached tokens > 0.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{admin_token, client, spawn_app, wait_ready, TestApp, MODEL};
use reqwest::Method;
use runaii_testkit::sse_data;
use rust_decimal::Decimal;
use serde_json::{json, Value};

fn d(text: &str) -> Decimal {
    text.parse().unwrap()
}

/// The catalog's prices of a model: (input, cached input, output), USD per million tokens.
type Prices = (Decimal, Decimal, Decimal);

fn formula((input_price, cached_price, output_price): Prices, input: i64, cached: i64, output: i64) -> Decimal {
    (Decimal::from(input - cached) * input_price + Decimal::from(cached) * cached_price + Decimal::from(output) * output_price)
        / Decimal::from(1_000_000)
}

/// The last `"cost":` number of a body, read from its text with every digit (a float would round it).
fn raw_cost(text: &str) -> Decimal {
    let at = text.rfind("\"cost\":").unwrap_or_else(|| panic!("no cost in {text}")) + "\"cost\":".len();
    let digits: String = text[at..].chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
    d(&digits)
}

/// A record's (status, input, cached, output, cost).
async fn record(app: &TestApp, request_id: &str) -> (String, i64, i64, i64, Decimal) {
    let (status, input, cached, output, cost): (String, i32, i32, i32, Decimal) =
        sqlx::query_as("SELECT status, input_tokens, cached_tokens, output_tokens, cost FROM cost_records WHERE request_id = $1")
            .bind(request_id)
            .fetch_one(&app.db)
            .await
            .unwrap_or_else(|e| panic!("no record for {request_id}: {e}"));
    (status, input.into(), cached.into(), output.into(), cost)
}

/// Sets the model's cached-input price through the admin API and waits until this replica serves it.
async fn set_cached_price(app: &TestApp, model: &str, price: &str) {
    let token = admin_token(&["ops"], None);
    let (status, body) =
        app.admin(Method::PATCH, &format!("/admin/v1/models/{model}"), &token, Some(&json!({"cached_input_price_per_mtok": price}))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(d(body["cached_input_price_per_mtok"].as_str().unwrap()), d(price));
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let m: Value = client().get(format!("{}/v1/models/{model}", app.base)).send().await.unwrap().json().await.unwrap();
        if m["pricing"]["cached_input_per_million_tokens"].as_str().is_some_and(|p| d(p) == d(price)) {
            return;
        }
        assert!(Instant::now() < deadline, "the gateway did not serve the new cached price: {m}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What one request's answer said about its tokens: (input, cached, output) in chat terms, and the cost.
#[derive(Debug)]
struct Told {
    request_id: String,
    input: i64,
    cached: i64,
    output: i64,
    cost: Decimal,
}

/// Sends `body` to `path` and reads the usage the dialect reported, whole or streamed, checking on the way
/// that each dialect says it in its own words.
async fn ask(app: &TestApp, path: &str, body: &Value) -> Told {
    let response = app.post(path, body).await;
    let status = response.status();
    let request_id = response.headers()["x-request-id"].to_str().unwrap().to_owned();
    let text = response.text().await.unwrap();
    assert_eq!(status, 200, "{text}");
    let streamed = body["stream"] == true;
    let usage: Value = match (path, streamed) {
        (_, false) => serde_json::from_str::<Value>(&text).unwrap()["usage"].clone(),
        ("/v1/chat/completions", true) => {
            let data = sse_data(&text);
            assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
            serde_json::from_str::<Value>(&data[data.len() - 2]).unwrap()["usage"].clone()
        }
        ("/v1/responses", true) => {
            let last = sse_data(&text).pop().unwrap();
            serde_json::from_str::<Value>(&last).unwrap()["response"]["usage"].clone()
        }
        (_, true) => {
            let events: Vec<Value> = sse_data(&text).iter().map(|d| serde_json::from_str(d).unwrap()).collect();
            let start = &events.iter().find(|e| e["type"] == "message_start").unwrap()["message"]["usage"];
            let delta = events.iter().find(|e| e["type"] == "message_delta").unwrap()["usage"].clone();
            // message_start announces the prompt as the end does: the SDK's stream helper keeps both.
            for key in ["input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"] {
                assert_eq!(start[key], delta[key], "{key}: {text}");
            }
            delta
        }
    };
    let n = |v: &Value| v.as_i64().unwrap_or_else(|| panic!("not a count: {v} in {usage}"));
    let (input, cached, output) = match path {
        "/v1/chat/completions" => {
            (n(&usage["prompt_tokens"]), n(&usage["prompt_tokens_details"]["cached_tokens"]), n(&usage["completion_tokens"]))
        }
        "/v1/responses" => {
            assert_eq!(usage["input_tokens_details"]["cache_write_tokens"], 0);
            (n(&usage["input_tokens"]), n(&usage["input_tokens_details"]["cached_tokens"]), n(&usage["output_tokens"]))
        }
        _ => {
            // Anthropic's input_tokens leave the cache reads out.
            assert_eq!(usage["cache_creation_input_tokens"], 0);
            let cached = n(&usage["cache_read_input_tokens"]);
            (n(&usage["input_tokens"]) + cached, cached, n(&usage["output_tokens"]))
        }
    };
    Told { request_id, input, cached, output, cost: raw_cost(&text) }
}

/// The record holds what the answer said, and the cost is the formula at the catalog's prices.
async fn assert_billed_as_told(app: &TestApp, told: &Told, prices: Prices, what: &str) {
    let (status, input, cached, output, cost) = record(app, &told.request_id).await;
    assert_eq!(status, "succeeded", "{what}");
    assert_eq!((input, cached, output), (told.input, told.cached, told.output), "{what}: the record holds what the client was told");
    assert!(cached <= input, "{what}: cached tokens are part of the prompt");
    assert_eq!(cost, formula(prices, input, cached, output), "{what}: cost is the formula, exact");
    assert_eq!(told.cost, cost, "{what}: usage.cost is the record's cost, digit for digit");
}

/// Every dialect, whole and streamed, for `model`.
fn requests(model: &str, system: &str, user: &str) -> Vec<(&'static str, Value)> {
    let chat = json!({"model": model, "max_tokens": 8, "temperature": 0,
                      "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]});
    let responses = json!({"model": model, "max_output_tokens": 16, "temperature": 0, "instructions": system, "input": user});
    let messages = json!({"model": model, "max_tokens": 8, "temperature": 0, "system": system,
                          "messages": [{"role": "user", "content": user}]});
    let streamed = |mut body: Value| {
        body["stream"] = json!(true);
        body
    };
    let mut chat_stream = streamed(chat.clone());
    chat_stream["stream_options"] = json!({"include_usage": true});
    vec![
        ("/v1/chat/completions", chat),
        ("/v1/responses", responses.clone()),
        ("/v1/messages", messages.clone()),
        ("/v1/chat/completions", chat_stream),
        ("/v1/responses", streamed(responses)),
        ("/v1/messages", streamed(messages)),
    ]
}

// ---- the stand-in: cached tokens > 0 today ----

const PROMPT: u32 = 1000;
const CACHED: u32 = 800;

fn usage(completion_tokens: u32) -> Value {
    json!({"prompt_tokens": PROMPT, "completion_tokens": completion_tokens, "total_tokens": PROMPT + completion_tokens,
           "prompt_tokens_details": {"cached_tokens": CACHED}})
}

/// A worker that answers every request as a real one would with a cache hit of [`CACHED`] of [`PROMPT`]
/// tokens: the cached count on the whole answer, on every chunk's running usage and on the usage chunk.
/// With `hang`, a stream stops after its first words and stays open (a long answer, still running).
async fn worker_with_a_cache_hit(model: &'static str, hang: bool) -> String {
    let chat = axum::routing::post(move |axum::Json(request): axum::Json<Value>| async move {
        let message = json!({"role": "assistant", "content": "Hello there", "refusal": null});
        if request["stream"] != true {
            let answer = json!({"id": "x", "object": "chat.completion", "created": 0, "model": model, "system_fingerprint": null,
                                "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": "stop"}],
                                "usage": usage(2)});
            return axum::response::IntoResponse::into_response(axum::Json(answer));
        }
        let chunk = |delta: Value, finish: Value, completion: u32| {
            json!({"id": "x", "object": "chat.completion.chunk", "created": 0, "model": model,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], "x_runaii_usage": usage(completion)})
        };
        let mut events =
            vec![chunk(json!({"role": "assistant", "content": ""}), Value::Null, 0), chunk(json!({"content": "Hello"}), Value::Null, 1)];
        if !hang {
            events.extend([
                chunk(json!({"content": " there"}), Value::Null, 2),
                chunk(json!({}), json!("stop"), 2),
                json!({"id": "x", "object": "chat.completion.chunk", "created": 0, "model": model, "choices": [], "usage": usage(2)}),
            ]);
        }
        let mut text: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
        if !hang {
            text.push_str("data: [DONE]\n\n");
        }
        let first = futures::stream::once(async move { Ok::<_, std::io::Error>(bytes::Bytes::from(text)) });
        let body = if hang {
            axum::body::Body::from_stream(futures::StreamExt::chain(first, futures::stream::pending()))
        } else {
            axum::body::Body::from_stream(first)
        };
        axum::response::IntoResponse::into_response(([("content-type", "text/event-stream")], body))
    });
    common::stand_in_worker(model, chat).await
}

#[tokio::test]
async fn cached_tokens_are_billed_at_their_price_and_told_in_every_dialect() {
    let app = spawn_app().await;
    let model = "cache-hit";
    let url = worker_with_a_cache_hit(model, false).await;
    app.upsert_model(model, (d("0.10"), d("0.30")), Some(&url)).await;
    set_cached_price(&app, model, "0.025").await;
    wait_ready(&app, model).await;
    let prices = (d("0.10"), d("0.025"), d("0.30"));
    for (path, body) in requests(model, "Be brief.", "Say hello.") {
        let what = format!("{path} stream={}", body["stream"]);
        let told = ask(&app, path, &body).await;
        assert_eq!((told.input, told.cached, told.output), (i64::from(PROMPT), i64::from(CACHED), 2), "{what}");
        assert_billed_as_told(&app, &told, prices, &what).await;
        // (1000 − 800) × 0.10 + 800 × 0.025 + 2 × 0.30 = 40.6 per million.
        assert_eq!(told.cost, d("0.0000406"), "{what}");
    }

    // Finance sees them: the CSV has a cached_tokens column and the month's total sums it.
    let finance = admin_token(&["finance"], None);
    let month = chrono::Utc::now().format("%Y-%m").to_string();
    let csv = client()
        .get(format!("{}/admin/v1/cost-records?month={month}&tenant_id={}&format=csv", app.base, app.tenant_id))
        .bearer_auth(&finance)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no {name} column: {header:?}"));
    let (cached_col, input_col, cost_col) = (col("cached_tokens"), col("input_tokens"), col("cost"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 6);
    assert!(rows.iter().all(|r| r[cached_col] == "800" && r[input_col] == "1000"), "{csv}");
    let (status, totals) =
        app.admin(Method::GET, &format!("/admin/v1/monthly-totals?month={month}&tenant_id={}", app.tenant_id), &finance, None).await;
    assert_eq!(status, 200, "{totals}");
    let total = &totals["data"][0];
    assert_eq!((total["input_tokens"].as_i64(), total["cached_tokens"].as_i64()), (Some(6000), Some(4800)), "{total}");
    let csv_cost: Decimal = rows.iter().map(|r| d(r[cost_col])).sum();
    assert_eq!(d(total["cost"].as_str().unwrap()), csv_cost);
    // The key's account shows the month's cached tokens too.
    let account: Value = client().get(format!("{}/v1/account", app.base)).bearer_auth(&app.key).send().await.unwrap().json().await.unwrap();
    assert_eq!(account["usage"]["cached_tokens"], 4800, "{account}");
}

#[tokio::test]
async fn a_stream_the_client_leaves_is_billed_with_the_cached_count_it_was_running_with() {
    // The running usage carries the cached count from the first chunk: a client that takes the first
    // words and leaves is billed for those, its cached prompt tokens at their price.
    let app = spawn_app().await;
    let model = "cache-hit-left";
    let url = worker_with_a_cache_hit(model, true).await;
    app.upsert_model(model, (d("0.10"), d("0.30")), Some(&url)).await;
    set_cached_price(&app, model, "0").await;
    wait_ready(&app, model).await;
    let body = json!({"model": model, "max_tokens": 8, "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let mut response = app.post("/v1/chat/completions", &body).await;
    let request_id = response.headers()["x-request-id"].to_str().unwrap().to_owned();
    let mut seen = String::new();
    while !seen.contains("Hello") {
        seen.push_str(&String::from_utf8_lossy(&response.chunk().await.unwrap().unwrap()));
    }
    drop(response);
    let deadline = Instant::now() + Duration::from_secs(30);
    let row = loop {
        let row: Option<(String, i32, i32, i32, Decimal)> =
            sqlx::query_as("SELECT status, input_tokens, cached_tokens, output_tokens, cost FROM cost_records WHERE request_id = $1")
                .bind(&request_id)
                .fetch_optional(&app.db)
                .await
                .unwrap();
        if let Some(row) = row {
            break row;
        }
        assert!(Instant::now() < deadline, "no record for the stream the client left");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let (status, input, cached, output, cost) = row;
    assert_eq!((status.as_str(), input, cached, output), ("cancelled", 1000, 800, 1));
    assert_eq!(cost, formula((d("0.10"), d("0"), d("0.30")), 1000, 800, 1), "200 × 0.10 + 800 × 0 + 1 × 0.30 per million");
}

// ---- the catalog ----

#[tokio::test]
async fn the_cached_price_defaults_to_the_input_price_and_is_checked_like_the_others() {
    let app = spawn_app().await;
    let ops = admin_token(&["ops"], None);
    let create = |body: Value| {
        let app = &app;
        let ops = ops.clone();
        async move { app.admin(Method::POST, "/admin/v1/models", &ops, Some(&body)).await }
    };
    // Not given: the input price, so nothing is discounted unless ops say so.
    let (status, m) =
        create(json!({"id": "org/plain", "context_length": 2048, "input_price_per_mtok": "1.5", "output_price_per_mtok": "2"})).await;
    assert_eq!(status, 200, "{m}");
    assert_eq!(d(m["cached_input_price_per_mtok"].as_str().unwrap()), d("1.5"));
    // Given: kept exactly, and it may be above the input price.
    let (status, m) = create(json!({"id": "org/cheap", "context_length": 2048, "input_price_per_mtok": "1.5",
                                    "output_price_per_mtok": "2", "cached_input_price_per_mtok": "0.1234567891"}))
    .await;
    assert_eq!(status, 200, "{m}");
    assert_eq!(d(m["cached_input_price_per_mtok"].as_str().unwrap()), d("0.1234567891"));
    let (status, m) = create(json!({"id": "org/dear", "context_length": 2048, "input_price_per_mtok": "1",
                                    "output_price_per_mtok": "2", "cached_input_price_per_mtok": "3"}))
    .await;
    assert_eq!(status, 200, "{m}");
    // Refused as other prices are: negative, too many decimals (never rounded), too large.
    for bad in ["-0.01", "0.12345678901", "10000000000"] {
        let (status, e) = create(json!({"id": "org/bad", "context_length": 2048, "input_price_per_mtok": "1",
                                        "output_price_per_mtok": "2", "cached_input_price_per_mtok": bad}))
        .await;
        assert_eq!(status, 400, "{bad}: {e}");
        assert_eq!(e["error"]["param"], "cached_input_price_per_mtok", "{e}");
    }
    let patch = |id: &'static str, body: Value| {
        let app = &app;
        let ops = ops.clone();
        async move { app.admin(Method::PATCH, &format!("/admin/v1/models/{}", id.replace('/', "%2F")), &ops, Some(&body)).await }
    };
    let (status, e) = patch("org/plain", json!({"cached_input_price_per_mtok": "-1"})).await;
    assert_eq!((status, e["error"]["param"].as_str()), (400, Some("cached_input_price_per_mtok")), "{e}");
    // A new input price: a cached price that was the input price follows it; one set apart stays.
    let (_, m) = patch("org/plain", json!({"input_price_per_mtok": "2.5"})).await;
    assert_eq!(d(m["cached_input_price_per_mtok"].as_str().unwrap()), d("2.5"), "{m}");
    let (_, m) = patch("org/cheap", json!({"input_price_per_mtok": "2.5"})).await;
    assert_eq!(d(m["cached_input_price_per_mtok"].as_str().unwrap()), d("0.1234567891"), "{m}");
    let (_, m) = patch("org/cheap", json!({"cached_input_price_per_mtok": "0.5", "input_price_per_mtok": "0.5"})).await;
    assert_eq!(d(m["cached_input_price_per_mtok"].as_str().unwrap()), d("0.5"), "{m}");
    // /v1/models shows it per token and per million, exact.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let m: Value = client().get(format!("{}/v1/models/org%2Fcheap", app.base)).send().await.unwrap().json().await.unwrap();
        if m["pricing"]["cached_input_per_million_tokens"] == "0.5" {
            assert_eq!(m["pricing"]["input_cache_read"], "0.0000005", "{m}");
            break;
        }
        assert!(Instant::now() < deadline, "{m}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The audit log has the before and after of the cached price.
    let (_, audit) = app
        .admin(Method::GET, "/admin/v1/audit-log?target_type=model&target_id=org%2Fcheap&limit=100", &admin_token(&["admin"], None), None)
        .await;
    let changed = audit["data"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["action"] == "model.update" && e["after"]["cached_input_price_per_mtok"].as_str().is_some_and(|p| d(p) == d("0.5")));
    assert!(changed, "{audit}");
}

// ---- the real worker ----

/// A system prompt long enough that a worker's prefix cache matters (over 1,000 tokens).
fn long_system_prompt() -> String {
    let rules: Vec<String> = (1..=80)
        .map(|i| format!("Rule {i}: when a field numbered {i} is missing, write null and keep the other fields as found."))
        .collect();
    format!("You extract invoices into JSON.\n{}", rules.join("\n"))
}

#[tokio::test]
async fn the_real_worker_is_billed_for_whatever_cached_count_it_reports_by_the_formula() {
    // Whatever cached count the worker reports (0 on a cold slot, more once a prefix is cached), the
    // answer and the record say the same and the cost follows the formula.
    let app = spawn_app().await;
    set_cached_price(&app, MODEL, "0.025").await;
    let prices = (d("0.10"), d("0.025"), d("0.30"));
    let system = long_system_prompt();
    for (path, body) in requests(MODEL, &system, "Invoice #A-1024, total 420.00 USD.") {
        let what = format!("{path} stream={}", body["stream"]);
        let told = ask(&app, path, &body).await;
        assert!(told.input > 1000, "{what}: the prompt is long: {told:?}");
        assert_billed_as_told(&app, &told, prices, &what).await;
    }
}

#[tokio::test]
async fn a_repeated_long_prompt_is_read_from_the_cache_and_billed_at_the_cached_price() {
    let app = spawn_app().await;
    set_cached_price(&app, MODEL, "0.025").await;
    let prices = (d("0.10"), d("0.025"), d("0.30"));
    let system = long_system_prompt();
    for (path, body) in requests(MODEL, &system, "Invoice #A-1024, total 420.00 USD.") {
        let what = format!("{path} stream={}", body["stream"]);
        let first = ask(&app, path, &body).await;
        let again = ask(&app, path, &body).await;
        assert_billed_as_told(&app, &first, prices, &what).await;
        assert_billed_as_told(&app, &again, prices, &what).await;
        assert!(again.cached >= 1000, "{what}: the second request reuses the 1,000+ token prefix: {again:?}");
        assert!(again.cost < first.cost || first.cached >= again.cached, "{what}: a cache hit costs less: {first:?} {again:?}");
    }
}

#[tokio::test]
async fn one_tenant_never_reads_another_tenant_s_cached_prompt() {
    // Two tenants on the one shared worker. A prompt of their own (the id first), so no other test's
    // cache can match it.
    let (a, b) = (spawn_app().await, spawn_app().await);
    let system = format!("Case {}.\n{}", uuid::Uuid::now_v7(), long_system_prompt());
    let body = json!({"model": MODEL, "max_tokens": 8, "temperature": 0,
                      "messages": [{"role": "system", "content": system}, {"role": "user", "content": "Invoice #A-1024, total 420.00 USD."}]});
    let path = "/v1/chat/completions";
    let first = ask(&a, path, &body).await;
    assert_eq!(first.cached, 0, "{first:?}");
    let again = ask(&a, path, &body).await;
    assert!(again.cached >= 1000, "a tenant reuses its own prompt: {again:?}");
    // The neighbour sends the very same prompt: it must find nothing cached, or it would learn (from
    // cached_tokens, or from how soon it answers) what the first tenant sent.
    let neighbour = ask(&b, path, &body).await;
    assert_eq!(neighbour.cached, 0, "tenant b read tenant a's prompt from the worker's cache: {neighbour:?}");
    assert_eq!(neighbour.input, first.input);
}
