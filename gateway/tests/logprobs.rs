//! Log probabilities through the gateway on real Postgres, Redis and worker: chat (whole and streamed)
//! passes the worker's entries on in OpenAI's shape, Responses puts them on the `output_text` part and
//! its text events, and the cost record is the same as without them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{spawn_app, TestApp, MODEL};
use runaii_testkit::sse_data;
use serde_json::{json, Value};

fn chat(extra: Value) -> Value {
    let mut body = json!({
        "model": MODEL,
        "messages": [{"role": "user", "content": "Name three fruits."}],
        "temperature": 0,
        "max_completion_tokens": 12
    });
    body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    body
}

fn bytes(entries: &[Value]) -> Vec<u8> {
    entries.iter().flat_map(|e| e["bytes"].as_array().unwrap().iter().map(|b| u8::try_from(b.as_u64().unwrap()).unwrap())).collect()
}

/// An entry in OpenAI's `ChatCompletionTokenLogprob` shape, with `top` alternatives.
fn assert_chat_shape(entry: &Value, top: usize) {
    let keys: Vec<&String> = entry.as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 4, "{entry}");
    assert!(entry["token"].is_string() && entry["logprob"].as_f64().unwrap() <= 0.0 && entry["bytes"].is_array(), "{entry}");
    let alternatives = entry["top_logprobs"].as_array().unwrap();
    assert_eq!(alternatives.len(), top, "{entry}");
    for alternative in alternatives {
        assert_eq!(alternative.as_object().unwrap().len(), 3, "token, logprob, bytes: {alternative}");
        assert!(alternative["token"].is_string() && alternative["logprob"].is_number() && alternative["bytes"].is_array());
    }
}

/// Two answers' entries: the same tokens, with log probabilities equal up to float noise (two requests
/// may be decoded in batches of other sizes).
fn assert_same_tokens(a: &[Value], b: &[Value]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x["token"], y["token"]);
        assert!((x["logprob"].as_f64().unwrap() - y["logprob"].as_f64().unwrap()).abs() < 1e-3, "{x} {y}");
    }
}

async fn events(app: &TestApp, path: &str, body: &Value) -> Vec<Value> {
    let response = app.post(path, body).await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    sse_data(&text).into_iter().filter(|d| d != "[DONE]").map(|d| serde_json::from_str(&d).unwrap()).collect()
}

#[tokio::test]
async fn chat_returns_the_tokens_whole_and_streamed_and_bills_as_without() {
    let app = spawn_app().await;
    let (status, plain, _) = app.post_json("/v1/chat/completions", &chat(json!({}))).await;
    assert_eq!(status, 200, "{plain}");
    assert!(plain["choices"][0]["logprobs"].is_null());

    let (status, whole, _) = app.post_json("/v1/chat/completions", &chat(json!({"logprobs": true, "top_logprobs": 3}))).await;
    assert_eq!(status, 200, "{whole}");
    let text = whole["choices"][0]["message"]["content"].as_str().unwrap();
    assert_eq!(text, plain["choices"][0]["message"]["content"].as_str().unwrap());
    let logprobs = &whole["choices"][0]["logprobs"];
    assert_eq!(logprobs["refusal"], Value::Null);
    let tokens = logprobs["content"].as_array().unwrap();
    assert_eq!(tokens.len(), 12, "{whole}");
    tokens.iter().for_each(|t| assert_chat_shape(t, 3));
    assert_eq!(bytes(tokens), text.as_bytes());
    for count in ["prompt_tokens", "completion_tokens"] {
        assert_eq!(whole["usage"][count], plain["usage"][count], "the same tokens are billed: {count}");
    }

    let mut streamed_body = chat(json!({"logprobs": true, "top_logprobs": 3, "stream": true, "stream_options": {"include_usage": true}}));
    let chunks = events(&app, "/v1/chat/completions", &streamed_body).await;
    let mut streamed = Vec::new();
    for chunk in &chunks {
        if let Some(choice) = chunk["choices"].as_array().unwrap().first() {
            if choice["delta"]["content"].as_str().is_some_and(|c| !c.is_empty()) {
                streamed.extend(choice["logprobs"]["content"].as_array().unwrap().iter().cloned());
            }
        }
    }
    assert_same_tokens(&streamed, tokens);
    assert_eq!(chunks.last().unwrap()["usage"]["completion_tokens"], 12);

    // Without the request's `logprobs`, a stream's chunks carry none.
    streamed_body.as_object_mut().unwrap().retain(|k, _| k != "logprobs" && k != "top_logprobs");
    let chunks = events(&app, "/v1/chat/completions", &streamed_body).await;
    assert!(chunks.iter().flat_map(|c| c["choices"].as_array().unwrap()).all(|c| c["logprobs"].is_null()));

    let rows = app.cost_rows().await;
    assert_eq!(rows.len(), 4);
    assert!(rows.iter().all(|r| r.1 == "succeeded" && r.2 == rows[0].2 && r.3 == 12), "{rows:?}");
}

fn respond(extra: Value) -> Value {
    let mut body = json!({"model": MODEL, "input": "Name three fruits.", "temperature": 0, "max_output_tokens": 16, "store": false});
    body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    body
}

#[tokio::test]
async fn responses_put_the_tokens_on_the_output_text_and_its_events() {
    let app = spawn_app().await;
    let include = json!({"include": ["message.output_text.logprobs"], "top_logprobs": 2});
    let (status, whole, _) = app.post_json("/v1/responses", &respond(include.clone())).await;
    assert_eq!(status, 200, "{whole}");
    assert_eq!(whole["top_logprobs"], 2, "echoed");
    let part = &whole["output"][0]["content"][0];
    let tokens = part["logprobs"].as_array().unwrap();
    assert_eq!(tokens.len() as u64, whole["usage"]["output_tokens"].as_u64().unwrap(), "{whole}");
    tokens.iter().for_each(|t| assert_chat_shape(t, 2));
    assert_eq!(bytes(tokens), part["text"].as_str().unwrap().as_bytes());

    let (_, plain, _) = app.post_json("/v1/responses", &respond(json!({}))).await;
    assert_eq!(plain["output"][0]["content"][0]["logprobs"], json!([]), "not asked: empty, as OpenAI sends it");

    let mut streamed = respond(include);
    streamed["stream"] = json!(true);
    let events = events(&app, "/v1/responses", &streamed).await;
    let mut from_deltas = Vec::new();
    for event in &events {
        if event["type"] == "response.output_text.delta" {
            for entry in event["logprobs"].as_array().unwrap() {
                // The events' shape: token, logprob, top_logprobs of {token, logprob}; no bytes.
                assert_eq!(entry.as_object().unwrap().len(), 3, "{entry}");
                assert!(entry["top_logprobs"].as_array().unwrap().iter().all(|t| t.as_object().unwrap().len() == 2), "{entry}");
                from_deltas.push(entry.clone());
            }
        }
    }
    assert_same_tokens(&from_deltas, tokens);
    let done = events.iter().find(|e| e["type"] == "response.output_text.done").unwrap();
    assert_eq!(done["logprobs"], json!(from_deltas), "`.done` carries every token");
    let completed = events.last().unwrap();
    assert_eq!(completed["type"], "response.completed");
    let part = &completed["response"]["output"][0]["content"][0];
    let kept = part["logprobs"].as_array().unwrap();
    assert_same_tokens(kept, &from_deltas);
    assert_eq!(bytes(kept), part["text"].as_str().unwrap().as_bytes());

    // Refused by name: alternatives without the include, and the include with tools the model may call.
    let (status, body, _) = app.post_json("/v1/responses", &respond(json!({"top_logprobs": 2}))).await;
    assert_eq!((status, body["error"]["param"].as_str()), (400, Some("top_logprobs")), "{body}");
    let tools = json!([{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}]);
    let (status, body, _) =
        app.post_json("/v1/responses", &respond(json!({"include": ["message.output_text.logprobs"], "tools": tools}))).await;
    assert_eq!((status, body["error"]["param"].as_str()), (400, Some("include")), "{body}");
}
