//! Work done that the customer did not receive in full, billed by one rule in every dialect
//! (docs/finance.md): ended on the customer's side (the client left, the request ran past its longest
//! time) → `cancelled`, billed for the work the worker did, as the worker tells it; ended by a fault of
//! ours (the worker failed, or its answer broke its own schema) → `failed`, billed for what the client
//! received. Chat completions, Responses and Messages, each against the real worker, except the invalid
//! answer, which a real worker cannot be made to produce (a stand-in at the process boundary sends it).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{client, configure_worker, spawn_app, spawn_app_with, stand_in_worker, TestApp, MODEL};
use futures::StreamExt as _;
use runaii_testkit::sse_data;
use rust_decimal::Decimal;
use serde_json::{json, Value};

const ENDPOINTS: [&str; 3] = ["/v1/chat/completions", "/v1/responses", "/v1/messages"];

/// A request in the endpoint's own dialect: a system text, a user text, an output limit, and optionally
/// a schema for the answer.
fn request(endpoint: &str, system: &str, user: &str, max_tokens: u32, schema: Option<&Value>, stream: bool) -> Value {
    let mut body = match endpoint {
        "/v1/chat/completions" => json!({"model": MODEL, "stream": stream, "max_tokens": max_tokens,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}),
        "/v1/responses" => {
            json!({"model": MODEL, "stream": stream, "max_output_tokens": max_tokens, "instructions": system, "input": user})
        }
        _ => json!({"model": MODEL, "stream": stream, "max_tokens": max_tokens, "system": system,
            "messages": [{"role": "user", "content": user}]}),
    };
    if let Some(schema) = schema {
        match endpoint {
            "/v1/chat/completions" => {
                body["response_format"] = json!({"type": "json_schema", "json_schema": {"name": "n", "schema": schema}})
            }
            "/v1/responses" => body["text"] = json!({"format": {"type": "json_schema", "name": "n", "schema": schema}}),
            _ => body["output_format"] = json!({"type": "json_schema", "schema": schema}),
        }
    }
    body
}

/// A record: (status, http status, error code, input, output, cost).
type Record = (String, i32, Option<String>, i32, i32, Decimal);

/// The request's record, once written (10 s at most).
async fn record(app: &TestApp, request_id: &str) -> Record {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let row: Option<Record> = sqlx::query_as(
            "SELECT status, http_status, error_code, input_tokens, output_tokens, cost FROM cost_records WHERE request_id = $1",
        )
        .bind(request_id)
        .fetch_optional(&app.db)
        .await
        .unwrap();
        if let Some(row) = row {
            return row;
        }
        assert!(Instant::now() < deadline, "no record for {request_id}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn open(app: &TestApp, endpoint: &str, body: &Value) -> (reqwest::Response, String) {
    let response = client().post(format!("{}{endpoint}", app.base)).bearer_auth(&app.key).json(body).send().await.unwrap();
    assert_eq!(response.status(), 200, "{endpoint}");
    let request_id = response.headers()["x-request-id"].to_str().unwrap().to_owned();
    (response, request_id)
}

/// A prompt of about 2,500 tokens no other request has sent (so no cache holds it): its reading takes
/// the worker a while.
fn long_prompt() -> String {
    let lines: Vec<String> =
        (1..=150).map(|i| format!("Line {i}: the ledger entry {i} was checked, and its amount kept as written.")).collect();
    format!("Case {}.\n{}", uuid::Uuid::now_v7(), lines.join("\n"))
}

#[tokio::test]
async fn a_client_that_leaves_before_the_first_content_is_billed_for_the_prompt_read() {
    let app = spawn_app().await;
    for endpoint in ENDPOINTS {
        let body = request(endpoint, &long_prompt(), "Summarise.", 40, None, true);
        let (response, request_id) = open(&app, endpoint, &body).await;
        // Nothing read: the worker is reading the prompt when the client goes.
        tokio::time::sleep(Duration::from_millis(400)).await;
        drop(response);
        let (status, http_status, code, input, output, cost) = record(&app, &request_id).await;
        assert_eq!((status.as_str(), http_status, code), ("cancelled", 499, None), "{endpoint}");
        assert!(input > 0, "{endpoint}: the prompt the worker read is billed ({input} input, {output} output)");
        assert!(cost > Decimal::ZERO, "{endpoint}");
    }
}

#[tokio::test]
async fn a_stream_cut_at_its_longest_time_is_billed_for_every_token_generated() {
    let app = spawn_app_with(|s| s.limits.max_request_s = 2).await;
    let schema = json!({"type": "array", "items": {"type": "integer"}, "minItems": 1500});
    for endpoint in ENDPOINTS {
        let body = request(endpoint, "List numbers.", "List numbers.", 3000, Some(&schema), true);
        let (response, request_id) = open(&app, endpoint, &body).await;
        // A client that reads slowly: by the cut it has taken only part of what the worker generated.
        let mut stream = response.bytes_stream();
        let mut text = String::new();
        while let Some(Ok(piece)) = stream.next().await {
            text.push_str(&String::from_utf8_lossy(&piece));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (status, http_status, code, input, output, cost) = record(&app, &request_id).await;
        assert_eq!((status.as_str(), http_status, code.as_deref()), ("cancelled", 504, Some("max_duration_exceeded")), "{endpoint}");
        assert!(input > 0 && output > 0 && cost > Decimal::ZERO, "{endpoint}: {input} in, {output} out, {cost}");
        let events = sse_data(&text);
        let told = |e: &String| e.contains("max_duration_exceeded") || e.contains("the longest a request may run");
        assert!(events.iter().any(told), "{endpoint}: the client is told why: {events:?}");
        // What the worker generated is billed, not only what the client took: never less than the
        // running count on the last content the client received.
        let seen = events.iter().filter_map(|e| serde_json::from_str::<Value>(e).ok()).filter_map(|e| output_count(endpoint, &e)).max();
        assert!(seen.is_none_or(|seen| i64::from(output) >= seen), "{endpoint}: billed {output}, the client saw {seen:?}");
    }
}

/// The output count an event tells, where the dialect tells one mid-stream.
fn output_count(endpoint: &str, event: &Value) -> Option<i64> {
    match endpoint {
        "/v1/messages" => event["usage"]["output_tokens"].as_i64(),
        _ => None,
    }
}

/// A stand-in for a worker whose answer broke its own schema after generating it: whole answers get its
/// 500; streams get two content chunks, then its error.
async fn worker_with_invalid_answers() -> String {
    let chat = axum::routing::post(|axum::Json(body): axum::Json<Value>| async move {
        let error = json!({"error": {"message": "the answer failed validation against the requested schema", "type": "server_error",
                                     "param": null, "code": "output_validation_failed"}});
        if body["stream"] != true {
            return (axum::http::StatusCode::INTERNAL_SERVER_ERROR, [("content-type", "application/json")], error.to_string());
        }
        let chunk = |content: &str, output: u32| {
            json!({"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "stand-in",
                   "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}],
                   "x_runaii_usage": {"prompt_tokens": 30, "completion_tokens": output, "total_tokens": 30 + output}})
        };
        let events = [chunk("{\"a\":", 4), chunk(" 1", 9), error];
        let text: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
        (axum::http::StatusCode::OK, [("content-type", "text/event-stream")], text)
    });
    stand_in_worker("stand-in", chat).await
}

#[tokio::test]
async fn an_answer_that_breaks_its_schema_is_ours_billed_for_what_the_client_received() {
    let app = spawn_app().await;
    let price = |s: &str| s.parse().unwrap();
    app.upsert_model("stand-in", (price("0.1"), price("0.3")), None).await;
    configure_worker(&app, "stand-in", &worker_with_invalid_answers().await).await;
    let schema = json!({"type": "object"});
    for endpoint in ENDPOINTS {
        let mut body = request(endpoint, "Be brief.", "Hi", 50, Some(&schema), false);
        body["model"] = json!("stand-in");
        let r = client().post(format!("{}{endpoint}", app.base)).bearer_auth(&app.key).json(&body).send().await.unwrap();
        assert_eq!(r.status(), 502, "{endpoint}");
        let request_id = r.headers()["x-request-id"].to_str().unwrap().to_owned();
        let (status, http_status, _, input, output, cost) = record(&app, &request_id).await;
        assert_eq!((status.as_str(), http_status, input, output, cost), ("failed", 502, 0, 0, Decimal::ZERO), "{endpoint}: whole");

        body["stream"] = json!(true);
        let (response, request_id) = open(&app, endpoint, &body).await;
        let text = response.text().await.unwrap();
        assert!(text.contains("upstream_error") || text.contains("api_error"), "{endpoint}: {text}");
        let (status, http_status, _, input, output, cost) = record(&app, &request_id).await;
        // Both chunks reached the client: 9 output tokens of the running count, and the prompt.
        assert_eq!((status.as_str(), http_status, input, output), ("failed", 502, 30, 9), "{endpoint}: stream");
        assert!(cost > Decimal::ZERO);
    }
}
