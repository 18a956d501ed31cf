//! Which chat completion parameters runaii honours, and the refusal, by name, of every other one: a
//! parameter accepted and then ignored (`logprobs: true` answered without them) is worse than a 400, because
//! the client believes it got what it asked for.
//!
//! Every parameter of OpenAI's `CreateChatCompletionRequest` is listed in [`CHAT`], with runaii's
//! extensions; a parameter outside the list is refused as unknown, as OpenAI refuses one.

use serde_json::{Map, Value};

use crate::error::ApiError;

/// What the gateway does with one parameter.
#[derive(Debug, Clone, Copy)]
pub enum Rule {
    /// Sent to the engine, which acts on it (or checks it and refuses it by name).
    Honoured,
    /// Identifies the caller's end user; it never changes an answer (nor does it at OpenAI). Accepted as
    /// a string and written to the request's log line.
    Identifier,
    /// Honoured only at values that ask for nothing runaii lacks (`store: false`, `service_tier: "auto"`); any
    /// other value is refused with the reason.
    Only(fn(&Value) -> bool, &'static str),
    /// Honoured at every well-formed value; one of the wrong type or out of range is refused by name
    /// (`invalid_value`) before anything is held or sent.
    Checked(fn(&Value) -> bool, &'static str),
}

fn absent(v: &Value) -> bool {
    v.is_null()
}

fn absent_or_false(v: &Value) -> bool {
    v.is_null() || *v == Value::Bool(false)
}

fn absent_or_empty(v: &Value) -> bool {
    v.is_null() || v.as_object().is_some_and(Map::is_empty)
}

/// The most answers one chat request may ask for (`n`), as OpenAI allows; a model's workers may allow
/// fewer (one decoding sequence per answer) and refuse more by name.
pub const MAX_CHOICES: u64 = 128;

/// `n`: null or an integer from 1 to [`MAX_CHOICES`].
fn choices_in_range(v: &Value) -> bool {
    v.is_null() || v.as_u64().is_some_and(|n| (1..=MAX_CHOICES).contains(&n))
}

fn bool_or_null(v: &Value) -> bool {
    v.is_null() || v.is_boolean()
}

/// Why a `top_logprobs` out of [`top_logprobs_in_range`] is refused.
pub const TOP_LOGPROBS_RANGE: &str = "top_logprobs must be an integer from 0 to 20";

/// `top_logprobs`: null or an integer from 0 to 20 (OpenAI's range).
pub fn top_logprobs_in_range(v: &Value) -> bool {
    v.is_null() || v.as_u64().is_some_and(|n| n <= u64::from(runaii_wire::MAX_TOP_LOGPROBS))
}

fn standard_tier(v: &Value) -> bool {
    v.is_null() || matches!(v.as_str(), Some("auto" | "default"))
}

fn text_only(v: &Value) -> bool {
    v.is_null() || v.as_array().is_some_and(|m| m.iter().all(|m| m == "text"))
}

fn default_verbosity(v: &Value) -> bool {
    v.is_null() || v == "medium"
}

const STORED: &str = "chat completions are not stored (the Responses API stores answers: /v1/responses)";

/// Every documented chat parameter (OpenAI's spec 2.3.0 and the fields its SDKs send) and runaii's
/// extensions, with what happens to it.
pub const CHAT: &[(&str, Rule)] = &[
    ("model", Rule::Honoured),
    ("messages", Rule::Honoured),
    ("temperature", Rule::Honoured),
    ("top_p", Rule::Honoured),
    ("seed", Rule::Honoured),
    ("stop", Rule::Honoured),
    ("max_tokens", Rule::Honoured),
    ("max_completion_tokens", Rule::Honoured),
    ("stream", Rule::Honoured),
    ("stream_options", Rule::Honoured),
    ("response_format", Rule::Honoured),
    ("tools", Rule::Honoured),
    ("tool_choice", Rule::Honoured),
    ("parallel_tool_calls", Rule::Honoured),
    ("frequency_penalty", Rule::Honoured),
    ("presence_penalty", Rule::Honoured),
    ("reasoning_effort", Rule::Honoured),
    ("prompt_cache_key", Rule::Honoured),
    ("n", Rule::Checked(choices_in_range, "n must be an integer from 1 to 128")),
    ("logprobs", Rule::Checked(bool_or_null, "logprobs must be true or false")),
    ("top_logprobs", Rule::Checked(top_logprobs_in_range, TOP_LOGPROBS_RANGE)),
    ("logit_bias", Rule::Only(absent_or_empty, "logit_bias is not supported by this engine")),
    ("store", Rule::Only(absent_or_false, STORED)),
    (
        "metadata",
        Rule::Only(absent_or_empty, "metadata is kept with stored answers only, and chat completions are not stored (use /v1/responses)"),
    ),
    ("service_tier", Rule::Only(standard_tier, "one service tier is offered: `auto` (or `default`)")),
    ("modalities", Rule::Only(text_only, "the models answer in text only: modalities must be [\"text\"]")),
    ("verbosity", Rule::Only(default_verbosity, "verbosity cannot be steered on these models: only `medium` is accepted")),
    ("audio", Rule::Only(absent, "audio output is not supported")),
    ("prediction", Rule::Only(absent, "predicted outputs are not supported")),
    ("web_search_options", Rule::Only(absent, "web search is not supported")),
    ("functions", Rule::Only(absent, "the deprecated `functions` is not supported: send `tools`")),
    ("function_call", Rule::Only(absent, "the deprecated `function_call` is not supported: send `tool_choice`")),
    (
        "prompt_cache_retention",
        Rule::Only(absent, "prompt cache retention cannot be chosen: cached prefixes live as long as the worker keeps them"),
    ),
    ("user", Rule::Identifier),
    ("safety_identifier", Rule::Identifier),
    // runaii's extensions (llama.cpp's sampler and grammar).
    ("top_k", Rule::Honoured),
    ("grammar", Rule::Honoured),
    ("dry_multiplier", Rule::Honoured),
    ("dry_base", Rule::Honoured),
    ("dry_allowed_length", Rule::Honoured),
    ("close_before_limit", Rule::Honoured),
];

/// The most characters an identifier (`user`, `safety_identifier`) may have.
const MAX_IDENTIFIER_CHARS: usize = 256;

/// Refuses, by name, any parameter of `request` that [`CHAT`] does not honour at the value sent.
///
/// # Errors
/// 400 `unsupported_parameter` naming the parameter (`unknown_parameter` for one not in the list).
pub fn check_chat(request: &Map<String, Value>) -> Result<(), ApiError> {
    check(request, CHAT)
}

/// [`check_chat`] against any list of rules (each dialect keeps its own).
///
/// # Errors
/// As [`check_chat`].
pub fn check(request: &Map<String, Value>, rules: &[(&'static str, Rule)]) -> Result<(), ApiError> {
    for (name, value) in request {
        let Some((name, rule)) = rules.iter().find(|(known, _)| *known == name.as_str()) else {
            return Err(ApiError::UnsupportedParameter {
                name: name.clone(),
                why: "it is not a parameter of this endpoint",
                code: "unknown_parameter",
            });
        };
        match rule {
            Rule::Honoured => {}
            Rule::Identifier => {
                let fits = value.is_null() || value.as_str().is_some_and(|s| s.chars().count() <= MAX_IDENTIFIER_CHARS);
                if !fits {
                    return Err(ApiError::UnsupportedParameter {
                        name: (*name).to_owned(),
                        why: "it must be a string of at most 256 characters",
                        code: "invalid_request_error",
                    });
                }
                if let Some(id) = value.as_str() {
                    tracing::info!(parameter = *name, value = id, "end-user identifier");
                }
            }
            Rule::Only(accepted, why) if !accepted(value) => {
                return Err(ApiError::UnsupportedParameter { name: (*name).to_owned(), why, code: "unsupported_parameter" });
            }
            Rule::Only(..) => {}
            Rule::Checked(valid, why) if !valid(value) => {
                return Err(ApiError::InvalidRequest { message: (*why).to_owned(), param: Some(name), code: "invalid_value" });
            }
            Rule::Checked(..) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn refused(body: Value) -> Option<(String, String)> {
        check_chat(body.as_object().unwrap()).err().map(|e| {
            let body = e.body().error;
            (body.param.unwrap_or_default(), body.code.unwrap_or_default())
        })
    }

    #[test]
    fn neutral_values_pass_and_the_rest_are_refused_by_name() {
        let base = || json!({"model": "m", "messages": []});
        assert_eq!(refused(base()), None);
        for (name, neutral, asking) in [
            ("store", json!(false), json!(true)),
            ("logit_bias", json!({}), json!({"50256": -100})),
            ("service_tier", json!("auto"), json!("priority")),
            ("modalities", json!(["text"]), json!(["text", "audio"])),
            ("functions", Value::Null, json!([{"name": "f"}])),
        ] {
            let mut ok = base();
            ok[name] = neutral;
            assert_eq!(refused(ok), None, "{name}");
            let mut bad = base();
            bad[name] = asking;
            assert_eq!(refused(bad), Some((name.to_owned(), "unsupported_parameter".to_owned())), "{name}");
        }
        let mut unknown = base();
        unknown["temprature"] = json!(1);
        assert_eq!(refused(unknown), Some(("temprature".into(), "unknown_parameter".into())));
        let mut long_user = base();
        long_user["user"] = json!("u".repeat(257));
        assert_eq!(refused(long_user).map(|r| r.0), Some("user".into()));
    }

    #[test]
    fn logprobs_and_n_are_honoured_and_malformed_values_refused_by_name() {
        let with = |fields: Value| {
            let mut body = json!({"model": "m", "messages": []});
            body.as_object_mut().unwrap().extend(fields.as_object().unwrap().clone());
            refused(body)
        };
        for fine in [
            json!({"logprobs": true, "top_logprobs": 20}),
            json!({"logprobs": false, "top_logprobs": 0}),
            json!({"logprobs": null}),
            json!({"n": 3}),
            json!({"n": null}),
        ] {
            assert_eq!(with(fine.clone()), None, "{fine}");
        }
        for (fields, param) in [
            (json!({"logprobs": true, "top_logprobs": 21}), "top_logprobs"),
            (json!({"logprobs": true, "top_logprobs": -1}), "top_logprobs"),
            (json!({"logprobs": true, "top_logprobs": 2.5}), "top_logprobs"),
            (json!({"logprobs": "yes"}), "logprobs"),
            (json!({"n": 0}), "n"),
            (json!({"n": 129}), "n"),
            (json!({"n": 1.5}), "n"),
            (json!({"n": "2"}), "n"),
        ] {
            assert_eq!(with(fields.clone()), Some((param.to_owned(), "invalid_value".to_owned())), "{fields}");
        }
    }
}
