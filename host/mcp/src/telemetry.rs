//! OpenTelemetry traces of `tools/call`, exported over OTLP/HTTP (the
//! OpenTelemetry project's own SDK and exporter).
//!
//! Each call is a server span `tools/call <tool>` with the tool, its
//! toolset, the JSON-RPC id and the outcome (`ok`, `tool_error`, ...,
//! with `error.type` and an error status when it failed). Its parent is the
//! W3C trace context the client sent in the request's `_meta`
//! (`traceparent`, `tracestate`), else in the HTTP headers; the span's own
//! context goes on in `_meta` to the plugin and to remote MCP toolsets,
//! which forward it.

use std::collections::{BTreeMap, HashMap};

use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt as _, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use serde::Deserialize;
use serde_json::Value;

/// Where traces go: the `serve.telemetry.otlp` section.
#[derive(Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct OtlpSettings {
    /// The collector's OTLP/HTTP base URL (`http://collector:4318`);
    /// traces are posted to `/v1/traces` under it.
    pub endpoint: String,
    /// `http/protobuf` (the default) or `http/json`.
    #[serde(default)]
    pub protocol: Option<String>,
    /// Headers sent with every export (a collector's API key, say: use
    /// `${secret:NAME}`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The `service.name` of the traces (default `toolhost`).
    #[serde(default)]
    pub service_name: Option<String>,
}

impl std::fmt::Debug for OtlpSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Header values may be keys: only their names.
        f.debug_struct("OtlpSettings")
            .field("endpoint", &self.endpoint)
            .field("protocol", &self.protocol)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("service_name", &self.service_name)
            .finish()
    }
}

impl OtlpSettings {
    /// Traces to the collector at `endpoint`, as protobuf.
    pub fn new(endpoint: impl Into<String>) -> Self {
        OtlpSettings { endpoint: endpoint.into(), protocol: None, headers: BTreeMap::new(), service_name: None }
    }
}

/// Why tracing could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("cannot export traces to {endpoint}: {message}")]
pub struct TelemetryError {
    /// The collector asked for.
    pub endpoint: String,
    /// What went wrong.
    pub message: String,
}

/// Traces exported over OTLP. Spans are sent in batches from a thread of
/// the exporter's; [`shutdown`](Self::shutdown) sends what is left.
#[derive(Clone)]
pub struct Tracing {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
}

impl std::fmt::Debug for Tracing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracing").finish_non_exhaustive()
    }
}

impl Tracing {
    /// Export to the collector `settings` name.
    pub fn otlp(settings: &OtlpSettings) -> Result<Tracing, TelemetryError> {
        use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
        let fail = |message: String| TelemetryError { endpoint: settings.endpoint.clone(), message };
        let protocol = match settings.protocol.as_deref() {
            None | Some("http/protobuf") => opentelemetry_otlp::Protocol::HttpBinary,
            Some("http/json") => opentelemetry_otlp::Protocol::HttpJson,
            Some(other) => return Err(fail(format!("unknown protocol `{other}` (http/protobuf or http/json)"))),
        };
        let base = settings.endpoint.trim_end_matches('/');
        let endpoint = if base.ends_with("/v1/traces") { base.to_owned() } else { format!("{base}/v1/traces") };
        let headers: HashMap<String, String> = settings.headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let _ = rustls::crypto::ring::default_provider().install_default();
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(endpoint)
            .with_protocol(protocol)
            .with_headers(headers)
            .with_timeout(std::time::Duration::from_secs(10))
            .build()
            .map_err(|e| fail(e.to_string()))?;
        let resource = opentelemetry_sdk::Resource::builder_empty()
            .with_service_name(settings.service_name.clone().unwrap_or_else(|| "toolhost".to_owned()))
            .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
            .build();
        let provider = SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build();
        let tracer = opentelemetry::trace::TracerProvider::tracer(&provider, "toolhost-mcp");
        Ok(Tracing { provider, tracer })
    }

    /// Send the spans not yet sent and stop exporting.
    pub fn shutdown(&self) {
        if let Err(error) = self.provider.shutdown() {
            tracing::warn!("the last traces were not all sent: {error}");
        }
    }

    pub(crate) fn tracer(&self) -> &SdkTracer {
        &self.tracer
    }
}

/// The W3C trace context (`traceparent`, `tracestate`) in a `_meta`
/// object, else in HTTP headers.
fn parent(meta: &serde_json::Map<String, Value>, headers: Option<&axum::http::HeaderMap>) -> Context {
    let mut carrier: HashMap<String, String> = HashMap::new();
    for key in ["traceparent", "tracestate"] {
        if let Some(value) = meta.get(key).and_then(Value::as_str) {
            carrier.insert(key.to_owned(), value.to_owned());
        }
    }
    if carrier.is_empty()
        && let Some(headers) = headers
    {
        for key in ["traceparent", "tracestate"] {
            if let Some(value) = headers.get(key).and_then(|v| v.to_str().ok()) {
                carrier.insert(key.to_owned(), value.to_owned());
            }
        }
    }
    TraceContextPropagator::new().extract(&carrier)
}

/// The span of one `tools/call`.
pub(crate) struct CallSpan {
    span: opentelemetry_sdk::trace::Span,
}

impl CallSpan {
    /// Start the span of a call of `tool` (of `toolset`), a child of the
    /// trace context the request carries; its own context replaces that in
    /// `meta`, so what the call reaches continues the trace.
    pub(crate) fn start(
        tracer: &SdkTracer,
        tool: &str,
        toolset: &str,
        request_id: &str,
        meta: &mut serde_json::Map<String, Value>,
        headers: Option<&axum::http::HeaderMap>,
    ) -> CallSpan {
        let parent = parent(meta, headers);
        let span = tracer
            .span_builder(format!("tools/call {tool}"))
            .with_kind(SpanKind::Server)
            .with_attributes([
                KeyValue::new("mcp.method.name", "tools/call"),
                KeyValue::new("gen_ai.operation.name", "execute_tool"),
                KeyValue::new("gen_ai.tool.name", tool.to_owned()),
                KeyValue::new("toolhost.toolset", toolset.to_owned()),
                KeyValue::new("jsonrpc.request.id", request_id.to_owned()),
            ])
            .start_with_context(tracer, &parent);
        let context = parent.with_remote_span_context(span.span_context().clone());
        let mut carrier: HashMap<String, String> = HashMap::new();
        TraceContextPropagator::new().inject_context(&context, &mut carrier);
        for (key, value) in carrier {
            meta.insert(key, Value::String(value));
        }
        CallSpan { span }
    }

    /// End it with the call's outcome.
    pub(crate) fn end(mut self, outcome: &'static str) {
        self.span.set_attribute(KeyValue::new("toolhost.outcome", outcome));
        // Waiting for the user, or stopped by the client, is not a failure.
        if !matches!(outcome, "ok" | "input_required" | "cancelled") {
            self.span.set_attribute(KeyValue::new("error.type", outcome));
            self.span.set_status(Status::error(outcome));
        }
        self.span.end();
    }
}
