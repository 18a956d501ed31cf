//! `/v1/messages` (Anthropic) and tools on `/v1/chat/completions` through the gateway: answers, events,
//! errors in each dialect's shape, and a cost record for every round.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{client, spawn_app, MODEL};
use runaii_testkit::{sse_data, weather_request, weather_tool};
use rust_decimal::Decimal;
use serde_json::{json, Value};

fn weather_messages(tool_choice: Value, stream: bool) -> Value {
    let tool = weather_tool();
    json!({
        "model": MODEL,
        "max_tokens": 80,
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
        "tools": [{"name": tool["function"]["name"], "description": tool["function"]["description"], "input_schema": tool["function"]["parameters"]}],
        "tool_choice": tool_choice,
        "temperature": 0,
        "stream": stream
    })
}

async fn post_messages(app: &common::TestApp, body: &Value, by_header: bool) -> reqwest::Response {
    let request = client().post(format!("{}/v1/messages", app.base)).header("anthropic-version", "2023-06-01").json(body);
    let request = if by_header { request.header("x-api-key", &app.key) } else { request.bearer_auth(&app.key) };
    request.send().await.unwrap()
}

#[tokio::test]
async fn a_tool_round_trip_in_the_messages_dialect_is_metered_per_round() {
    let app = spawn_app().await;
    let r = post_messages(&app, &weather_messages(json!({"type": "any", "disable_parallel_tool_use": true}), false), true).await;
    assert_eq!(r.status(), 200);
    assert!(r.headers()["request-id"].to_str().unwrap().starts_with("msg_"));
    let first: Value = r.json().await.unwrap();
    assert_eq!(first["type"], "message");
    assert_eq!(first["stop_reason"], "tool_use", "{first}");
    let call = first["content"].as_array().unwrap().iter().find(|b| b["type"] == "tool_use").unwrap().clone();
    assert!(jsonschema::is_valid(&weather_tool()["function"]["parameters"], &call["input"]), "{call}");
    assert!(call["id"].as_str().unwrap().starts_with("toolu_"));

    let mut second = weather_messages(json!({"type": "none"}), false);
    second["messages"] = json!([
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "21 degrees and sunny"}]}
    ]);
    let answer: Value = post_messages(&app, &second, false).await.json().await.unwrap();
    // The tiny model may ramble to max_tokens; either way it answers in text, not with another call.
    assert!(answer["stop_reason"] == "end_turn" || answer["stop_reason"] == "max_tokens", "{answer}");
    assert_eq!(answer["content"][0]["type"], "text");

    let rows = app.cost_rows().await;
    assert_eq!(rows.len(), 2, "one record per round");
    for (row, body) in rows.iter().zip([&first, &answer]) {
        assert_eq!(row.0, body["id"].as_str().unwrap());
        assert_eq!(row.1, "succeeded");
        // Anthropic counts cache reads apart from `input_tokens`; the record holds the whole prompt (the
        // second round's prompt starts with the first's, so the worker may read it from its cache).
        let usage = &body["usage"];
        let prompt = usage["input_tokens"].as_i64().unwrap() + usage["cache_read_input_tokens"].as_i64().unwrap();
        assert_eq!(i64::from(row.2), prompt, "{usage}");
        let said: Decimal = serde_json::to_string(&body["usage"]["cost"]).unwrap().parse().unwrap();
        assert_eq!(said, row.4.normalize());
    }
}

#[tokio::test]
async fn streamed_messages_follow_anthropics_event_order() {
    let app = spawn_app().await;
    let text = post_messages(
        &app,
        &weather_messages(json!({"type": "tool", "name": "get_weather", "disable_parallel_tool_use": true}), true),
        true,
    )
    .await
    .text()
    .await
    .unwrap();
    let kinds: Vec<&str> = text.split("\n\n").filter_map(|e| e.lines().next()?.strip_prefix("event: ")).collect();
    assert_eq!(kinds.first(), Some(&"message_start"), "{text}");
    assert_eq!(&kinds[kinds.len() - 2..], ["message_delta", "message_stop"]);
    let starts = kinds.iter().filter(|k| **k == "content_block_start").count();
    assert_eq!(starts, kinds.iter().filter(|k| **k == "content_block_stop").count());
    let events: Vec<Value> = sse_data(&text).iter().map(|d| serde_json::from_str(d).unwrap()).collect();
    assert!(events[0]["message"]["usage"]["input_tokens"].as_u64().unwrap() > 0);
    // Each tool_use block's input_json_delta fragments join into arguments that match the schema.
    let blocks: Vec<u64> = events.iter().filter(|e| e["type"] == "content_block_start").map(|e| e["index"].as_u64().unwrap()).collect();
    assert!(!blocks.is_empty());
    for index in blocks {
        let partial: String = events
            .iter()
            .filter(|e| e["index"] == index && e["delta"]["type"] == "input_json_delta")
            .filter_map(|e| e["delta"]["partial_json"].as_str())
            .collect();
        let input: Value = serde_json::from_str(&partial).unwrap();
        assert!(jsonschema::is_valid(&weather_tool()["function"]["parameters"], &input));
    }
    let delta = events.iter().find(|e| e["type"] == "message_delta").unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    let rows = app.cost_rows().await;
    assert_eq!(rows.len(), 1);
    assert!(text.contains(&format!("\"cost\":{}", rows[0].4.normalize())));
}

#[tokio::test]
async fn structured_output_is_one_text_block_of_json() {
    let app = spawn_app().await;
    let schema = json!({"type": "object", "properties": {"city": {"type": "string", "maxLength": 30}}, "required": ["city"], "additionalProperties": false});
    for key in ["output_config", "output_format"] {
        let format = json!({"type": "json_schema", "schema": schema});
        let format = if key == "output_config" { json!({"format": format}) } else { format };
        let body = json!({"model": MODEL, "max_tokens": 60, "messages": [{"role": "user", "content": "Name a city."}], key: format});
        let answer: Value = post_messages(&app, &body, true).await.json().await.unwrap();
        let blocks = answer["content"].as_array().unwrap();
        assert_eq!(blocks.len(), 1, "{answer}");
        let value: Value = serde_json::from_str(blocks[0]["text"].as_str().unwrap()).unwrap();
        assert!(jsonschema::is_valid(&schema, &value), "{value}");
    }
}

#[tokio::test]
async fn messages_errors_use_anthropics_shape() {
    let app = spawn_app().await;
    let r = client().post(format!("{}/v1/messages", app.base)).header("x-api-key", "rk-nope").json(&json!({})).send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert!(r.headers().get("request-id").is_some());
    let body: Value = r.json().await.unwrap();
    assert_eq!(body, json!({"type": "error", "error": {"type": "authentication_error", "message": body["error"]["message"]}}));
    let r = post_messages(&app, &json!({"model": MODEL, "messages": []}), true).await;
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(body["error"]["message"].as_str().unwrap().contains("max_tokens"));
    let r = post_messages(&app, &json!({"model": "nope", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}), true).await;
    assert_eq!(r.status(), 404);
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["type"], "not_found_error");
    assert!(app.cost_rows().await.is_empty());
}

#[tokio::test]
async fn chat_tools_pass_through_and_each_call_is_recorded() {
    let app = spawn_app().await;
    let (status, body, request_id) = app.post_json("/v1/chat/completions", &weather_request(&json!("required"), false)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
    assert!(body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"].is_string());
    let rows = app.cost_rows().await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].0, request_id);
}
