//! Starts one real worker process (real llama.cpp, embedded model) per test binary and hands out its
//! address. The worker exits when this test process does (its stdin closes).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

pub struct Worker {
    pub base: String,
    _child: Mutex<Child>,
}

pub fn model_path() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(path.exists(), "{} is missing: run scripts/fetch-model.sh first", path.display());
    path
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The shared worker of this test binary, started on first use.
pub fn worker() -> &'static Worker {
    static WORKER: OnceLock<Worker> = OnceLock::new();
    WORKER.get_or_init(|| start(&[]))
}

/// Starts a worker with extra flags and waits until `/health` says it is ready.
pub fn start(extra: &[&str]) -> Worker {
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_runaii-worker"))
        .arg("--model-path")
        .arg(model_path())
        .args(["--listen", &format!("127.0.0.1:{port}"), "--exit-on-stdin-eof"])
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn runaii-worker");
    let base = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(120);
    while !healthy(port) {
        assert!(Instant::now() < deadline, "worker did not become ready in 120 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    Worker { base, _child: Mutex::new(child) }
}

/// A plain HTTP/1.0 GET, so readiness can be polled from sync code outside any runtime.
fn healthy(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream.write_all(b"GET /health HTTP/1.0\r\nHost: localhost\r\n\r\n").is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).is_ok() && head.ends_with(b" 200")
}

pub fn client() -> ::reqwest::Client {
    ::reqwest::Client::builder().timeout(Duration::from_secs(300)).build().unwrap()
}

pub async fn post(base: &str, body: &Value) -> (u16, Value) {
    let r = client().post(format!("{base}/v1/chat/completions")).json(body).send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or_else(|_| panic!("non-JSON body ({status}): {text}")))
}

pub async fn get_json(base: &str, path: &str) -> Value {
    client().get(format!("{base}{path}")).send().await.unwrap().json().await.unwrap()
}

/// Reads one counter or gauge from `/metrics`.
pub async fn metric(base: &str, name: &str) -> u64 {
    let text = client().get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')).map(|v| v.trim().parse().unwrap()))
        .unwrap_or_else(|| panic!("metric {name} not found"))
}

pub const MODEL: &str = "smollm2-135m-instruct";

pub fn invoice_request() -> Value {
    serde_json::json!({
        "model": MODEL,
        "messages": [
            {"role": "system", "content": "Extract the invoice fields."},
            {"role": "user", "content": "Invoice #A-1024, due 2026-11-01, total 420.00 USD."}
        ],
        "temperature": 0,
        "response_format": {
            "type": "json_schema",
            "json_schema": {
                "name": "invoice",
                "strict": true,
                "schema": invoice_schema()
            }
        }
    })
}

pub fn invoice_schema() -> Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "invoice_number": {"type": "string"},
            "due_date": {"type": "string"},
            "total": {"type": "number"},
            "currency": {"type": "string"}
        },
        "required": ["invoice_number", "due_date", "total", "currency"],
        "additionalProperties": false
    })
}
