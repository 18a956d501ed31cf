//! Sending one request and reading its answer the way a client would, noting what it was told.

use std::time::Duration;

use futures::StreamExt;
use runaii_sse::SseParser;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use tokio::time::Instant;

use crate::mix::Kind;
use crate::money::parse_amount;
use crate::observe::{Observation, Outcome};

/// Where requests go and how.
#[derive(Debug, Clone)]
pub struct Target {
    pub http: reqwest::Client,
    /// Without a trailing slash, e.g. `http://127.0.0.1:8080`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer`; a mock worker ignores it.
    pub api_key: Option<String>,
    /// For one whole request, answer included.
    pub timeout: Duration,
}

impl Target {
    /// A client fit for thousands of requests per second: no proxy lookups, Nagle off, idle connections
    /// kept for reuse.
    ///
    /// # Errors
    /// When the HTTP client cannot be built.
    pub fn new(base_url: &str, api_key: Option<String>, timeout: Duration) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder()
            .no_proxy()
            .tcp_nodelay(true)
            .pool_max_idle_per_host(4096)
            .connect_timeout(Duration::from_secs(5))
            .build()?;
        Ok(Self { http, base_url: base_url.trim_end_matches('/').to_owned(), api_key, timeout })
    }

    pub(crate) fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.authorized(self.http.get(format!("{}{path}", self.base_url)))
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.api_key {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    }
}

#[derive(Debug, Deserialize)]
struct UsageWire {
    #[serde(default)]
    prompt_tokens: u32,
    #[serde(default)]
    completion_tokens: u32,
    /// Raw JSON: the gateway writes the cost as a number with every digit, which a float would round.
    #[serde(default)]
    cost: Option<Box<RawValue>>,
}

#[derive(Debug, Deserialize)]
struct Whole {
    usage: Option<UsageWire>,
}

#[derive(Debug, Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    #[serde(default)]
    usage: Option<UsageWire>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    delta: Option<Delta>,
}

#[derive(Debug, Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
}

/// Sends request `n` of `kind` with `body`; `due` is when it was due to go (latency counts from there).
pub async fn send(target: &Target, n: u64, kind: Kind, body: &Value, due: Instant) -> Observation {
    let mut seen = Observation {
        n,
        kind,
        status: None,
        request_id: None,
        error_code: None,
        outcome: Outcome::Broken { why: "timed out".into() },
        latency: Duration::ZERO,
        first_token: None,
        content_chunks: 0,
    };
    let deadline = due + target.timeout;
    let outcome = tokio::time::timeout_at(deadline, exchange(target, kind, body, due, &mut seen)).await;
    seen.outcome = outcome.unwrap_or_else(|_| Outcome::Broken { why: format!("no whole answer within {:?}", target.timeout) });
    seen.latency = due.elapsed();
    seen
}

async fn exchange(target: &Target, kind: Kind, body: &Value, due: Instant, seen: &mut Observation) -> Outcome {
    let request = target.authorized(target.http.post(format!("{}/v1/chat/completions", target.base_url))).json(body);
    let response = match request.send().await {
        Ok(r) => r,
        Err(e) => return Outcome::Broken { why: format!("request failed: {e}") },
    };
    let status = response.status();
    seen.status = Some(status.as_u16());
    seen.request_id = response.headers().get("x-request-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
    if !status.is_success() {
        let error: Option<Value> = response.json().await.ok();
        seen.error_code = error.as_ref().and_then(|e| e["error"]["code"].as_str()).map(str::to_owned);
        return if status.is_client_error() { Outcome::Refused } else { Outcome::ServerError };
    }
    if kind.is_stream() {
        return read_stream(response, kind, due, seen).await;
    }
    let text = match response.text().await {
        Ok(t) => t,
        Err(e) => return Outcome::Broken { why: format!("answer unreadable: {e}") },
    };
    match serde_json::from_str::<Whole>(&text) {
        Ok(Whole { usage: Some(usage) }) => completed(&usage),
        Ok(Whole { usage: None }) => Outcome::Broken { why: "answer without usage".into() },
        Err(e) => Outcome::Broken { why: format!("answer is not a chat completion: {e}") },
    }
}

fn completed(usage: &UsageWire) -> Outcome {
    let cost = match usage.cost.as_deref().map(|raw| parse_amount(raw.get())).transpose() {
        Ok(cost) => cost,
        Err(e) => return Outcome::Broken { why: e.to_string() },
    };
    Outcome::Completed { cost, prompt_tokens: usage.prompt_tokens, completion_tokens: usage.completion_tokens }
}

/// Reads chunks until `[DONE]`, an error chunk, or (abandon) the first content, then drops the
/// connection.
async fn read_stream(response: reqwest::Response, kind: Kind, due: Instant, seen: &mut Observation) -> Outcome {
    let mut bytes = response.bytes_stream();
    let mut sse = SseParser::default();
    let mut usage: Option<UsageWire> = None;
    let mut events: Vec<String> = Vec::new();
    loop {
        for data in events.drain(..) {
            if data == "[DONE]" {
                return match &usage {
                    Some(u) => completed(u),
                    None => Outcome::Broken { why: "stream ended without a usage chunk".into() },
                };
            }
            let chunk: Chunk = match serde_json::from_str(&data) {
                Ok(c) => c,
                Err(e) => return Outcome::Broken { why: format!("chunk is not JSON: {e}") },
            };
            if let Some(error) = chunk.error {
                seen.error_code = error["code"].as_str().map(str::to_owned);
                let message = error["message"].as_str().unwrap_or("error chunk").to_owned();
                return Outcome::StreamFailed { message };
            }
            let has_content =
                chunk.choices.iter().any(|c| c.delta.as_ref().and_then(|d| d.content.as_deref()).is_some_and(|t| !t.is_empty()));
            if has_content {
                seen.content_chunks += 1;
                if seen.first_token.is_none() {
                    seen.first_token = Some(due.elapsed());
                }
                if kind == Kind::Abandon {
                    // Returning drops the body stream, which closes the connection mid-answer.
                    return Outcome::Abandoned;
                }
            }
            if chunk.usage.is_some() {
                usage = chunk.usage;
            }
        }
        match bytes.next().await {
            Some(Ok(b)) => events = sse.push(&b),
            Some(Err(e)) => return Outcome::Broken { why: format!("stream broke: {e}") },
            None => {
                return Outcome::Broken { why: "stream ended without [DONE]".into() };
            }
        }
    }
}
