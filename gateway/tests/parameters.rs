//! No parameter is accepted and ignored: every parameter of OpenAI's chat completion request (the list
//! below is the spec's `CreateChatCompletionRequest`, 2.3.0, with the fields its SDKs send) is either
//! honoured (a 200 whose answer shows it) or refused by name (a 400 whose `param` is that parameter),
//! never charged. Engine refusals follow the seed contract: `400 upstream_rejected`, `param` naming the
//! field, the message naming the check.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{spawn_app, MODEL};
use serde_json::{json, Value};

fn tiny() -> Value {
    json!({"model": MODEL, "messages": [{"role": "user", "content": "Say hi."}], "max_completion_tokens": 3, "temperature": 0})
}

/// What a parameter, sent at a value that asks for something, gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Honoured,
    Refused,
}

/// Every documented parameter, a value that asks for something, and what runaii does with it.
fn documented() -> Vec<(&'static str, Value, Expect)> {
    use Expect::{Honoured, Refused};
    vec![
        ("model", json!(MODEL), Honoured),
        ("messages", json!([{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Hi"}]), Honoured),
        ("temperature", json!(0.5), Honoured),
        ("top_p", json!(0.9), Honoured),
        ("seed", json!(7), Honoured),
        ("stop", json!(["\n\n"]), Honoured),
        ("max_tokens", json!(2), Honoured),
        ("max_completion_tokens", json!(2), Honoured),
        ("stream", json!(false), Honoured),
        ("stream_options", Value::Null, Honoured),
        ("response_format", json!({"type": "json_object"}), Honoured),
        ("tools", json!([runaii_testkit::weather_tool()]), Honoured),
        ("tool_choice", json!("none"), Honoured),
        ("parallel_tool_calls", json!(false), Honoured),
        ("frequency_penalty", json!(0.5), Honoured),
        ("presence_penalty", json!(0.5), Honoured),
        ("reasoning_effort", json!("none"), Honoured),
        ("prompt_cache_key", json!("walk"), Honoured),
        ("user", json!("end-user-1"), Honoured),
        ("safety_identifier", json!("end-user-1"), Honoured),
        ("logprobs", json!(true), Honoured),
        ("top_logprobs", json!(2), Honoured),
        ("n", json!(2), Honoured),
        ("logit_bias", json!({"50256": -100}), Refused),
        ("store", json!(true), Refused),
        ("metadata", json!({"order": "A-1024"}), Refused),
        ("service_tier", json!("priority"), Refused),
        ("modalities", json!(["text", "audio"]), Refused),
        ("verbosity", json!("low"), Refused),
        ("audio", json!({"voice": "alloy", "format": "wav"}), Refused),
        ("prediction", json!({"type": "content", "content": "Hi"}), Refused),
        ("web_search_options", json!({}), Refused),
        ("functions", json!([{"name": "f", "parameters": {"type": "object"}}]), Refused),
        ("function_call", json!("auto"), Refused),
        ("prompt_cache_retention", json!("24h"), Refused),
    ]
}

#[tokio::test]
async fn every_documented_chat_parameter_is_honoured_or_refused_by_name() {
    let app = spawn_app().await;
    let mut honoured = 0;
    for (name, value, expect) in documented() {
        let mut body = tiny();
        if name == "tools" {
            body["tool_choice"] = json!("none");
        }
        if name == "max_tokens" {
            body.as_object_mut().unwrap().remove("max_completion_tokens");
        }
        if name == "top_logprobs" {
            body["logprobs"] = json!(true);
        }
        body[name] = value;
        let (status, answer, _) = app.post_json("/v1/chat/completions", &body).await;
        match expect {
            Expect::Honoured => {
                assert_eq!(status, 200, "{name} is honoured: {answer}");
                honoured += 1;
            }
            Expect::Refused => {
                assert_eq!(status, 400, "{name} is refused: {answer}");
                assert_eq!(answer["error"]["param"], name, "{name}: the refusal names it: {answer}");
                assert!(answer["error"]["message"].as_str().unwrap().contains(name), "{name}: {answer}");
            }
        }
    }
    // The answers that show a parameter acted: a stop sequence, a JSON object, the token limit, the
    // tokens' log probabilities.
    let mut limited = tiny();
    limited["max_completion_tokens"] = json!(1);
    let (_, answer, _) = app.post_json("/v1/chat/completions", &limited).await;
    assert_eq!(answer["usage"]["completion_tokens"], 1, "{answer}");
    let mut object = tiny();
    object["response_format"] = json!({"type": "json_object"});
    object["max_completion_tokens"] = json!(24);
    let (_, answer, _) = app.post_json("/v1/chat/completions", &object).await;
    if answer["choices"][0]["finish_reason"] == "stop" {
        assert!(serde_json::from_str::<Value>(answer["choices"][0]["message"]["content"].as_str().unwrap()).unwrap().is_object());
    }

    let mut logprobs = tiny();
    logprobs["logprobs"] = json!(true);
    logprobs["top_logprobs"] = json!(2);
    let (_, answer, _) = app.post_json("/v1/chat/completions", &logprobs).await;
    let tokens = answer["choices"][0]["logprobs"]["content"].as_array().unwrap();
    assert_eq!(tokens.len(), 3, "{answer}");
    assert!(tokens.iter().all(|t| t["top_logprobs"].as_array().unwrap().len() == 2), "{answer}");
    honoured += 1;

    // Two answers: two choices, the prompt billed once, every answer's tokens, and the record as the answer.
    let mut two = tiny();
    two["n"] = json!(2);
    two["temperature"] = json!(1);
    let (_, answer, id) = app.post_json("/v1/chat/completions", &two).await;
    let choices = answer["choices"].as_array().unwrap();
    assert_eq!(choices.iter().map(|c| c["index"].as_u64().unwrap()).collect::<Vec<_>>(), [0, 1], "{answer}");
    assert!(choices.iter().all(|c| c["message"]["content"].is_string()), "{answer}");
    let (_, one, _) = app.post_json("/v1/chat/completions", &tiny()).await;
    assert_eq!(answer["usage"]["prompt_tokens"], one["usage"]["prompt_tokens"], "the prompt once: {answer}");
    let rows = app.cost_rows().await;
    let row = rows.iter().find(|r| r.0 == id).unwrap_or_else(|| panic!("a cost record for {id}: {rows:?}"));
    let billed = (answer["usage"]["prompt_tokens"].as_i64().unwrap(), answer["usage"]["completion_tokens"].as_i64().unwrap());
    assert_eq!((i64::from(row.2), i64::from(row.3)), billed, "{answer}");
    honoured += 2;

    let mut unknown = tiny();
    unknown["temprature"] = json!(0.2);
    let (status, answer, _) = app.post_json("/v1/chat/completions", &unknown).await;
    assert_eq!(
        (status, answer["error"]["param"].as_str(), answer["error"]["code"].as_str()),
        (400, Some("temprature"), Some("unknown_parameter"))
    );

    // Neutral values ask for nothing and pass.
    let mut neutral = tiny();
    for (name, value) in [("logprobs", json!(false)), ("n", json!(1)), ("store", json!(false)), ("service_tier", json!("auto"))] {
        neutral[name] = value;
    }
    let (status, answer, _) = app.post_json("/v1/chat/completions", &neutral).await;
    assert_eq!(status, 200, "{answer}");

    let rows = app.cost_rows().await;
    assert_eq!(rows.len(), honoured + 3, "refusals are not charged, nor recorded: {rows:?}");
}

/// The engine's refusals are the seed contract's `upstream_rejected`: `param` names the field the engine
/// checked (not always `response_format`) and the message names the check.
#[tokio::test]
async fn engine_refusals_name_the_field_and_the_check() {
    let app = spawn_app().await;
    let long = "word ".repeat(5000);
    let cases = [
        (json!({"model": MODEL, "messages": [{"role": "user", "content": long}]}), "messages", "context_length_exceeded"),
        (
            json!({"model": MODEL, "messages": [{"role": "user", "content": "x"}], "grammar": "root ::= \"a\"",
                "response_format": {"type": "json_object"}}),
            "grammar",
            "conflicting_constraints",
        ),
        (
            json!({"model": MODEL, "messages": [{"role": "user", "content": "x"}],
                "response_format": {"type": "json_schema", "json_schema": {"name": "u", "schema":
                    {"type": "array", "items": {"type": "integer"}, "uniqueItems": true, "minItems": 2}}}}),
            "response_format",
            "grammar_rejected",
        ),
        (json!({"model": MODEL, "messages": [{"role": "user", "content": "x"}], "top_logprobs": 2}), "top_logprobs", "invalid_value"),
        (
            json!({"model": MODEL, "messages": [{"role": "user", "content": "x"}], "logprobs": true,
                "tools": [runaii_testkit::weather_tool()]}),
            "logprobs",
            "logprobs_unsupported",
        ),
    ];
    for (body, param, check) in cases {
        let (status, answer, _) = app.post_json("/v1/chat/completions", &body).await;
        assert_eq!(status, 400, "{answer}");
        assert_eq!(answer["error"]["code"], "upstream_rejected", "{answer}");
        assert_eq!(answer["error"]["param"], param, "{answer}");
        assert!(answer["error"]["message"].as_str().unwrap().contains(check), "the message names the check {check}: {answer}");
    }
}
