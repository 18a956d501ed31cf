//! Prompt-lookup drafts (`engine/drafts.rs`) against the real engine: an answer decoded with drafts is
//! the answer decoded without them (or parts from it only at a near tie of the model's two best tokens), and an
//! extraction takes fewer decode steps.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use serde_json::{json, Value};

/// The bench's invoice requests (`scripts/bench_peers.py`): number and total varied, 64 tokens at most.
fn invoice(n: u32) -> Value {
    let mut request = common::invoice_request();
    request["messages"][1]["content"] = json!(format!("Invoice #A-{}, due 2026-11-01, total {}.00 USD.", 1024 + n, 420 + n));
    request["max_tokens"] = json!(64);
    request
}

/// Each request, one at a time, to `base`: the answers' text, finish reason and completion tokens.
async fn answers(base: &str, requests: &[Value]) -> Vec<(String, String, u64)> {
    let mut out = Vec::new();
    for request in requests {
        let (status, body) = common::post(base, request).await;
        assert_eq!(status, 200, "{body}");
        let choice = &body["choices"][0];
        out.push((
            choice["message"]["content"].as_str().unwrap().to_owned(),
            choice["finish_reason"].as_str().unwrap().to_owned(),
            body["usage"]["completion_tokens"].as_u64().unwrap(),
        ));
    }
    out
}

/// Where two answers to `request` part, the drafted answer took the model's second best token, and the
/// two best were within [`NEAR_TIE`] of each other (log probabilities read on the worker at `base`):
/// llama.cpp's arithmetic rounds a position's logits differently in a batch of several rows than alone,
/// which can swap such a tie. Any other difference is a fault of the drafts.
/// The widest gap between the two best log probabilities that batch arithmetic may swap. A position's
/// logits computed in a batch of several rows and alone differ by more on some CPUs than on others: the
/// order form's `"product":"` parted at a gap of 0.147 on an AVX2 build (`2` alone, `Er` drafted), while
/// the same answers never parted on an AVX-512 one. A draft that overrules the model gets it wrong by
/// whole logits.
const NEAR_TIE: f64 = 0.25;

async fn assert_near_tie(base: &str, request: &Value, drafted: &str, plain: &str) {
    let common_len = drafted.bytes().zip(plain.bytes()).take_while(|(a, b)| a == b).count();
    let mut scored = request.clone();
    scored["logprobs"] = json!(true);
    scored["top_logprobs"] = json!(2);
    let (status, body) = common::post(base, &scored).await;
    assert_eq!(status, 200, "{body}");
    let mut at = 0;
    for entry in body["choices"][0]["logprobs"]["content"].as_array().unwrap() {
        let token = entry["token"].as_str().unwrap();
        if at + token.len() > common_len {
            let top = entry["top_logprobs"].as_array().unwrap();
            let gap = top[0]["logprob"].as_f64().unwrap() - top[1]["logprob"].as_f64().unwrap();
            eprintln!("answers part after {:?}: {top:?}", &plain[..common_len]);
            let runner_up = top[1]["token"].as_str().unwrap();
            assert!(
                drafted.as_bytes()[at..].starts_with(runner_up.as_bytes()),
                "drafts took a token that was not the runner-up {runner_up:?}:\n{drafted}\n{plain}"
            );
            assert!(gap < NEAR_TIE, "drafts changed a choice that was no tie (gap {gap}):\n{drafted}\n{plain}");
            return;
        }
        at += token.len();
    }
    panic!("no token where the answers part:\n{drafted}\n{plain}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drafted_answers_are_the_undrafted_answers_in_fewer_decode_steps() {
    // The prefix cache off in both: every prompt is read whole, so the two differ in drafts alone.
    let drafting = common::start(&["--prefix-cache", "false", "--draft-max", "8"]);
    let plain = common::start(&["--prefix-cache", "false", "--draft-max", "0"]);
    // Without the repetition guard and the closing bonus, the log probabilities the near-tie check reads
    // are the very logits greedy sampling compares; with them, a penalty could shrink a gap it cannot see.
    let requests: Vec<Value> = (0..6)
        .map(invoice)
        .chain((0..3).map(runaii_testkit::order_form_request))
        .map(|mut request| {
            request["dry_multiplier"] = json!(0);
            request["close_before_limit"] = json!(false);
            request
        })
        .collect();

    let steps = |base: String| async move { common::metric(&base, "runaii_worker_decode_steps_total").await };
    let plain_before = steps(plain.url.clone()).await;
    let expected = answers(&plain.url, &requests).await;
    let plain_steps = steps(plain.url.clone()).await - plain_before;
    let drafting_before = steps(drafting.url.clone()).await;
    let got = answers(&drafting.url, &requests).await;
    let drafting_steps = steps(drafting.url.clone()).await - drafting_before;

    let mut near_ties = 0;
    for (i, (with, without)) in got.iter().zip(&expected).enumerate() {
        if with != without {
            near_ties += 1;
            assert_near_tie(&plain.url, &requests[i], &with.0, &without.0).await;
        }
    }
    assert!(near_ties * 3 <= requests.len(), "{near_ties} of {} answers differ, each at a near tie", requests.len());
    for (content, finish, _) in &expected {
        assert_eq!(finish, "stop", "every extraction ends by itself: {content}");
        let _: Value = serde_json::from_str(content).unwrap();
    }
    let generated: u64 = expected.iter().map(|(_, _, n)| n).sum();
    let guessed = common::metric(&drafting.url, "runaii_worker_draft_tokens_total").await;
    let kept = common::metric(&drafting.url, "runaii_worker_draft_accepted_tokens_total").await;
    eprintln!(
        "{generated} tokens: {plain_steps} decode steps without drafts, {drafting_steps} with; {kept} of {guessed} guessed tokens kept"
    );
    assert!(kept > 0 && kept <= guessed, "answers that copy from their prompt keep guessed tokens: {kept} of {guessed}");
    assert!(kept < generated, "a kept guess is a token of some answer");
    assert!(drafting_steps < plain_steps, "the same answers in fewer decode steps: {drafting_steps} against {plain_steps}");
    assert_eq!(common::metric(&plain.url, "runaii_worker_draft_tokens_total").await, 0, "--draft-max 0 guesses nothing");

    // Streamed, a drafted answer arrives in pieces that add up to the same text.
    let mut streamed = requests[requests.len() - 1].clone();
    streamed["stream"] = json!(true);
    let body = common::post_chat(&drafting.url, &streamed).send().await.unwrap().text().await.unwrap();
    let text: String = runaii_testkit::sse_data(&body)
        .iter()
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .filter_map(|chunk| chunk["choices"][0]["delta"]["content"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(text, got[got.len() - 1].0);
}
