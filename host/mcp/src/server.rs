//! The MCP server handler (on `rmcp`) in front of a plugin or a registry.
//!
//! `tools/list` shows every available tool (title, description, inputSchema,
//! outputSchema, annotations); `tools/call` goes through the validating host.
//! Following the MCP specification, an unknown tool is a protocol error
//! (`-32602`), while arguments that break the tool's schema and failures of
//! the plugin are tool execution errors (`isError: true`) whose text says
//! what happened, so a model can correct itself. A client's cancellation
//! stops the call's guest; a change of the registry's tools is announced
//! with `notifications/tools/list_changed`.

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, InitializeResult, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use serde_json::Value;

use toolhost::{Approver, CallContext, Error};

use crate::caller::{Caller, Outlet};
use crate::elicit::Elicitor;
use crate::listings::Listings;
#[cfg(feature = "production")]
use crate::tool_source::principal_in;
use crate::tool_source::{Resolved, ToolSource};
use crate::wire;

/// Who approves the calls of tools that require approval.
#[derive(Clone)]
pub enum Approvals {
    /// The embedding program's approver (for example `ApproveAll`, the
    /// CLI's `--yes`).
    Approver(Arc<dyn Approver>),
    /// The client's user, asked through elicitation (and at 2026-07-28 an
    /// `input_required` result), with at most this long to answer. A
    /// decline, a cancel, no answer or a client that cannot ask means the
    /// tool does not run.
    AskTheUser {
        /// How long a user has to answer one question.
        timeout: std::time::Duration,
    },
}

/// The MCP server handler: one per connection (cheap to clone).
#[derive(Clone)]
pub struct McpServer {
    source: ToolSource,
    approvals: Approvals,
    /// The level the client asked for with `logging/setLevel` (per
    /// session; `None`: it did not ask, and gets no log messages).
    log_level: Arc<std::sync::Mutex<Option<LogLevel>>>,
    /// The resource URIs this session subscribed to (`resources/subscribe`):
    /// a plugin's update of one reaches it, of others does not.
    subscriptions: Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>,
    /// tools/call requests being answered, in every session (what a
    /// graceful shutdown waits for).
    running: Arc<std::sync::atomic::AtomicUsize>,
    /// The most tools/call requests answered at once (1,024
    /// unless told).
    max_calls: usize,
    /// `tools/list` answers of registries until they change, shared by
    /// every session.
    listings: Arc<Listings>,
    /// Cancelled once the last clone of this session's server is dropped:
    /// the session has ended, and what it started for itself stops.
    session: Session,
    /// Rate limits on tools/call, shared by every session.
    #[cfg(feature = "production")]
    limiter: Option<Arc<crate::limits::Limiter>>,
    /// The server's metrics, shared by every session.
    #[cfg(feature = "production")]
    metrics: Option<Arc<crate::metrics::Metrics>>,
    /// Where the spans of calls go.
    #[cfg(feature = "production")]
    tracer: Option<opentelemetry_sdk::trace::SdkTracer>,
    /// Told of each session once it is initialized, and asked for what a
    /// parked session had set as it comes back (the HTTP front, which
    /// answers its plain calls itself and parks its idle sessions).
    #[cfg(feature = "http")]
    hooks: Option<Arc<dyn SessionHooks>>,
}

/// What the HTTP front is told of its sessions, and asked.
#[cfg(feature = "http")]
pub(crate) trait SessionHooks: Send + Sync {
    /// An HTTP session is initialized: its id, its server (its state, not
    /// its lifetime) and its peer. What this returns is kept until the
    /// session ends, and dropped then.
    fn register(&self, id: Arc<str>, server: McpServer, peer: rmcp::service::Peer<RoleServer>) -> Box<dyn Send + Sync>;

    /// What session `id` had set before it was parked, as rmcp restores it.
    fn restored(&self, id: &str) -> Option<SessionSettings>;
}

/// What a client set in its session: its log level and its subscriptions
/// (kept while the session is parked).
#[derive(Debug, Clone, Default)]
pub(crate) struct SessionSettings {
    log_level: Option<LogLevel>,
    subscriptions: std::collections::BTreeSet<String>,
}

/// A session's lifetime: its token is cancelled when the last server of
/// the session (every clone) is dropped.
#[derive(Clone)]
struct Session {
    ended: tokio_util::sync::CancellationToken,
    /// Held for what its drop does (read only by the HTTP front).
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    end: Arc<SessionEnd>,
    /// Set once the session's `list_changed` relay runs: a client may send
    /// `notifications/initialized` again and again, and each started one.
    relaying: Arc<std::sync::atomic::AtomicBool>,
}

/// What happens when a session ends: its token is cancelled, and what its
/// registration returned is dropped (the HTTP front stops answering its
/// calls).
struct SessionEnd {
    _ended: tokio_util::sync::DropGuard,
    #[cfg(feature = "http")]
    registered: std::sync::OnceLock<Box<dyn Send + Sync>>,
}

impl Default for Session {
    fn default() -> Self {
        let ended = tokio_util::sync::CancellationToken::new();
        let end = SessionEnd {
            _ended: ended.clone().drop_guard(),
            #[cfg(feature = "http")]
            registered: Default::default(),
        };
        Session { end: Arc::new(end), ended, relaying: Default::default() }
    }
}

#[allow(deprecated)] // Logging is deprecated after 2025-11-25, which we still serve.
type LogLevel = rmcp::model::LoggingLevel;

/// A `notifications/message` of `logger` at `level`.
#[allow(deprecated)]
fn log_notification(level: LogLevel, logger: String, text: String) -> rmcp::model::ServerNotification {
    let params = rmcp::model::LoggingMessageNotificationParam::new(level, Value::String(text)).with_logger(logger);
    rmcp::model::ServerNotification::LoggingMessageNotification(rmcp::model::Notification::new(params))
}

/// A level's severity, for filtering (`debug` 0 ... `emergency` 7).
#[allow(deprecated)]
fn severity(level: LogLevel) -> u8 {
    use rmcp::model::LoggingLevel as L;
    match level {
        L::Debug => 0,
        L::Info => 1,
        L::Notice => 2,
        L::Warning => 3,
        L::Error => 4,
        L::Critical => 5,
        L::Alert => 6,
        L::Emergency => 7,
    }
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer").finish_non_exhaustive()
    }
}

impl McpServer {
    /// A server for these tools. `approver` decides on tools that require
    /// approval (registry sources only).
    pub fn new(source: ToolSource, approver: Arc<dyn Approver>) -> Self {
        McpServer::with_approvals(source, Approvals::Approver(approver))
    }

    /// The same server for another session (connection): same tools and
    /// approvals, its own session state (the logging level).
    pub fn for_session(&self) -> McpServer {
        McpServer {
            log_level: Default::default(),
            subscriptions: Default::default(),
            session: Session::default(),
            ..self.clone()
        }
    }

    /// A server for these tools whose approvals come from `approvals`
    /// (e.g. [`Approvals::AskTheUser`]).
    pub fn with_approvals(source: ToolSource, approvals: Approvals) -> Self {
        McpServer {
            source,
            approvals,
            log_level: Default::default(),
            subscriptions: Default::default(),
            running: Default::default(),
            max_calls: crate::jsonrpc::DEFAULT_MAX_CALLS,
            listings: Default::default(),
            session: Session::default(),
            #[cfg(feature = "production")]
            limiter: None,
            #[cfg(feature = "production")]
            metrics: None,
            #[cfg(feature = "production")]
            tracer: None,
            #[cfg(feature = "http")]
            hooks: None,
        }
    }

    /// Tell `hooks` of each session once it is initialized, and ask it
    /// for a restored session's settings.
    #[cfg(feature = "http")]
    pub(crate) fn with_session_hooks(mut self, hooks: Arc<dyn SessionHooks>) -> Self {
        self.hooks = Some(hooks);
        self
    }

    /// What the client set in this session.
    #[cfg(feature = "http")]
    pub(crate) fn settings(&self) -> SessionSettings {
        SessionSettings {
            log_level: *self.log_level.lock().unwrap_or_else(|e| e.into_inner()),
            subscriptions: self.subscriptions.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        }
    }

    /// Take on what the client had set in this session before it was parked.
    #[cfg(feature = "http")]
    fn adopt(&self, settings: SessionSettings) {
        *self.log_level.lock().unwrap_or_else(|e| e.into_inner()) = settings.log_level;
        *self.subscriptions.lock().unwrap_or_else(|e| e.into_inner()) = settings.subscriptions;
    }

    /// Register this session for the HTTP front, if it is one of the
    /// front's (an HTTP session that began with `initialize`), once.
    #[cfg(feature = "http")]
    fn register_session(&self, context: &NotificationContext<RoleServer>) {
        let Some(hooks) = &self.hooks else { return };
        let Some(parts) = context.extensions.get::<axum::http::request::Parts>() else { return };
        let Some(id) = parts.headers.get("mcp-session-id").and_then(|v| v.to_str().ok()) else { return };
        if context.peer.peer_info().is_none() || self.session.end.registered.get().is_some() {
            return;
        }
        self.session
            .end
            .registered
            .get_or_init(|| hooks.register(Arc::from(id), self.state_copy(), context.peer.clone()));
    }

    /// A copy of this session's server for answering its calls outside
    /// rmcp: its state (log level, subscriptions), not its lifetime (the
    /// session still ends when rmcp drops its last server), nor its
    /// hooks (whose registry would then hold itself).
    #[cfg(any(feature = "http", feature = "stdio"))]
    pub(crate) fn state_copy(&self) -> McpServer {
        McpServer {
            session: Session::default(),
            #[cfg(feature = "http")]
            hooks: None,
            ..self.clone()
        }
    }

    /// Answer at most `calls` `tools/call` requests at once, in all
    /// sessions together: one more is refused at once (JSON-RPC error
    /// `-32029`, `retryAfterMs` in its data) rather than queued.
    /// [`HttpServer`](crate::HttpServer) sets it from its limits.
    pub fn with_max_calls(mut self, calls: usize) -> Self {
        self.max_calls = calls.max(1);
        self
    }

    /// The same server over another source of tools.
    pub fn with_source(mut self, source: ToolSource) -> Self {
        self.source = source;
        self
    }

    /// Trace every `tools/call` with `tracing` (a span each, continuing
    /// the client's trace context, passed on to what the call reaches).
    #[cfg(feature = "production")]
    pub fn with_tracing(mut self, tracing: &crate::telemetry::Tracing) -> Self {
        self.tracer = Some(tracing.tracer().clone());
        self
    }

    /// Limit `tools/call` as `limits` say (per client, per tool, calls
    /// running per client). A client is the token's subject when
    /// `HttpServer` authenticates requests, else the peer's address (one
    /// client on stdio).
    #[cfg(feature = "production")]
    pub fn with_rate_limits(mut self, limits: crate::settings::RateLimits) -> Self {
        self.limiter = limits.any().then(|| Arc::new(crate::limits::Limiter::new(limits)));
        self
    }

    /// Count calls, their outcomes and latency, and limits' refusals in
    /// `metrics` (which `HttpServer` serves at `/metrics`).
    #[cfg(feature = "production")]
    pub fn with_metrics(mut self, metrics: Arc<crate::metrics::Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The tools this server serves.
    pub fn source(&self) -> &ToolSource {
        &self.source
    }

    /// Whether `name` is a tool this server serves (to anyone): what is
    /// not is counted and traced as `(unknown)`, so made-up names cannot
    /// grow the metrics or the limits' state.
    #[cfg(feature = "production")]
    fn serves(&self, source: &Resolved<'_>, name: &str) -> bool {
        source.has_tool(name)
    }

    /// How many `tools/call` requests are being answered now, in every
    /// session of this server.
    pub fn calls_running(&self) -> usize {
        self.running.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Send `message` to the client as a log notification at `level`, if
    /// it asked for log messages at that level or below.
    #[allow(deprecated)]
    async fn log(&self, outlet: &Outlet, level: LogLevel, message: &str) {
        let wanted = *self.log_level.lock().unwrap_or_else(|e| e.into_inner());
        if wanted.is_some_and(|wanted| severity(level) >= severity(wanted)) {
            let _ = outlet.notify(log_notification(level, "toolhost".to_owned(), message.to_owned())).await;
        }
    }

    /// The context of a request that runs a plugin (a tool call, a prompt,
    /// a resource read, a completion): its JSON-RPC id (which names it in
    /// spans and metrics) and `_meta` (a progress token, trace context);
    /// its client, so the plugin may talk back (resource updates only for
    /// this session's subscriptions); and the plugin's log lines, to a
    /// client that asked for them (`logging/setLevel`), in order, at its
    /// level or above. The caller's `_meta` and capabilities are moved into
    /// the context, not copied (a client's capabilities are maps, cloned
    /// on every call otherwise): nothing reads them from the caller after.
    fn call_context(&self, context: &mut Caller) -> CallContext {
        let client = crate::call_relay::PeerClient {
            outlet: context.outlet.clone(),
            version: context.version.clone(),
            capabilities: context.capabilities.take(),
            subscriptions: Arc::clone(&self.subscriptions),
        };
        #[allow(unused_mut)]
        let mut call_context = CallContext::new()
            .with_call_id(context.id.to_string())
            .with_meta(std::mem::take(&mut context.meta.0.0))
            .with_client(Arc::new(client));
        // An authenticated caller: its tools are those its scopes allow,
        // and a tool that declares `user_id` gets its subject.
        #[cfg(feature = "production")]
        if let Some(principal) = principal(context) {
            call_context =
                call_context.with_scopes(principal.scopes.iter().cloned()).with_user_id(principal.subject.clone());
        }
        let wanted = *self.log_level.lock().unwrap_or_else(|e| e.into_inner());
        let Some(wanted) = wanted else { return call_context };
        let (lines, mut queued) = tokio::sync::mpsc::unbounded_channel::<(LogLevel, String, String)>();
        let outlet = context.outlet.clone();
        tokio::spawn(async move {
            while let Some((level, logger, text)) = queued.recv().await {
                if outlet.notify(log_notification(level, logger, text)).await.is_err() {
                    break;
                }
            }
        });
        call_context.with_log_sink(move |line| {
            let level = crate::call_relay::mcp_level(line.level);
            if severity(level) >= severity(wanted) {
                let _ = lines.send((level, line.plugin.to_owned(), line.message.to_owned()));
            }
        })
    }

    /// The tools as MCP `Tool` values (JSON), sorted by name.
    pub fn tool_list(&self) -> Vec<toolhost_protocol::Tool> {
        self.tools_for(None)
    }

    /// The tools a caller holding `scopes` may see (`None`: every tool);
    /// for [`ToolSource::Tenants`], those of the registry of a caller
    /// without a principal.
    pub fn tools_for(&self, scopes: Option<&toolhost::Scopes>) -> Vec<toolhost_protocol::Tool> {
        self.source.resolve(&Default::default()).tools(scopes)
    }

    async fn call(
        source: &Resolved<'_>,
        name: &str,
        arguments: Value,
        approver: &dyn Approver,
        context: &CallContext,
    ) -> Result<toolhost_protocol::CallToolResult, Error> {
        source.call(name, arguments, approver, context).await
    }
}

/// A failed prompt, resource or completion request as the protocol's error:
/// a resource nothing offers is `resource not found`, a prompt nothing
/// offers invalid parameters, a plugin's own refusal invalid parameters
/// (its message says why), the rest internal errors.
fn offer_error(error: Error) -> McpError {
    match &error {
        Error::NotOffered { what, .. } if what.starts_with("resource") => {
            McpError::resource_not_found(error.to_string(), None)
        }
        Error::NotOffered { .. } => McpError::invalid_params(error.to_string(), None),
        Error::PluginFailed { fault, .. } if fault.kind == toolhost::FaultKind::Error => {
            McpError::invalid_params(error.model_text(), None)
        }
        _ => {
            tracing::warn!("request failed: {error}");
            McpError::internal_error(error.model_text(), None)
        }
    }
}

/// One of our protocol values as rmcp's type of it (through JSON: these
/// are not hot paths). A value rmcp refuses is the server's error.
fn to_rmcp<T: serde::Serialize, R: serde::de::DeserializeOwned>(value: T) -> Result<R, McpError> {
    serde_json::to_value(value)
        .and_then(serde_json::from_value)
        .map_err(|e| McpError::internal_error(format!("a plugin's answer does not fit the protocol: {e}"), None))
}

/// One of rmcp's values as ours.
fn from_rmcp<T: serde::Serialize, R: serde::de::DeserializeOwned>(value: &T) -> Result<R, McpError> {
    serde_json::to_value(value)
        .and_then(serde_json::from_value)
        .map_err(|e| McpError::invalid_params(format!("{e}"), None))
}

/// Counts one call in a server's running calls until dropped.
struct Running(Arc<std::sync::atomic::AtomicUsize>);

impl Running {
    /// Count one more call, unless `max` are running already.
    fn admit(running: &Arc<std::sync::atomic::AtomicUsize>, max: usize) -> Option<Running> {
        use std::sync::atomic::Ordering::SeqCst;
        let before = running.fetch_add(1, SeqCst);
        if before >= max {
            running.fetch_sub(1, SeqCst);
            return None;
        }
        Some(Running(Arc::clone(running)))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Records a call's outcome (its metrics, the end of its span) when
/// dropped, also when the call's future is dropped before it ends.
#[cfg(feature = "production")]
struct Finish<'a> {
    metrics: Option<&'a Arc<crate::metrics::Metrics>>,
    label: &'a str,
    started: std::time::Instant,
    /// Counts the call among those running until dropped.
    _running: Option<crate::metrics::RunningGuard<'a>>,
    /// (Boxed: a span is 288 bytes, there only when calls are traced, and
    /// every call's future would otherwise carry its room.)
    span: Option<Box<crate::telemetry::CallSpan>>,
    outcome: &'static str,
}

#[cfg(feature = "production")]
impl Drop for Finish<'_> {
    fn drop(&mut self) {
        if let Some(metrics) = self.metrics {
            metrics.call_finished(self.label, self.outcome, self.started.elapsed());
        }
        if let Some(span) = self.span.take() {
            span.end(self.outcome);
        }
    }
}

/// Who made the request, when `HttpServer` authenticated it.
#[cfg(feature = "production")]
fn principal(context: &Caller) -> Option<&crate::auth::Principal> {
    principal_in(&context.extensions)
}

/// Who a request counts against for rate limits: the token's subject (by
/// credential), else the peer's address (not the MCP session, which a
/// client may open anew whenever it likes), else the one client of stdio.
#[cfg(feature = "production")]
fn client_key(context: &Caller) -> String {
    let Some(parts) = context.extensions.get::<axum::http::request::Parts>() else { return "stdio".to_owned() };
    if let Some(principal) = parts.extensions.get::<crate::auth::Principal>() {
        return principal.key();
    }
    match parts.extensions.get::<axum::extract::ConnectInfo<std::net::SocketAddr>>() {
        Some(axum::extract::ConnectInfo(peer)) => format!("address:{}", peer.ip()),
        None => "unknown".to_owned(),
    }
}

/// A tool execution error: `isError: true` with one text item.
fn tool_error(message: String) -> Result<CallToolResponse, McpError> {
    Ok(CallToolResponse::from(wire::call_tool_result(toolhost_protocol::CallToolResult::error(message))))
}

impl McpServer {
    /// Answer a `tools/call` (through rmcp, or on an HTTP connection's own
    /// task): counted, traced, rate-limited, then approved, run and
    /// answered. A call whose future is dropped (its client went away)
    /// counts as `cancelled`.
    pub(crate) async fn serve_call(
        &self,
        mut request: CallToolRequestParams,
        mut context: Caller,
    ) -> Result<CallToolResponse, McpError> {
        // Moved out, not copied: the rest of the call needs the params'
        // arguments, not their name.
        let name = std::mem::take(&mut request.name).into_owned();
        let Some(_counted) = Running::admit(&self.running, self.max_calls) else {
            #[cfg(feature = "production")]
            if let Some(metrics) = &self.metrics {
                metrics.rate_limited("calls_in_flight");
            }
            let retry_after_ms = crate::jsonrpc::SHED_RETRY_SECONDS * 1000;
            let data = serde_json::json!({"limit": "calls_in_flight", "retryAfterMs": retry_after_ms});
            return Err(McpError::new(
                rmcp::model::ErrorCode(crate::jsonrpc::LIMITED),
                crate::jsonrpc::calls_refusal_text(self.max_calls),
                Some(data),
            ));
        };
        let source = self.source.resolve(&context.extensions);
        #[cfg(feature = "production")]
        let label = if self.serves(&source, &name) { name.as_str() } else { "(unknown)" };
        #[cfg(feature = "production")]
        let span = self.tracer.as_ref().map(|tracer| {
            let toolset = source.toolset_of(&name);
            let headers = context.extensions.get::<axum::http::request::Parts>().map(|parts| parts.headers.clone());
            let id = context.id.to_string();
            Box::new(crate::telemetry::CallSpan::start(
                tracer,
                label,
                &toolset,
                &id,
                &mut context.meta.0.0,
                headers.as_ref(),
            ))
        });
        #[cfg(feature = "production")]
        let _permit = match &self.limiter {
            None => None,
            Some(limiter) => match limiter.admit(&client_key(&context), (label == name).then_some(label)) {
                Ok(permit) => Some(permit),
                Err(limited) => {
                    if let Some(metrics) = &self.metrics {
                        metrics.rate_limited(limited.kind.label());
                    }
                    if let Some(span) = span {
                        span.end("rate_limited");
                    }
                    let data = serde_json::json!({
                        "limit": limited.kind.label(),
                        "retryAfterMs": limited.retry_after.map(|wait| wait.as_millis().max(1) as u64),
                    });
                    return Err(McpError::new(
                        rmcp::model::ErrorCode(crate::limits::RATE_LIMITED),
                        limited.message,
                        Some(data),
                    ));
                }
            },
        };
        #[cfg(feature = "production")]
        let mut finish = Finish {
            metrics: self.metrics.as_ref(),
            label,
            started: std::time::Instant::now(),
            _running: self.metrics.as_ref().map(|m| m.running()),
            span,
            outcome: "cancelled",
        };
        // Boxed: a call's future is large (the guest's run in it), and
        // callers move the future of every request into a task by value.
        let (answer, outcome) = Box::pin(self.answer_call(&source, &name, request, &mut context)).await;
        #[cfg(feature = "production")]
        {
            finish.outcome = outcome;
        }
        #[cfg(not(feature = "production"))]
        let _ = outcome;
        answer
    }

    /// A `tools/call` let through the limits: approved, run, and answered;
    /// with its outcome (`ok`, `tool_error`, `cancelled`, or the kind of
    /// failure: `invalid_arguments`, `trap`, `timeout`...).
    async fn answer_call(
        &self,
        source: &Resolved<'_>,
        name: &str,
        request: CallToolRequestParams,
        context: &mut Caller,
    ) -> (Result<CallToolResponse, McpError>, &'static str) {
        let arguments = request.arguments.map(Value::Object).unwrap_or(Value::Null);
        let elicitor = match &self.approvals {
            Approvals::Approver(_) => None,
            Approvals::AskTheUser { timeout } => Some(Elicitor {
                outlet: context.outlet.clone(),
                version: context.version.clone(),
                can_elicit: crate::elicit::can_elicit(context.capabilities.as_ref()),
                timeout: *timeout,
                responses: request.input_responses,
                request_state: request.request_state,
                input_required: Default::default(),
            }),
        };
        let approver: &dyn Approver = match (&self.approvals, &elicitor) {
            (_, Some(elicitor)) => elicitor,
            (Approvals::Approver(approver), None) => approver.as_ref(),
            (Approvals::AskTheUser { .. }, None) => unreachable!("an elicitor is made for AskTheUser"),
        };
        let call_context = self.call_context(context);
        // Dropping the call's future (on cancellation) stops its guest, or
        // withdraws the question its approval waits on. The call is polled
        // first: one that finishes in its first poll never registers with
        // the token (two locks of its tree).
        let outcome = tokio::select! {
            biased;
            outcome = McpServer::call(source, name, arguments, approver, &call_context) => outcome,
            () = context.ct.cancelled() => {
                tracing::info!(tool = %name, "call cancelled by the client");
                return (Err(McpError::internal_error("the call was cancelled", None)), "cancelled");
            }
        };
        if let Some(input_required) = elicitor.as_ref().and_then(Elicitor::take_input_required) {
            return (Ok(CallToolResponse::InputRequired(input_required)), "input_required");
        }
        let kind = match &outcome {
            Ok(result) if result.is_error() => "tool_error",
            Ok(_) => "ok",
            Err(error) => error.outcome(),
        };
        let answer = match outcome {
            Ok(result) => Ok(CallToolResponse::from(wire::call_tool_result(result))),
            Err(error @ (Error::UnknownTool { .. } | Error::NoSuchTool { .. })) => {
                Err(McpError::invalid_params(error.to_string(), None))
            }
            Err(error @ Error::InvalidArguments { .. }) => tool_error(error.model_text()),
            Err(error) => {
                tracing::warn!(tool = %name, "call failed: {error}");
                let text = error.model_text();
                let line = format!("tool `{name}` failed: {text}");
                // Boxed: sending a notification is a large future, and a
                // failure is rare; unboxed, every call's state had room
                // for it (2.3 KB instead of 1.6 KB).
                #[allow(deprecated)]
                Box::pin(self.log(&context.outlet, rmcp::model::LoggingLevel::Warning, &line)).await;
                tool_error(text)
            }
        };
        (answer, kind)
    }
}

impl rmcp::ServerHandler for McpServer {
    fn get_info(&self) -> InitializeResult {
        // Logging: `logging/setLevel` opts a session in to log messages
        // (plugins' log lines, calls that failed). Prompts, resources and
        // completions: what the plugins offer (none, for most).
        #[allow(deprecated)]
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_completions()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .build();
        let mut info = InitializeResult::new(capabilities);
        info.server_info = Implementation::new("toolhost", env!("CARGO_PKG_VERSION"));
        info.instructions = Some("Tools run as sandboxed WebAssembly plugins; arguments and results are validated against each tool's schemas.".to_owned());
        info
    }

    async fn initialize(
        &self,
        request: rmcp::model::InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        // A parked session coming back: rmcp replays its client's
        // `initialize`, and the session takes on what its client had set.
        #[cfg(feature = "http")]
        if let Some(hooks) = &self.hooks
            && let Some(marker) =
                context.extensions.get::<rmcp::transport::streamable_http_server::session::SessionRestoreMarker>()
            && let Some(settings) = hooks.restored(&marker.id)
        {
            self.adopt(settings);
        }
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        *self.log_level.lock().unwrap_or_else(|e| e.into_inner()) = Some(request.level);
        Ok(())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        // The whole list is one page: no cursor was ever handed out, so any
        // cursor is one the server does not know.
        if let Some(cursor) = request.and_then(|r| r.cursor) {
            return Err(McpError::invalid_params(format!("unknown cursor `{cursor}`: tools/list has one page"), None));
        }
        #[cfg(feature = "production")]
        let scopes = principal_in(&context.extensions).map(|p| &p.scopes);
        #[cfg(not(feature = "production"))]
        let scopes = {
            let _ = context;
            None
        };
        let tools = match self.source.resolve(&context.extensions) {
            Resolved::Registry(registry) => self.listings.of(&registry, scopes).as_ref().clone(),
            plugin => plugin.tools(scopes).into_iter().map(wire::tool).collect(),
        };
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.serve_call(request, Caller::from(context)).await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, McpError> {
        let mut context = Caller::from(context);
        let call = self.call_context(&mut context);
        let prompts = self.source.resolve(&context.extensions).list_prompts(&call).await.map_err(offer_error)?;
        Ok(rmcp::model::ListPromptsResult::with_all_items(to_rmcp(prompts)?))
    }

    async fn get_prompt(
        &self,
        request: rmcp::model::GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, McpError> {
        let mut context = Caller::from(context);
        let call = self.call_context(&mut context);
        let result = self.source.resolve(&context.extensions).get_prompt(&request.name, request.arguments, &call).await;
        let result: rmcp::model::GetPromptResult = to_rmcp(result.map_err(offer_error)?)?;
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, McpError> {
        let mut context = Caller::from(context);
        let call = self.call_context(&mut context);
        let resources = self.source.resolve(&context.extensions).list_resources(&call).await.map_err(offer_error)?;
        Ok(rmcp::model::ListResourcesResult::with_all_items(to_rmcp(resources)?))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, McpError> {
        let mut context = Caller::from(context);
        let call = self.call_context(&mut context);
        let templates =
            self.source.resolve(&context.extensions).list_resource_templates(&call).await.map_err(offer_error)?;
        Ok(rmcp::model::ListResourceTemplatesResult::with_all_items(to_rmcp(templates)?))
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, McpError> {
        let mut context = Caller::from(context);
        let call = self.call_context(&mut context);
        let result = self.source.resolve(&context.extensions).read_resource(&request.uri, &call).await;
        let result: rmcp::model::ReadResourceResult = to_rmcp(result.map_err(offer_error)?)?;
        Ok(result.into())
    }

    async fn complete(
        &self,
        request: rmcp::model::CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CompleteResult, McpError> {
        let mut context = Caller::from(context);
        let call = self.call_context(&mut context);
        let reference: toolhost::protocol::CompletionReference = from_rmcp(&request.r#ref)?;
        let argument = (request.argument.name.as_str(), request.argument.value.as_str());
        let arguments = request.context.and_then(|c| c.arguments).map(|arguments| {
            arguments.into_iter().map(|(k, v)| (k, Value::String(v))).collect::<toolhost::protocol::JsonObject>()
        });
        let result = self.source.resolve(&context.extensions).complete(&reference, argument, arguments, &call).await;
        to_rmcp(result.map_err(offer_error)?)
    }

    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscriptions.lock().unwrap_or_else(|e| e.into_inner()).insert(request.uri);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscriptions.lock().unwrap_or_else(|e| e.into_inner()).remove(&request.uri);
        Ok(())
    }

    async fn on_roots_list_changed(&self, context: NotificationContext<RoleServer>) {
        let call = CallContext::new();
        self.source.resolve(&context.extensions).roots_list_changed(&call).await;
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        #[cfg(feature = "http")]
        self.register_session(&context);
        let Resolved::Registry(registry) = self.source.resolve(&context.extensions) else { return };
        if self.session.relaying.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let mut changes = registry.subscribe();
        let peer = context.peer.clone();
        // Until the session ends (not until the registry's next change:
        // the peer holds what the client sent in `initialize`).
        let ended = self.session.ended.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { break },
                    () = ended.cancelled() => break,
                }
                if peer.notify_tool_list_changed().await.is_err() {
                    break;
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_past_the_most_running_are_refused_and_room_comes_back() {
        let running = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let first = Running::admit(&running, 2).expect("room for one");
        let second = Running::admit(&running, 2).expect("room for two");
        assert!(Running::admit(&running, 2).is_none(), "a third past two");
        assert_eq!(running.load(std::sync::atomic::Ordering::SeqCst), 2, "a refusal counts nothing");
        drop(first);
        let third = Running::admit(&running, 2).expect("room again");
        drop((second, third));
        assert_eq!(running.load(std::sync::atomic::Ordering::SeqCst), 0);
    }

    #[test]
    #[allow(deprecated)]
    fn severities_rise_from_debug_to_emergency() {
        use rmcp::model::LoggingLevel as L;
        let levels = [L::Debug, L::Info, L::Notice, L::Warning, L::Error, L::Critical, L::Alert, L::Emergency];
        let severities: Vec<u8> = levels.into_iter().map(severity).collect();
        assert_eq!(severities, (0..8).collect::<Vec<u8>>());
    }

    #[test]
    fn a_tool_error_is_one_text_item_marked_as_an_error() {
        let Ok(CallToolResponse::Complete(result)) = tool_error("no such city".to_owned()) else {
            panic!("not a completed call")
        };
        let answer = serde_json::to_value(result).unwrap();
        assert_eq!(answer["isError"], true, "{answer}");
        assert_eq!(answer["content"], serde_json::json!([{"type": "text", "text": "no such city"}]), "{answer}");
    }
}
