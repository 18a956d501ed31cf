//! `POST /v1/responses` on the real stack.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{invoice_schema, spawn_app, MODEL};
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
