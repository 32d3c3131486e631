//! Remote MCP servers as toolsets (`kind: mcp`): toolhost as the client.
//!
//! [`McpConnector`] is a [`ToolsetConnector`]: for a toolsets-file entry of
//! kind `mcp` it starts or reaches the server (`server.command` with
//! `args` and `env` over stdio; `server.url` over streamable HTTP with the
//! entry's `headers`), initializes, lists every tool (following
//! pagination) and returns them as built-in tools that forward each call.
//! The registry then treats them as any toolset's: names, filters,
//! approvals, the server's `inputSchema` checked before a call is
//! forwarded, the result checked against the protocol and the tool's
//! `outputSchema` after, secret redaction (the header values resolved from
//! `${secret:}` included), output cap, timeout, cancellation (dropping a
//! call drops its request, which rmcp cancels on the server). The caller's
//! `_meta` is forwarded (trace context), less its progress token and the
//! protocol's own keys; no request carries a progress token (progress is
//! not relayed, and asking for it costs the server).
//!
//! A server's `notifications/tools/list_changed` makes the registry list its
//! tools again on the same session (the connector keeps one session per
//! toolset id and hands it back while the server's address is the same), as
//! does a session made again after a failure: the server may have changed.
//!
//! A server that cannot be reached, dies or answers garbage is an error of
//! that call (`Error::PluginFailed`), never of the registry. The connection
//! is made again on the next call after a failure, no sooner than a backoff
//! that doubles from 250 ms up to 30 s.
//!
//! A command's server starts with an empty environment but `PATH`, `HOME`
//! and `LANG`, plus `server.env`: what the person running toolhost grants,
//! not everything toolhost's own environment holds.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, ClientJsonRpcMessage, GetExtensions as _, GetMeta as _, JsonRpcMessage,
    PaginatedRequestParams, RequestMetaObject, ServerJsonRpcMessage,
};
use rmcp::service::{RunningService, ServiceExt as _};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess, Transport};
use rmcp::{Peer, RoleClient};
use serde_json::Value;
use tokio::sync::Mutex;
use toolhost::protocol::{CallToolResult, Tool};
use toolhost::{BoxFuture, BuiltinCall, BuiltinError, BuiltinTool, BuiltinToolset, ToolsetConfig, ToolsetConnector};

/// The first wait before connecting again after a failure.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// The longest wait between attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How long connecting and listing the tools may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Most tools one server may list.
const MAX_TOOLS: usize = 10_000;
/// Most pages its listing may take (a server that always answers with a
/// next cursor would otherwise be listed until the timeout, its tools
/// piling up).
const MAX_PAGES: usize = 1_000;
/// Shortest time between two listings its `list_changed` notices cause: a
/// server that sends one after every listing would otherwise have its tools
/// listed, their schemas compiled and every client of the registry told,
/// over and over, as fast as it answers.
const MIN_RELIST_INTERVAL: Duration = Duration::from_secs(2);
/// Most of a server's own text (an error's message) kept in an error or a
/// sync event.
const MAX_SERVER_TEXT: usize = 1024;

/// Connects toolsets of `kind: mcp`: give it to
/// [`Registry::with_connector`](toolhost::Registry::with_connector) as
/// `"mcp"`.
#[derive(Debug, Default, Clone)]
pub struct McpConnector {
    /// The session of each toolset id, while its toolset is loaded: a
    /// toolset loaded again (its configuration changed, or its server said
    /// its tools did) lists them on the same session.
    sessions: Arc<std::sync::Mutex<HashMap<String, Weak<Connection>>>>,
    /// Where its HTTP connections may go, if it is limited: the addresses
    /// these host patterns let a connection reach.
    reach: Option<crate::GrantedAddresses>,
}

impl McpConnector {
    /// The connector.
    pub fn new() -> Self {
        McpConnector::default()
    }

    /// A connector whose HTTP connections go only to addresses these host
    /// patterns let a connection reach ([`toolhost::address_allowed`]):
    /// public ones, and others only where a pattern names the address.
    /// For servers named by someone other than the operator (a tenant),
    /// whose URLs the caller has checked against the same patterns: an
    /// allowed name that resolves to an internal address does not reach
    /// it.
    pub fn reaching(mut self, hosts: impl Into<Arc<[String]>>) -> Self {
        self.reach = Some(crate::GrantedAddresses::new(hosts));
        self
    }

    /// The session for a toolset: its current one if the server is the
    /// same, else a new one.
    fn connection(&self, id: &str, target: Target) -> Arc<Connection> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(existing) = sessions.get(id).and_then(Weak::upgrade)
            && existing.target == target
        {
            return existing;
        }
        sessions.retain(|_, session| session.strong_count() > 0);
        let connection = Arc::new(Connection {
            target,
            reach: self.reach.clone(),
            state: Mutex::new(State::default()),
            changes: Arc::new(Changes::default()),
        });
        sessions.insert(id.to_owned(), Arc::downgrade(&connection));
        connection
    }
}

impl ToolsetConnector for McpConnector {
    fn connect<'a>(&'a self, config: &'a ToolsetConfig) -> BoxFuture<'a, Result<BuiltinToolset, String>> {
        Box::pin(async move {
            // A tenant's server (reached within patterns) gets no header
            // that is the transport's own: `Host` would reach a virtual
            // host behind an allowed address that the patterns do not name.
            if self.reach.is_some()
                && let Some(header) = config.remote.headers.keys().find_map(|name| toolhost::transport_header(name))
            {
                return Err(format!("the `{header}` header is the transport's own: a tool set may not set it"));
            }
            let connection = self.connection(&config.id, Target::of(config)?);
            let peer = connection.peer().await?;
            // Subscribed before listing: a notice that comes while (or
            // just after) the tools are listed is one to follow.
            let changes = connection.changes.subscribe();
            let max_bytes = config.policy.limits.max_output_bytes;
            let tools = tokio::time::timeout(CONNECT_TIMEOUT, list_tools(&peer, max_bytes))
                .await
                .map_err(|_| format!("the server did not list its tools within {CONNECT_TIMEOUT:?}"))??;
            let tools = tools.into_iter().map(|tool| {
                let name = tool.name.clone();
                let connection = Arc::clone(&connection);
                BuiltinTool::from_tool(tool, move |call: BuiltinCall| {
                    let (connection, name) = (Arc::clone(&connection), name.clone());
                    async move { connection.call(&name, call).await }
                })
            });
            Ok(BuiltinToolset::new(config.id.clone()).with_tools(tools).with_changes(changes))
        })
    }
}

/// Every page of a server's tools, each read as the protocol's `Tool`: at
/// most [`MAX_PAGES`] pages, [`MAX_TOOLS`] tools and `max_bytes` of them
/// as JSON (the toolset's output limit, as a plugin's `describe` has), no
/// name twice.
async fn list_tools(peer: &Peer<RoleClient>, max_bytes: usize) -> Result<Vec<Tool>, String> {
    let mut tools = Vec::new();
    let mut names = std::collections::HashSet::new();
    let mut bytes = 0usize;
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let page = peer
            .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await
            .map_err(|e| format!("the server did not list its tools: {}", clip(&e.to_string())))?;
        for tool in page.tools {
            let listed = serde_json::to_vec(&tool).map_err(|e| format!("a tool cannot be read: {e}"))?;
            bytes = bytes.saturating_add(listed.len());
            if bytes > max_bytes {
                return Err(format!("the server's tools are more than {max_bytes} bytes of JSON, its output limit"));
            }
            let tool: Tool = serde_json::from_slice(&listed)
                .map_err(|e| format!("the server listed a tool that is not valid: {e}"))?;
            if !names.insert(tool.name.clone()) {
                return Err(format!("the server listed the tool `{}` twice", clip(&tool.name)));
            }
            if tools.len() == MAX_TOOLS {
                return Err(format!("the server listed more than {MAX_TOOLS} tools"));
            }
            tools.push(tool);
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(tools),
        }
    }
    Err(format!("the server's tools took more than {MAX_PAGES} pages to list"))
}

/// At most [`MAX_SERVER_TEXT`] bytes of a server's text, saying how long it was.
fn clip(text: &str) -> String {
    if text.len() <= MAX_SERVER_TEXT {
        return text.to_owned();
    }
    format!("{}… ({} bytes in all)", &text[..text.floor_char_boundary(MAX_SERVER_TEXT)], text.len())
}

/// Tells the toolset's registry that the server's tools may have changed:
/// at once, or, within [`MIN_RELIST_INTERVAL`] of the last time, once
/// when it is over (notices in between are one).
#[derive(Default)]
struct Changes {
    sender: tokio::sync::watch::Sender<u64>,
    /// When the registry was last told, and whether a later telling is due.
    told: std::sync::Mutex<(Option<Instant>, bool)>,
}

impl Changes {
    fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.sender.subscribe()
    }

    fn notice(self: &Arc<Self>) {
        let mut told = self.told.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if told.1 {
            return;
        }
        let now = Instant::now();
        match told.0.map(|last| last + MIN_RELIST_INTERVAL).filter(|due| *due > now) {
            None => {
                told.0 = Some(now);
                self.sender.send_modify(|count| *count += 1);
            }
            Some(due) => {
                told.1 = true;
                let changes = Arc::clone(self);
                tokio::spawn(async move {
                    tokio::time::sleep_until(due.into()).await;
                    let mut told = changes.told.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                    *told = (Some(Instant::now()), false);
                    changes.sender.send_modify(|count| *count += 1);
                });
            }
        }
    }
}

/// The client side of a session: tells the toolset's registry when the
/// server says its tools changed.
struct Listener {
    changes: Arc<Changes>,
}

impl rmcp::ClientHandler for Listener {
    async fn on_tool_list_changed(&self, _: rmcp::service::NotificationContext<RoleClient>) {
        self.changes.notice();
    }
}

/// Where the server is.
#[derive(Debug, Clone, PartialEq)]
enum Target {
    /// Started as a child process, spoken to over its stdio.
    Command { program: String, args: Vec<String>, env: Vec<(String, String)> },
    /// Streamable HTTP.
    Url { url: String, headers: Vec<(String, String)> },
}

impl Target {
    fn of(config: &ToolsetConfig) -> Result<Target, String> {
        let server = &config.remote.server;
        let strings = |key: &str| -> Result<Vec<String>, String> {
            match server.get(key) {
                None => Ok(Vec::new()),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|item| item.as_str().map(str::to_owned).ok_or_else(|| format!("server.{key} lists strings")))
                    .collect(),
                Some(_) => Err(format!("server.{key} is a list of strings")),
            }
        };
        match (server.get("url"), server.get("command")) {
            (Some(Value::String(url)), None) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(format!("server.url of an MCP toolset is an http(s) URL, not `{url}`"));
                }
                let headers = config.remote.headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                Ok(Target::Url { url: url.clone(), headers })
            }
            (None, Some(Value::String(program))) => {
                let env = match server.get("env") {
                    None => Vec::new(),
                    Some(Value::Object(env)) => env
                        .iter()
                        .map(|(k, v)| {
                            v.as_str()
                                .map(|v| (k.clone(), v.to_owned()))
                                .ok_or_else(|| format!("server.env.{k} is a string"))
                        })
                        .collect::<Result<_, _>>()?,
                    Some(_) => return Err("server.env is an object of strings".to_owned()),
                };
                Ok(Target::Command { program: program.clone(), args: strings("args")?, env })
            }
            (Some(_), Some(_)) => Err("an MCP toolset names server.url or server.command, not both".to_owned()),
            _ => {
                Err("an MCP toolset names its server: server.url (streamable HTTP) or server.command (stdio)"
                    .to_owned())
            }
        }
    }

    fn describe(&self) -> String {
        match self {
            Target::Command { program, .. } => format!("the MCP server `{program}`"),
            Target::Url { url, .. } => format!("the MCP server at {url}"),
        }
    }

    /// Connect and initialize.
    async fn connect(
        &self,
        listener: Listener,
        reach: Option<crate::GrantedAddresses>,
    ) -> Result<RunningService<RoleClient, Listener>, String> {
        let what = self.describe();
        // (Its own, so that a refusal it reports is this connection's.)
        let reach = reach.map(|reach| reach.fresh());
        let refused = || reach.as_ref().and_then(crate::GrantedAddresses::refused);
        let started = match self {
            Target::Command { program, args, env } => {
                let mut command = tokio::process::Command::new(program);
                command.args(args).env_clear();
                for inherited in ["PATH", "HOME", "LANG"] {
                    if let Some(value) = std::env::var_os(inherited) {
                        command.env(inherited, value);
                    }
                }
                command.envs(env.iter().map(|(k, v)| (k, v)));
                let (transport, _) = TokioChildProcess::builder(command)
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .map_err(|e| format!("{what} cannot be started: {e}"))?;
                tokio::time::timeout(CONNECT_TIMEOUT, listener.serve(WithoutProgressTokens(transport))).await
            }
            Target::Url { url, headers } => {
                use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
                // reqwest's TLS uses the process's rustls provider: ring, as
                // the rest of toolhost (a provider installed already stays).
                let _ = rustls::crypto::ring::default_provider().install_default();
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                for (name, value) in headers {
                    let name = http::HeaderName::try_from(name.as_str())
                        .map_err(|e| format!("header `{name}` is not a valid header name: {e}"))?;
                    let value = http::HeaderValue::try_from(value.as_str())
                        .map_err(|_| format!("the value of header `{name}` is not a valid header value"))?;
                    config.custom_headers.insert(name, value);
                }
                let transport = StreamableHttpClientTransport::with_client(Paced::new(reach.clone()), config);
                tokio::time::timeout(CONNECT_TIMEOUT, listener.serve(WithoutProgressTokens(transport))).await
            }
        };
        let started = started.map_err(|_| format!("{what} did not initialize within {CONNECT_TIMEOUT:?}"))?;
        started.map_err(|e| match refused() {
            Some(refusal) => format!("{what} was not connected to: {refusal}"),
            None => format!("{what} did not initialize: {}", clip(&e.to_string())),
        })
    }
}

/// An rmcp client transport that sends no progress token: what the
/// connector wraps its transports in, for any rmcp client that does not
/// want progress either.
///
/// rmcp's client puts a progress token on every request it sends, and
/// offers no way not to. A token asks the server for progress notices,
/// which the connector does not relay (the caller's own token is not
/// forwarded either), and it costs the server: one that would answer a
/// request with one JSON object answers it on an event stream instead, so
/// that progress can ride along. `toolhost serve` answers a session's call
/// with a progress token through rmcp's session path rather than on the
/// connection's own task. So the token is taken off each request on its
/// way out, and the request's `_meta` with it when nothing else is left.
///
/// ```no_run
/// # async fn connect() -> Result<(), Box<dyn std::error::Error>> {
/// use rmcp::service::ServiceExt as _;
/// use rmcp::transport::StreamableHttpClientTransport;
///
/// let transport = StreamableHttpClientTransport::from_uri("http://127.0.0.1:8080/mcp");
/// let client = ().serve(toolhost_mcp::WithoutProgressTokens(transport)).await?;
/// # drop(client);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct WithoutProgressTokens<T>(pub T);

impl<T: Transport<RoleClient>> Transport<RoleClient> for WithoutProgressTokens<T> {
    type Error = T::Error;

    fn name() -> std::borrow::Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        mut item: ClientJsonRpcMessage,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let JsonRpcMessage::Request(request) = &mut item {
            let meta = request.request.get_meta_mut();
            meta.0.0.remove("progressToken");
            if meta.0.0.is_empty() {
                request.request.extensions_mut().remove::<RequestMetaObject>();
            }
        }
        self.0.send(item)
    }

    fn receive(&mut self) -> impl std::future::Future<Output = Option<ServerJsonRpcMessage>> + Send {
        self.0.receive()
    }

    fn close(&mut self) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        self.0.close()
    }
}

/// The session with a server, made again after it fails.
struct Connection {
    target: Target,
    /// The connector's limit on where HTTP connections go.
    reach: Option<crate::GrantedAddresses>,
    state: Mutex<State>,
    /// Told when the server's tools may have changed.
    changes: Arc<Changes>,
}

#[derive(Default)]
struct State {
    service: Option<RunningService<RoleClient, Listener>>,
    /// Failures in a row, and when the last one was.
    failures: u32,
    failed_at: Option<Instant>,
}

impl Connection {
    /// The session's peer: the one open, or a new one (not before the
    /// backoff after a failure is over).
    async fn peer(&self) -> Result<Peer<RoleClient>, String> {
        let mut state = self.state.lock().await;
        if let Some(service) = &state.service {
            if !service.is_closed() {
                return Ok(service.peer().clone());
            }
            state.service = None;
        }
        if let Some(failed_at) = state.failed_at {
            let backoff = FIRST_BACKOFF.saturating_mul(1 << state.failures.min(8)).min(MAX_BACKOFF);
            let wait = backoff.saturating_sub(failed_at.elapsed());
            if !wait.is_zero() {
                return Err(format!(
                    "{} failed {} time(s) in a row; connecting again in {:?}",
                    self.target.describe(),
                    state.failures,
                    wait
                ));
            }
        }
        let again = state.failed_at.is_some();
        match self.target.connect(Listener { changes: Arc::clone(&self.changes) }, self.reach.clone()).await {
            Ok(service) => {
                let peer = service.peer().clone();
                *state = State { service: Some(service), failures: 0, failed_at: None };
                // A server reached again may not be the one whose tools
                // were listed: have them listed again.
                if again {
                    self.changes.notice();
                }
                Ok(peer)
            }
            Err(error) => {
                state.failures = state.failures.saturating_add(1);
                state.failed_at = Some(Instant::now());
                Err(error)
            }
        }
    }

    /// Forget the session after a failure: the next call connects again.
    async fn failed(&self) {
        let mut state = self.state.lock().await;
        if let Some(service) = state.service.take() {
            let _ = service.cancel().await;
        }
        state.failures = state.failures.saturating_add(1);
        state.failed_at = Some(Instant::now());
    }

    /// Forward one call.
    async fn call(&self, name: &str, call: BuiltinCall) -> Result<CallToolResult, BuiltinError> {
        let peer = self.peer().await.map_err(BuiltinError::Unavailable)?;
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = Some(call.arguments);
        // The caller's `_meta` goes on (trace context, say), but not what
        // belongs to this hop: a progress token (progress is not relayed)
        // and the protocol's own keys, which rmcp sets.
        if let Some(mut meta) = call.meta {
            meta.retain(|key, _| key != "progressToken" && !key.starts_with("io.modelcontextprotocol/"));
            if !meta.is_empty() {
                params.meta = serde_json::from_value(Value::Object(meta)).ok();
            }
        }
        let answered = match peer.call_tool(params).await {
            Ok(answered) => answered,
            // The server answered, with a protocol error: the session is fine.
            Err(rmcp::ServiceError::McpError(error)) => {
                return Err(BuiltinError::Unavailable(format!(
                    "{} refused `{name}`: {}",
                    self.target.describe(),
                    clip(&error.message)
                )));
            }
            Err(error) => {
                self.failed().await;
                return Err(BuiltinError::Unavailable(format!(
                    "{} failed to answer `{name}`: {}",
                    self.target.describe(),
                    clip(&error.to_string())
                )));
            }
        };
        // rmcp's type to toolhost's through the encoding, which is shorter
        // work than through a `Value` tree built and dropped on the way.
        let answered = serde_json::to_vec(&answered)
            .map_err(|e| BuiltinError::Unavailable(format!("the answer cannot be read: {e}")))?;
        serde_json::from_slice(&answered).map_err(|e| {
            BuiltinError::Unavailable(format!(
                "{} answered `{name}` with a result that is not valid: {e}",
                self.target.describe()
            ))
        })
    }
}

/// The shortest wait before reconnecting an event stream, whatever the
/// server's `retry:` asks: a server that asked for 0 ms and ended every
/// stream at once was reconnected 2,500 times in five seconds.
const MIN_RECONNECT_MS: u64 = 1000;

/// How long a connection to a remote server may wait idle for the next
/// call before it is closed: under the 5 s after which uvicorn (the Python
/// SDK's server) and Node's HTTP server close an idle connection, so that
/// the client lets go first and a call is not sent on a connection the
/// server is closing.
const IDLE_CONNECTION: std::time::Duration = std::time::Duration::from_secs(4);

/// Idle connections kept per remote host, for calls made at once.
const IDLE_CONNECTIONS: usize = 16;

/// The reqwest client for a remote server: same-origin 307 and 308
/// redirects only, at most 10 (as rmcp's own); every event stream's
/// `retry:` raised to at least [`MIN_RECONNECT_MS`]; and, unlike rmcp's
/// own, connections kept alive between calls for [`IDLE_CONNECTION`].
/// rmcp's client keeps none (against a delayed-ACK stall when a server
/// writes a response in pieces without `TCP_NODELAY`), so each call would
/// open a TCP connection, and a TLS session over `https`: DESIGN.md,
/// "Connections to remote MCP servers".
#[derive(Clone)]
struct Paced(reqwest::Client);

impl Paced {
    fn new(reach: Option<crate::GrantedAddresses>) -> Paced {
        let policy = reqwest::redirect::Policy::custom(|attempt| {
            let status = attempt.status().as_u16();
            let first = attempt.previous().first();
            let same_origin = first.is_some_and(|first| {
                first.scheme() == attempt.url().scheme()
                    && first.host_str() == attempt.url().host_str()
                    && first.port_or_known_default() == attempt.url().port_or_known_default()
            });
            if attempt.previous().len() > 10 || !matches!(status, 307 | 308) || !same_origin {
                attempt.stop()
            } else {
                attempt.follow()
            }
        });
        let mut builder = reqwest::Client::builder()
            .pool_idle_timeout(IDLE_CONNECTION)
            .pool_max_idle_per_host(IDLE_CONNECTIONS)
            .redirect(policy);
        if let Some(reach) = reach {
            builder = builder.dns_resolver(reach);
        }
        let client = builder.build();
        // (Building fails only without a TLS provider, and ring's is installed.)
        Paced(client.unwrap_or_default())
    }
}

type Events = futures_core::stream::BoxStream<
    'static,
    Result<sse_stream::Sse, rmcp::transport::streamable_http_client::SseError>,
>;

/// `events` with every `retry:` at least [`MIN_RECONNECT_MS`].
fn floored(events: Events) -> Events {
    struct Floor(Events);
    impl futures_core::Stream for Floor {
        type Item = Result<sse_stream::Sse, rmcp::transport::streamable_http_client::SseError>;
        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Self::Item>> {
            self.0.as_mut().poll_next(cx).map(|event| {
                event.map(|event| {
                    event.map(|mut sse| {
                        sse.retry = sse.retry.map(|ms| ms.max(MIN_RECONNECT_MS));
                        sse
                    })
                })
            })
        }
    }
    Box::pin(Floor(events))
}

mod paced {
    use std::collections::HashMap;
    use std::sync::Arc;

    use http::{HeaderName, HeaderValue};
    use rmcp::model::ClientJsonRpcMessage;
    use rmcp::transport::streamable_http_client::{
        StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
    };

    use super::{Events, Paced, floored};

    type Failure = StreamableHttpError<reqwest::Error>;

    fn post(response: StreamableHttpPostResponse) -> StreamableHttpPostResponse {
        match response {
            StreamableHttpPostResponse::Sse(events, session) => {
                StreamableHttpPostResponse::Sse(floored(events), session)
            }
            other => other,
        }
    }

    impl StreamableHttpClient for Paced {
        type Error = reqwest::Error;

        async fn post_message(
            &self,
            uri: Arc<str>,
            message: ClientJsonRpcMessage,
            session_id: Option<Arc<str>>,
            auth_header: Option<String>,
            custom_headers: HashMap<HeaderName, HeaderValue>,
        ) -> Result<StreamableHttpPostResponse, Failure> {
            self.0.post_message(uri, message, session_id, auth_header, custom_headers).await.map(post)
        }

        async fn post_message_with_max_sse_event_size(
            &self,
            uri: Arc<str>,
            message: ClientJsonRpcMessage,
            session_id: Option<Arc<str>>,
            auth_header: Option<String>,
            custom_headers: HashMap<HeaderName, HeaderValue>,
            max_sse_event_size: usize,
        ) -> Result<StreamableHttpPostResponse, Failure> {
            self.0
                .post_message_with_max_sse_event_size(
                    uri,
                    message,
                    session_id,
                    auth_header,
                    custom_headers,
                    max_sse_event_size,
                )
                .await
                .map(post)
        }

        async fn post_message_with_response_limits(
            &self,
            uri: Arc<str>,
            message: ClientJsonRpcMessage,
            session_id: Option<Arc<str>>,
            auth_header: Option<String>,
            custom_headers: HashMap<HeaderName, HeaderValue>,
            limits: StreamableHttpResponseLimits,
        ) -> Result<StreamableHttpPostResponse, Failure> {
            self.0
                .post_message_with_response_limits(uri, message, session_id, auth_header, custom_headers, limits)
                .await
                .map(post)
        }

        async fn delete_session(
            &self,
            uri: Arc<str>,
            session_id: Arc<str>,
            auth_header: Option<String>,
            custom_headers: HashMap<HeaderName, HeaderValue>,
        ) -> Result<(), Failure> {
            self.0.delete_session(uri, session_id, auth_header, custom_headers).await
        }

        async fn get_stream(
            &self,
            uri: Arc<str>,
            session_id: Option<Arc<str>>,
            last_event_id: Option<String>,
            auth_header: Option<String>,
            custom_headers: HashMap<HeaderName, HeaderValue>,
        ) -> Result<Events, Failure> {
            self.0.get_stream(uri, session_id, last_event_id, auth_header, custom_headers).await.map(floored)
        }

        async fn get_stream_with_max_sse_event_size(
            &self,
            uri: Arc<str>,
            session_id: Option<Arc<str>>,
            last_event_id: Option<String>,
            auth_header: Option<String>,
            custom_headers: HashMap<HeaderName, HeaderValue>,
            max_sse_event_size: usize,
        ) -> Result<Events, Failure> {
            self.0
                .get_stream_with_max_sse_event_size(
                    uri,
                    session_id,
                    last_event_id,
                    auth_header,
                    custom_headers,
                    max_sse_event_size,
                )
                .await
                .map(floored)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_servers_long_text_is_clipped_at_a_character_boundary_with_its_length() {
        assert_eq!(clip("short"), "short");
        let long = "日".repeat(MAX_SERVER_TEXT);
        let clipped = clip(&long);
        assert!(clipped.ends_with(&format!("… ({} bytes in all)", long.len())), "{clipped}");
        assert!(clipped.len() < MAX_SERVER_TEXT + 64 && !clipped.contains('\u{FFFD}'));
    }
}
