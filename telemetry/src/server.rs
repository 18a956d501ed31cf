//! The server span around every request a service answers.

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use tracing::field::Empty;
use tracing::Instrument as _;

/// Probes and scrapes: every gateway checks every worker's health several times a second, and
/// orchestrators and Prometheus poll both. As traces they would bury the requests.
const UNTRACED: [&str; 2] = ["/health", "/metrics"];

/// Axum middleware: one span per request, named `METHOD route` as OpenTelemetry's HTTP conventions
/// name server spans, continuing the caller's trace. Work the handler hands to spawned tasks stays in it
/// when those tasks are instrumented with the current span (a stream keeps it open until its end).
pub async fn trace_requests(request: Request, next: Next) -> Response {
    let matched = request.extensions().get::<MatchedPath>().cloned();
    let route = matched.as_ref().map_or("unmatched", MatchedPath::as_str);
    if UNTRACED.contains(&route) {
        return next.run(request).await;
    }
    let method = request.method().clone();
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
    let response = next.run(request).instrument(span.clone()).await;
    let status = response.status();
    // As i64: the trace layer exports unsigned integers as strings, and the convention wants an int.
    span.record("http.response.status_code", i64::from(status.as_u16()));
    if status.is_server_error() {
        span.record("otel.status_code", "ERROR");
    }
    response
}
