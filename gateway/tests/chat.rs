//! The gateway on real Postgres, real Redis and a real worker: auth, catalog, chat completions, cost
//! records.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::{client, invoice_request, invoice_schema, spawn_app, MODEL};
use futures::StreamExt;
use rust_decimal::Decimal;
use serde_json::{json, Value};

#[tokio::test]
async fn missing_wrong_and_revoked_keys_get_401_without_echo() {
    let app = spawn_app().await;
    let url = format!("{}/v1/chat/completions", app.base);
    let req = invoice_request();
    let none = client().post(&url).json(&req).send().await.unwrap();
    assert_eq!(none.status(), 401);
    let body: Value = none.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_api_key");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(body["error"].get("param").is_some());

    // The last character changed (to one it is not): the checksum no longer verifies.
    let other = if app.key.ends_with('x') { 'y' } else { 'x' };
    let forged = format!("{}{other}", &app.key[..app.key.len() - 1]);
    let wrong = client().post(&url).bearer_auth(&forged).json(&req).send().await.unwrap();
    assert_eq!(wrong.status(), 401);
    let text = wrong.text().await.unwrap();
    assert!(!text.contains(&forged), "the key is never echoed");

    // A revoked key stops working within the cache TTL (300 ms in tests).
    let public_id = app.key.split('-').nth(1).unwrap();
    let key_id: uuid::Uuid =
        sqlx::query_scalar("SELECT id FROM api_keys WHERE public_id = $1").bind(public_id).fetch_one(&app.db).await.unwrap();
    let mut conn = app.db.acquire().await.unwrap();
    runaii_gateway::db::keys::revoke(&mut conn, key_id).await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let (status, body, _) = app.post_json("/v1/chat/completions", &req).await;
    assert_eq!(status, 401, "{body}");
    assert!(app.cost_rows().await.is_empty(), "unauthenticated requests are not charged");
}

#[tokio::test]
async fn catalog_lists_models_with_readiness_pricing_and_parameters() {
    let app = spawn_app().await;
    app.upsert_model("org/offline-model", ("1".parse().unwrap(), "2".parse().unwrap()), None).await;
    let list: Value = client().get(format!("{}/v1/models", app.base)).send().await.unwrap().json().await.unwrap();
    assert_eq!(list["object"], "list");
    let ours = list["data"].as_array().unwrap().iter().find(|m| m["id"] == MODEL).expect("listed");
    assert_eq!(ours["object"], "model");
    assert_eq!(ours["is_ready"], true);
    assert_eq!(ours["context_length"], 4096);
    assert_eq!(ours["pricing"]["input_per_million_tokens"], "0.1");
    assert_eq!(ours["supported_parameters"]["structured_outputs"], json!({"type": "boolean"}));
    assert_eq!(ours["supported_parameters"]["response_format"], json!({"type": "boolean"}));

    // Percent-encoded ids (what the SDKs send for ids with `/`) are decoded.
    let one: Value = client().get(format!("{}/v1/models/org%2Foffline-model", app.base)).send().await.unwrap().json().await.unwrap();
    assert_eq!(one["id"], "org/offline-model");
    assert_eq!(one["is_ready"], false, "no worker serves it");
    let missing = client().get(format!("{}/v1/models/nope", app.base)).send().await.unwrap();
    assert_eq!(missing.status(), 404);
    let body: Value = missing.json().await.unwrap();
    assert_eq!(body["error"]["code"], "model_not_found");

    // A model with no ready worker answers 503 with a clear code, and costs nothing.
    let mut req = invoice_request();
    req["model"] = json!("org/offline-model");
    let (status, body, _) = app.post_json("/v1/chat/completions", &req).await;
    assert_eq!(status, 503);
    assert_eq!(body["error"]["code"], "model_unavailable");
    let rows = app.cost_rows().await;
    assert!(rows.iter().all(|r| r.4 == Decimal::ZERO));
}

#[tokio::test]
async fn invoice_answer_validates_and_its_cost_is_what_the_ledger_holds() {
    let app = spawn_app().await;
    let (status, body, request_id) = app.post_json("/v1/chat/completions", &invoice_request()).await;
    assert_eq!(status, 200, "{body}");
    let content = body["choices"][0]["message"]["content"].as_str().unwrap();
    let answer: Value = serde_json::from_str(content).unwrap();
    assert!(jsonschema::is_valid(&invoice_schema(), &answer), "{answer}");
    assert_eq!(body["id"], request_id, "the completion id is the request id");
    let rows = app.cost_rows().await;
    assert_eq!(rows.len(), 1, "one cost record per request");
    let (rid, status, input, output, cost, _) = &rows[0];
    assert_eq!(rid, &request_id);
    assert_eq!(status, "succeeded");
    assert_eq!(i64::from(*input), body["usage"]["prompt_tokens"].as_i64().unwrap());
    assert_eq!(i64::from(*output), body["usage"]["completion_tokens"].as_i64().unwrap());
    let expected = (Decimal::from(*input) * Decimal::new(10, 2) + Decimal::from(*output) * Decimal::new(30, 2)) / Decimal::from(1_000_000);
    assert_eq!(*cost, expected);
    // usage.cost is written digit for digit: compare the raw text, not a float.
    let raw = serde_json::to_string(&body["usage"]["cost"]).unwrap();
    assert_eq!(raw.parse::<f64>().unwrap(), expected.to_string().parse::<f64>().unwrap());
}

#[tokio::test]
async fn bad_schemas_are_400_and_cost_nothing() {
    let app = spawn_app().await;
    let mut invalid = invoice_request();
    invalid["response_format"]["json_schema"]["schema"] = json!({"type": "object", "properties": 7});
    let (status, body, _) = app.post_json("/v1/chat/completions", &invalid).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert_eq!(body["error"]["param"], "response_format");

    let mut no_name = invoice_request();
    no_name["response_format"]["json_schema"].as_object_mut().unwrap().remove("name");
    let (status, body, _) = app.post_json("/v1/chat/completions", &no_name).await;
    assert_eq!(status, 400, "{body}");

    let mut unenforceable = invoice_request();
    unenforceable["response_format"]["json_schema"]["schema"] =
        json!({"type": "array", "items": {"type": "integer"}, "uniqueItems": true, "minItems": 2});
    let (status, body, request_id) = app.post_json("/v1/chat/completions", &unenforceable).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "upstream_rejected");

    let rows = app.cost_rows().await;
    assert!(rows.iter().all(|r| r.4 == Decimal::ZERO && r.1 == "rejected"), "{rows:?}");
    assert_eq!(rows.len(), 1, "the engine refusal is recorded, at zero cost");
    assert_eq!(rows[0].0, request_id, "the refusal names its cost record");
}

async fn sse(response: reqwest::Response) -> Vec<String> {
    runaii_testkit::sse_data(&response.text().await.unwrap())
}

#[tokio::test]
async fn stream_with_usage_reports_the_ledger_cost() {
    let app = spawn_app().await;
    let mut req = invoice_request();
    req["stream"] = json!(true);
    req["stream_options"] = json!({"include_usage": true});
    let response = app.post("/v1/chat/completions", &req).await;
    assert_eq!(response.status(), 200);
    let request_id = response.headers()["x-request-id"].to_str().unwrap().to_owned();
    let events = sse(response).await;
    assert_eq!(events.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = events[..events.len() - 1].iter().map(|e| serde_json::from_str(e).unwrap()).collect();
    assert!(chunks.iter().all(|c| c["object"] == "chat.completion.chunk" && c["id"] == request_id.as_str()));
    assert!(chunks.iter().all(|c| c.get("x_runaii_usage").is_none() && c.get("error").is_none()));
    let usage_chunk = chunks.last().unwrap();
    assert_eq!(usage_chunk["choices"], json!([]));
    let text: String = chunks.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    assert!(jsonschema::is_valid(&invoice_schema(), &serde_json::from_str::<Value>(&text).unwrap()));
    let rows = app.cost_rows().await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].1, "succeeded");
    assert_eq!(i64::from(rows[0].3), usage_chunk["usage"]["completion_tokens"].as_i64().unwrap());
    let raw = events[events.len() - 2].clone();
    assert!(raw.contains(&format!("\"cost\":{}", rows[0].4.normalize())), "usage chunk carries the ledger's cost: {raw}");

    // Without include_usage: no usage anywhere, still recorded.
    req.as_object_mut().unwrap().remove("stream_options");
    let events = sse(app.post("/v1/chat/completions", &req).await).await;
    assert_eq!(events.last().unwrap(), "[DONE]");
    assert!(events[..events.len() - 1].iter().all(|e| !e.contains("\"usage\"")), "{events:?}");
    assert_eq!(app.cost_rows().await.len(), 2);
}

#[tokio::test]
async fn abandoned_stream_is_billed_for_delivered_tokens() {
    let app = spawn_app().await;
    let req = runaii_testkit::long_answer_request(600, 2000, true);
    let response = app.post("/v1/chat/completions", &req).await;
    let mut body = response.bytes_stream();
    let mut seen = 0;
    while seen < 6000 {
        seen += body.next().await.unwrap().unwrap().len();
    }
    drop(body);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let row = loop {
        if let Some(row) = app.cost_rows().await.into_iter().next() {
            break row;
        }
        assert!(std::time::Instant::now() < deadline, "no cost record for the abandoned stream");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(row.1, "cancelled");
    assert!(row.3 > 0 && row.3 < 2000, "billed for delivered tokens, not zero, not max_tokens: {}", row.3);
    assert!(row.4 > Decimal::ZERO);
}

/// Answers are gzipped for clients that accept it (the official SDKs do), and read back the same; an event
/// stream never is, so its chunks still arrive as they are written; a client that does not ask gets plain
/// JSON.
#[tokio::test]
async fn answers_are_gzipped_for_clients_that_ask_and_streams_never() {
    use std::io::Read as _;
    let app = spawn_app().await;
    let models = format!("{}/v1/models", app.base);
    let plain = client().get(&models).send().await.unwrap();
    assert!(plain.headers().get("content-encoding").is_none());
    let plain: Value = plain.json().await.unwrap();
    let gzipped = client().get(&models).header("accept-encoding", "gzip").send().await.unwrap();
    assert_eq!(gzipped.headers()["content-encoding"], "gzip");
    let bytes = gzipped.bytes().await.unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(&bytes[..]).read_to_string(&mut text).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), plain);

    let mut stream = invoice_request();
    stream["stream"] = json!(true);
    let response = client()
        .post(format!("{}/v1/chat/completions", app.base))
        .bearer_auth(&app.key)
        .header("accept-encoding", "gzip")
        .json(&stream)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers().get("content-encoding").is_none(), "{:?}", response.headers());
    let text = response.text().await.unwrap();
    assert!(text.starts_with("data: ") && text.trim_end().ends_with("data: [DONE]"), "{text}");
}

/// The request id is the gateway's own, on both header names: a client's `x-request-id` is never
/// adopted, neither by a completion (whose id keys its cost record) nor by an answer that is not one.
#[tokio::test]
async fn a_client_cannot_name_the_request_id() {
    let app = spawn_app().await;
    let ids = |response: &reqwest::Response| {
        let header = |name: &str| response.headers()[name].to_str().unwrap().to_owned();
        (header("x-request-id"), header("request-id"))
    };
    let chosen = [("x-request-id", "chatcmpl-chosen-by-the-client")];
    let served = app.post_as(&app.key, "/v1/chat/completions", &invoice_request(), &chosen).await;
    assert_eq!(served.status(), 200);
    let (id, same) = ids(&served);
    assert_eq!(id, same);
    assert!(id.starts_with("chatcmpl-") && id != chosen[0].1, "{id}");
    let body: Value = served.json().await.unwrap();
    assert_eq!(body["id"], id.as_str(), "the header names the completion");
    let rows = app.cost_rows().await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].0, id, "and its cost record");

    let refused = client()
        .post(format!("{}/v1/chat/completions", app.base))
        .header("x-request-id", "req_chosen-by-the-client")
        .json(&invoice_request())
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let (id, same) = ids(&refused);
    assert_eq!(id, same);
    assert!(id.starts_with("req_") && id != "req_chosen-by-the-client", "{id}");
}
