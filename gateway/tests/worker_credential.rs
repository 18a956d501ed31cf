//! The gateway's credential to its workers and the cache scope it sends are keyed secrets, not values a
//! listener on the cluster network can reuse. A recording proxy stands where a listener would, between a
//! gateway and a real worker (started with a 2 s window for signed requests): what it captures can be sent
//! once and as it was, never with another body, never again, never late; and a tenant's cache scope
//! cannot be computed from its id.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use common::{client, configure_worker, spawn_app, start_worker, MODEL};
use runaii_testkit::WorkerProcess;
use serde_json::{json, Value};
use sha2::Digest as _;

/// One request as the proxy saw it on its way to the worker.
#[derive(Clone)]
struct Captured {
    authorization: String,
    scope: Option<String>,
    body: Bytes,
}

#[derive(Clone)]
struct Proxy {
    worker: String,
    captured: Arc<Mutex<Vec<Captured>>>,
    /// Keep requests from the worker (answer "full") instead of passing them on.
    swallow: Arc<Mutex<bool>>,
}

async fn chat(axum::extract::State(proxy): axum::extract::State<Proxy>, headers: HeaderMap, body: Bytes) -> (StatusCode, String) {
    let text = |name: &str| headers.get(name).map(|v| v.to_str().unwrap().to_owned());
    let captured = Captured { authorization: text("authorization").unwrap_or_default(), scope: text("x-runaii-cache-scope"), body };
    proxy.captured.lock().unwrap().push(captured.clone());
    if *proxy.swallow.lock().unwrap() {
        let full = json!({"error": {"message": "full", "type": "server_error", "param": null, "code": "worker_overloaded"}});
        return (StatusCode::SERVICE_UNAVAILABLE, full.to_string());
    }
    let r = replay(&proxy.worker, &captured, &captured.body).await;
    (StatusCode::from_u16(r.0).unwrap(), r.1.to_string())
}

/// Sends a captured credential and scope to the worker with `body`.
async fn replay(worker: &str, captured: &Captured, body: &Bytes) -> (u16, Value) {
    let mut request = client()
        .post(format!("{worker}/v1/chat/completions"))
        .header("authorization", &captured.authorization)
        .header("content-type", "application/json")
        .body(body.clone());
    if let Some(scope) = &captured.scope {
        request = request.header("x-runaii-cache-scope", scope);
    }
    let r = request.send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or_default())
}

async fn start_proxy(worker: &WorkerProcess) -> (String, Proxy) {
    let proxy = Proxy { worker: worker.url.clone(), captured: Arc::default(), swallow: Arc::default() };
    let health_of = worker.url.clone();
    let app = axum::Router::new()
        .route(
            "/health",
            axum::routing::get(move || {
                let url = format!("{health_of}/health");
                async move { axum::Json(client().get(url).send().await.unwrap().json::<Value>().await.unwrap()) }
            }),
        )
        .route("/v1/chat/completions", axum::routing::post(chat))
        .with_state(proxy.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, proxy)
}

fn question(system: &str, max_tokens: u32) -> Value {
    json!({"model": MODEL, "max_tokens": max_tokens, "temperature": 0,
           "messages": [{"role": "system", "content": system}, {"role": "user", "content": "Invoice #A-1024, total 420.00 USD."}]})
}

#[tokio::test]
async fn a_captured_request_calls_the_worker_once_as_it_was_and_never_late() {
    let worker = start_worker(&["--request-max-age-s", "2"]);
    let app = spawn_app().await;
    let (url, proxy) = start_proxy(&worker).await;
    configure_worker(&app, MODEL, &url).await;

    // Two requests kept from the worker: their credentials were never used.
    *proxy.swallow.lock().unwrap() = true;
    for _ in 0..2 {
        let (status, body, _) = app.post_json("/v1/chat/completions", &question("Be brief.", 4)).await;
        assert_eq!(status, 503, "{body}");
    }
    let captured = proxy.captured.lock().unwrap().clone();
    let (first, second) = (&captured[0], &captured[1]);
    assert!(first.authorization.starts_with("RunaiiSig "), "signed, not a static bearer: {}", first.authorization);
    assert_ne!(first.authorization, second.authorization, "each request has its own credential");

    // With another body the credential is worthless: nothing is generated for whoever sent it.
    let other = Bytes::from(question("Tell me everything you know.", 64).to_string());
    let (status, body) = replay(&worker.url, first, &other).await;
    assert_eq!((status, &body["error"]["code"]), (401, &json!("invalid_worker_credential")), "{body}");
    // As it was, in time, it is the gateway's request: served once ...
    let (status, body) = replay(&worker.url, first, &first.body).await;
    assert_eq!(status, 200, "{body}");
    // ... and never again.
    let (status, body) = replay(&worker.url, first, &first.body).await;
    assert_eq!((status, &body["error"]["code"]), (401, &json!("invalid_worker_credential")), "a replay: {body}");
    // The other, never used, is refused once the window has passed.
    tokio::time::sleep(Duration::from_millis(3200)).await;
    let (status, body) = replay(&worker.url, second, &second.body).await;
    assert_eq!((status, &body["error"]["code"]), (401, &json!("invalid_worker_credential")), "late: {body}");

    // Through the gateway, requests go on being served.
    *proxy.swallow.lock().unwrap() = false;
    let (status, body, _) = app.post_json("/v1/chat/completions", &question("Be brief.", 4)).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn a_tenant_s_cached_prompt_cannot_be_read_with_its_raw_id() {
    let worker = start_worker(&[]);
    let app = spawn_app().await;
    let (url, proxy) = start_proxy(&worker).await;
    configure_worker(&app, MODEL, &url).await;
    let rules: Vec<String> = (1..=80).map(|i| format!("Rule {i}: when field {i} is missing, write null and keep the rest.")).collect();
    let system = format!("Case {}.\n{}", uuid::Uuid::now_v7(), rules.join("\n"));
    let body = question(&system, 4);
    // The tenant's prompt, twice: the second finds it cached, under the tenant's scope.
    for _ in 0..2 {
        let (status, answer, _) = app.post_json("/v1/chat/completions", &body).await;
        assert_eq!(status, 200, "{answer}");
    }
    let sent = proxy.captured.lock().unwrap().last().cloned().unwrap();
    let scope = sent.scope.clone().unwrap();

    // Whoever knows the tenant's id (it is in invoices and logs) and could call the worker: a scope
    // computed from the id alone, as it once was, reads nothing of the tenant's.
    let digest = sha2::Sha256::new().chain_update(b"runaii cache scope v1\0").chain_update(app.tenant_id.as_bytes()).finalize();
    let from_id = hex::encode(&digest[..16]);
    assert_ne!(from_id, scope, "the scope is keyed with the fleet's secret");
    let worker_url = worker.url.clone();
    let probe = |scope: String| {
        let (body, url) = (body.clone(), format!("{worker_url}/v1/chat/completions"));
        async move {
            let request = client().post(url).header("x-runaii-cache-scope", scope).json(&body);
            let r = runaii_testkit::send_signed(request).await.unwrap();
            let answer: Value = r.json().await.unwrap();
            answer["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap_or(0)
        }
    };
    assert_eq!(probe(from_id).await, 0, "the tenant's cached prompt was read with a scope computed from its id");
    // The scope the gateway sent does find it: the probe itself can see a hit.
    assert!(probe(scope).await >= 500, "the tenant's own scope reads its cache");
}
