//! Black-box tests of the worker's HTTP API on the real embedded model.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{get_json, invoice_request, invoice_schema, post, worker, MODEL};
use serde_json::{json, Value};

fn content(body: &Value) -> &str {
    body["choices"][0]["message"]["content"].as_str().expect("content is a string")
}

fn assert_usage(body: &Value) {
    let u = &body["usage"];
    let (p, c, t) = (u["prompt_tokens"].as_u64().unwrap(), u["completion_tokens"].as_u64().unwrap(), u["total_tokens"].as_u64().unwrap());
    assert!(p > 0 && c > 0, "usage counts tokens: {u}");
    assert_eq!(p + c, t);
    // Always present, as OpenAI sends it: SDK code reads it without a null check.
    let cached = u["prompt_tokens_details"]["cached_tokens"].as_u64().expect("usage.prompt_tokens_details.cached_tokens");
    assert!(cached < p, "at least the last prompt token is decoded: {u}");
    let timings = &body["timings"];
    for key in ["queue_ms", "prompt_ms", "generation_ms"] {
        assert!(timings[key].as_f64().is_some(), "timings.{key} present: {timings}");
    }
}

#[tokio::test]
async fn invoice_json_schema_answer_validates() {
    let (status, body) = post(&worker().url, &invoice_request()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["choices"][0]["finish_reason"], "stop", "{body}");
    let answer: Value = serde_json::from_str(content(&body)).expect("answer is JSON");
    assert!(jsonschema::is_valid(&invoice_schema(), &answer), "answer {answer} matches the schema");
    // Keys come in the schema's declaration order, with no whitespace between tokens.
    let keys: Vec<&String> = answer.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["invoice_number", "due_date", "total", "currency"]);
    assert!(!content(&body).contains('\n'), "compact JSON: {}", content(&body));
    assert_usage(&body);
}

#[tokio::test]
async fn json_object_answer_is_an_object() {
    let req = json!({
        "model": MODEL,
        "messages": [{"role": "user", "content": "Describe a cat as JSON with name and age."}],
        "response_format": {"type": "json_object"},
        "max_tokens": 200,
        "seed": 7
    });
    let (status, body) = post(&worker().url, &req).await;
    assert_eq!(status, 200, "{body}");
    let finish = body["choices"][0]["finish_reason"].as_str().unwrap();
    if finish == "stop" {
        let v: Value = serde_json::from_str(content(&body)).expect("JSON");
        assert!(v.is_object(), "{v}");
    } else {
        assert_eq!(finish, "length");
        assert!(content(&body).starts_with('{'));
    }
    assert_usage(&body);
}

#[tokio::test]
async fn gbnf_grammar_is_enforced() {
    let req = json!({
        "model": MODEL,
        "messages": [{"role": "user", "content": "Is Paris in France? Answer yes or no."}],
        "grammar": "root ::= (\"yes\" | \"no\") \"!\"",
        "temperature": 1.5,
        "seed": 3
    });
    for _ in 0..3 {
        let (status, body) = post(&worker().url, &req).await;
        assert_eq!(status, 200, "{body}");
        assert!(["yes!", "no!"].contains(&content(&body)), "{body}");
        assert_eq!(body["choices"][0]["finish_reason"], "stop");
    }
}

#[tokio::test]
async fn seed_makes_sampling_repeatable_and_stop_cuts() {
    let req = json!({
        "model": MODEL,
        "messages": [{"role": "user", "content": "Write a short poem about the sea."}],
        "temperature": 0.9,
        "seed": 1234,
        "max_tokens": 40
    });
    let (_, a) = post(&worker().url, &req).await;
    let (_, b) = post(&worker().url, &req).await;
    assert_eq!(content(&a), content(&b));
    let text = content(&a).to_owned();
    // A stop sequence taken from inside the first answer cuts the second one right before it.
    let word: String = text.chars().skip(text.chars().count() / 2).take(3).collect();
    let mut with_stop = req.clone();
    with_stop["stop"] = json!([word]);
    let (status, c) = post(&worker().url, &with_stop).await;
    assert_eq!(status, 200);
    assert_eq!(c["choices"][0]["finish_reason"], "stop");
    assert!(text.starts_with(content(&c)) && !content(&c).contains(&word), "{:?} cut at {word:?}", content(&c));
}

#[tokio::test]
async fn max_tokens_cut_is_reported_as_length() {
    let req = json!({
        "model": MODEL,
        "messages": [{"role": "user", "content": "List twenty animals."}],
        "max_completion_tokens": 5,
        "temperature": 0
    });
    let (status, body) = post(&worker().url, &req).await;
    assert_eq!(status, 200);
    assert_eq!(body["choices"][0]["finish_reason"], "length");
    assert_eq!(body["usage"]["completion_tokens"], 5);
}

#[tokio::test]
async fn cut_constrained_answer_is_length_not_an_error() {
    let mut req = invoice_request();
    req["max_tokens"] = json!(4);
    let (status, body) = post(&worker().url, &req).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["finish_reason"], "length");
    assert!(serde_json::from_str::<Value>(content(&body)).is_err(), "a cut answer is not complete JSON");
}

async fn assert_error(body: Value, want_status: u16, code: &str) -> Value {
    let (status, resp) = post(&worker().url, &body).await;
    assert_eq!(status, want_status, "{resp}");
    let err = &resp["error"];
    assert_eq!(err["code"], code, "{resp}");
    assert!(err["message"].as_str().is_some_and(|m| !m.is_empty()));
    assert!(err.get("param").is_some() && err.get("type").is_some(), "all four keys: {resp}");
    resp
}

#[tokio::test]
async fn bad_input_is_a_clear_4xx_and_the_worker_lives() {
    let base = &worker().url;
    let raw = common::signed_post(&format!("{base}/v1/chat/completions"), &[], b"{\"model\": ".to_vec()).send().await.unwrap();
    assert_eq!(raw.status(), 400);
    let body: Value = raw.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_json");

    let user = json!([{"role": "user", "content": "hi"}]);
    assert_error(json!({"model": "no-such-model", "messages": user}), 404, "model_not_found").await;
    assert_error(json!({"model": MODEL, "messages": []}), 400, "invalid_value").await;
    // The error names what to shorten: the output asked for, or the messages when they fill the window.
    let too_much_output =
        assert_error(json!({"model": MODEL, "messages": user, "max_tokens": 1_000_000_000_000_i64}), 400, "context_length_exceeded").await;
    assert_eq!(too_much_output["error"]["param"], "max_tokens", "{too_much_output}");
    assert_error(json!({"model": MODEL, "messages": user, "max_tokens": 0}), 400, "invalid_value").await;
    assert_error(json!({"model": MODEL, "messages": user, "temperature": 7}), 400, "invalid_value").await;
    // More answers than the worker runs sequences (8 by default), or none.
    for n in [9, 0] {
        let refused = assert_error(json!({"model": MODEL, "messages": user, "n": n}), 400, "invalid_value").await;
        assert_eq!(refused["error"]["param"], "n", "{refused}");
    }
    let long = "word ".repeat(10_000);
    let too_long =
        assert_error(json!({"model": MODEL, "messages": [{"role": "user", "content": long}]}), 400, "context_length_exceeded").await;
    assert_eq!(too_long["error"]["param"], "messages", "{too_long}");
    assert_error(
        json!({"model": MODEL, "messages": user, "response_format": {"type": "json_object"}, "grammar": "root ::= \"a\""}),
        400,
        "conflicting_constraints",
    )
    .await;
    let schema_format = |schema: Value| json!({"type": "json_schema", "json_schema": {"name": "x", "schema": schema}});
    assert_error(json!({"model": MODEL, "messages": user, "response_format": schema_format(json!({"type": 5}))}), 400, "invalid_schema")
        .await;
    // Valid JSON Schema keywords the engine cannot enforce, even narrowed (`constraint/narrow.rs`), are
    // refused, never dropped.
    for schema in [
        json!({"type": "array", "items": {"type": "integer"}, "uniqueItems": true, "minItems": 2}),
        json!({"type": "string", "not": {"pattern": "^a"}}),
        json!({"type": "string", "format": "regex"}),
    ] {
        assert_error(json!({"model": MODEL, "messages": user, "response_format": schema_format(schema)}), 400, "grammar_rejected").await;
    }
    assert_error(json!({"model": MODEL, "messages": user, "grammar": "root ::= ( \"a\""}), 400, "grammar_rejected").await;
    assert_error(json!({"model": MODEL, "messages": user, "grammar": "start ::= \"a\""}), 400, "grammar_rejected").await;
    let deep = format!("root ::= {}\"a\"{}", "(".repeat(20_000), ")".repeat(20_000));
    assert_error(json!({"model": MODEL, "messages": user, "grammar": deep}), 400, "grammar_rejected").await;
    assert_error(json!({"model": MODEL, "messages": [{"role": "wizard", "content": "x"}]}), 400, "invalid_value").await;
    let tool = json!([{"type": "retrieval"}]);
    assert_error(json!({"model": MODEL, "messages": user, "tools": tool}), 400, "invalid_value").await;

    // The worker refuses after reading its 4 MiB and closes the connection. A client still writing the
    // rest may see that close instead of the 413 (a race on loopback: it failed a CI run): an upload cut
    // short is a refusal too, and one of a few tries must read the 413 itself.
    let oversized = "x".repeat(5 * 1024 * 1024);
    let mut answered = false;
    for _ in 0..5 {
        match common::signed_post(&format!("{base}/v1/chat/completions"), &[], oversized.clone().into_bytes()).send().await {
            Ok(r) => {
                assert_eq!(r.status(), 413);
                answered = true;
                break;
            }
            Err(e) => assert!(e.is_request() && !e.is_timeout(), "neither a 413 nor an upload cut short: {e}"),
        }
    }
    assert!(answered, "no try read the 413");

    let health = get_json(base, "/health").await;
    assert_eq!(health["status"], "ok", "worker still alive: {health}");
}

#[tokio::test]
async fn health_and_metrics_describe_the_replica() {
    let base = &worker().url;
    let health = get_json(base, "/health").await;
    assert_eq!(health["model"], MODEL);
    assert!(health["context_length"].as_u64().unwrap() >= 1024);
    assert!(health["slots"].as_u64().unwrap() >= 1);
    assert!(health["supports_tools"].is_boolean());
    assert_eq!(common::metric(base, "runaii_worker_ready").await, 1);
}

/// Anything that can reach a worker but is not a gateway gets no inference: no credential, a wrong one,
/// the secret itself sent as the token, the static bearer token (weaker: only for `--accept-bearer`),
/// or a gateway's signed request copied off the network and replayed, edited, or sent late.
#[tokio::test]
async fn inference_needs_a_fresh_gateway_signature_and_health_stays_open() {
    use runaii_wire::request_signature::HEADER;
    let base = &worker().url;
    let request = json!({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1});
    let body = serde_json::to_vec(&request).unwrap();
    let url = format!("{base}/v1/chat/completions");
    let path = "/v1/chat/completions";
    let captured = runaii_testkit::worker_signature("POST", path, "", "", &body);
    let (status, answer) = common::post(base, &request).await;
    assert_eq!(status, 200, "the gateway's signature is accepted: {answer}");
    let accepted = common::client().post(&url).header(HEADER, &captured).header("content-type", "application/json").body(body.clone());
    assert_eq!(accepted.send().await.unwrap().status(), 200, "a fresh signature, once");

    let edited =
        serde_json::to_vec(&json!({"model": MODEL, "messages": [{"role": "user", "content": "write an essay"}], "max_tokens": 500}))
            .unwrap();
    let other_scope = runaii_testkit::worker_signature("POST", path, "", "", &body);
    let now_ms = u64::try_from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()).unwrap();
    let late = runaii_wire::request_signature::sign(
        &runaii_testkit::worker_secrets(),
        &runaii_wire::request_signature::Signed { method: "POST", path, scope: "", priority: "", body: &body },
        now_ms - 60_000,
        [9; 16],
    );
    let anonymous = common::anonymous_client;
    let refusals = [
        ("no credential", anonymous().post(&url).json(&request)),
        ("a wrong token", anonymous().post(&url).bearer_auth("not-the-token").json(&request)),
        ("the secret as a token", anonymous().post(&url).bearer_auth(runaii_testkit::WORKER_SECRET).json(&request)),
        ("the static bearer", anonymous().post(&url).header("authorization", runaii_testkit::worker_bearer()).json(&request)),
        ("a replay", anonymous().post(&url).header(HEADER, &captured).body(body.clone())),
        ("another body", anonymous().post(&url).header(HEADER, &captured).body(edited)),
        (
            "another tenant's cache",
            anonymous().post(&url).header(HEADER, &other_scope).header(runaii_wire::cache_scope::HEADER, "victim").body(body.clone()),
        ),
        ("a minute late", anonymous().post(&url).header(HEADER, &late).body(body.clone())),
    ];
    for (what, refused) in refusals {
        let r = refused.send().await.unwrap();
        assert_eq!(r.status(), 401, "{what}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], "invalid_worker_credential", "{what}: {body}");
        assert!(body.get("choices").is_none());
    }
    let health = common::anonymous_client().get(format!("{base}/health")).send().await.unwrap();
    assert_eq!(health.status(), 200, "probes need no credential");
}

/// What a request consumed is kept for the gateway that cut it, in the request's scope only: a stream
/// left after its first event is billed for the prompt the worker read and the tokens it generated,
/// although no chunk carried them.
#[tokio::test]
async fn a_left_request_s_receipt_tells_its_work_to_its_scope_only() {
    use runaii_wire::cache_scope::{self, CacheScope};
    let base = &worker().url;
    let scope = CacheScope::of_tenant(&runaii_testkit::worker_secrets(), b"receipt tenant");
    let scope = scope.header_value().unwrap();
    let request = runaii_testkit::long_answer_request(400, 2000, true);
    let url = format!("{base}/v1/chat/completions");
    let headers = [(cache_scope::HEADER, scope), ("x-request-id", "chatcmpl-receipt-1")];
    let mut response = common::signed_post(&url, &headers, serde_json::to_vec(&request).unwrap()).send().await.unwrap();
    assert_eq!(response.status(), 200);
    response.chunk().await.unwrap().unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    drop(response);

    let path = "/v1/requests/chatcmpl-receipt-1/usage";
    let ask = |scope: &str| {
        let signature = runaii_testkit::worker_signature("GET", path, scope, "", b"");
        let mut get = common::client().get(format!("{base}{path}")).header(runaii_wire::request_signature::HEADER, signature);
        if !scope.is_empty() {
            get = get.header(cache_scope::HEADER, scope);
        }
        get
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let consumed = loop {
        let r = ask(scope).send().await.unwrap();
        assert_eq!(r.status(), 200);
        let consumed: Value = r.json().await.unwrap();
        if consumed["ended"] == true {
            break consumed;
        }
        assert!(std::time::Instant::now() < deadline, "the left request never ended: {consumed}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert!(consumed["prompt_tokens"].as_u64().unwrap() > 10, "{consumed}");
    let generated = consumed["completion_tokens"].as_u64().unwrap();
    assert!(generated > 0 && generated < 2000, "generated until the client left: {consumed}");

    let other = CacheScope::of_tenant(&runaii_testkit::worker_secrets(), b"someone else");
    assert_eq!(ask(other.header_value().unwrap()).send().await.unwrap().status(), 404, "another tenant's scope reads nothing");
    assert_eq!(ask("").send().await.unwrap().status(), 404);
    let unsigned = common::anonymous_client().get(format!("{base}{path}")).header(cache_scope::HEADER, scope).send().await.unwrap();
    assert_eq!(unsigned.status(), 401);
}
