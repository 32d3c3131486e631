//! The library's `tracing` spans: one per load and one per call, with the
//! plugin, the tool, a call id, the outcome and the duration, seen by an
//! embedder's subscriber.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::json;
use toolhost::Plugin;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;

/// A span's fields as text.
#[derive(Debug, Default, Clone)]
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
}

/// Records every span when it closes: its name and fields.
#[derive(Clone, Default)]
struct Closed(Arc<Mutex<Vec<(String, Fields)>>>);

impl<S> tracing_subscriber::Layer<S> for Closed
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &tracing::span::Attributes<'_>, id: &tracing::span::Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &tracing::span::Id, values: &tracing::span::Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<Fields>()
        {
            values.record(fields);
        }
    }

    fn on_close(&self, id: tracing::span::Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(&id) {
            let fields = span.extensions_mut().remove::<Fields>().unwrap_or_default();
            self.0.lock().unwrap().push((span.name().to_owned(), fields));
        }
    }
}

impl Closed {
    fn named(&self, name: &str) -> Vec<BTreeMap<String, String>> {
        self.0.lock().unwrap().iter().filter(|(n, _)| n == name).map(|(_, f)| f.0.clone()).collect()
    }
}

#[tokio::test]
async fn loads_and_calls_are_spans_with_their_outcome_and_duration() {
    let closed = Closed::default();
    let _guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(closed.clone()));
    // Callsites other tests' threads registered before this subscriber
    // existed are asked again (tracing caches each callsite's interest).
    tracing::callsite::rebuild_interest_cache();

    let plugin = Plugin::load(toolhost_tests::example("calculator")).await.expect("load");
    let loads = closed.named("toolhost.load");
    assert_eq!(loads.len(), 1, "{loads:?}");
    assert_eq!(loads[0]["plugin"], "calculator");
    assert_eq!(loads[0]["outcome"], "ok");
    assert!(loads[0]["duration_us"].parse::<u64>().is_ok(), "{loads:?}");

    // Again: another test's thread may have registered the call span's
    // callsite while this subscriber was being set (tracing then caches
    // `never` for it).
    tracing::callsite::rebuild_interest_cache();
    plugin.call_tool("add", json!({"a": 2, "b": 3})).await.expect("add");
    plugin.call_tool("divide", json!({"a": 1, "b": 0})).await.expect("a tool error is a result");
    plugin.call_tool("add", json!({"a": "two"})).await.unwrap_err();
    {
        // Dropped before it finishes: cancelled.
        let call = plugin.call_tool("add", json!({"a": 1, "b": 1}));
        drop(call);
    }
    let calls = closed.named("toolhost.call");
    let outcomes: Vec<(&str, &str)> = calls.iter().map(|c| (c["tool"].as_str(), c["outcome"].as_str())).collect();
    assert_eq!(
        outcomes,
        [("add", "ok"), ("divide", "tool_error"), ("add", "invalid_arguments")],
        "a future that never ran opens no span: {calls:?}"
    );
    let ids: std::collections::BTreeSet<&str> = calls.iter().map(|c| c["call_id"].as_str()).collect();
    assert_eq!(ids.len(), 3, "each call has its own id: {calls:?}");
    assert!(calls.iter().all(|c| c["plugin"] == "calculator" && c["duration_us"].parse::<u64>().is_ok()));

    // A call dropped while it runs: `cancelled`.
    let spin = Plugin::load(toolhost_tests::fixture("hostile")).await.expect("load");
    let running = spin.call_tool("spin", json!({}));
    let _ = tokio::time::timeout(std::time::Duration::from_millis(50), running).await;
    let spins = closed.named("toolhost.call");
    let last = spins.last().expect("the spin's span");
    assert_eq!((last["tool"].as_str(), last["outcome"].as_str()), ("spin", "cancelled"), "{spins:?}");

    // A plugin that does not load: the load span says so.
    let error = Plugin::load("/nonexistent/nothing.wasm").await.unwrap_err();
    assert!(error.is_load());
    let failed = closed.named("toolhost.load");
    assert_eq!(failed.last().map(|l| l["outcome"].as_str()), Some("load_failed"), "{failed:?}");
}
