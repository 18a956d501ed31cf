//! Several answers to one request (`n`), on the real model: the prompt is read once and its KV cache
//! copied to the other answers' sequences, and each answer is what the same request alone would answer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{metric, post, MODEL};
use serde_json::{json, Value};

/// A prompt long enough that reading it again for each answer would be the bulk of the work.
fn request(n: u32, temperature: f64, seed: u64) -> Value {
    let rules: String =
        (1..=30).map(|rule| format!("Rule {rule}: an invoice of item group {rule} is paid within {rule} days.\n")).collect();
    json!({
        "model": MODEL,
        "messages": [
            {"role": "system", "content": rules},
            {"role": "user", "content": "Invoice A-1024 for item group 7 totals 120.50 EUR. Reply as JSON."}
        ],
        "response_format": {"type": "json_schema", "json_schema": {"name": "invoice", "schema": common::invoice_schema()}},
        "max_tokens": 120,
        "temperature": temperature,
        "seed": seed,
        "n": n,
    })
}

fn contents(body: &Value) -> Vec<String> {
    let choices = body["choices"].as_array().unwrap_or_else(|| panic!("no choices: {body}"));
    for (i, choice) in choices.iter().enumerate() {
        assert_eq!(choice["index"], i, "choices in index order: {body}");
    }
    choices.iter().map(|c| c["message"]["content"].as_str().unwrap().to_owned()).collect()
}

fn usage(body: &Value, field: &str) -> u64 {
    body["usage"][field].as_u64().unwrap_or_else(|| panic!("no usage.{field}: {body}"))
}

#[tokio::test]
async fn the_prompt_is_read_once_and_every_answer_is_as_alone() {
    // A worker of its own: its counters see this test only. No prefix cache, so every request reads its
    // whole prompt in one decode: a prompt read partly from the cache has its last token decoded in a
    // batch of its own, and llama.cpp's arithmetic, which depends on the batch's shape, can tip a greedy
    // near tie (tested in prefix_cache.rs on prompts without one), which is not what this test is about.
    let worker = common::start(&["--prefix-cache", "false"]);
    let base = &worker.url;

    // Greedy: every answer of three is the one answer of the same request alone, which it can only be if
    // the copied cache holds the prompt exactly.
    let (status, alone) = post(base, &request(1, 0.0, 1)).await;
    assert_eq!(status, 200, "{alone}");
    let prompt = usage(&alone, "prompt_tokens");
    assert!(prompt > 400, "a prompt worth sharing: {prompt}");
    let copied_before = metric(base, "runaii_worker_prompt_copied_tokens_total").await;
    let read_before = metric(base, "runaii_worker_prompt_tokens_total").await;
    let (status, three) = post(base, &request(3, 0.0, 1)).await;
    assert_eq!(status, 200, "{three}");
    let answers = contents(&three);
    assert_eq!(answers.len(), 3);
    for answer in &answers {
        assert_eq!(answer, &contents(&alone)[0], "every greedy answer is the answer alone");
        let invoice: Value = serde_json::from_str(answer).unwrap_or_else(|e| panic!("each answer is JSON ({e}): {answer}"));
        assert!(jsonschema::is_valid(&common::invoice_schema(), &invoice), "each answer matches the schema: {invoice}");
    }
    // Billed: the prompt once, every answer's tokens.
    assert_eq!(usage(&three, "prompt_tokens"), prompt);
    assert_eq!(usage(&three, "completion_tokens"), 3 * usage(&alone, "completion_tokens"));
    assert_eq!(usage(&three, "total_tokens"), prompt + 3 * usage(&alone, "completion_tokens"));
    assert_eq!(three["timings"]["predicted_n"], usage(&three, "completion_tokens"));
    // Read once: one request's prompt admitted, and two copies of it made instead of two more readings.
    assert_eq!(metric(base, "runaii_worker_prompt_tokens_total").await - read_before, prompt);
    assert_eq!(metric(base, "runaii_worker_prompt_copied_tokens_total").await - copied_before, 2 * prompt);

    // Sampled: answer i is sampled with the request's seed + i (`Job::sibling`, unit-tested), so the
    // answers are not copies of one another, and each holds to the schema. (They are not compared with
    // the request alone at each seed: at a temperature of 1 the last bits of llama.cpp's arithmetic, which
    // depend on what shares the decode step and where in the cache a sequence's cells lie, turn into
    // other tokens.)
    let (status, sampled) = post(base, &request(3, 1.0, 40)).await;
    assert_eq!(status, 200, "{sampled}");
    let sampled = contents(&sampled);
    for answer in &sampled {
        let invoice: Value = serde_json::from_str(answer).unwrap_or_else(|e| panic!("each answer is JSON ({e}): {answer}"));
        assert!(jsonschema::is_valid(&common::invoice_schema(), &invoice), "each answer matches the schema: {invoice}");
    }
    assert!(sampled[0] != sampled[1] || sampled[1] != sampled[2], "three seeds, not one answer thrice: {sampled:?}");
}

#[tokio::test]
async fn a_stream_of_several_answers_interleaves_them_by_index() {
    // No prefix cache: the stream and the whole request read the prompt the same way (see above).
    let worker = common::start(&["--slots", "4", "--prefix-cache", "false"]);
    let base = &worker.url;
    let mut streamed = request(2, 0.0, 1);
    streamed["stream"] = json!(true);
    streamed["stream_options"] = json!({"include_usage": true});
    let response = common::post_chat(base, &streamed).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let payloads = runaii_testkit::sse_data(&response.text().await.unwrap());
    assert_eq!(payloads.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = payloads[..payloads.len() - 1].iter().map(|p| serde_json::from_str(p).unwrap()).collect();
    let (usage_chunk, rest) = chunks.split_last().unwrap();
    assert_eq!(usage_chunk["choices"], json!([]));
    let texts: Vec<String> = (0..2)
        .map(|index| {
            let of = |c: &&Value| c["choices"][0]["index"] == index;
            let mine: Vec<&Value> = rest.iter().filter(of).collect();
            assert_eq!(
                mine.iter().filter(|c| c["choices"][0]["delta"].get("role").is_some()).count(),
                1,
                "one role chunk for choice {index}"
            );
            let finish: Vec<&Value> = mine.iter().map(|c| &c["choices"][0]["finish_reason"]).filter(|f| !f.is_null()).collect();
            assert_eq!(finish.len(), 1, "choice {index} ends once");
            mine.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect()
        })
        .collect();
    assert!(rest.iter().all(|c| c["choices"].as_array().is_some_and(|a| a.len() == 1)), "one choice per chunk");

    // The same request whole: the same answers, the same usage.
    let (status, whole) = post(base, &request(2, 0.0, 1)).await;
    assert_eq!(status, 200, "{whole}");
    assert_eq!(contents(&whole), texts);
    for count in ["prompt_tokens", "completion_tokens", "total_tokens"] {
        assert_eq!(whole["usage"][count], usage_chunk["usage"][count], "{count}");
    }

    // More answers than the worker runs sequences, or none, is refused by name.
    for n in [5, 0] {
        let (status, refused) = post(base, &request(n, 0.0, 1)).await;
        assert_eq!(status, 400, "n = {n}: {refused}");
        assert_eq!(refused["error"]["param"], "n", "{refused}");
    }
}
