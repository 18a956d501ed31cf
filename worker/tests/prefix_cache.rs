//! Prompt caching on the real model: a request sharing a long prefix with an earlier one reads that
//! prefix from the KV cache, says so in its usage, and answers exactly as it would have uncached.
//! (How much sooner it answers is measured by `examples/prefix_cache.rs`, not asserted here.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{metric, post, MODEL};
use runaii_wire::cache_scope::{self, CacheScope};
use serde_json::{json, Value};

/// A system prompt of well over 1,000 tokens.
fn system_prompt() -> String {
    (1..=60)
        .map(|rule| {
            format!("Rule {rule}: when an invoice mentions item group {rule}, copy its amount exactly as written, keep the currency.\n")
        })
        .collect()
}

fn request(question: &str) -> Value {
    json!({
        "model": MODEL,
        "messages": [{"role": "system", "content": system_prompt()}, {"role": "user", "content": question}],
        "max_tokens": 40,
        "temperature": 0,
    })
}

fn cached(body: &Value) -> u64 {
    body["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap_or_else(|| panic!("no cached_tokens: {body}"))
}

#[tokio::test]
async fn a_shared_prefix_is_read_from_the_cache_and_changes_no_answer() {
    // A worker of its own: its counters and caches see this test only.
    let worker = common::start(&[]);
    let base = &worker.url;
    let first_question = "Invoice 1: item group 7, 120.50 EUR. What is the amount?";

    let (status, cold) = post(base, &request(first_question)).await;
    assert_eq!(status, 200, "{cold}");
    let prompt_tokens = cold["usage"]["prompt_tokens"].as_u64().unwrap();
    assert!(prompt_tokens > 1100, "the prompt is long enough to mean something: {prompt_tokens}");
    assert_eq!(cached(&cold), 0, "nothing is cached on a fresh worker");
    assert_eq!(cold["timings"]["cache_n"], 0);
    assert_eq!(cold["timings"]["prompt_n"], prompt_tokens);

    // Another question behind the same system prompt reuses it.
    let (status, other) = post(base, &request("Invoice 2: item group 9, 88.10 EUR. What is the amount?")).await;
    assert_eq!(status, 200, "{other}");
    let reused = cached(&other);
    assert!(reused >= 1000, "the shared system prompt is read from the cache: {}", other["usage"]);
    assert!(reused < other["usage"]["prompt_tokens"].as_u64().unwrap());
    assert_eq!(other["timings"]["cache_n"], reused);
    assert_eq!(other["timings"]["prompt_n"].as_u64().unwrap() + reused, other["usage"]["prompt_tokens"].as_u64().unwrap());

    // The first question again, now mostly from the cache: the same greedy answer as uncached, and the
    // whole prompt still counted in prompt_tokens.
    let (status, warm) = post(base, &request(first_question)).await;
    assert_eq!(status, 200, "{warm}");
    assert!(cached(&warm) >= 1000, "{}", warm["usage"]);
    assert_eq!(warm["choices"][0]["message"]["content"], cold["choices"][0]["message"]["content"], "the cache changes no answer");
    assert_eq!(warm["usage"]["prompt_tokens"], cold["usage"]["prompt_tokens"]);
    assert_eq!(warm["usage"]["completion_tokens"], cold["usage"]["completion_tokens"]);

    assert_eq!(metric(base, "runaii_worker_prompt_cached_tokens_total").await, reused + cached(&warm));
}

#[tokio::test]
async fn with_the_cache_off_every_prompt_is_decoded_whole() {
    let worker = common::start(&["--prefix-cache", "false"]);
    let question = "Invoice 3: item group 2, 10.00 EUR. What is the amount?";
    for _ in 0..2 {
        let (status, body) = post(&worker.url, &request(question)).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(cached(&body), 0);
    }
}

async fn post_scoped(base: &str, body: &Value, scope: &str) -> Value {
    let url = format!("{base}/v1/chat/completions");
    let r = common::signed_post(&url, &[(cache_scope::HEADER, scope)], serde_json::to_vec(body).unwrap()).send().await.unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

#[tokio::test]
async fn one_tenant_never_reads_another_tenant_s_cached_prefix() {
    // One slot: both tenants' prompts land on the same sequence, so only the scope can keep them apart.
    let worker = common::start(&["--slots", "1"]);
    let base = &worker.url;
    let scope = |name: &[u8]| CacheScope::of_tenant(&runaii_testkit::worker_secrets(), name).header_value().unwrap().to_owned();
    let (a, b) = (scope(b"tenant a"), scope(b"tenant b"));
    let question = request("Invoice 4: item group 3, 7.00 EUR. What is the amount?");

    let first = post_scoped(base, &question, &a).await;
    assert_eq!(cached(&first), 0);
    let neighbour = post_scoped(base, &question, &b).await;
    assert_eq!(cached(&neighbour), 0, "tenant b read tenant a's prompt from the cache: {}", neighbour["usage"]);
    assert_eq!(neighbour["timings"]["cache_n"], 0);
    // b's own prompt, now cached under b, is b's to reuse.
    let again = post_scoped(base, &question, &b).await;
    assert!(cached(&again) >= 1000, "a tenant reuses its own prefix: {}", again["usage"]);
    let unscoped = post(base, &question).await.1;
    assert_eq!(cached(&unscoped), 0, "a request without a scope reads no tenant's cache");

    let url = format!("{base}/v1/chat/completions");
    let r =
        common::signed_post(&url, &[(cache_scope::HEADER, "not a scope")], serde_json::to_vec(&question).unwrap()).send().await.unwrap();
    assert_eq!(r.status(), 400, "a malformed scope is refused, not read as none");
}

/// A long prompt that shares nothing with [`request`]'s but the chat template's first tokens.
fn other_request() -> Value {
    let rules: String = (1..=60).map(|n| format!("Clause {n}: deliveries to depot {n} leave before noon, sealed and weighed.\n")).collect();
    json!({
        "model": MODEL,
        "messages": [{"role": "system", "content": rules}, {"role": "user", "content": "Which depot is first?"}],
        "max_tokens": 8,
        "temperature": 0,
    })
}

#[tokio::test]
async fn an_evicted_prefix_comes_back_from_host_memory_for_its_own_tenant_only() {
    // One sequence: any other prompt takes it, and the first prompt's KV cache leaves it.
    let worker = common::start(&["--slots", "1"]);
    let base = &worker.url;
    let scope = |name: &[u8]| CacheScope::of_tenant(&runaii_testkit::worker_secrets(), name).header_value().unwrap().to_owned();
    let (a, b) = (scope(b"tenant a"), scope(b"tenant b"));
    let question = request("Invoice 5: item group 4, 19.90 EUR. What is the amount?");

    let cold = post_scoped(base, &question, &a).await;
    assert_eq!(cached(&cold), 0);
    // The same prompt from the sequence's own cache: the answer a restored cache must give. (Not the cold
    // one: there the last prompt token is decoded with the whole prompt, here alone, and llama.cpp's
    // arithmetic depends on the batch's shape, which can tip a greedy near tie.)
    let kept = post_scoped(base, &question, &a).await;
    assert_eq!(cached(&kept), cold["usage"]["prompt_tokens"].as_u64().unwrap() - 1);
    let evicting = post_scoped(base, &other_request(), &b).await;
    assert_eq!(cached(&evicting), 0);
    assert!(metric(base, "runaii_worker_prompt_cache_saves_total").await >= 1, "a's prefix was saved when b took the sequence");

    // a's prompt again: restored from host memory, not decoded, and the same greedy answer.
    let warm = post_scoped(base, &question, &a).await;
    let prompt_tokens = warm["usage"]["prompt_tokens"].as_u64().unwrap();
    assert_eq!(cached(&warm), prompt_tokens - 1, "all but the last prompt token restored: {}", warm["usage"]);
    assert_eq!(warm["timings"]["prompt_n"], 1);
    assert_eq!(warm["choices"][0]["message"]["content"], kept["choices"][0]["message"]["content"], "a restored cache changes no answer");
    assert_eq!(metric(base, "runaii_worker_prompt_cache_restores_total").await, 1);
    assert_eq!(metric(base, "runaii_worker_prompt_restored_tokens_total").await, prompt_tokens - 1);
    assert!(metric(base, "runaii_worker_saved_prefix_bytes").await > 0);

    // b sends a's prompt: a's saved state is not b's to read.
    let neighbour = post_scoped(base, &question, &b).await;
    assert_eq!(cached(&neighbour), 0, "tenant b read tenant a's saved prefix: {}", neighbour["usage"]);
    assert_eq!(metric(base, "runaii_worker_prompt_cache_restores_total").await, 1);
}

#[tokio::test]
async fn without_host_memory_an_evicted_prefix_is_decoded_again() {
    let worker = common::start(&["--slots", "1", "--prompt-cache-mib", "0"]);
    let base = &worker.url;
    let question = request("Invoice 6: item group 5, 3.50 EUR. What is the amount?");
    assert_eq!(cached(&post(base, &question).await.1), 0);
    post(base, &other_request()).await;
    let again = post(base, &question).await.1;
    assert!(
        cached(&again) < 16,
        "the prefix left with its sequence (only the chat template's first tokens are shared): {}",
        again["usage"]
    );
    assert_eq!(metric(base, "runaii_worker_prompt_cache_saves_total").await, 0);
}
