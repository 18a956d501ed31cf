//! Tool calling on the real embedded model, in every call format: the generic JSON format (its own
//! template has no tool support), Hermes (a Qwen-style template), and the real chat templates of Llama
//! 3.2, Mistral Nemo, Mistral Small 3.2 and gpt-oss (Harmony), each given with `--chat-template-file`. The
//! grammar writes each family's own call syntax; the model's vocabulary holds their markers as text.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::OnceLock;

use common::{post, start, worker, MODEL};
use runaii_testkit::{sse_data, weather_request, weather_tool, WorkerProcess};
use serde_json::{json, Value};

fn with_template(file: &str) -> WorkerProcess {
    let template = runaii_testkit::repo_root().join("worker/tests/data").join(file);
    start(&["--chat-template-file", template.to_str().unwrap()])
}

fn hermes_worker() -> &'static WorkerProcess {
    static WORKER: OnceLock<WorkerProcess> = OnceLock::new();
    WORKER.get_or_init(|| with_template("hermes-template.jinja"))
}

/// The embedded model with each family's real template, by the call format it is read as.
fn family_workers() -> &'static [(&'static str, WorkerProcess)] {
    static WORKERS: OnceLock<Vec<(&'static str, WorkerProcess)>> = OnceLock::new();
    WORKERS.get_or_init(|| {
        [
            ("llama3", "llama-3.2-template.jinja"),
            ("mistral", "mistral-nemo-template.jinja"),
            ("mistral_args", "mistral-small-3.2-template.jinja"),
            ("harmony", "gpt-oss-template.jinja"),
        ]
        .into_iter()
        .map(|(format, file)| (format, with_template(file)))
        .collect()
    })
}

/// Every worker, by the call format it serves: generic, Hermes, then the families.
fn all_workers() -> Vec<(&'static str, &'static str)> {
    let mut all = vec![("generic", worker().url.as_str()), ("hermes", hermes_worker().url.as_str())];
    all.extend(family_workers().iter().map(|(format, w)| (*format, w.url.as_str())));
    all
}

/// Each template is read as its family's format (so the tests below run that format's grammar, not the
/// generic one any template could fall back to).
#[tokio::test]
async fn each_template_is_served_in_its_familys_format() {
    for (format, url) in all_workers() {
        let health = common::get_json(url, "/health").await;
        assert_eq!(health["tool_format"], format, "{health}");
    }
}

/// The weather request, told not to think first (gpt-oss would otherwise write its analysis channel,
/// which this small model does not know how to end).
fn weather(tool_choice: &Value, stream: bool) -> Value {
    let mut request = weather_request(tool_choice, stream);
    request["reasoning_effort"] = json!("none");
    request
}

/// Every call names the weather tool and its arguments validate against its schema.
fn assert_valid_calls(message: &Value) -> usize {
    let calls = message["tool_calls"].as_array().unwrap_or_else(|| panic!("no tool_calls: {message}"));
    let schema = &weather_tool()["function"]["parameters"];
    for call in calls {
        assert!(call["id"].as_str().unwrap().starts_with("call_"));
        assert_eq!(call["type"], "function");
        assert_eq!(call["function"]["name"], "get_weather");
        let args: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
        assert!(jsonschema::is_valid(schema, &args), "{args}");
    }
    calls.len()
}

#[tokio::test]
async fn required_and_named_choices_call_the_tool_with_valid_arguments() {
    for (served, url) in all_workers() {
        for choice in [json!("required"), json!({"type": "function", "function": {"name": "get_weather"}})] {
            let (status, body) = post(url, &weather(&choice, false)).await;
            assert_eq!(status, 200, "{served}: {body}");
            assert_eq!(body["choices"][0]["finish_reason"], "tool_calls", "{served}: {body}");
            assert_eq!(assert_valid_calls(&body["choices"][0]["message"]), 1, "parallel_tool_calls: false");
        }
    }
}

#[tokio::test]
async fn none_answers_in_text_and_auto_may_do_either() {
    for (served, url) in all_workers() {
        let (status, body) = post(url, &weather(&json!("none"), false)).await;
        assert_eq!(status, 200, "{served}: {body}");
        assert!(body["choices"][0]["message"].get("tool_calls").is_none(), "{body}");
        assert!(body["choices"][0]["message"]["content"].is_string());

        let (status, body) = post(url, &weather(&json!("auto"), false)).await;
        assert_eq!(status, 200, "{served}: {body}");
        let message = &body["choices"][0]["message"];
        let content = message["content"].as_str().unwrap_or_default();
        assert!(!content.contains("<|channel|>") && !content.contains("[TOOL_CALLS]"), "{served}: markers are not text: {body}");
        match body["choices"][0]["finish_reason"].as_str().unwrap() {
            "tool_calls" => {
                assert_valid_calls(message);
            }
            _ => assert!(message["content"].is_string(), "{body}"),
        }
    }
}

#[tokio::test]
async fn tools_and_response_format_give_a_call_or_matching_json() {
    let schema =
        json!({"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"], "additionalProperties": false});
    for (served, url) in all_workers() {
        let mut req = weather(&json!("auto"), false);
        req["response_format"] = json!({"type": "json_schema", "json_schema": {"name": "a", "schema": schema}});
        let (status, body) = post(url, &req).await;
        assert_eq!(status, 200, "{served}: {body}");
        let message = &body["choices"][0]["message"];
        if body["choices"][0]["finish_reason"] == "tool_calls" {
            assert_valid_calls(message);
        } else {
            let answer: Value =
                serde_json::from_str(message["content"].as_str().unwrap()).unwrap_or_else(|e| panic!("{served}: {e}: {body}"));
            assert!(jsonschema::is_valid(&schema, &answer), "{served}: {answer}");
        }
    }
}

#[tokio::test]
async fn streamed_calls_send_id_and_name_once_then_arguments() {
    for (served, url) in all_workers() {
        let text = common::post_chat(url, &weather(&json!("required"), true)).send().await.unwrap().text().await.unwrap();
        let events = sse_data(&text);
        assert_eq!(events.last().unwrap(), "[DONE]");
        let chunks: Vec<Value> = events[..events.len() - 1].iter().map(|e| serde_json::from_str(e).unwrap()).collect();
        let deltas: Vec<&Value> = chunks.iter().filter_map(|c| c["choices"][0]["delta"]["tool_calls"].as_array()).flatten().collect();
        let heads: Vec<&&Value> = deltas.iter().filter(|d| d.get("id").is_some()).collect();
        assert_eq!(heads.len(), 1, "{served}: one call, its id sent once: {deltas:?}");
        assert_eq!(heads[0]["function"]["name"], "get_weather");
        let arguments: String = deltas.iter().filter_map(|d| d["function"]["arguments"].as_str()).collect();
        let args: Value = serde_json::from_str(&arguments).unwrap();
        assert!(jsonschema::is_valid(&weather_tool()["function"]["parameters"], &args));
        assert!(deltas.iter().all(|d| d["index"] == 0));
        assert!(chunks.iter().any(|c| c["choices"][0]["finish_reason"] == "tool_calls"));
    }
}

#[tokio::test]
async fn a_tool_round_trip_renders_and_bad_tools_are_refused() {
    // Two calls in one turn, then their results: templates that render one call per turn (Llama 3,
    // Harmony) get one turn per call, each followed by its result; Mistral's get ids of 9 characters.
    let call = |id: &str, city: &str| json!({"id": id, "type": "function", "function": {"name": "get_weather", "arguments": format!("{{\"city\":\"{city}\"}}")}});
    for (served, url) in all_workers() {
        for choice in [json!("none"), json!("auto")] {
            let mut req = weather(&choice, false);
            req["messages"] = json!([
                {"role": "user", "content": "What is the weather in Paris and in Oslo?"},
                {"role": "assistant", "content": null, "tool_calls": [call("call_1", "Paris"), call("call_2", "Oslo")]},
                {"role": "tool", "tool_call_id": "call_1", "content": "{\"temperature\": 21}"},
                {"role": "tool", "tool_call_id": "call_2", "content": "{\"temperature\": 9}"}
            ]);
            let (status, body) = post(url, &req).await;
            assert_eq!(status, 200, "{served}: {body}");
            // Text, calls, or (under `auto`) a call cut at max_tokens, which is neither.
            let message = &body["choices"][0]["message"];
            let cut = body["choices"][0]["finish_reason"] == "length";
            assert!(message["content"].is_string() || message["tool_calls"].is_array() || cut, "{served}: {body}");
        }
    }
    let url = &worker().url;
    let mut unknown = weather_request(&json!({"type": "function", "function": {"name": "nope"}}), false);
    let (status, body) = post(url, &unknown).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "tool_choice");
    unknown["tool_choice"] = json!("auto");
    unknown["tools"] = json!([{"type": "function", "function": {"name": "f", "parameters": {"type": 5}}}]);
    let (status, body) = post(url, &unknown).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "tools");
    let mut bad_args = weather_request(&json!("none"), false);
    bad_args["messages"] = json!([{"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "get_weather", "arguments": "{not json"}}]}]);
    let (status, _) = post(url, &bad_args).await;
    assert_eq!(status, 400);
    let _ = MODEL;
}

/// A tool whose schema leaves its object open (`additionalProperties` unsaid) still gets calls with only
/// the keys it declares: the grammar closes the arguments as it closes a `response_format` schema.
/// Sampled hot, over several seeds, in both formats.
#[tokio::test]
async fn sampled_arguments_hold_only_the_keys_the_tool_declares() {
    let open_tool = json!({"type": "function", "function": {"name": "lookup", "description": "Look up a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}}}});
    for url in [&worker().url, &hermes_worker().url] {
        for seed in 0..6 {
            let request = json!({
                "model": MODEL,
                "messages": [{"role": "user", "content": "Look up Paris, with the country, the population and the mayor."}],
                "tools": [open_tool],
                "tool_choice": "required",
                "parallel_tool_calls": false,
                "max_tokens": 80,
                "temperature": 1.5,
                "seed": seed
            });
            let (status, body) = post(url, &request).await;
            assert_eq!(status, 200, "{body}");
            let calls = body["choices"][0]["message"]["tool_calls"].as_array().unwrap_or_else(|| panic!("no calls: {body}"));
            for call in calls {
                let args: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
                let keys: Vec<&String> = args.as_object().unwrap().keys().collect();
                assert!(keys.iter().all(|k| k.as_str() == "city"), "seed {seed}: undeclared keys in {args}");
            }
        }
    }
}

/// A Harmony model's answer is its final channel, whole and streamed, also without tools: a GBNF grammar
/// makes the embedded model write what gpt-oss writes (thinking, then the final channel). Its log
/// probabilities are refused by name (its tokens are not the content's).
#[tokio::test]
async fn a_harmony_answer_is_its_final_channel() {
    let url = &family_workers().iter().find(|(format, _)| *format == "harmony").unwrap().1.url;
    let grammar =
        r#"root ::= "<|channel|>analysis<|message|>" [a-z ]{1,20} "<|end|><|start|>assistant<|channel|>final<|message|>It is sunny.""#;
    let request = |stream: bool| {
        json!({"model": MODEL, "messages": [{"role": "user", "content": "Weather?"}], "grammar": grammar,
               "max_tokens": 60, "temperature": 0, "stream": stream})
    };
    let (status, body) = post(url, &request(false)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "It is sunny.", "{body}");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    let text = common::post_chat(url, &request(true)).send().await.unwrap().text().await.unwrap();
    let events = sse_data(&text);
    assert_eq!(events.last().unwrap(), "[DONE]", "{text}");
    let content: String = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str::<Value>(e).unwrap())
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(content, "It is sunny.", "{text}");
    let mut logprobs = request(false);
    logprobs["logprobs"] = json!(true);
    let (status, body) = post(url, &logprobs).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "logprobs");
}
