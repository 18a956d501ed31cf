//! Test support shared by the worker's and the gateway's tests: starting a real worker process on the
//! embedded model (and a real S3 server, `s3`), the seed's invoice example, and reading SSE bodies.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod s3;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub const MODEL: &str = "smollm2-135m-instruct";

/// The worker secret test workers and gateways share.
pub const WORKER_SECRET: &str = "test-worker-secret-of-at-least-32-bytes!";

/// The fleet secret of test workers and gateways.
#[must_use]
pub fn worker_secrets() -> runaii_wire::worker_auth::WorkerSecrets {
    runaii_wire::worker_auth::WorkerSecrets::load(None, Some(&WORKER_SECRET.into())).unwrap()
}

/// The static `Authorization` value: what an engine of another make is given, and what a test worker
/// started with `--accept-bearer` accepts.
#[must_use]
pub fn worker_bearer() -> String {
    worker_secrets().bearer_header()
}

/// The `x-runaii-signature` value a gateway would send with this request now, under a nonce no other
/// call in this process uses.
#[must_use]
pub fn worker_signature(method: &str, path: &str, scope: &str, priority: &str, body: &[u8]) -> String {
    use runaii_wire::request_signature::{sign, Signed};
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let mut nonce = [0u8; 16];
    nonce[..8].copy_from_slice(&NEXT.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    nonce[8..12].copy_from_slice(&std::process::id().to_le_bytes());
    nonce[12..].copy_from_slice(&since_epoch.subsec_nanos().to_le_bytes());
    let now_ms = u64::try_from(since_epoch.as_millis()).unwrap();
    sign(&worker_secrets(), &Signed { method, path, scope, priority, body }, now_ms, nonce)
}

/// The repository root: the parent of the package whose tests are running.
///
/// Read at run time (cargo sets `CARGO_MANIFEST_DIR` for every test process), not baked in at compile
/// time: clones that share one target dir can reuse a build made in another clone, whose path may be gone.
#[must_use]
pub fn repo_root() -> PathBuf {
    let package = std::env::var_os("CARGO_MANIFEST_DIR").expect("tests run under cargo, which sets CARGO_MANIFEST_DIR");
    Path::new(&package).join("..")
}

/// The JSONSchemaBench sample that tests, examples and scripts read: `data/jsonschemabench/` in the
/// repository (`raw/` the schemas byte for byte, `with_tests/` each with its valid and invalid instances).
#[must_use]
pub fn jsonschemabench_dir() -> PathBuf {
    repo_root().join("data/jsonschemabench")
}

#[must_use]
pub fn model_path() -> PathBuf {
    let path = repo_root().join("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(path.exists(), "{} is missing: run scripts/fetch-model.sh first", path.display());
    path
}

/// A port nothing listens on now, and that no other call in this process was given: the tests of one
/// binary run at once, and two of them starting servers on the same port would talk to one server.
#[must_use]
pub fn free_port() -> u16 {
    static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// A running worker. It exits when this value is dropped or the test process ends: its stdin closes.
pub struct WorkerProcess {
    pub url: String,
    _child: Mutex<Child>,
}

impl WorkerProcess {
    /// Kills the worker at once (SIGKILL): no graceful exit, no last announcement, as when a node dies.
    pub fn kill(&self) {
        let mut child = self._child.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Starts `binary` on the embedded model with `extra` flags and waits until `/health` answers 200.
#[must_use]
pub fn start_worker(binary: &Path, extra: &[&str]) -> WorkerProcess {
    let port = free_port();
    let mut child = Command::new(binary)
        .arg("--model-path")
        .arg(model_path())
        .args(["--listen", &format!("127.0.0.1:{port}"), "--exit-on-stdin-eof"])
        .args(extra)
        .env("RUST_LOG", "warn")
        .env("RUNAII_WORKER_SECRET", WORKER_SECRET)
        .env_remove("RUNAII_WORKER_SECRET_FILE")
        .stdin(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
    let deadline = Instant::now() + Duration::from_secs(120);
    // A worker that exited (its port taken since `free_port`) must not be mistaken for whatever else
    // answers on that port: checked before each poll and once more after the answer.
    loop {
        still_running(&mut child);
        if healthy(port) {
            break;
        }
        assert!(Instant::now() < deadline, "worker not ready in 120 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    still_running(&mut child);
    WorkerProcess { url: format!("http://127.0.0.1:{port}"), _child: Mutex::new(child) }
}

/// Panics with the worker's exit status if it ended.
fn still_running(child: &mut Child) {
    if let Some(status) = child.try_wait().unwrap() {
        panic!("the worker exited before it was ready ({status}): see its log above");
    }
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

/// The `data` payloads of an SSE body, in order.
#[must_use]
pub fn sse_data(body: &str) -> Vec<String> {
    body.split("\n\n").filter_map(|event| event.lines().find_map(|l| l.strip_prefix("data:")).map(|d| d.trim().to_owned())).collect()
}

/// A request whose schema needs hundreds of tokens (an array of at least `min_items` integers): an answer
/// that is still running when a test disconnects, fills the queue, or hits `max_tokens`.
#[must_use]
pub fn long_answer_request(min_items: u32, max_tokens: u32, stream: bool) -> Value {
    json!({
        "model": MODEL,
        "messages": [{"role": "user", "content": "List numbers."}],
        "stream": stream,
        "max_tokens": max_tokens,
        "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "array", "items": {"type": "integer"}, "minItems": min_items}}}
    })
}

/// The seed's invoice example as a chat completion request.
#[must_use]
pub fn invoice_request() -> Value {
    json!({
        "model": MODEL,
        "messages": [
            {"role": "system", "content": "Extract the invoice fields."},
            {"role": "user", "content": "Invoice #A-1024, due 2026-11-01, total 420.00 USD."}
        ],
        "temperature": 0,
        "response_format": {"type": "json_schema", "json_schema": {"name": "invoice", "strict": true, "schema": invoice_schema()}}
    })
}

#[must_use]
pub fn invoice_schema() -> Value {
    json!({
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

/// An order form of 13 fields, most of them copied from the document in the prompt (names, addresses,
/// numbers): the extraction drafts speed up most. `n` varies the order number and quantity.
#[must_use]
pub fn order_form_request(n: u32) -> Value {
    let (number, quantity) = (58213 + n, 2 + n % 5);
    let total = format!("{}.{:02}", quantity * 4995 / 100, quantity * 4995 % 100);
    let document = format!(
        "Order PO-{number} was placed on 2026-10-14 by Margaret Okonkwo-Hale (margaret.hale@example.org, \
         +44 20 7946 0123). Ship to 221 Baker Street, London, NW1 6XE, United Kingdom. Items: {quantity} x \
         Ergonomic Walnut Desk Organizer at 49.95 GBP each, total {total} GBP."
    );
    json!({
        "model": MODEL,
        "messages": [
            {"role": "system", "content": "Extract the order form's fields from the document."},
            {"role": "user", "content": document}
        ],
        "temperature": 0,
        "max_tokens": 200,
        "response_format": {"type": "json_schema", "json_schema": {"name": "order_form", "strict": true, "schema": order_form_schema()}}
    })
}

#[must_use]
pub fn order_form_schema() -> Value {
    let text = json!({"type": "string"});
    let fields = [
        ("order_id", &text),
        ("order_date", &text),
        ("customer_name", &text),
        ("email", &text),
        ("phone", &text),
        ("street", &text),
        ("city", &text),
        ("postal_code", &text),
        ("country", &text),
        ("product", &text),
        ("quantity", &json!({"type": "integer"})),
        ("unit_price", &json!({"type": "number"})),
        ("total", &json!({"type": "number"})),
    ];
    let properties: serde_json::Map<String, Value> = fields.iter().map(|(name, schema)| ((*name).to_owned(), (*schema).clone())).collect();
    let required: Vec<&str> = fields.iter().map(|(name, _)| *name).collect();
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

/// The weather tool of the tool-calling tests.
#[must_use]
pub fn weather_tool() -> Value {
    json!({"type": "function", "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                       "required": ["city", "unit"], "additionalProperties": false}
    }})
}

/// A chat request offering [`weather_tool`], with the given `tool_choice`.
#[must_use]
pub fn weather_request(tool_choice: &Value, stream: bool) -> Value {
    json!({
        "model": MODEL,
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
        "tools": [weather_tool()],
        "tool_choice": tool_choice,
        "parallel_tool_calls": false,
        "max_tokens": 80,
        "temperature": 0,
        "stream": stream
    })
}
