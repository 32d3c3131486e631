//! `toolhost serve`: the MCP server of `toolhost-mcp` on stdio or streamable
//! HTTP, until the client leaves or the process is told to stop.

use std::path::PathBuf;
use std::sync::Arc;

use toolhost::{ApproveAll, ToolsetsWatcher, WatchEvent};
use toolhost_mcp::{Approvals, McpServer, ToolSource};

use crate::args::{PluginOptions, SecretOptions};
use crate::exit::{Failure, usage};
use crate::output::load_serving;
use crate::{exit, serve};
use toolhost_mcp::telemetry::{OtlpSettings, Tracing};
use toolhost_mcp::{HttpOptions, HttpServer, Metrics, ServeSettings};

/// Run the MCP server until the client disconnects (stdio) or the process
/// gets SIGINT or SIGTERM (either transport).
pub(crate) async fn serve(server: McpServer, http: Option<HttpOptions>) -> anyhow::Result<()> {
    match http {
        None => toolhost_mcp::serve_stdio(server, shutdown_signal()).await?,
        Some(options) => {
            let http = HttpServer::bind(server, options).await?;
            eprintln!("toolhost: serving MCP over streamable HTTP at {}", http.url());
            http.serve(async {
                shutdown_signal().await;
                eprintln!("toolhost: shutting down: draining (calls running finish first), then ending sessions");
            })
            .await?;
        }
    }
    Ok(())
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() {
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The plugin's .wasm file (or --config FILE)
    pub(crate) plugin: Option<PathBuf>,
    /// Serve streamable HTTP at ADDR (127.0.0.1:8000)
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:8000")]
    pub(crate) http: Option<std::net::SocketAddr>,
    /// Also accept this browser origin (repeatable)
    #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "http")]
    pub(crate) allow_origins: Vec<String>,
    /// Approve calls that require approval, without asking
    #[arg(long)]
    pub(crate) yes: bool,
    /// Serve Prometheus metrics at /metrics
    #[arg(long, requires = "http")]
    pub(crate) metrics: bool,
    /// Export a span per call to this OTLP/HTTP collector
    #[arg(long, value_name = "URL")]
    pub(crate) otlp_endpoint: Option<String>,
    /// Also answer requests for this `Host` (repeatable)
    #[arg(long = "public-host", value_name = "NAME", requires = "http")]
    pub(crate) public_hosts: Vec<String>,
    /// On SIGTERM, time for running calls to finish
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = crate::args::parse_duration, requires = "http")]
    pub(crate) drain_timeout: std::time::Duration,
    /// Run the tool-set service on this store
    #[arg(long, value_name = "URL", requires = "http")]
    pub(crate) store: Option<String>,
    /// Time to answer an approval question
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = crate::args::parse_duration)]
    pub(crate) approval_timeout: std::time::Duration,
    #[command(flatten)]
    pub(crate) secrets: SecretOptions,
    #[command(flatten)]
    pub(crate) options: PluginOptions,
}

pub(crate) async fn run(args: Args) -> Result<u8, Failure> {
    let Args {
        plugin,
        http,
        allow_origins,
        metrics,
        otlp_endpoint,
        public_hosts,
        drain_timeout,
        store,
        yes,
        approval_timeout,
        secrets,
        options,
    } = args;
    let approvals = if yes {
        Approvals::Approver(Arc::new(ApproveAll))
    } else {
        Approvals::AskTheUser { timeout: approval_timeout }
    };
    let served = served(plugin, options, &secrets).await?;
    let service_settings = service_settings(store, &served, http.is_some())?;
    let settings = &served.settings;
    let metrics = (metrics || settings.telemetry.metrics).then(|| Arc::new(Metrics::new()));
    let mut server =
        McpServer::with_approvals(served.source.clone(), approvals).with_rate_limits(settings.rate_limits.clone());
    if let Some(metrics) = &metrics {
        server = server.with_metrics(Arc::clone(metrics));
    }
    let otlp = otlp_endpoint.map(OtlpSettings::new).or_else(|| settings.telemetry.otlp.clone());
    let tracing = match otlp {
        None => None,
        Some(otlp) => Some(Tracing::otlp(&otlp).map_err(|error| usage(anyhow::anyhow!(error)))?),
    };
    if let Some(tracing) = &tracing {
        server = server.with_tracing(tracing);
    }
    let mut http = match http {
        None => {
            if settings.auth.is_some() {
                eprintln!(
                    "toolhost: note: serve.auth applies to --http; over stdio the client is the program that started toolhost"
                );
            }
            None
        }
        Some(addr) => Some(
            HttpOptions::from_settings(addr, settings, &served.base, metrics)
                .await
                .map_err(|error| usage(anyhow::anyhow!(error)))?
                .allow_origins(allow_origins)
                .allow_hosts(public_hosts)
                .with_drain_timeout(drain_timeout),
        ),
    };
    if let Some(service) = service_settings
        && let Some(options) = http.take()
    {
        let (tenants, options) = start_service(service, options).await?;
        server = server.with_source(tenants);
        http = Some(options);
    }
    let outcome = serve::serve(server, http).await;
    if let Some(tracing) = tracing {
        // The spans not sent yet go now (the exporter blocks on its thread).
        let _ = tokio::task::spawn_blocking(move || tracing.shutdown()).await;
    }
    outcome.map_err(|error| Failure { code: exit::PLUGIN_FAILED, error })?;
    drop(served);
    Ok(0)
}

/// What `serve` serves: one plugin, or a toolsets file's registry (followed
/// while serving) with its `serve` section.
struct Served {
    source: ToolSource,
    /// The registry of a toolsets file.
    registry_of_file: Option<Arc<toolhost::Registry>>,
    settings: ServeSettings,
    /// Where relative paths of the file are from.
    base: PathBuf,
    /// The file's top-level `verify` (the service's tenants' key).
    verify: toolhost::VerifyPolicy,
    /// Follows the file while serving (dropped when serving ends).
    _watching: Option<toolhost::WatchHandle>,
}

/// Load the plugin, or the toolsets file and its watcher.
async fn served(plugin: Option<PathBuf>, options: PluginOptions, secrets: &SecretOptions) -> Result<Served, Failure> {
    let (pairs, toolsets) = options.config(None).map_err(usage)?;
    let file = match (plugin, toolsets) {
        (Some(plugin), None) => {
            return Ok(Served {
                source: ToolSource::Plugin(options.load(&plugin, pairs, Some(secrets)).await?),
                registry_of_file: None,
                settings: ServeSettings::default(),
                base: PathBuf::from("."),
                verify: toolhost::VerifyPolicy::default(),
                _watching: None,
            });
        }
        (None, Some(file)) => file,
        _ => return Err(usage(anyhow::anyhow!("give PLUGIN.wasm or --config TOOLSETS_FILE (one of them)"))),
    };
    if options.configures_a_plugin() || !pairs.is_empty() {
        return Err(usage(anyhow::anyhow!(
            "with a toolsets file, grants, limits and config come from the file, not from flags"
        )));
    }
    secrets.not_with_toolsets()?;
    let (registry, section, verify) = load_serving(&file, secrets).await?;
    let settings = match section {
        Some(section) => ServeSettings::from_section(&section)
            .map_err(|problem| usage(anyhow::anyhow!("invalid configuration {}: {problem}", file.display())))?,
        None => ServeSettings::default(),
    };
    let base = file.parent().map_or_else(|| PathBuf::from("."), std::path::Path::to_path_buf);
    let watching = ToolsetsWatcher::new(file, secrets.provider(), Arc::clone(&registry))
        .on_event(|event| match event {
            WatchEvent::Applied(report) => crate::output::print_load_report(&report),
            WatchEvent::Rejected(error) => eprintln!(
                "warning: the changed configuration was not applied: {}",
                crate::terminal::escaped(&error.to_string())
            ),
            _ => {}
        })
        .spawn();
    Ok(Served {
        source: ToolSource::Registry(Arc::clone(&registry)),
        registry_of_file: Some(registry),
        settings,
        base,
        verify,
        _watching: Some(watching),
    })
}

/// The tool-set service's settings, if it is asked for (`--store`, or
/// `serve.service` in the file); what it needs is checked here.
fn service_settings(
    store: Option<String>,
    served: &Served,
    over_http: bool,
) -> Result<Option<toolhost_service::ServiceSettings>, Failure> {
    let section = &served.settings.service;
    if store.is_none() && section.is_none() {
        return Ok(None);
    }
    let mut service = match section {
        Some(section) => {
            let mut service = toolhost_service::ServiceSettings::from_section(section)
                .map_err(|problem| usage(anyhow::anyhow!("invalid configuration: {problem}")))?;
            // A relative SQLite path, like every path of the file, is
            // relative to the file.
            if let Some(path) = service.store.strip_prefix("sqlite://")
                && std::path::Path::new(path).is_relative()
            {
                service.store = format!("sqlite://{}", served.base.join(path).display());
            }
            service
        }
        None => toolhost_service::ServiceSettings::new(""),
    };
    if let Some(store) = store {
        service.store = store;
    }
    // The key tenants' downloaded plugins must be signed with: the file's.
    if let Some(toolhost::Verification::Key(key)) = &served.verify.default {
        service.signature_key = Some(std::path::absolute(key).unwrap_or_else(|_| key.clone()));
    }
    if !over_http {
        return Err(usage(anyhow::anyhow!("the tool-set service (--store, serve.service) needs --http")));
    }
    if served.settings.auth.is_none() {
        return Err(usage(anyhow::anyhow!(
            "the tool-set service needs serve.auth in the toolsets file: every request's token names its workspace"
        )));
    }
    if served.registry_of_file.as_ref().is_some_and(|registry| !registry.toolset_ids().is_empty()) {
        return Err(usage(anyhow::anyhow!(
            "with the tool-set service, tool sets come from its store: the file's `toolsets` must be empty"
        )));
    }
    Ok(Some(service))
}

/// Start the tool-set service: what the server serves (each workspace its
/// registry) and the HTTP options with its routes.
async fn start_service(
    service: toolhost_service::ServiceSettings,
    options: HttpOptions,
) -> Result<(ToolSource, HttpOptions), Failure> {
    let Some(auth) = options.auth.clone() else {
        return Err(usage(anyhow::anyhow!("the tool-set service needs serve.auth in the toolsets file")));
    };
    let redacted = service.store_redacted();
    let service =
        toolhost_service::Service::start(service, auth, crate::runtime_builder()).await.map_err(
            |error| match error {
                toolhost_service::ServiceError::Settings(_) => usage(anyhow::anyhow!(error)),
                _ => Failure { code: exit::PLUGIN_FAILED, error: anyhow::anyhow!(error) },
            },
        )?;
    eprintln!("toolhost: the tool-set service is at /v1/tool_sets, its store {redacted}");
    let service = service.ending_with(options.stopping());
    Ok((toolhost_mcp::ToolSource::Tenants(service.tenants()), options.with_routes(service.routes())))
}
