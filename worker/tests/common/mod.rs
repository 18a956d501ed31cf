//! One real worker process (real llama.cpp, embedded model) per test binary, and request helpers.

#![allow(dead_code, unused_imports, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use runaii_testkit::WorkerProcess;
pub use runaii_testkit::{invoice_request, invoice_schema, model_path, MODEL};
use serde_json::Value;

/// The shared worker of this test binary, started on first use.
pub fn worker() -> &'static WorkerProcess {
    static WORKER: OnceLock<WorkerProcess> = OnceLock::new();
    WORKER.get_or_init(|| start(&[]))
}

/// Starts a worker with extra flags and waits until it is ready.
pub fn start(extra: &[&str]) -> WorkerProcess {
    runaii_testkit::start_worker(Path::new(env!("CARGO_BIN_EXE_runaii-worker")), extra)
}

/// A client for the worker; [`signed_post`] makes its requests speak as a gateway.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(1800)).build().unwrap()
}

/// A POST of `body` to `url` as a gateway sends it: `headers` (a cache scope, a class) and a signature
/// over them and the body.
pub fn signed_post(url: &str, headers: &[(&str, &str)], body: Vec<u8>) -> reqwest::RequestBuilder {
    let parsed = reqwest::Url::parse(url).unwrap();
    let path = match parsed.query() {
        Some(query) => format!("{}?{query}", parsed.path()),
        None => parsed.path().to_owned(),
    };
    let header = |name: &str| headers.iter().find(|(n, _)| *n == name).map_or("", |(_, v)| *v);
    let signature = runaii_testkit::worker_signature(
        "POST",
        &path,
        header(runaii_wire::cache_scope::HEADER),
        header(runaii_wire::priority::HEADER),
        &body,
    );
    let mut request =
        client().post(url).header("content-type", "application/json").header(runaii_wire::request_signature::HEADER, signature);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.body(body)
}

/// A signed POST of a JSON body to the worker's chat route.
pub fn post_chat(base: &str, body: &Value) -> reqwest::RequestBuilder {
    signed_post(&format!("{base}/v1/chat/completions"), &[], serde_json::to_vec(body).unwrap())
}

/// A client with no credential: what anything else on the network is.
pub fn anonymous_client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(300)).build().unwrap()
}

pub async fn post(base: &str, body: &Value) -> (u16, Value) {
    let r = post_chat(base, body).send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or_else(|_| panic!("non-JSON body ({status}): {text}")))
}

pub async fn get_json(base: &str, path: &str) -> Value {
    client().get(format!("{base}{path}")).send().await.unwrap().json().await.unwrap()
}

/// Reads one counter or gauge from `/metrics`.
pub async fn metric(base: &str, name: &str) -> u64 {
    metric_as(base, name).await
}

/// Reads one metric whose value is not a whole number (a gauge such as a CPU share).
pub async fn metric_f64(base: &str, name: &str) -> f64 {
    metric_as(base, name).await
}

async fn metric_as<T: std::str::FromStr>(base: &str, name: &str) -> T {
    let text = client().get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("metric {name} not found or not a number"))
}
