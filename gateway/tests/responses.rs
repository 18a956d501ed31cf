//! `POST /v1/responses` on the real stack.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{client, create_key, invoice_schema, spawn_app, TestApp, MODEL};
use serde_json::{json, Value};

fn invoice_response_request() -> Value {
    json!({
        "model": MODEL,
        "input": "Invoice #A-1024, due 2026-11-01, total 420.00 USD.",
        "instructions": "Extract the invoice fields.",
        "temperature": 0,
        "text": {"format": {"type": "json_schema", "name": "invoice", "strict": true, "schema": invoice_schema()}}
    })
}

#[tokio::test]
async fn json_schema_response_is_a_message_with_output_text_and_cost() {
    let app = spawn_app().await;
    let (status, body, request_id) = app.post_json("/v1/responses", &invoice_response_request()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "response");
    assert_eq!(body["status"], "completed");
    assert_eq!(body["id"], request_id);
    let item = &body["output"][0];
    assert_eq!(item["type"], "message");
    assert_eq!(item["role"], "assistant");
    let part = &item["content"][0];
    assert_eq!(part["type"], "output_text");
    let answer: Value = serde_json::from_str(part["text"].as_str().unwrap()).unwrap();
    assert!(jsonschema::is_valid(&invoice_schema(), &answer), "{answer}");
    let usage = &body["usage"];
    assert_eq!(usage["total_tokens"], usage["input_tokens"].as_u64().unwrap() + usage["output_tokens"].as_u64().unwrap());
    let rows = app.cost_rows().await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].0, request_id);
    assert_eq!(i64::from(rows[0].3), usage["output_tokens"].as_i64().unwrap());
    assert!(usage["cost"].as_f64().unwrap() > 0.0);
}

#[tokio::test]
async fn unknown_format_and_previous_response_are_refused() {
    let app = spawn_app().await;
    let mut bad = invoice_response_request();
    bad["text"]["format"] = json!({"type": "xml"});
    let (status, body, _) = app.post_json("/v1/responses", &bad).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["code"], "invalid_request");
    assert_eq!(body["error"]["param"], "text.format");
    let mut previous = invoice_response_request();
    previous["previous_response_id"] = json!("resp_123");
    let (status, body, _) = app.post_json("/v1/responses", &previous).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["code"], "previous_response_not_found");
    assert!(app.cost_rows().await.is_empty());
}

/// The seed contract's error names: every `text.format` problem is `invalid_request` on `text.format`
/// (a bad name, a schema that is not an object or not valid), and what runaii does not honour is refused
/// by name, never ignored.
#[tokio::test]
async fn format_problems_and_unhonoured_parameters_are_named() {
    let app = spawn_app().await;
    for format in [
        json!({"type": "json_schema", "name": "not a name", "schema": {"type": "object"}}),
        json!({"type": "json_schema", "name": "invoice", "schema": "object"}),
        json!({"type": "json_schema", "name": "invoice", "schema": {"type": "object", "properties": 7}}),
        json!({"type": "json_schema", "schema": {"type": "object"}}),
    ] {
        let mut bad = invoice_response_request();
        bad["text"]["format"] = format.clone();
        let (status, body, _) = app.post_json("/v1/responses", &bad).await;
        assert_eq!(status, 400, "{format}: {body}");
        assert_eq!(
            (body["error"]["code"].as_str(), body["error"]["param"].as_str()),
            (Some("invalid_request"), Some("text.format")),
            "{body}"
        );
    }
    for (name, value) in [
        ("include", json!(["reasoning.encrypted_content"])),
        ("top_logprobs", json!(3)),
        ("top_logprobs", json!(21)),
        ("truncation", json!("auto")),
        ("max_tool_calls", json!(2)),
        ("conversation", json!("conv_1")),
        ("temprature", json!(0)),
    ] {
        let mut req = invoice_response_request();
        req[name] = value;
        let (status, body, _) = app.post_json("/v1/responses", &req).await;
        assert_eq!(status, 400, "{name}: {body}");
        assert_eq!(body["error"]["param"], name, "{body}");
    }
    let mut rejected = invoice_response_request();
    rejected["text"]["format"]["schema"] = json!({"type": "array", "items": {"type": "integer"}, "uniqueItems": true, "minItems": 2});
    let (status, body, _) = app.post_json("/v1/responses", &rejected).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("upstream_rejected")), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("grammar_rejected"), "{body}");
    // The worker names the chat field; the client is told the field it sent.
    assert_eq!(body["error"]["param"], "text.format", "{body}");
    let mut too_long = invoice_response_request();
    too_long["max_output_tokens"] = json!(1_000_000);
    let (status, body, _) = app.post_json("/v1/responses", &too_long).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("context_length_exceeded"), "{body}");
    assert_eq!(body["error"]["param"], "max_output_tokens", "{body}");
    assert!(app.cost_rows().await.iter().all(|r| r.1 == "rejected"));
}

#[tokio::test]
async fn stream_emits_the_responses_event_sequence() {
    let app = spawn_app().await;
    let mut req = invoice_response_request();
    req["stream"] = json!(true);
    let text = app.post("/v1/responses", &req).await.text().await.unwrap();
    let events: Vec<(String, Value)> = text
        .split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let kind = e.lines().find_map(|l| l.strip_prefix("event: ")).unwrap().to_owned();
            let data: Value = serde_json::from_str(e.lines().find_map(|l| l.strip_prefix("data: ")).unwrap()).unwrap();
            (kind, data)
        })
        .collect();
    let kinds: Vec<&str> = events.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(&kinds[..4], ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"]);
    assert_eq!(
        &kinds[kinds.len() - 4..],
        ["response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"]
    );
    assert!(kinds[4..kinds.len() - 4].iter().all(|k| *k == "response.output_text.delta"));
    for (i, (kind, data)) in events.iter().enumerate() {
        assert_eq!(data["type"], kind.as_str());
        assert_eq!(data["sequence_number"], i as u64);
    }
    let deltas: String = events.iter().filter_map(|(_, d)| d["delta"].as_str()).collect();
    let done = &events.last().unwrap().1["response"];
    assert_eq!(done["output"][0]["content"][0]["text"], deltas.as_str());
    assert!(jsonschema::is_valid(&invoice_schema(), &serde_json::from_str::<Value>(&deltas).unwrap()));
    let rows = app.cost_rows().await;
    assert_eq!(rows.len(), 1);
    assert_eq!(done["usage"]["output_tokens"].as_i64().unwrap(), i64::from(rows[0].3));
    assert_eq!(done["id"], rows[0].0.as_str());
}

async fn get_json(app: &TestApp, key: &str, path: &str) -> (u16, Value) {
    let r = client().get(format!("{}{path}", app.base)).bearer_auth(key).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

fn turn(input: Value) -> Value {
    json!({"model": MODEL, "input": input, "max_output_tokens": 16, "temperature": 0})
}

/// A stored response is kept under its tenant: retrieved as answered, continued with
/// `previous_response_id` (the earlier turns come first, so the worker reads them from its cache),
/// its input listed, deleted; another tenant sees none of it, and `store: false` leaves nothing.
#[tokio::test]
async fn stored_responses_continue_and_belong_to_their_tenant() {
    let app = spawn_app().await;
    let (status, first, _) = app.post_json("/v1/responses", &turn(json!("My name is Ada. Remember it."))).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["store"], true);
    let id = first["id"].as_str().unwrap();
    let (status, kept) = get_json(&app, &app.key, &format!("/v1/responses/{id}")).await;
    assert_eq!(status, 200, "{kept}");
    assert_eq!(kept, first, "retrieved as answered, cost included");

    let mut second = turn(json!("What is my name?"));
    second["previous_response_id"] = json!(id);
    let (status, second, _) = app.post_json("/v1/responses", &second).await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["previous_response_id"], id);
    let cached = second["usage"]["input_tokens_details"]["cached_tokens"].as_u64().unwrap();
    assert!(cached > 0 && second["usage"]["input_tokens"].as_u64().unwrap() > first["usage"]["input_tokens"].as_u64().unwrap(), "{second}");
    let rows = app.cost_rows().await;
    assert_eq!(rows.len(), 2);

    let (status, items) =
        get_json(&app, &app.key, &format!("/v1/responses/{}/input_items?order=asc", second["id"].as_str().unwrap())).await;
    assert_eq!(status, 200, "{items}");
    assert_eq!(items["object"], "list");
    assert_eq!(items["data"].as_array().unwrap().len(), 1, "this request's input only: {items}");
    assert_eq!(items["data"][0]["content"][0], json!({"type": "input_text", "text": "What is my name?"}));

    // Another tenant: none of it exists.
    let other = create_key(&app.db, "another-tenant").await;
    let (status, body) = get_json(&app, &other, &format!("/v1/responses/{id}")).await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("not_found")), "{body}");
    let mut theirs = turn(json!("Hi"));
    theirs["previous_response_id"] = json!(id);
    let r = app.post_as(&other, "/v1/responses", &theirs, &[]).await;
    assert_eq!(r.status(), 400);
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["code"], "previous_response_not_found");
    let deleted = client().delete(format!("{}/v1/responses/{id}", app.base)).bearer_auth(&other).send().await.unwrap();
    assert_eq!(deleted.status(), 404);

    let deleted = client().delete(format!("{}/v1/responses/{id}", app.base)).bearer_auth(&app.key).send().await.unwrap();
    assert_eq!(deleted.status(), 200);
    assert_eq!(deleted.json::<Value>().await.unwrap(), json!({"id": id, "object": "response", "deleted": true}));
    assert_eq!(get_json(&app, &app.key, &format!("/v1/responses/{id}")).await.0, 404);

    let mut unstored = turn(json!("Hi"));
    unstored["store"] = json!(false);
    let (status, body, _) = app.post_json("/v1/responses", &unstored).await;
    assert_eq!((status, body["store"].as_bool()), (200, Some(false)), "{body}");
    assert_eq!(get_json(&app, &app.key, &format!("/v1/responses/{}", body["id"].as_str().unwrap())).await.0, 404);
    let kept: i64 = sqlx::query_scalar("SELECT count(*) FROM stored_responses WHERE id = $1")
        .bind(body["id"].as_str().unwrap())
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(kept, 0, "store: false leaves nothing behind");
}

/// A tenant's quota bounds what it stores (the request asking to store past it is refused before it runs,
/// and nothing is charged), and its retention period ends a response's life.
#[tokio::test]
async fn storage_is_bounded_per_tenant() {
    let app = spawn_app().await;
    sqlx::query("INSERT INTO response_storage_terms (tenant_id, retention_hours, max_stored_bytes) VALUES ($1, 1, 1)")
        .bind(app.tenant_id)
        .execute(&app.db)
        .await
        .unwrap();
    let (status, first, _) = app.post_json("/v1/responses", &turn(json!("Hi"))).await;
    assert_eq!(status, 200, "the first crosses the quota: {first}");
    let expires: chrono::DateTime<chrono::Utc> = sqlx::query_scalar("SELECT expires_at FROM stored_responses WHERE id = $1")
        .bind(first["id"].as_str().unwrap())
        .fetch_one(&app.db)
        .await
        .unwrap();
    let left = expires - chrono::Utc::now();
    assert!(left <= chrono::Duration::hours(1) && left > chrono::Duration::minutes(58), "the tenant's retention: {left}");
    let (status, body, _) = app.post_json("/v1/responses", &turn(json!("Hi again"))).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!((body["error"]["code"].as_str(), body["error"]["param"].as_str()), (Some("storage_quota_exceeded"), Some("store")));
    let mut unstored = turn(json!("Hi again"));
    unstored["store"] = json!(false);
    assert_eq!(app.post_json("/v1/responses", &unstored).await.0, 200, "store: false is not bounded");
    assert_eq!(app.cost_rows().await.len(), 2, "the refusal is not charged");
    // Past its retention a response is gone.
    sqlx::query("UPDATE stored_responses SET expires_at = now() - interval '1 second'").execute(&app.db).await.unwrap();
    assert_eq!(get_json(&app, &app.key, &format!("/v1/responses/{}", first["id"].as_str().unwrap())).await.0, 404);
}

fn weather_response_request(stream: bool) -> Value {
    let tool = runaii_testkit::weather_tool();
    json!({
        "model": MODEL,
        "input": "What is the weather in Paris?",
        "tools": [{"type": "function", "name": tool["function"]["name"], "description": tool["function"]["description"],
                   "parameters": tool["function"]["parameters"], "strict": true}],
        "tool_choice": {"type": "function", "name": "get_weather"},
        "max_output_tokens": 80,
        "temperature": 0,
        "stream": stream,
    })
}

/// Function tools on Responses: the call is a `function_call` item with a `call_id`, its result goes
/// back as a `function_call_output` item continuing the response, and the model answers in text.
#[tokio::test]
async fn function_tools_round_trip() {
    let app = spawn_app().await;
    let (status, body, _) = app.post_json("/v1/responses", &weather_response_request(false)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "completed", "{body}");
    let call = body["output"].as_array().unwrap().iter().find(|i| i["type"] == "function_call").expect("a call").clone();
    assert_eq!(call["name"], "get_weather");
    let arguments: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
    assert!(jsonschema::is_valid(&runaii_testkit::weather_tool()["function"]["parameters"], &arguments), "{arguments}");
    assert_eq!(body["tools"][0]["name"], "get_weather");

    let next = json!({
        "model": MODEL,
        "previous_response_id": body["id"],
        "input": [{"type": "function_call_output", "call_id": call["call_id"], "output": "{\"temp_c\": 21}"}],
        "tools": body["tools"],
        "tool_choice": "none",
        "max_output_tokens": 24,
        "temperature": 0,
    });
    let (status, answer, _) = app.post_json("/v1/responses", &next).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["output"][0]["type"], "message", "{answer}");

    // Streamed: the call's item announced, its arguments in deltas, then done, in the final response too.
    let text = app.post("/v1/responses", &weather_response_request(true)).await.text().await.unwrap();
    let events: Vec<Value> = text
        .split("\n\n")
        .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"response.created"));
    assert_eq!(kinds.last(), Some(&"response.completed"), "{kinds:?}");
    let added =
        events.iter().find(|e| e["type"] == "response.output_item.added" && e["item"]["type"] == "function_call").expect("call added");
    assert_eq!(added["item"]["arguments"], "");
    let deltas: String =
        events.iter().filter(|e| e["type"] == "response.function_call_arguments.delta").map(|e| e["delta"].as_str().unwrap()).collect();
    let done = events.iter().find(|e| e["type"] == "response.function_call_arguments.done").expect("arguments done");
    assert_eq!(done["arguments"], deltas.as_str());
    assert_eq!((done["item_id"].clone(), done["name"].clone()), (added["item"]["id"].clone(), json!("get_weather")));
    let final_call = &events.last().unwrap()["response"]["output"][done["output_index"].as_u64().unwrap() as usize];
    assert_eq!(final_call["arguments"], deltas.as_str());
    assert_eq!(final_call["call_id"], added["item"]["call_id"]);
}

async fn poll_until_done(app: &TestApp, id: &str) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let (status, body) = get_json(app, &app.key, &format!("/v1/responses/{id}")).await;
        assert_eq!(status, 200, "{body}");
        if !matches!(body["status"].as_str(), Some("queued" | "in_progress")) {
            return body;
        }
        assert!(std::time::Instant::now() < deadline, "still {body}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Background responses: answered `queued` at once, polled to their end, billed as online; one cancelled
/// while it runs stops, and is billed for what it generated.
#[tokio::test]
async fn background_responses_are_polled_and_cancelled() {
    let app = spawn_app().await;
    let mut request = turn(json!("Say hi."));
    request["background"] = json!(true);
    let (status, queued, request_id) = app.post_json("/v1/responses", &request).await;
    assert_eq!(status, 200, "{queued}");
    assert_eq!((queued["status"].as_str(), queued["background"].as_bool()), (Some("queued"), Some(true)), "{queued}");
    let id = queued["id"].as_str().unwrap();
    assert_eq!(request_id, id);
    let done = poll_until_done(&app, id).await;
    assert!(matches!(done["status"].as_str(), Some("completed" | "incomplete")), "{done}");
    let rows = app.cost_rows().await;
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].0.as_str(), i64::from(rows[0].3)), (id, done["usage"]["output_tokens"].as_i64().unwrap()), "billed as online");

    let mut long = runaii_testkit::long_answer_request(200, 400, false);
    let long = json!({"model": MODEL, "input": long["messages"][0]["content"].take(), "max_output_tokens": 400, "background": true,
                      "text": {"format": {"type": "json_schema", "name": "items", "schema": long["response_format"]["json_schema"]["schema"].take()}}});
    let (status, queued, _) = app.post_json("/v1/responses", &long).await;
    assert_eq!(status, 200, "{queued}");
    let id = queued["id"].as_str().unwrap().to_owned();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while get_json(&app, &app.key, &format!("/v1/responses/{id}")).await.1["status"] == "queued" {
        assert!(std::time::Instant::now() < deadline);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let r = client().post(format!("{}/v1/responses/{id}/cancel", app.base)).bearer_auth(&app.key).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["status"], "cancelled");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let record = loop {
        let rows = app.cost_rows().await;
        if let Some(row) = rows.into_iter().find(|r| r.0 == id) {
            break row;
        }
        assert!(std::time::Instant::now() < deadline, "the cancelled run has no record");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(record.1, "cancelled", "{record:?}");
    assert!(record.3 < 400, "stopped before its end: {record:?}");
    assert_eq!(get_json(&app, &app.key, &format!("/v1/responses/{id}")).await.1["status"], "cancelled");

    // Only background responses are cancelled; another tenant's is not found.
    let (_, online, _) = app.post_json("/v1/responses", &turn(json!("Hi"))).await;
    let r = client()
        .post(format!("{}/v1/responses/{}/cancel", app.base, online["id"].as_str().unwrap()))
        .bearer_auth(&app.key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let other = create_key(&app.db, "another-tenant").await;
    let r = client().post(format!("{}/v1/responses/{id}/cancel", app.base)).bearer_auth(&other).send().await.unwrap();
    assert_eq!(r.status(), 404);
}

/// A server-sent events body as its events: each one's text as sent, and its data.
fn sse_events(body: &str) -> Vec<(String, Value)> {
    body.split_inclusive("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let data = e.lines().find_map(|l| l.strip_prefix("data: ")).unwrap_or_else(|| panic!("no data: {e:?}"));
            (e.to_owned(), serde_json::from_str(data).unwrap())
        })
        .collect()
}

async fn get_stream(app: &TestApp, key: &str, id: &str, query: &str) -> (u16, String) {
    let r = client().get(format!("{}/v1/responses/{id}?{query}", app.base)).bearer_auth(key).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

fn is_final(kind: &str) -> bool {
    matches!(kind, "response.completed" | "response.incomplete" | "response.failed")
}

/// A background response streamed: its events from `response.created` (queued) to its final one, kept so
/// that `GET ?stream=true` replays them (after `starting_after`, the same bytes); a client that leaves
/// its stream leaves the response running; it is billed once. Streaming a response that was not run in
/// the background, a bad `starting_after` and another tenant's id are refused.
#[tokio::test]
async fn background_streams_resume_and_outlive_their_readers() {
    let app = spawn_app().await;
    let mut request = turn(json!("Say hi."));
    request["background"] = json!(true);
    request["stream"] = json!(true);
    let r = app.post("/v1/responses", &request).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let events = sse_events(&r.text().await.unwrap());
    let (_, created) = &events[0];
    assert_eq!((created["type"].as_str(), created["response"]["status"].as_str()), (Some("response.created"), Some("queued")));
    assert_eq!(created["response"]["background"], true);
    let id = created["response"]["id"].as_str().unwrap().to_owned();
    for (i, (text, data)) in events.iter().enumerate() {
        assert_eq!(data["sequence_number"], i as u64, "{text}");
        assert!(text.starts_with(&format!("event: {}\n", data["type"].as_str().unwrap())), "{text}");
    }
    assert_eq!(events[1].1["type"], "response.in_progress");
    let last = &events.last().unwrap().1;
    assert!(matches!(last["type"].as_str(), Some("response.completed" | "response.incomplete")), "{last}");
    let (status, stored) = get_json(&app, &app.key, &format!("/v1/responses/{id}")).await;
    assert_eq!(status, 200);
    assert_eq!(stored, last["response"], "the final event carries the stored response");

    // Replayed from the start, and resumed after k: the same events, byte for byte.
    let (status, all) = get_stream(&app, &app.key, &id, "stream=true").await;
    assert_eq!(status, 200, "{all}");
    assert_eq!(sse_events(&all), events);
    for k in [0, 2, events.len() - 2, events.len() - 1] {
        let (status, rest) = get_stream(&app, &app.key, &id, &format!("stream=true&starting_after={k}")).await;
        assert_eq!(status, 200, "{rest}");
        assert_eq!(sse_events(&rest), events[k + 1..], "after {k}");
    }

    // Refusals.
    let (_, online, _) = app.post_json("/v1/responses", &turn(json!("Hi"))).await;
    let online = online["id"].as_str().unwrap();
    let (status, body) = get_stream(&app, &app.key, online, "stream=true").await;
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!((status, body["error"]["param"].as_str()), (400, Some("stream")), "{body}");
    for query in ["stream=true&starting_after=-1", "stream=true&starting_after=x", "stream=true&starting_after=1.5", "starting_after=1"] {
        let (status, body) = get_stream(&app, &app.key, &id, query).await;
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!((status, body["error"]["param"].as_str()), (400, Some("starting_after")), "{query}: {body}");
    }
    let other = create_key(&app.db, "another-tenant").await;
    for query in ["stream=true", "stream=true&starting_after=0"] {
        let (status, body) = get_stream(&app, &other, &id, query).await;
        assert_eq!(status, 404, "{query}: {body}");
    }

    // A client that leaves mid-way: the response runs on, and its stream resumes where the client was.
    let mut long = runaii_testkit::long_answer_request(200, 400, false);
    let long = json!({"model": MODEL, "input": long["messages"][0]["content"].take(), "max_output_tokens": 200, "background": true,
                      "stream": true, "temperature": 0});
    let mut r = app.post("/v1/responses", &long).await;
    assert_eq!(r.status(), 200);
    let mut read = Vec::new();
    while !String::from_utf8_lossy(&read).contains("event: response.output_text.delta") {
        read.extend_from_slice(&r.chunk().await.unwrap().expect("the stream ended early"));
    }
    drop(r);
    let read = String::from_utf8(read).unwrap();
    let seen = sse_events(&read[..read.rfind("\n\n").unwrap() + 2]);
    let long_id = seen[0].1["response"]["id"].as_str().unwrap().to_owned();
    let after = seen.last().unwrap().1["sequence_number"].as_u64().unwrap();
    let done = poll_until_done(&app, &long_id).await;
    assert!(matches!(done["status"].as_str(), Some("completed" | "incomplete")), "not cancelled by its reader leaving: {done}");
    let (status, rest) = get_stream(&app, &app.key, &long_id, &format!("stream=true&starting_after={after}")).await;
    assert_eq!(status, 200);
    let rest = sse_events(&rest);
    assert_eq!(rest[0].1["sequence_number"], after + 1);
    let (_, whole) = get_stream(&app, &app.key, &long_id, "stream=true").await;
    let whole = sse_events(&whole);
    assert_eq!(whole[..seen.len()], seen, "what the first reader read");
    assert_eq!(whole[seen.len()..], rest);
    assert!(is_final(rest.last().unwrap().1["type"].as_str().unwrap()));
    assert_eq!(rest.last().unwrap().1["response"], done);

    // Billed once each, as online: streaming it again bills nothing.
    let rows = app.cost_rows().await;
    assert_eq!(rows.len(), 3, "{rows:?}");
    for (answer, events) in [(&id, &events), (&long_id, &whole)] {
        let row = rows.iter().find(|r| &r.0 == answer).unwrap();
        assert_eq!(row.1, "succeeded", "{row:?}");
        let usage = &events.last().unwrap().1["response"]["usage"];
        assert_eq!(i64::from(row.3), usage["output_tokens"].as_i64().unwrap());
    }
}
