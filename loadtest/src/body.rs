//! The JSON body of each kind of request. Prompts are short and varied a little per request, so a prompt
//! cache cannot turn every request into the same one.

use serde_json::{json, Value};

use crate::mix::Kind;

/// What every request of a run shares.
#[derive(Debug, Clone)]
pub struct BodySpec {
    pub model: String,
    pub max_tokens: u32,
}

/// The small object the `json_schema` kind asks for.
#[must_use]
pub fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {"city": {"type": "string"}, "country": {"type": "string"}, "population": {"type": "integer"}},
        "required": ["city", "country", "population"],
        "additionalProperties": false
    })
}

/// An array of more integers than `max_tokens` holds: the answer runs to the limit.
#[must_use]
pub fn long_schema(max_tokens: u32) -> Value {
    json!({"type": "array", "items": {"type": "integer"}, "minItems": max_tokens})
}

const CITIES: [&str; 8] = ["Paris", "Lyon", "Osaka", "Lima", "Oslo", "Quito", "Perth", "Porto"];

/// The body of request number `n` of kind `kind`.
#[must_use]
pub fn build(spec: &BodySpec, kind: Kind, n: u64) -> Value {
    let city = CITIES[usize::try_from(n % CITIES.len() as u64).unwrap_or(0)];
    let mut body = match kind {
        Kind::Plain | Kind::Stream | Kind::Abandon => json!({
            "model": spec.model,
            "messages": [{"role": "user", "content": format!("Write one sentence about {city}.")}],
        }),
        Kind::JsonSchema => json!({
            "model": spec.model,
            "messages": [
                {"role": "system", "content": "Answer with the city's facts."},
                {"role": "user", "content": format!("Tell me about {city}.")}
            ],
            "response_format": {"type": "json_schema", "json_schema": {"name": "city", "strict": true, "schema": schema()}},
        }),
        Kind::Long => json!({
            "model": spec.model,
            "messages": [{"role": "user", "content": format!("List the years {city} was in the news.")}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "years", "schema": long_schema(spec.max_tokens)}},
        }),
    };
    body["max_tokens"] = json!(spec.max_tokens);
    if kind.is_stream() {
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_ask_for_usage_and_schemas_are_objects() {
        let spec = BodySpec { model: "m".into(), max_tokens: 16 };
        let stream = build(&spec, Kind::Abandon, 3);
        assert_eq!(stream["stream_options"]["include_usage"], true);
        assert_eq!(stream["max_tokens"], 16);
        let structured = build(&spec, Kind::JsonSchema, 0);
        assert_eq!(structured["response_format"]["json_schema"]["schema"]["type"], "object");
        assert!(structured.get("stream").is_none());
        let long = build(&spec, Kind::Long, 1);
        assert_eq!(long["response_format"]["json_schema"]["schema"]["minItems"], 16);
        assert!(long.get("stream").is_none());
    }
}
