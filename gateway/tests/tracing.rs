//! Traces: with a collector configured, a request's spans reach it over OTLP, and the worker's spans
//! continue the gateway's trace through the `traceparent` header, which continues the client's.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use common::{client, invoice_request, spawn_app};
use futures::StreamExt;
use serde_json::{json, Value};

/// A span as the collector received it, with the service that sent it.
#[derive(Debug, Clone)]
struct Span {
    service: String,
    name: String,
    kind: u64,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    attributes: Value,
}

type Received = Arc<Mutex<Vec<Span>>>;

/// The collector: an OTLP/HTTP receiver (JSON encoding, as `http/json` exporters send) keeping every span.
async fn start_collector() -> (String, Received) {
    async fn traces(State(received): State<Received>, Json(body): Json<Value>) -> Json<Value> {
        let mut spans = received.lock().unwrap();
        for resource in body["resourceSpans"].as_array().into_iter().flatten() {
            let service = resource["resource"]["attributes"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|a| a["key"] == "service.name")
                .and_then(|a| a["value"]["stringValue"].as_str())
                .unwrap_or_default()
                .to_owned();
            for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
                for span in scope["spans"].as_array().into_iter().flatten() {
                    let text = |field: &str| span[field].as_str().unwrap_or_default().to_owned();
                    spans.push(Span {
                        service: service.clone(),
                        name: text("name"),
                        kind: span["kind"].as_u64().unwrap_or_default(),
                        trace_id: text("traceId"),
                        span_id: text("spanId"),
                        parent_span_id: text("parentSpanId"),
                        attributes: span["attributes"].clone(),
                    });
                }
            }
        }
        Json(json!({}))
    }
    let received = Received::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = Router::new().route("/v1/traces", post(traces)).with_state(Arc::clone(&received));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, received)
}

/// OTLP span kinds.
const SERVER: u64 = 2;
const CLIENT: u64 = 3;

/// Waits until `found` finds what it looks for among the spans the collector holds.
async fn wait_for<T>(received: &Received, what: &str, found: impl Fn(&[Span]) -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let spans = received.lock().unwrap().clone();
        if let Some(found) = found(&spans) {
            return found;
        }
        assert!(Instant::now() < deadline, "no {what}; received: {spans:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the collector holds a span of `trace_id` matching `wanted`.
async fn span_of(received: &Received, trace_id: &str, what: &str, wanted: impl Fn(&Span) -> bool) -> Span {
    let what = format!("{what} in trace {trace_id}");
    wait_for(received, &what, |spans| spans.iter().find(|s| s.trace_id == trace_id && wanted(s)).cloned()).await
}

fn attribute(span: &Span, key: &str) -> Value {
    let found = span.attributes.as_array().into_iter().flatten().find(|a| a["key"] == key);
    found.map_or(Value::Null, |a| a["value"].clone())
}

/// Follows one request's trace from the client through the gateway to the worker and back.
async fn assert_one_trace(received: &Received, trace_id: &str, client_span: &str) {
    let gateway = span_of(received, trace_id, "gateway server span", |s| s.service == "runaii-gateway" && s.kind == SERVER).await;
    assert_eq!(gateway.parent_span_id, client_span, "the gateway continues the client's traceparent");
    assert_eq!(gateway.name, "POST /v1/chat/completions");
    assert_eq!(attribute(&gateway, "http.response.status_code"), json!({"intValue": "200"}));

    let call = span_of(received, trace_id, "gateway → worker span", |s| s.service == "runaii-gateway" && s.kind == CLIENT).await;
    assert_eq!(call.parent_span_id, gateway.span_id);

    let worker = span_of(received, trace_id, "worker server span", |s| s.service == "runaii-worker" && s.kind == SERVER).await;
    assert_eq!(worker.parent_span_id, call.span_id, "the worker's span is a child of the gateway's call: traceparent was carried");
    let generate = span_of(received, trace_id, "worker generate span", |s| s.service == "runaii-worker" && s.name == "generate").await;
    assert_eq!(generate.parent_span_id, worker.span_id);

    let record = span_of(received, trace_id, "cost record span", |s| s.name == "cost record").await;
    assert_eq!(record.service, "runaii-gateway");
    assert_eq!(attribute(&record, "status"), json!({"stringValue": "succeeded"}));
}

// One test in this binary: it installs the process's tracing, and the worker inherits its OTEL_* variables.
#[tokio::test(flavor = "multi_thread")]
async fn a_request_is_one_trace_from_the_client_through_gateway_and_worker() {
    let (collector, received) = start_collector().await;
    // Set before anything reads them: this process's exporter below, and the worker, which inherits them.
    std::env::set_var("OTEL_EXPORTER_OTLP_ENDPOINT", &collector);
    std::env::set_var("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json");
    std::env::set_var("OTEL_BSP_SCHEDULE_DELAY", "100");
    let telemetry = runaii_telemetry::init("runaii-gateway", "warn").unwrap();
    assert!(telemetry.exporting());
    let app = spawn_app().await;

    let whole_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let traceparent = format!("00-{whole_trace}-00f067aa0ba902b7-01");
    let response = app.post_as(&app.key, "/v1/chat/completions", &invoice_request(), &[("traceparent", &traceparent)]).await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    assert_one_trace(&received, whole_trace, "00f067aa0ba902b7").await;

    let stream_trace = "5cf92f3577b34da6a3ce929d0e0e4737";
    let mut streamed = invoice_request();
    streamed["stream"] = json!(true);
    let response = client()
        .post(format!("{}/v1/chat/completions", app.base))
        .bearer_auth(&app.key)
        .header("traceparent", format!("00-{stream_trace}-00f067aa0ba902b8-01"))
        .json(&streamed)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut chunks = response.bytes_stream();
    while chunks.next().await.is_some() {}
    assert_one_trace(&received, stream_trace, "00f067aa0ba902b8").await;

    // Without a traceparent the gateway starts a trace of its own, and the worker still joins it.
    let (status, _, _) = app.post_json("/v1/chat/completions", &invoice_request()).await;
    assert_eq!(status, 200);
    let spans = wait_for(&received, "new trace joined by the worker", |spans| {
        let mut roots = spans.iter().filter(|s| s.service == "runaii-gateway" && s.kind == SERVER && s.parent_span_id.is_empty());
        let joined = roots.any(|root| {
            let mut calls = spans.iter().filter(|c| c.kind == CLIENT && c.parent_span_id == root.span_id);
            calls.any(|call| spans.iter().any(|w| w.service == "runaii-worker" && w.parent_span_id == call.span_id))
        });
        joined.then(|| spans.to_vec())
    })
    .await;
    let probes = spans.iter().filter(|s| s.name.contains("/health") || s.name.contains("/metrics")).count();
    assert_eq!(probes, 0, "the gateway probes the worker's /health every 300 ms; probes are not traced");
}
