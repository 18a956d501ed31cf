//! The OTLP exporter, configured the way every OpenTelemetry SDK is: by the standard `OTEL_*` variables.

use anyhow::bail;
use opentelemetry_otlp::{Protocol, SpanExporter, WithExportConfig as _};
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;

/// The tracer provider when a collector is configured, else `None`.
///
/// The endpoint, headers, timeout, sampler (`OTEL_TRACES_SAMPLER`) and batching (`OTEL_BSP_*`) are read
/// by the SDK itself; the protocol is chosen here because this build speaks OTLP over HTTP only.
pub(crate) fn provider(service: &str) -> anyhow::Result<Option<SdkTracerProvider>> {
    if env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) || env("OTEL_TRACES_EXPORTER").is_some_and(|v| v == "none")
    {
        return Ok(None);
    }
    if env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT")).is_none() {
        return Ok(None);
    }
    let protocol = env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"));
    let protocol = match protocol.as_deref().unwrap_or("http/protobuf") {
        "http/protobuf" => Protocol::HttpBinary,
        "http/json" => Protocol::HttpJson,
        other => bail!(
            "OTEL_EXPORTER_OTLP_PROTOCOL={other} is not supported: traces go over OTLP/HTTP, \
             `http/protobuf` (the collector's port 4318) or `http/json`"
        ),
    };
    let exporter = SpanExporter::builder().with_http().with_protocol(protocol).build()?;
    let mut resource = Resource::builder();
    let named = env("OTEL_SERVICE_NAME").is_some()
        || env("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|attributes| attributes.contains("service.name="));
    if !named {
        resource = resource.with_service_name(service.to_owned());
    }
    Ok(Some(SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource.build()).build()))
}

/// A variable's value, unless it is unset or empty (which the specification treats alike).
fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}
