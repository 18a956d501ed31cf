//! Streaming, continuous batching and disconnects, on a worker of this binary's own (so its counters
//! only see these tests, which run one after another through a lock).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{get_json, metric, post, worker, MODEL};
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::const_new(());

async fn sse_payloads(response: reqwest::Response) -> Vec<String> {
    runaii_testkit::sse_data(&response.text().await.unwrap())
}

#[tokio::test]
async fn stream_follows_openai_chunk_rules() {
    let _serial = SERIAL.lock().await;
    let base = &worker().url;
    let mut req = common::invoice_request();
    req["stream"] = json!(true);
    req["stream_options"] = json!({"include_usage": true});
    let response = common::post_chat(base, &req).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let payloads = sse_payloads(response).await;
    assert_eq!(payloads.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = payloads[..payloads.len() - 1].iter().map(|p| serde_json::from_str(p).unwrap()).collect();
    assert!(chunks.iter().all(|c| c["object"] == "chat.completion.chunk" && c.get("error").is_none()));
    let id = &chunks[0]["id"];
    assert!(chunks.iter().all(|c| &c["id"] == id), "one id for the whole stream");
    let roles = chunks.iter().filter(|c| c["choices"][0]["delta"].get("role").is_some()).count();
    assert_eq!(roles, 1, "role only in the first chunk");
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let (usage_chunk, rest) = chunks.split_last().unwrap();
    assert_eq!(usage_chunk["choices"], json!([]));
    let usage = &usage_chunk["usage"];
    assert!(rest.iter().all(|c| c["usage"].is_null()), "usage is null on every other chunk");
    let finish: Vec<&Value> = rest.iter().map(|c| &c["choices"][0]["finish_reason"]).filter(|f| !f.is_null()).collect();
    assert_eq!(finish, [&json!("stop")]);
    let text: String = rest.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    let answer: Value = serde_json::from_str(&text).expect("streamed text is the JSON answer");
    assert!(jsonschema::is_valid(&common::invoice_schema(), &answer));
    assert_eq!(usage["total_tokens"], usage["prompt_tokens"].as_u64().unwrap() + usage["completion_tokens"].as_u64().unwrap());

    // The same request without streaming yields the same answer (temperature 0) and the same usage.
    let (_, whole) = post(base, &common::invoice_request()).await;
    assert_eq!(whole["choices"][0]["message"]["content"].as_str().unwrap(), text);
    for count in ["prompt_tokens", "completion_tokens", "total_tokens"] {
        assert_eq!(whole["usage"][count], usage[count], "{count}");
    }
    // The second request found the first one's prompt in the cache (all of it but the last token).
    assert_eq!(whole["usage"]["prompt_tokens_details"]["cached_tokens"], usage["prompt_tokens"].as_u64().unwrap() - 1);
}

#[tokio::test]
async fn parallel_requests_decode_together_with_exact_usage() {
    let _serial = SERIAL.lock().await;
    let base = worker().url.clone();
    let before = metric(&base, "runaii_worker_completion_tokens_total").await;
    let steps_before = metric(&base, "runaii_worker_decode_steps_total").await;
    let n = 6;
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let base = base.clone();
            tokio::spawn(async move {
                let req = json!({
                    "model": MODEL,
                    "messages": [{"role": "user", "content": format!("Tell me fact number {i} about the moon.")}],
                    "max_tokens": 24,
                    "seed": i,
                });
                post(&base, &req).await
            })
        })
        .collect();
    let mut reported = 0;
    for t in tasks {
        let (status, body) = t.await.unwrap();
        assert_eq!(status, 200, "{body}");
        let u = &body["usage"];
        let c = u["completion_tokens"].as_u64().unwrap();
        assert!((1..=24).contains(&c));
        if body["choices"][0]["finish_reason"] == "length" {
            assert_eq!(c, 24);
        }
        reported += c;
    }
    let counted = metric(&base, "runaii_worker_completion_tokens_total").await - before;
    assert_eq!(counted, reported, "every generated token is reported to its request");
    // Decoded together: far fewer decode calls than tokens generated one request at a time.
    let steps = metric(&base, "runaii_worker_decode_steps_total").await - steps_before;
    assert!(steps < reported, "{steps} decode steps for {reported} tokens: requests were batched");
}

#[tokio::test]
async fn disconnect_mid_stream_frees_the_slot_and_counts_tokens() {
    let _serial = SERIAL.lock().await;
    let base = &worker().url;
    let disconnected = metric(base, "runaii_worker_disconnected_total").await;
    let tokens_before = metric(base, "runaii_worker_completion_tokens_total").await;
    // A schema that needs hundreds of tokens, so the answer is still running when we leave.
    let req = runaii_testkit::long_answer_request(600, 2000, true);
    let response = common::post_chat(base, &req).send().await.unwrap();
    let mut body = response.bytes_stream();
    let mut seen = Vec::new();
    while seen.len() < 8_000 {
        seen.extend_from_slice(&body.next().await.expect("stream continues").unwrap());
    }
    drop(body);
    // Every content chunk after the role chunk carries at least one generated token.
    let deltas = String::from_utf8_lossy(&seen).matches("\"content\"").count() as u64 - 1;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let health = get_json(base, "/health").await;
        if health["slots_busy"] == 0 && metric(base, "runaii_worker_disconnected_total").await == disconnected + 1 {
            break;
        }
        assert!(Instant::now() < deadline, "slot not freed after disconnect: {health}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let consumed = metric(base, "runaii_worker_completion_tokens_total").await - tokens_before;
    assert!(
        consumed >= deltas && consumed < 2000,
        "tokens generated before the disconnect are counted: {consumed} for {deltas} deltas seen"
    );
}
