//! The OpenAPI document: the committed `openapi/openapi.json` is what the code generates, the gateway
//! serves that same document, and real answers of the running gateway (every documented operation at
//! least once, successes and errors) match the schemas, status codes and content types it declares.
//!
//! `UPDATE_OPENAPI=1 cargo test -p runaii-gateway --test openapi` rewrites the committed file.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;
use std::sync::Mutex;

use common::{admin_token, client, create_key, spawn_app, spawn_app_with, TestApp, MODEL};
use reqwest::Method;
use serde_json::{json, Value};

fn committed_path() -> std::path::PathBuf {
    runaii_testkit::repo_root().join("openapi/openapi.json")
}

fn committed() -> Value {
    let text = std::fs::read_to_string(committed_path()).expect("openapi/openapi.json is missing: run with UPDATE_OPENAPI=1");
    serde_json::from_str(&text).expect("openapi/openapi.json is not JSON")
}

#[test]
fn committed_document_is_current() {
    let generated = runaii_gateway::openapi::to_json();
    let path = committed_path();
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    if on_disk != generated {
        let line = on_disk
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| on_disk.lines().count().min(generated.lines().count()));
        panic!(
            "openapi/openapi.json is stale: the code generates another document (first difference at line {}: \
             committed {:?}, generated {:?}).\nRegenerate and commit it: \
             `UPDATE_OPENAPI=1 cargo test -p runaii-gateway --test openapi` \
             (or `cargo run -p runaii-gateway -- openapi > openapi/openapi.json`).",
            line + 1,
            on_disk.lines().nth(line).unwrap_or("<end of file>"),
            generated.lines().nth(line).unwrap_or("<end of file>"),
        );
    }
}

#[tokio::test]
async fn the_gateway_serves_the_committed_document() {
    let app = spawn_app().await;
    let response = client().get(format!("{}/openapi.json", app.base)).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    let served: Value = response.json().await.unwrap();
    assert_eq!(served, committed(), "GET /openapi.json differs from openapi/openapi.json");
}

/// The committed document, and which operations real answers have exercised.
struct Spec {
    doc: Value,
    seen: Mutex<BTreeSet<(String, String)>>,
}

impl Spec {
    fn new() -> Self {
        Self { doc: committed(), seen: Mutex::new(BTreeSet::new()) }
    }

    /// Checks one real answer of `method template` against the document: its status is declared, its
    /// content type is one declared for that status, and a JSON body matches the declared schema.
    fn check(&self, method: &Method, template: &str, status: u16, content_type: &str, body: &str) {
        let what = format!("{method} {template} → {status}");
        let operation = &self.doc["paths"][template][method.as_str().to_lowercase()];
        assert!(operation.is_object(), "{what}: the operation is not documented");
        let mut response = &operation["responses"][status.to_string()];
        assert!(response.is_object(), "{what}: status not documented; body: {body}");
        if let Some(reference) = response["$ref"].as_str() {
            response = self.doc.pointer(reference.trim_start_matches('#')).unwrap_or_else(|| panic!("{what}: dangling {reference}"));
        }
        let media = content_type.split(';').next().unwrap_or_default().trim();
        let content = &response["content"][media];
        assert!(content.is_object(), "{what}: content type {content_type:?} not documented ({})", response["content"]);
        if status < 300 {
            self.seen.lock().unwrap().insert((method.as_str().to_lowercase(), template.to_owned()));
        }
        if media != "application/json" {
            return;
        }
        let instance: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {body}"));
        self.validate(&content["schema"], &instance, &what);
    }

    fn validate(&self, schema: &Value, instance: &Value, what: &str) {
        // The schema's `$ref`s point into the document's components, so they travel with it.
        let root = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "components": self.doc["components"],
            "allOf": [schema],
        });
        let validator =
            jsonschema::options().should_validate_formats(true).build(&root).unwrap_or_else(|e| panic!("{what}: bad schema: {e}"));
        let errors: Vec<String> = validator.iter_errors(instance).map(|e| format!("{} at {}", e, e.instance_path())).collect();
        assert!(errors.is_empty(), "{what}: the answer does not match the document:\n{}\nanswer: {instance}", errors.join("\n"));
    }

    fn schema(&self, name: &str) -> Value {
        json!({"$ref": format!("#/components/schemas/{name}")})
    }

    /// Checks a `text/event-stream` body event by event, as Schemathesis does: each `{event?, data}`
    /// against the stream's event schema `component`, and each JSON `data` against its `contentSchema`
    /// (which the validator here only reads as an annotation).
    fn validate_sse(&self, component: &str, body: &str) -> usize {
        let data_schema = &self.doc["components"]["schemas"][component]["properties"]["data"];
        let content_schema = std::iter::once(data_schema)
            .chain(data_schema["anyOf"].as_array().into_iter().flatten())
            .find_map(|s| s.get("contentSchema"))
            .unwrap_or_else(|| panic!("{component}: no contentSchema for data"));
        let mut events = 0;
        for block in body.split("\n\n").filter(|b| !b.trim().is_empty()) {
            let mut event = serde_json::Map::new();
            let mut data = Vec::new();
            for line in block.lines() {
                if let Some(name) = line.strip_prefix("event:") {
                    event.insert("event".into(), json!(name.trim()));
                } else if let Some(d) = line.strip_prefix("data:") {
                    data.push(d.strip_prefix(' ').unwrap_or(d));
                }
            }
            let data = data.join("\n");
            event.insert("data".into(), json!(data));
            let what = format!("{component} event {events}");
            self.validate(&self.schema(component), &Value::Object(event), &what);
            if data != "[DONE]" {
                self.validate(content_schema, &serde_json::from_str(&data).unwrap_or_else(|e| panic!("{what}: {e}: {data}")), &what);
            }
            events += 1;
        }
        events
    }

    /// Every documented operation has been seen answering 2xx.
    fn assert_all_seen(&self) {
        let seen = self.seen.lock().unwrap();
        let mut missing = Vec::new();
        for (path, item) in self.doc["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                if !seen.contains(&(method.clone(), path.clone())) {
                    missing.push(format!("{method} {path}"));
                }
            }
        }
        assert!(missing.is_empty(), "documented operations no test answer exercised: {missing:?}");
    }
}

/// One request: what to send and how to check the answer.
struct Call<'a> {
    method: Method,
    template: &'a str,
    path: String,
    auth: Auth<'a>,
    body: Option<Value>,
    form: Option<reqwest::multipart::Form>,
    headers: Vec<(&'a str, &'a str)>,
}

enum Auth<'a> {
    None,
    Bearer(&'a str),
    XApiKey(&'a str),
}

impl<'a> Call<'a> {
    fn new(method: Method, template: &'a str, path: impl Into<String>, auth: Auth<'a>) -> Self {
        Self { method, template, path: path.into(), auth, body: None, form: None, headers: Vec::new() }
    }

    /// A multipart form with a file part `file` holding `bytes`, and `purpose`.
    fn upload(mut self, bytes: Vec<u8>, purpose: &str) -> Self {
        let file = reqwest::multipart::Part::bytes(bytes).file_name("input.jsonl");
        self.form = Some(reqwest::multipart::Form::new().text("purpose", purpose.to_owned()).part("file", file));
        self
    }

    fn body(mut self, body: Value) -> Self {
        self.body = Some(body);
        self
    }

    fn header(mut self, name: &'a str, value: &'a str) -> Self {
        self.headers.push((name, value));
        self
    }

    /// Sends it, checks the answer against the document and the expected status; returns the body.
    async fn expect(self, app: &TestApp, spec: &Spec, want: u16) -> (String, reqwest::header::HeaderMap) {
        let mut request = client().request(self.method.clone(), format!("{}{}", app.base, self.path));
        request = match self.auth {
            Auth::None => request,
            Auth::Bearer(token) => request.bearer_auth(token),
            Auth::XApiKey(key) => request.header("x-api-key", key),
        };
        for (name, value) in &self.headers {
            request = request.header(*name, *value);
        }
        if let Some(body) = &self.body {
            request = request.json(body);
        }
        if let Some(form) = self.form {
            request = request.multipart(form);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let content_type = headers.get("content-type").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
        let text = response.text().await.unwrap();
        assert_eq!(status, want, "{} {}: {text}", self.method, self.path);
        assert!(headers.contains_key("x-request-id") && headers.contains_key("request-id"), "{} {}: no request id", self.method, self.path);
        spec.check(&self.method, self.template, status, &content_type, &text);
        (text, headers)
    }
}

fn tiny_chat() -> Value {
    json!({"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "temperature": 0})
}

#[tokio::test]
async fn real_answers_match_the_document() {
    let spec = Spec::new();
    let app = spawn_app().await;
    let key = app.key.as_str();
    public_routes(&app, &spec, key).await;
    inference_routes(&app, &spec, key).await;
    inference_errors(&app, &spec, key).await;
    file_routes(&app, &spec, key).await;
    admin_routes(&app, &spec).await;

    // Without a JWT secret or key the admin API is off: 503.
    let disabled = spawn_app_with(|s| s.admin.admin_jwt_secret = None).await;
    let token = admin_token(&["admin"], None);
    Call::new(Method::GET, "/admin/v1/tenants", "/admin/v1/tenants", Auth::Bearer(&token)).expect(&disabled, &spec, 503).await;

    spec.assert_all_seen();
}

async fn file_routes(app: &TestApp, spec: &Spec, key: &str) {
    use Method as M;
    let line = json!({"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": tiny_chat()}).to_string();
    let (text, _) = Call::new(M::POST, "/v1/files", "/v1/files", Auth::Bearer(key))
        .upload(line.clone().into_bytes(), "batch")
        .expect(app, spec, 200)
        .await;
    let id = serde_json::from_str::<Value>(&text).unwrap()["id"].as_str().unwrap().to_owned();
    Call::new(M::POST, "/v1/files", "/v1/files", Auth::Bearer(key)).upload(line.into_bytes(), "fine-tune").expect(app, spec, 400).await;
    Call::new(M::POST, "/v1/files", "/v1/files", Auth::None).upload(Vec::new(), "batch").expect(app, spec, 401).await;
    Call::new(M::GET, "/v1/files", "/v1/files?limit=1", Auth::Bearer(key)).expect(app, spec, 200).await;
    Call::new(M::GET, "/v1/files", "/v1/files?limit=0", Auth::Bearer(key)).expect(app, spec, 400).await;
    Call::new(M::GET, "/v1/files/{id}", format!("/v1/files/{id}"), Auth::Bearer(key)).expect(app, spec, 200).await;
    Call::new(M::GET, "/v1/files/{id}/content", format!("/v1/files/{id}/content"), Auth::Bearer(key)).expect(app, spec, 200).await;
    batch_routes(app, spec, key, &id).await;
    Call::new(M::DELETE, "/v1/files/{id}", format!("/v1/files/{id}"), Auth::Bearer(key)).expect(app, spec, 200).await;
    Call::new(M::GET, "/v1/files/{id}", format!("/v1/files/{id}"), Auth::Bearer(key)).expect(app, spec, 404).await;
    Call::new(M::GET, "/v1/files/{id}/content", format!("/v1/files/{id}/content"), Auth::Bearer(key)).expect(app, spec, 404).await;
    Call::new(M::DELETE, "/v1/files/{id}", format!("/v1/files/{id}"), Auth::Bearer(key)).expect(app, spec, 404).await;
}

async fn batch_routes(app: &TestApp, spec: &Spec, key: &str, file: &str) {
    use Method as M;
    let create = json!({"input_file_id": file, "endpoint": "/v1/chat/completions", "completion_window": "24h"});
    let (text, _) = Call::new(M::POST, "/v1/batches", "/v1/batches", Auth::Bearer(key)).body(create.clone()).expect(app, spec, 200).await;
    let id = serde_json::from_str::<Value>(&text).unwrap()["id"].as_str().unwrap().to_owned();
    let bad = json!({"input_file_id": file, "endpoint": "/v1/embeddings", "completion_window": "24h"});
    Call::new(M::POST, "/v1/batches", "/v1/batches", Auth::Bearer(key)).body(bad).expect(app, spec, 400).await;
    Call::new(M::POST, "/v1/batches", "/v1/batches", Auth::None).body(create).expect(app, spec, 401).await;
    Call::new(M::GET, "/v1/batches", "/v1/batches?limit=5", Auth::Bearer(key)).expect(app, spec, 200).await;
    Call::new(M::GET, "/v1/batches/{id}", format!("/v1/batches/{id}"), Auth::Bearer(key)).expect(app, spec, 200).await;
    Call::new(M::GET, "/v1/batches/{id}", "/v1/batches/batch_nope", Auth::Bearer(key)).expect(app, spec, 404).await;
    Call::new(M::POST, "/v1/batches/{id}/cancel", format!("/v1/batches/{id}/cancel"), Auth::Bearer(key)).expect(app, spec, 200).await;
}

async fn public_routes(app: &TestApp, spec: &Spec, key: &str) {
    use Method as M;
    Call::new(M::GET, "/health", "/health", Auth::None).expect(app, spec, 200).await;
    Call::new(M::GET, "/openapi.json", "/openapi.json", Auth::None).expect(app, spec, 200).await;
    let ops = admin_token(&["ops"], None);
    Call::new(M::GET, "/metrics", "/metrics", Auth::Bearer(&ops)).expect(app, spec, 200).await;
    Call::new(M::GET, "/metrics", "/metrics", Auth::None).expect(app, spec, 401).await;
    Call::new(M::GET, "/metrics", "/metrics", Auth::Bearer(key)).expect(app, spec, 401).await;
    let confined = admin_token(&["ops", "finance"], Some(app.tenant_id));
    Call::new(M::GET, "/metrics", "/metrics", Auth::Bearer(&confined)).expect(app, spec, 403).await;
    Call::new(M::GET, "/v1/models", "/v1/models", Auth::None).expect(app, spec, 200).await;
    Call::new(M::GET, "/v1/models", "/v1/models", Auth::Bearer(key)).expect(app, spec, 200).await;
    Call::new(M::GET, "/v1/models", "/v1/models", Auth::Bearer("rk-000000000000-wrong")).expect(app, spec, 401).await;
    Call::new(M::GET, "/v1/models/{id}", format!("/v1/models/{MODEL}"), Auth::XApiKey(key)).expect(app, spec, 200).await;
    Call::new(M::GET, "/v1/models/{id}", "/v1/models/org%2Fnope", Auth::None).expect(app, spec, 404).await;
    Call::new(M::GET, "/v1/account", "/v1/account", Auth::Bearer(key)).expect(app, spec, 200).await;
    Call::new(M::GET, "/v1/account", "/v1/account", Auth::None).expect(app, spec, 401).await;
}

async fn inference_routes(app: &TestApp, spec: &Spec, key: &str) {
    use Method as M;
    let chat = "/v1/chat/completions";
    let (body, _) = Call::new(M::POST, chat, chat, Auth::Bearer(key)).body(tiny_chat()).expect(app, spec, 200).await;
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert!(answer["usage"]["cost"].is_number(), "{answer}");

    // A stream: every chunk is a ChatCompletionChunk, the usage chunk included.
    let mut streamed = tiny_chat();
    streamed["stream"] = json!(true);
    streamed["stream_options"] = json!({"include_usage": true});
    let (body, headers) = Call::new(M::POST, chat, chat, Auth::Bearer(key)).body(streamed).expect(app, spec, 200).await;
    assert!(headers["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    assert_eq!(runaii_testkit::sse_data(&body).last().map(String::as_str), Some("[DONE]"));
    assert!(spec.validate_sse("ChatCompletionsSse", &body) > 2);

    let mut responses = json!({"model": MODEL, "input": "Hi", "max_output_tokens": 4, "temperature": 0});
    let (stored, _) =
        Call::new(M::POST, "/v1/responses", "/v1/responses", Auth::Bearer(key)).body(responses.clone()).expect(app, spec, 200).await;
    let id = serde_json::from_str::<Value>(&stored).unwrap()["id"].as_str().unwrap().to_owned();
    Call::new(M::GET, "/v1/responses/{id}", format!("/v1/responses/{id}"), Auth::Bearer(key)).expect(app, spec, 200).await;
    let items = "/v1/responses/{id}/input_items";
    Call::new(M::GET, items, format!("/v1/responses/{id}/input_items"), Auth::Bearer(key)).expect(app, spec, 200).await;
    let cancel = "/v1/responses/{id}/cancel";
    Call::new(M::POST, cancel, "/v1/responses/resp_unknown/cancel", Auth::Bearer(key)).expect(app, spec, 404).await;
    let background = json!({"model": MODEL, "input": "Hi", "max_output_tokens": 4, "temperature": 0, "background": true});
    let (queued, _) = Call::new(M::POST, "/v1/responses", "/v1/responses", Auth::Bearer(key)).body(background).expect(app, spec, 200).await;
    let queued = serde_json::from_str::<Value>(&queued).unwrap()["id"].as_str().unwrap().to_owned();
    Call::new(M::POST, cancel, format!("/v1/responses/{queued}/cancel"), Auth::Bearer(key)).expect(app, spec, 200).await;
    Call::new(M::DELETE, "/v1/responses/{id}", format!("/v1/responses/{id}"), Auth::Bearer(key)).expect(app, spec, 200).await;
    responses["stream"] = json!(true);
    let (body, _) = Call::new(M::POST, "/v1/responses", "/v1/responses", Auth::Bearer(key)).body(responses).expect(app, spec, 200).await;
    assert!(spec.validate_sse("ResponsesSse", &body) > 5);

    let mut messages = json!({"model": MODEL, "max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}]});
    Call::new(M::POST, "/v1/messages", "/v1/messages", Auth::XApiKey(key))
        .header("anthropic-version", "2023-06-01")
        .body(messages.clone())
        .expect(app, spec, 200)
        .await;
    messages["stream"] = json!(true);
    let (body, _) = Call::new(M::POST, "/v1/messages", "/v1/messages", Auth::XApiKey(key)).body(messages).expect(app, spec, 200).await;
    assert!(spec.validate_sse("MessagesSse", &body) > 3);

    // A tool call streamed in Anthropic's events: tool_use blocks and input_json_delta.
    let weather = runaii_testkit::weather_tool()["function"].clone();
    let tool = json!({"model": MODEL, "max_tokens": 80, "stream": true, "temperature": 0,
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
        "tools": [{"name": weather["name"], "description": weather["description"], "input_schema": weather["parameters"]}],
        "tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": true}});
    let (body, _) = Call::new(M::POST, "/v1/messages", "/v1/messages", Auth::XApiKey(key)).body(tool).expect(app, spec, 200).await;
    assert!(body.contains("input_json_delta"), "{body}");
    spec.validate_sse("MessagesSse", &body);
}

async fn inference_errors(app: &TestApp, spec: &Spec, key: &str) {
    use Method as M;
    let chat = "/v1/chat/completions";
    Call::new(M::POST, chat, chat, Auth::None).body(tiny_chat()).expect(app, spec, 401).await;
    Call::new(M::POST, chat, chat, Auth::Bearer(key)).body(json!({"model": MODEL})).expect(app, spec, 400).await;
    let mut bad_format = tiny_chat();
    bad_format["response_format"] = json!({"type": "json_schema", "json_schema": {"name": "bad name", "schema": {}}});
    Call::new(M::POST, chat, chat, Auth::Bearer(key)).body(bad_format).expect(app, spec, 400).await;
    let mut unknown = tiny_chat();
    unknown["model"] = json!("no-such-model");
    Call::new(M::POST, chat, chat, Auth::Bearer(key)).body(unknown).expect(app, spec, 404).await;
    let huge = json!({"model": MODEL, "messages": [{"role": "user", "content": "x".repeat(2 * 1024 * 1024)}]});
    Call::new(M::POST, chat, chat, Auth::Bearer(key)).body(huge).expect(app, spec, 413).await;

    // The same Idempotency-Key with another body.
    let first = json!({"model": MODEL});
    Call::new(M::POST, chat, chat, Auth::Bearer(key)).header("Idempotency-Key", "openapi-1").body(first).expect(app, spec, 400).await;
    Call::new(M::POST, chat, chat, Auth::Bearer(key)).header("Idempotency-Key", "openapi-1").body(json!({})).expect(app, spec, 422).await;

    // A tenant without credit.
    let broke = create_key(&app.db, "openapi-broke").await;
    Call::new(M::POST, chat, chat, Auth::Bearer(&broke)).body(tiny_chat()).expect(app, spec, 402).await;

    // A key allowed one request a minute.
    let limited = limited_key(app).await;
    Call::new(M::POST, chat, chat, Auth::Bearer(&limited)).body(json!({})).expect(app, spec, 400).await;
    let (_, headers) = Call::new(M::POST, chat, chat, Auth::Bearer(&limited)).body(json!({})).expect(app, spec, 429).await;
    assert!(headers.contains_key("retry-after") && headers.contains_key("x-ratelimit-limit-requests"));

    let previous = json!({"model": MODEL, "input": "Hi", "previous_response_id": "resp_1"});
    Call::new(M::POST, "/v1/responses", "/v1/responses", Auth::Bearer(key)).body(previous).expect(app, spec, 400).await;
    Call::new(M::POST, "/v1/responses", "/v1/responses", Auth::None).body(json!({})).expect(app, spec, 401).await;

    let messages = "/v1/messages";
    let (body, _) = Call::new(M::POST, messages, messages, Auth::None).body(json!({})).expect(app, spec, 401).await;
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["error"]["type"], "authentication_error");
    Call::new(M::POST, messages, messages, Auth::XApiKey(key)).body(json!({"model": MODEL, "messages": []})).expect(app, spec, 400).await;
    let unknown = json!({"model": "no-such-model", "max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}]});
    Call::new(M::POST, messages, messages, Auth::XApiKey(key)).body(unknown).expect(app, spec, 404).await;
}

async fn limited_key(app: &TestApp) -> String {
    let spec = runaii_gateway::ops::keys::KeySpec { name: "one a minute".into(), rpm_limit: Some(1), ..Default::default() };
    runaii_gateway::ops::keys::create(&app.db, runaii_gateway::ops::Actor("test"), app.tenant_id, &spec).await.unwrap().key
}

async fn admin_routes(app: &TestApp, spec: &Spec) {
    use Method as M;
    let all = admin_token(&["ops", "finance", "admin"], None);
    let ops_only = admin_token(&["ops"], None);
    let tenant = app.tenant_id.to_string();
    let month = chrono::Utc::now().format("%Y-%m").to_string();

    Call::new(M::GET, "/admin/v1/tenants", "/admin/v1/tenants", Auth::None).expect(app, spec, 401).await;
    Call::new(M::GET, "/admin/v1/tenants", "/admin/v1/tenants", Auth::Bearer(&ops_only)).expect(app, spec, 403).await;
    Call::new(M::GET, "/admin/v1/tenants", "/admin/v1/tenants", bearer(&all)).expect(app, spec, 200).await;
    Call::new(M::GET, "/admin/v1/tenants/{id}", format!("/admin/v1/tenants/{tenant}"), bearer(&all)).expect(app, spec, 200).await;
    let nobody = uuid::Uuid::now_v7();
    Call::new(M::GET, "/admin/v1/tenants/{id}", format!("/admin/v1/tenants/{nobody}"), bearer(&all)).expect(app, spec, 404).await;
    Call::new(M::PATCH, "/admin/v1/tenants/{id}", format!("/admin/v1/tenants/{tenant}"), bearer(&all))
        .body(json!({"monthly_spend_cap": null}))
        .expect(app, spec, 200)
        .await;
    let (created, _) = Call::new(M::POST, "/admin/v1/tenants", "/admin/v1/tenants", bearer(&all))
        .body(json!({"name": "openapi-new"}))
        .expect(app, spec, 200)
        .await;
    let new_tenant = serde_json::from_str::<Value>(&created).unwrap()["id"].as_str().unwrap().to_owned();
    Call::new(M::POST, "/admin/v1/tenants", "/admin/v1/tenants", bearer(&all))
        .body(json!({"name": "openapi-new"}))
        .expect(app, spec, 409)
        .await;
    Call::new(M::POST, "/admin/v1/tenants", "/admin/v1/tenants", bearer(&all)).body(json!({"title": "x"})).expect(app, spec, 400).await;
    let tenant_path = format!("/admin/v1/tenants/{new_tenant}");
    Call::new(M::PATCH, "/admin/v1/tenants/{id}", tenant_path.clone(), bearer(&all))
        .body(json!({"max_concurrent_requests": 8}))
        .expect(app, spec, 200)
        .await;
    Call::new(M::PATCH, "/admin/v1/tenants/{id}", tenant_path, bearer(&all))
        .body(json!({"max_concurrent_requests": 0}))
        .expect(app, spec, 400)
        .await;
    let credits = "/admin/v1/tenants/{id}/credits";
    Call::new(M::POST, credits, format!("/admin/v1/tenants/{new_tenant}/credits"), bearer(&all))
        .body(json!({"amount": "2.50", "note": "openapi"}))
        .expect(app, spec, 200)
        .await;
    Call::new(M::POST, credits, format!("/admin/v1/tenants/{new_tenant}/credits"), bearer(&all))
        .body(json!({"amount": "-100"}))
        .expect(app, spec, 409)
        .await;

    let keys = "/admin/v1/tenants/{id}/keys";
    Call::new(M::GET, keys, format!("/admin/v1/tenants/{tenant}/keys"), bearer(&all)).expect(app, spec, 200).await;
    let (created, _) = Call::new(M::POST, keys, format!("/admin/v1/tenants/{new_tenant}/keys"), bearer(&all))
        .body(json!({"name": "openapi", "rpm_limit": 60}))
        .expect(app, spec, 200)
        .await;
    let key_id = serde_json::from_str::<Value>(&created).unwrap()["id"].as_str().unwrap().to_owned();
    let key_path = format!("/admin/v1/keys/{key_id}");
    Call::new(M::PATCH, "/admin/v1/keys/{id}", key_path.clone(), bearer(&all))
        .body(json!({"rpm_limit": null}))
        .expect(app, spec, 200)
        .await;
    Call::new(M::DELETE, "/admin/v1/keys/{id}", key_path, bearer(&all)).expect(app, spec, 200).await;
    Call::new(M::DELETE, "/admin/v1/keys/{id}", format!("/admin/v1/keys/{nobody}"), bearer(&all)).expect(app, spec, 404).await;

    Call::new(M::GET, "/admin/v1/models", "/admin/v1/models", bearer(&all)).expect(app, spec, 200).await;
    let model = json!({"id": "openapi/private", "context_length": 1024, "input_price_per_mtok": "0.5", "output_price_per_mtok": "1.5", "public": false});
    Call::new(M::POST, "/admin/v1/models", "/admin/v1/models", bearer(&all)).body(model.clone()).expect(app, spec, 200).await;
    Call::new(M::POST, "/admin/v1/models", "/admin/v1/models", bearer(&all)).body(model).expect(app, spec, 409).await;
    Call::new(M::PATCH, "/admin/v1/models/{id}", "/admin/v1/models/openapi/private", bearer(&all))
        .body(json!({"supports_tools": true}))
        .expect(app, spec, 200)
        .await;
    Call::new(M::PATCH, "/admin/v1/models/{id}", "/admin/v1/models/nope", bearer(&all)).body(json!({})).expect(app, spec, 404).await;
    let access = "/admin/v1/tenants/{id}/models/{model}";
    Call::new(M::PUT, access, format!("/admin/v1/tenants/{tenant}/models/openapi/private"), bearer(&all)).expect(app, spec, 200).await;
    Call::new(M::DELETE, access, format!("/admin/v1/tenants/{tenant}/models/openapi/private"), bearer(&all)).expect(app, spec, 200).await;
    Call::new(M::GET, "/admin/v1/workers", "/admin/v1/workers", bearer(&all)).expect(app, spec, 200).await;
    let revocations = "/admin/v1/admin-token-revocations";
    Call::new(M::POST, revocations, revocations, bearer(&all)).body(json!({"jti": "openapi-revoked"})).expect(app, spec, 200).await;
    Call::new(M::POST, revocations, revocations, bearer(&all)).body(json!({"token": "x"})).expect(app, spec, 400).await;

    let costs = "/admin/v1/cost-records";
    Call::new(M::GET, costs, format!("{costs}?month={month}&limit=2"), bearer(&all)).expect(app, spec, 200).await;
    Call::new(M::GET, costs, format!("{costs}?format=csv"), bearer(&all)).expect(app, spec, 200).await;
    Call::new(M::GET, costs, format!("{costs}?month=2026-13"), bearer(&all)).expect(app, spec, 400).await;
    let totals = "/admin/v1/monthly-totals";
    Call::new(M::GET, totals, format!("{totals}?month={month}"), bearer(&all)).expect(app, spec, 200).await;
    Call::new(M::GET, totals, totals, bearer(&all)).expect(app, spec, 400).await;
    let ledger = "/admin/v1/tenants/{id}/credit-ledger";
    Call::new(M::GET, ledger, format!("/admin/v1/tenants/{tenant}/credit-ledger?limit=1"), bearer(&all)).expect(app, spec, 200).await;
    Call::new(M::GET, "/admin/v1/audit-log", "/admin/v1/audit-log?limit=3", bearer(&all)).expect(app, spec, 200).await;
}

fn bearer(token: &str) -> Auth<'_> {
    Auth::Bearer(token)
}

/// What Schemathesis found (scripts/fuzz-api.sh), or checking its findings showed, answered as the
/// document says: a path parameter that does not parse was axum's plain-text 400; text with a NUL
/// character reached Postgres, which refuses it (22021), as a 500; a Response echoed `instructions`,
/// `parallel_tool_calls` and `metadata` of any type, breaking its own schema.
#[tokio::test]
async fn fuzz_findings_stay_fixed() {
    use Method as M;
    let spec = Spec::new();
    let app = spawn_app().await;
    let token = admin_token(&["ops", "finance", "admin"], None);
    let tenant = app.tenant_id.to_string();

    for (method, template, path, auth) in [
        (M::GET, "/admin/v1/tenants/{id}", "/admin/v1/tenants/null%2Cnull", bearer(&token)),
        (M::DELETE, "/admin/v1/keys/{id}", "/admin/v1/keys/not-a-uuid", bearer(&token)),
        (M::PUT, "/admin/v1/tenants/{id}/models/{model}", "/admin/v1/tenants/0/models/m", bearer(&token)),
        (M::GET, "/v1/models/{id}", "/v1/models/%FF", Auth::None),
    ] {
        let (body, _) = Call::new(method, template, path, auth).expect(&app, &spec, 400).await;
        assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["error"]["param"], "path", "{body}");
    }

    let credits = format!("/admin/v1/tenants/{tenant}/credits");
    Call::new(M::POST, "/admin/v1/tenants/{id}/credits", credits, bearer(&token))
        .body(json!({"amount": "1", "note": "\u{0}"}))
        .expect(&app, &spec, 400)
        .await;
    Call::new(M::POST, "/admin/v1/tenants", "/admin/v1/tenants", bearer(&token))
        .body(json!({"name": "a\u{0}b"}))
        .expect(&app, &spec, 400)
        .await;
    // The catalog is held in memory: an id with NUL (which Postgres text cannot hold) is simply unknown.
    Call::new(M::GET, "/v1/models/{id}", "/v1/models/a%00b", Auth::None).expect(&app, &spec, 404).await;
    let mut chat = tiny_chat();
    chat["model"] = json!("a\u{0}b");
    Call::new(M::POST, "/v1/chat/completions", "/v1/chat/completions", Auth::Bearer(&app.key)).body(chat).expect(&app, &spec, 404).await;

    let responses = "/v1/responses";
    for (key, value) in [("instructions", json!(5)), ("parallel_tool_calls", json!("yes")), ("metadata", json!("x"))] {
        let mut request = json!({"model": MODEL, "input": "Hi", "max_output_tokens": 2});
        request[key] = value;
        let (body, _) = Call::new(M::POST, responses, responses, Auth::Bearer(&app.key)).body(request).expect(&app, &spec, 400).await;
        assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["error"]["param"], key, "{body}");
    }
    let echoed = json!({"model": MODEL, "input": "Hi", "max_output_tokens": 2, "instructions": "Be brief.",
                        "parallel_tool_calls": false, "metadata": {"order": "A-1024"}});
    Call::new(M::POST, responses, responses, Auth::Bearer(&app.key)).body(echoed).expect(&app, &spec, 200).await;
}
