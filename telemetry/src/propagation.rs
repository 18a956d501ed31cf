//! W3C trace context (`traceparent`, `tracestate`) in and out of HTTP headers.

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::propagation::{Extractor, Injector};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// Makes the trace a request arrived with the parent of `span`. Without trace headers, or without trace
/// export, `span` stays a root.
pub fn set_parent(span: &tracing::Span, headers: &HeaderMap) {
    let parent = opentelemetry::global::get_text_map_propagator(|p| p.extract(&Incoming(headers)));
    // Fails only when no trace layer is installed: then there is no trace to continue.
    let _ = span.set_parent(parent);
}

/// Writes `span`'s trace context into the headers of a request about to be sent. Without trace export
/// nothing is written.
pub fn inject(span: &tracing::Span, headers: &mut HeaderMap) {
    let context = span.context();
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&context, &mut Outgoing(headers)));
}

struct Incoming<'a>(&'a HeaderMap);

impl Extractor for Incoming<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

struct Outgoing<'a>(&'a mut HeaderMap);

impl Injector for Outgoing<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(key), HeaderValue::try_from(value)) {
            self.0.insert(name, value);
        }
    }
}
