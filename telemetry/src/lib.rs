//! Logs and traces for both binaries.
//!
//! Logs go to stderr as they always did. Traces go out over OTLP only when a collector is named with the
//! standard OpenTelemetry variables (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`);
//! without one, spans are not recorded at all: log lines then carry only their own fields (every log on
//! a request's path names its request id), not the span context around them, and a request pays nothing
//! for spans nobody exports (allocating them and formatting their fields was ~5% of the gateway's CPU).
//! `RUNAII_LOG_SPANS=1` puts the span context back into the logs. Requests carry their trace from hop to
//! hop in the W3C `traceparent` header: [`trace_requests`] continues the caller's trace, [`inject`] hands
//! it on.

mod export;
mod propagation;
mod server;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::filter::{filter_fn, FilterExt as _, LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

pub use propagation::{inject, set_parent};
pub use server::{trace_requests, TraceRequests};

/// The crates whose spans become trace spans. Libraries' own spans (HTTP clients, pools) stay out: they
/// would multiply the spans per request without saying anything about the request.
const TRACED: [&str; 3] = ["runaii_gateway", "runaii_worker", "runaii_telemetry"];

/// Keeps the trace exporter alive; dropping it sends what is still buffered.
#[must_use = "dropping the guard stops the trace export"]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Whether spans are being exported.
    #[must_use]
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            if let Err(e) = provider.shutdown() {
                eprintln!("telemetry: could not flush the last spans: {e}");
            }
        }
    }
}

/// Installs the process's logging (`RUST_LOG`, else `default_filter`) and, when a collector is
/// configured, the trace export under `service` (unless `OTEL_SERVICE_NAME` names it otherwise).
///
/// # Errors
/// An OTLP protocol this build does not speak, an exporter that cannot be built, or a second call.
pub fn init(service: &str, default_filter: &str) -> anyhow::Result<Telemetry> {
    opentelemetry::global::set_text_map_propagator(opentelemetry_sdk::propagation::TraceContextPropagator::new());
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let provider = export::provider(service)?;
    let span_context = provider.is_some() || std::env::var("RUNAII_LOG_SPANS").is_ok_and(|v| v == "1" || v == "true");
    // Logs go to stderr (stdout carries command output, such as a new key), in colour only on a terminal.
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_filter(filter.and(filter_fn(move |meta| span_context || meta.is_event())));
    match &provider {
        Some(provider) => {
            let targets = TRACED.iter().fold(Targets::new(), |t, crate_name| t.with_target(*crate_name, LevelFilter::INFO));
            let traces = tracing_opentelemetry::layer().with_tracer(provider.tracer("runaii")).with_filter(targets);
            tracing_subscriber::registry().with(logs).with(traces).try_init()?;
        }
        // Not `.with(None)`: an absent layer still says it wants every span, and each would be built.
        None => tracing_subscriber::registry().with(logs).try_init()?,
    }
    Ok(Telemetry { provider })
}
