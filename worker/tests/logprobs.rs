//! `logprobs` / `top_logprobs` on the real embedded model: the values are the model's distribution
//! (after the grammar's mask), every token of the answer is listed once, with the answer's own bytes,
//! streamed with the text it completes, and asking for them never changes the answer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{post, post_chat, worker, MODEL};
use runaii_testkit::{sse_data, weather_request};
use serde_json::{json, Value};

fn content(body: &Value) -> &str {
    body["choices"][0]["message"]["content"].as_str().expect("content is a string")
}

fn entries(logprobs: &Value) -> &[Value] {
    logprobs["content"].as_array().unwrap_or_else(|| panic!("logprobs.content is a list: {logprobs}"))
}

fn bytes(entry: &Value) -> Vec<u8> {
    entry["bytes"].as_array().unwrap().iter().map(|b| u8::try_from(b.as_u64().unwrap()).unwrap()).collect()
}

fn joined(entries: &[Value]) -> Vec<u8> {
    entries.iter().flat_map(bytes).collect()
}

fn logprob(entry: &Value) -> f64 {
    entry["logprob"].as_f64().unwrap()
}

/// What holds for every entry: a log probability, `token` the lossy text of `bytes`, `top` alternatives
/// that are most likely first, and whose probabilities sum to at most 1.
fn assert_well_formed(entry: &Value, top: usize) {
    let lp = logprob(entry);
    assert!((-9999.0..=0.0).contains(&lp), "{entry}");
    assert_eq!(entry["token"].as_str().unwrap(), String::from_utf8_lossy(&bytes(entry)), "{entry}");
    let alternatives = entry["top_logprobs"].as_array().unwrap();
    assert!(alternatives.len() <= top && !(top > 0 && alternatives.is_empty()), "{entry}");
    let values: Vec<f64> = alternatives.iter().map(logprob).collect();
    assert!(values.windows(2).all(|w| w[0] >= w[1]), "most likely first: {entry}");
    assert!(values.iter().map(|v| v.exp()).sum::<f64>() <= 1.0 + 1e-4, "probabilities sum to at most 1: {entry}");
    if let Some(best) = values.first() {
        assert!(lp <= best + 1e-6, "no token is more likely than the most likely: {entry}");
    }
    for alternative in alternatives {
        assert_eq!(alternative["token"].as_str().unwrap(), String::from_utf8_lossy(&bytes(alternative)), "{alternative}");
    }
}

fn with(mut body: Value, extra: Value) -> Value {
    body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    body
}

fn poem(extra: Value) -> Value {
    let body = json!({
        "model": MODEL,
        "messages": [{"role": "user", "content": "Write a short poem about the sea."}],
        "temperature": 0,
        "max_tokens": 24
    });
    with(body, extra)
}

/// The answers `color` admits.
const COLORS: [&str; 3] = [r#"{"color":"red"}"#, r#"{"color":"green"}"#, r#"{"color":"blue"}"#];

/// A color picked under a schema whose key and punctuation the grammar forces.
fn color(extra: Value) -> Value {
    let schema = json!({"type": "object", "properties": {"color": {"enum": ["red", "green", "blue"]}}, "required": ["color"]});
    let body = json!({
        "model": MODEL,
        "messages": [{"role": "user", "content": "Pick a color."}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "c", "schema": schema}},
        "logprobs": true
    });
    with(body, extra)
}

#[tokio::test]
async fn greedy_tokens_are_the_most_likely_and_spell_the_answer() {
    let (status, plain) = post(&worker().url, &poem(json!({}))).await;
    assert_eq!(status, 200, "{plain}");
    assert!(plain["choices"][0]["logprobs"].is_null(), "not asked, not sent: {plain}");

    let (status, body) = post(&worker().url, &poem(json!({"logprobs": true, "top_logprobs": 5}))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(content(&body), content(&plain), "asking for log probabilities does not change the answer");
    let logprobs = &body["choices"][0]["logprobs"];
    assert!(logprobs["refusal"].is_null() && logprobs.get("refusal").is_some(), "{logprobs}");
    let tokens = entries(logprobs);
    assert_eq!(tokens.len() as u64, body["usage"]["completion_tokens"].as_u64().unwrap(), "one entry per generated token");
    assert_eq!(joined(tokens), content(&body).as_bytes(), "the tokens' bytes are the answer");
    for entry in tokens {
        assert_well_formed(entry, 5);
        let best = &entry["top_logprobs"][0];
        assert_eq!((&entry["token"], &entry["bytes"]), (&best["token"], &best["bytes"]), "greedy takes the most likely: {entry}");
        assert!((logprob(entry) - logprob(best)).abs() < 1e-6, "{entry}");
    }

    let (_, alone) = post(&worker().url, &poem(json!({"logprobs": true}))).await;
    assert!(entries(&alone["choices"][0]["logprobs"]).iter().all(|e| e["top_logprobs"] == json!([])), "top_logprobs 0: none");
}

/// Under a grammar, every token listed (chosen, forced or alternative) continues the answer so far into
/// one the grammar accepts.
fn assert_only_allowed_tokens(body: &Value, valid: &[&str]) {
    assert_eq!(body["choices"][0]["finish_reason"], "stop", "{body}");
    let tokens = entries(&body["choices"][0]["logprobs"]);
    assert_eq!(joined(tokens), content(body).as_bytes());
    assert_eq!(tokens.len() as u64, body["usage"]["completion_tokens"].as_u64().unwrap(), "forced tokens are listed too: {body}");
    let continues = |prefix: &[u8], more: &[u8]| {
        let text = [prefix, more].concat();
        valid.iter().any(|v| v.as_bytes().starts_with(&text))
    };
    let mut prefix = Vec::new();
    for entry in tokens {
        assert_well_formed(entry, 20);
        for alternative in entry["top_logprobs"].as_array().unwrap() {
            assert!(continues(&prefix, &bytes(alternative)), "{alternative} after {:?}", String::from_utf8_lossy(&prefix));
        }
        prefix.extend(bytes(entry));
    }
    let probability: f64 = tokens.iter().map(logprob).sum::<f64>().exp();
    assert!(probability > 0.0 && probability <= 1.0, "{probability}");
}

#[tokio::test]
async fn under_a_schema_every_listed_token_is_one_the_grammar_allows_forced_ones_included() {
    for seed in [1, 2, 3] {
        let body = color(json!({"temperature": 1.0, "seed": seed, "top_logprobs": 20}));
        let (status, answer) = post(&worker().url, &body).await;
        assert_eq!(status, 200, "{answer}");
        assert_only_allowed_tokens(&answer, &COLORS);

        // Cut inside the forced key: the forced tokens within the budget are scored all the same.
        let mut cut = body.clone();
        cut["max_tokens"] = json!(3);
        let (status, answer) = post(&worker().url, &cut).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["choices"][0]["finish_reason"], "length");
        let tokens = entries(&answer["choices"][0]["logprobs"]);
        assert_eq!(tokens.len(), 3, "{answer}");
        assert_eq!(joined(tokens), content(&answer).as_bytes());
    }
}

#[tokio::test]
async fn under_a_gbnf_grammar_every_alternative_is_allowed() {
    let body = json!({
        "model": MODEL,
        "messages": [{"role": "user", "content": "Is Paris in France? Answer yes or no."}],
        "grammar": "root ::= (\"yes\" | \"no\") \"!\"",
        "temperature": 0,
        "logprobs": true,
        "top_logprobs": 20
    });
    let (status, answer) = post(&worker().url, &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_only_allowed_tokens(&answer, &["yes!", "no!"]);
}

/// The chunks of a streamed answer: the content of each content chunk and its entries.
async fn stream(body: &Value) -> Vec<(String, Vec<Value>)> {
    let response = post_chat(&worker().url, body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    let mut chunks = Vec::new();
    for data in sse_data(&text) {
        if data == "[DONE]" {
            break;
        }
        let chunk: Value = serde_json::from_str(&data).unwrap();
        let choice = &chunk["choices"][0];
        if choice["delta"]["role"].is_string() || !choice["finish_reason"].is_null() || chunk["choices"] == json!([]) {
            assert!(choice["logprobs"].is_null(), "no tokens in the role and final chunks: {chunk}");
            continue;
        }
        chunks.push((choice["delta"]["content"].as_str().unwrap().to_owned(), entries(&choice["logprobs"]).to_vec()));
    }
    chunks
}

#[tokio::test]
async fn a_stream_carries_each_delta_s_tokens_and_a_stop_sequence_keeps_only_the_tokens_before_it() {
    let (_, whole) = post(&worker().url, &poem(json!({"logprobs": true, "top_logprobs": 2}))).await;
    let chunks = stream(&poem(json!({"logprobs": true, "top_logprobs": 2, "stream": true}))).await;
    let text: String = chunks.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(text, content(&whole));
    let streamed: Vec<Value> = chunks.iter().flat_map(|(_, e)| e.clone()).collect();
    let whole_tokens = entries(&whole["choices"][0]["logprobs"]);
    assert_eq!(streamed.len(), whole_tokens.len());
    for (a, b) in streamed.iter().zip(whole_tokens) {
        // The same tokens; the values up to float noise (the two were decoded in batches of other sizes).
        assert_eq!(a["bytes"], b["bytes"]);
        assert!((logprob(a) - logprob(b)).abs() < 1e-3, "{a} {b}");
    }
    for (text, tokens) in &chunks {
        if text.is_ascii() {
            assert_eq!(joined(tokens), text.as_bytes(), "each delta carries the tokens it completes");
        }
    }

    // A stop sequence from the middle of the answer: the tokens listed are those with a byte before it.
    let answer = content(&whole).to_owned();
    let stop: String = answer.chars().skip(answer.chars().count() / 2).take(3).collect();
    let (status, cut) = post(&worker().url, &poem(json!({"logprobs": true, "stop": [stop]}))).await;
    assert_eq!(status, 200, "{cut}");
    let tokens = entries(&cut["choices"][0]["logprobs"]);
    let (joined, text) = (joined(tokens), content(&cut).as_bytes());
    assert!(joined.starts_with(text), "{cut}");
    let last = bytes(tokens.last().unwrap()).len();
    assert!(joined.len() - last < text.len(), "no token lies wholly in or after the stop sequence: {cut}");

    // Under a schema, forced tokens are streamed once scored.
    let chunks = stream(&color(json!({"temperature": 0, "stream": true}))).await;
    let text: String = chunks.iter().map(|(t, _)| t.as_str()).collect();
    let tokens: Vec<Value> = chunks.iter().flat_map(|(_, e)| e.clone()).collect();
    assert_eq!(self::joined(&tokens), text.as_bytes(), "{chunks:?}");
    assert!(serde_json::from_str::<Value>(&text).is_ok(), "{text}");
}

#[tokio::test]
async fn out_of_range_or_unusable_requests_are_refused_by_name() {
    for (extra, param) in [
        (json!({"logprobs": true, "top_logprobs": 21}), "top_logprobs"),
        (json!({"top_logprobs": 3}), "top_logprobs"),
        (json!({"logprobs": false, "top_logprobs": 3}), "top_logprobs"),
    ] {
        let (status, body) = post(&worker().url, &poem(extra.clone())).await;
        assert_eq!((status, body["error"]["param"].as_str()), (400, Some(param)), "{extra}: {body}");
    }
    let mut with_tools = weather_request(&json!("auto"), false);
    with_tools["logprobs"] = json!(true);
    let (status, body) = post(&worker().url, &with_tools).await;
    assert_eq!((status, body["error"]["param"].as_str()), (400, Some("logprobs")), "{body}");
    assert_eq!(body["error"]["code"], "logprobs_unsupported");

    // Tools only described (`tool_choice: none`): the answer is plain text, and its tokens are listed.
    with_tools["tool_choice"] = json!("none");
    let (status, body) = post(&worker().url, &with_tools).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(joined(entries(&body["choices"][0]["logprobs"])), content(&body).as_bytes());
}
