//! Prometheus metrics of a server (`/metrics`, the text exposition format,
//! from the Prometheus project's own `prometheus-client`): tool calls by
//! outcome, their latency, calls running, refusals by rate limits and by
//! authorization, and, read from the registry when scraped, instances in
//! each toolset's pool, the memory they hold and each toolset's sync state.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry as Metrics_;

use crate::ToolSource;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tool: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabel {
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LimitLabel {
    limit: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolsetLabel {
    toolset: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabels {
    toolset: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SyncLabels {
    toolset: String,
    state: String,
}

fn latency_histogram() -> Histogram {
    // 50 µs to ~26 s, doubling.
    Histogram::new(exponential_buckets(0.000_05, 2.0, 20))
}

/// A server's metrics.
pub struct Metrics {
    registry: Metrics_,
    calls: Family<CallLabels, Counter>,
    latency: Family<ToolLabel, Histogram, fn() -> Histogram>,
    running: Gauge,
    limited: Family<LimitLabel, Counter>,
    refused: Family<ReasonLabel, Counter>,
    instances: Family<PoolLabels, Gauge>,
    memory: Family<ToolsetLabel, Gauge>,
    sync: Family<SyncLabels, Gauge>,
    /// One scrape at a time: a scrape clears and refills the gauges read
    /// from the registry, which another must not see half done.
    scraping: std::sync::Mutex<()>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Every metric at zero.
    pub fn new() -> Metrics {
        let mut registry = Metrics_::with_prefix("toolhost");
        let calls = Family::<CallLabels, Counter>::default();
        registry.register("tool_calls", "tools/call requests answered, by tool and outcome", calls.clone());
        let latency = Family::<ToolLabel, Histogram, fn() -> Histogram>::new_with_constructor(latency_histogram);
        registry.register(
            "tool_call_duration_seconds",
            "Time from a tools/call request to its answer, approval and validation included",
            latency.clone(),
        );
        let running = Gauge::default();
        registry.register("tool_calls_running", "tools/call requests being answered now", running.clone());
        let limited = Family::<LimitLabel, Counter>::default();
        registry.register("rate_limited", "tools/call requests refused by a rate limit, by limit", limited.clone());
        let refused = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "auth_refused",
            "HTTP requests refused by authorization (missing, invalid, insufficient_scope)",
            refused.clone(),
        );
        let instances = Family::<PoolLabels, Gauge>::default();
        registry.register("pool_instances", "Plugin instances by toolset and state (idle, busy)", instances.clone());
        let memory = Family::<ToolsetLabel, Gauge>::default();
        registry.register(
            "pool_idle_memory_bytes",
            "Memory the idle instances of a toolset hold (linear memories, Extism kernel memory)",
            memory.clone(),
        );
        let sync = Family::<SyncLabels, Gauge>::default();
        registry.register(
            "toolset_sync",
            "1 for each toolset's last sync state (SyncStarted, SyncCompleted, SyncFailed)",
            sync.clone(),
        );
        Metrics {
            registry,
            calls,
            latency,
            running,
            limited,
            refused,
            instances,
            memory,
            sync,
            scraping: std::sync::Mutex::new(()),
        }
    }

    /// A call is being answered; the guard counts it until dropped.
    pub(crate) fn running(&self) -> RunningGuard<'_> {
        self.running.inc();
        RunningGuard(&self.running)
    }

    /// A call was answered.
    pub(crate) fn call_finished(&self, tool: &str, outcome: &str, took: Duration) {
        self.calls.get_or_create(&CallLabels { tool: tool.to_owned(), outcome: outcome.to_owned() }).inc();
        self.latency.get_or_create(&ToolLabel { tool: tool.to_owned() }).observe(took.as_secs_f64());
    }

    /// A call was refused by a limit.
    pub(crate) fn rate_limited(&self, limit: &str) {
        self.limited.get_or_create(&LimitLabel { limit: limit.to_owned() }).inc();
    }

    /// A request was refused by authorization.
    pub(crate) fn auth_refused(&self, reason: &str) {
        self.refused.get_or_create(&ReasonLabel { reason: reason.to_owned() }).inc();
    }

    /// The metrics in Prometheus' text format, pools and sync states read
    /// from `source` now.
    pub fn render(&self, source: &ToolSource) -> String {
        let _one_at_a_time = self.scraping.lock().unwrap_or_else(|e| e.into_inner());
        self.instances.clear();
        self.memory.clear();
        self.sync.clear();
        let mut pools = match source {
            ToolSource::Plugin(plugin) => vec![(plugin.name().to_owned(), plugin.pool_stats())],
            _ => Vec::new(),
        };
        // A tenant's toolsets are labelled `<tenant>/<toolset>`.
        for (tenant, registry) in source.registries() {
            let label = |id: String| if tenant.is_empty() { id } else { format!("{tenant}/{id}") };
            for event in registry.last_syncs() {
                let state = event.event.name().to_owned();
                self.sync.get_or_create(&SyncLabels { toolset: label(event.tool_set_id), state }).set(1);
            }
            pools.extend(registry.pool_stats().into_iter().map(|(id, stats)| (label(id), stats)));
        }
        for (toolset, stats) in pools {
            let gauge = |state: &str| PoolLabels { toolset: toolset.clone(), state: state.to_owned() };
            self.instances.get_or_create(&gauge("idle")).set(stats.idle as i64);
            self.instances.get_or_create(&gauge("busy")).set(stats.busy as i64);
            self.memory.get_or_create(&ToolsetLabel { toolset }).set(stats.idle_memory_bytes as i64);
        }
        let mut text = String::new();
        if let Err(error) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            tracing::warn!("cannot write the metrics: {error}");
        }
        text
    }
}

/// Counts a call as running until dropped.
pub(crate) struct RunningGuard<'a>(&'a Gauge);

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}
