//! The server span layer (`runaii_telemetry::trace_requests`): an answer's body is polled inside its
//! request's span, its status is recorded, a 5xx marks it as an error, and probes get no span.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use axum::body::{to_bytes, Body};
use axum::http::{Request, StatusCode};
use axum::routing::get;
use axum::Router;
use futures::StreamExt as _;
use tower::ServiceExt as _;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// An event's message with the names of the spans around it.
type SeenEvent = (String, Vec<String>);

/// What the test subscriber saw: each event's message with the names of the spans around it, and
/// every field recorded on a span.
#[derive(Default, Clone)]
struct Seen {
    events: Arc<Mutex<Vec<SeenEvent>>>,
    fields: Arc<Mutex<Vec<(String, String)>>>,
}

struct Fields<'a>(&'a mut Vec<(String, String)>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name().to_owned(), format!("{value:?}")));
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Seen {
    fn on_new_span(&self, attrs: &Attributes<'_>, _id: &Id, _ctx: Context<'_, S>) {
        attrs.record(&mut Fields(&mut self.fields.lock().unwrap()));
    }

    fn on_record(&self, _id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        values.record(&mut Fields(&mut self.fields.lock().unwrap()));
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Vec::new();
        event.record(&mut Fields(&mut fields));
        let message = fields.into_iter().find(|(name, _)| name == "message").map(|(_, v)| v).unwrap_or_default();
        let spans = ctx.event_scope(event).into_iter().flatten().map(|s| s.name().to_owned()).collect();
        self.events.lock().unwrap().push((message, spans));
    }
}

fn app() -> Router {
    // The body's chunks log as they are polled: after the handler has returned, as an event stream's do.
    let stream = || async {
        let chunks = futures::stream::iter(["a", "b"]).map(|chunk| {
            tracing::info!("chunk {chunk}");
            Ok::<_, std::convert::Infallible>(chunk)
        });
        Body::from_stream(chunks)
    };
    Router::new()
        .route("/stream", get(stream))
        .route("/fail", get(|| async { StatusCode::SERVICE_UNAVAILABLE }))
        .route(
            "/health",
            get(|| async {
                tracing::info!("probe");
                "ok"
            }),
        )
        .layer(runaii_telemetry::trace_requests())
}

async fn get_body(app: Router, path: &str) -> (StatusCode, String) {
    let response = app.oneshot(Request::get(path).body(Body::empty()).unwrap()).await.unwrap();
    let status = response.status();
    (status, String::from_utf8(to_bytes(response.into_body(), 1 << 16).await.unwrap().to_vec()).unwrap())
}

#[tokio::test]
async fn a_streamed_body_is_polled_inside_its_request_span() {
    let seen = Seen::default();
    let _guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(seen.clone()));
    assert_eq!(get_body(app(), "/stream").await, (StatusCode::OK, "ab".to_owned()));
    let events = seen.events.lock().unwrap().clone();
    assert_eq!(events, [("chunk a".to_owned(), vec!["request".to_owned()]), ("chunk b".to_owned(), vec!["request".to_owned()])]);
    let fields = seen.fields.lock().unwrap().clone();
    assert!(fields.contains(&("otel.name".to_owned(), "GET /stream".to_owned())), "{fields:?}");
    assert!(fields.contains(&("http.response.status_code".to_owned(), "200".to_owned())), "{fields:?}");
    assert!(!fields.iter().any(|(name, _)| name == "otel.status_code"), "{fields:?}");
}

#[tokio::test]
async fn a_server_error_marks_its_span_and_probes_have_none() {
    let seen = Seen::default();
    let _guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(seen.clone()));
    assert_eq!(get_body(app(), "/fail").await.0, StatusCode::SERVICE_UNAVAILABLE);
    let fields = seen.fields.lock().unwrap().clone();
    assert!(fields.contains(&("http.response.status_code".to_owned(), "503".to_owned())), "{fields:?}");
    assert!(fields.contains(&("otel.status_code".to_owned(), "\"ERROR\"".to_owned())), "{fields:?}");

    assert_eq!(get_body(app(), "/health").await, (StatusCode::OK, "ok".to_owned()));
    let events = seen.events.lock().unwrap().clone();
    assert_eq!(events, [("probe".to_owned(), Vec::<String>::new())], "probes are not traced");
}
