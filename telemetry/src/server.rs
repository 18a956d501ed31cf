//! The server span around every request a service answers: `tower-http`'s [`TraceLayer`] with this
//! crate's span (OpenTelemetry's HTTP server conventions, continuing the caller's trace) and no log lines
//! of its own. The layer keeps the span entered while the handler runs and while the answer's body is
//! polled, so an event stream's work stays in its request's span until the stream ends.

use std::time::Duration;

use axum::extract::MatchedPath;
use axum::http::{Request, Response};
use tower_http::classify::{ServerErrorsAsFailures, ServerErrorsFailureClass, SharedClassifier};
use tower_http::trace::{MakeSpan, OnFailure, OnResponse, TraceLayer};
use tracing::field::Empty;
use tracing::Span;

/// Probes and scrapes: every gateway checks every worker's health several times a second, and
/// orchestrators and Prometheus poll both. As traces they would bury the requests.
const UNTRACED: [&str; 2] = ["/health", "/metrics"];

/// The layer [`trace_requests`] builds.
pub type TraceRequests = TraceLayer<SharedClassifier<ServerErrorsAsFailures>, RequestSpan, (), RecordStatus, (), (), MarkError>;

/// One span per request, named `METHOD route` as OpenTelemetry's HTTP conventions name server spans,
/// continuing the caller's trace; its status code recorded with the answer, and a 5xx answer or a body
/// that fails while it streams marks it as an error. Work the handler hands to spawned tasks stays in it
/// when those tasks are instrumented with the current span. Mount it where the router has matched the
/// route (`Router::layer`), so the span can name it.
#[must_use]
pub fn trace_requests() -> TraceRequests {
    TraceLayer::new_for_http()
        .make_span_with(RequestSpan)
        .on_request(())
        .on_response(RecordStatus)
        .on_body_chunk(())
        .on_eos(())
        .on_failure(MarkError)
}

/// Makes the request's span; none for [`UNTRACED`] routes.
#[derive(Debug, Clone, Copy)]
pub struct RequestSpan;

impl<B> MakeSpan<B> for RequestSpan {
    fn make_span(&mut self, request: &Request<B>) -> Span {
        let route = request.extensions().get::<MatchedPath>().map_or("unmatched", MatchedPath::as_str);
        if UNTRACED.contains(&route) {
            return Span::none();
        }
        let method = request.method();
        let span = tracing::info_span!(
            "request",
            otel.name = %format_args!("{method} {route}"),
            otel.kind = "server",
            http.request.method = %method,
            http.route = %route,
            http.response.status_code = Empty,
            otel.status_code = Empty,
        );
        crate::set_parent(&span, request.headers());
        span
    }
}

/// Records the answer's status code on the span.
#[derive(Debug, Clone, Copy)]
pub struct RecordStatus;

impl<B> OnResponse<B> for RecordStatus {
    fn on_response(self, response: &Response<B>, _latency: Duration, span: &Span) {
        // As i64: the trace layer exports unsigned integers as strings, and the convention wants an int.
        span.record("http.response.status_code", i64::from(response.status().as_u16()));
    }
}

/// Marks the span as an error: a 5xx answer, or a body that failed on its way out.
#[derive(Debug, Clone, Copy)]
pub struct MarkError;

impl OnFailure<ServerErrorsFailureClass> for MarkError {
    fn on_failure(&mut self, _failure: ServerErrorsFailureClass, _latency: Duration, span: &Span) {
        span.record("otel.status_code", "ERROR");
    }
}
