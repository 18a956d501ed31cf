//! Thinking switches on the real model: a Qwen3-style template (given with `--chat-template-file`)
//! renders a constrained request with thinking off and honours `reasoning_effort`; the embedded model's
//! own template, which has no switch, refuses any effort but `none`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{post, MODEL};
use serde_json::{json, Value};

/// The generation prompt of Qwen3's template: with thinking off it writes an empty think block, so the
/// model answers at once.
const QWEN3_STYLE: &str = "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}\
{%- if add_generation_prompt %}<|im_start|>assistant\n\
{%- if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}{% endif %}";

fn request(effort: Option<&str>, constrained: bool) -> Value {
    let mut req = json!({
        "model": MODEL,
        "messages": [{"role": "user", "content": "Capital of France and its population?"}],
        "max_tokens": 24,
        "temperature": 0,
    });
    if let Some(effort) = effort {
        req["reasoning_effort"] = json!(effort);
    }
    if constrained {
        req["response_format"] = json!({"type": "json_schema", "json_schema": {"name": "city", "schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
            "required": ["city", "population"],
        }}});
    }
    req
}

async fn prompt_tokens(base: &str, body: &Value) -> u64 {
    let (status, answer) = post(base, body).await;
    assert_eq!(status, 200, "{answer}");
    answer["usage"]["prompt_tokens"].as_u64().unwrap()
}

async fn refusal(base: &str, body: &Value) -> String {
    let (status, answer) = post(base, body).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["type"], "invalid_request_error");
    assert_eq!(answer["error"]["param"], "reasoning_effort");
    answer["error"]["code"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_thinking_template_is_switched_per_request() {
    let path = std::env::temp_dir().join(format!("runaii-qwen3-style-{}.jinja", std::process::id()));
    std::fs::write(&path, QWEN3_STYLE).unwrap();
    let worker = common::start(&["--chat-template-file", path.to_str().unwrap()]);
    let base = &worker.url;

    // The template's default (thinking on) renders no think block; thinking off renders an empty one.
    let thinking = prompt_tokens(base, &request(None, false)).await;
    let constrained = prompt_tokens(base, &request(None, true)).await;
    assert!(constrained > thinking, "a constrained request renders with thinking off: {constrained} vs {thinking}");
    assert_eq!(prompt_tokens(base, &request(Some("none"), false)).await, constrained, "`none` turns thinking off");
    assert_eq!(prompt_tokens(base, &request(Some("high"), false)).await, thinking, "any other level leaves it on");
    assert_eq!(prompt_tokens(base, &request(Some("none"), true)).await, constrained);

    assert_eq!(refusal(base, &request(Some("high"), true)).await, "reasoning_unsupported", "a grammar leaves no room to think");
    assert_eq!(refusal(base, &request(Some("turbo"), false)).await, "invalid_value");
    let _ = std::fs::remove_file(&path);
}

#[tokio::test]
async fn a_template_without_a_switch_refuses_effort_it_cannot_honour() {
    let worker = common::start(&[]);
    let base = &worker.url;
    let plain = prompt_tokens(base, &request(None, false)).await;
    assert_eq!(prompt_tokens(base, &request(Some("none"), false)).await, plain, "`none` is what this model does anyway");
    assert_eq!(refusal(base, &request(Some("low"), false)).await, "reasoning_unsupported");
    let (status, body) = post(base, &request(None, true)).await;
    assert_eq!(status, 200, "a constrained request works as before: {body}");
}
