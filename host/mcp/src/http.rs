//! MCP over streamable HTTP (feature `http`).
//!
//! rmcp does the protocol; [`http_front`] sits in front of it and answers
//! what rmcp's transport gets wrong for real clients (see DESIGN.md,
//! `serve`): malformed JSON is `400` with `-32700`, malformed `tools/call`
//! params are `-32602`, a batch is split and its answers joined, DELETE of
//! an unknown session is `404` and of a live one `204`; foreign `Origin`s
//! are refused with `403`, and the listener sets `TCP_NODELAY`. A session
//! idle for [`HttpLimits::session_park_after`] is parked, and restored by
//! its next request ([`parking`]).
//!
//! Beside `/mcp`: `/healthz` (alive) and `/readyz` (serving, not
//! draining); with the `production` feature, the protected-resource
//! metadata and bearer-token checks of [`crate::auth`] in front of `/mcp`,
//! and `/metrics`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, Request, Response, StatusCode, header};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde::Deserialize as _;
use serde_json::Value;

mod admission;
/// Idle sessions parked, and restored by their next request.
pub(crate) mod parking;
/// Its production layer: bearer tokens, scopes, the metadata and metrics
/// endpoints.
#[cfg(feature = "production")]
mod production;

pub use crate::http_limits::HttpLimits;
use crate::jsonrpc::{MAX_LINE, SHUTDOWN_GRACE, check_message, error_response, malformed_call};
use crate::{McpServer, ServeError};

/// How long a shutdown waits, once the last call has answered, for the
/// answers to be written out before ending every stream.
const ANSWER_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// The origins a browser page served by this server itself would send.
fn own_origins(bound: SocketAddr) -> Vec<String> {
    let port = bound.port();
    let mut hosts = vec![match bound.ip() {
        std::net::IpAddr::V4(ip) => ip.to_string(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
    }];
    if bound.ip().is_loopback() || bound.ip().is_unspecified() {
        for local in ["localhost", "127.0.0.1", "[::1]"] {
            if !hosts.iter().any(|host| host == local) {
                hosts.push(local.to_owned());
            }
        }
    }
    hosts.into_iter().map(|host| format!("http://{host}:{port}")).collect()
}

/// How long a session's `notifications/initialized` waits for the session
/// to be registered for calls answered on their connection's task (its
/// handler does so at once; past this, rmcp answers its calls).
const REGISTERING: std::time::Duration = std::time::Duration::from_secs(1);

/// The most connections [`HttpLimits::connections`] can allow.
const MAX_CONNECTIONS: usize = 1 << 20;
/// The longest [`HttpLimits::request_timeout`] (a longer one is this).
const MAX_REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3600);

/// A request body that fails once its deadline has passed: a client
/// sending its body a byte at a time holds a connection no longer than
/// the request timeout.
struct DeadlineBody {
    body: hyper::body::Incoming,
    /// When the body must have come by.
    until: tokio::time::Instant,
    /// Its timer, set only once the body keeps the reader waiting: most
    /// bodies come with their head, and a timer each (made, registered,
    /// cancelled) was a cost on every request.
    deadline: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    timeout: std::time::Duration,
}

/// The error of a request body that came too slowly.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0:?}")]
struct SlowBody(std::time::Duration);

impl http_body::Body for DeadlineBody {
    type Data = axum::body::Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<axum::body::Bytes>, axum::BoxError>>> {
        if let std::task::Poll::Ready(frame) = std::pin::Pin::new(&mut self.body).poll_frame(cx) {
            return std::task::Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        let until = self.until;
        match self.deadline.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(until))).as_mut().poll(cx) {
            std::task::Poll::Ready(()) => std::task::Poll::Ready(Some(Err(SlowBody(self.timeout).into()))),
            std::task::Poll::Pending => std::task::Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// Whether reading a body failed because it came too slowly.
fn too_slow(error: &axum::Error) -> bool {
    std::iter::successors(Some(error as &(dyn std::error::Error + 'static)), |e| e.source()).any(|e| e.is::<SlowBody>())
}

/// Serve `router` on `listener` until `stop`, then let every connection
/// finish its request: at most `limits.connections` connections at once
/// (one more is answered `503` with `Retry-After` at once and closed),
/// each with `TCP_NODELAY` (responses are written in several pieces, and
/// Nagle's algorithm would hold each later piece back until the client's
/// delayed ACK, ~40 ms per request on a kept-alive connection), a timeout
/// on reading each request's head (which also ends idle kept-alive
/// connections) and a deadline on its body.
async fn accept_loop(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    stop: tokio_util::sync::CancellationToken,
    limits: HttpLimits,
) {
    let places = limits.connections.clamp(1, MAX_CONNECTIONS);
    let room = Arc::new(tokio::sync::Semaphore::new(places));
    // (Past an hour, hyper's deadline arithmetic could overflow.)
    let timeout = limits.request_timeout.clamp(std::time::Duration::from_millis(100), MAX_REQUEST_TIMEOUT);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(timeout);
    let refusing = Arc::new(tokio::sync::Semaphore::new(admission::MAX_REFUSING));
    let refusal = admission::connections_refusal(places);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                // A connection that went before it was accepted: the next.
                Err(error) if matches!(
                    error.kind(),
                    std::io::ErrorKind::ConnectionAborted | std::io::ErrorKind::ConnectionReset
                ) => continue,
                Err(error) => {
                    // Out of descriptors, most likely: wait a moment rather
                    // than spin.
                    tracing::warn!("cannot accept a connection: {error}");
                    tokio::select! {
                        () = tokio::time::sleep(std::time::Duration::from_millis(100)) => continue,
                        () = stop.cancelled() => break,
                    }
                }
            },
            () = stop.cancelled() => break,
        };
        let Ok(permit) = Arc::clone(&room).try_acquire_owned() else {
            // Past the cap: told so at once, not left in the backlog.
            if let Ok(refusing) = Arc::clone(&refusing).try_acquire_owned() {
                tokio::spawn(admission::refuse_connection(stream, Arc::clone(&refusal), refusing));
            }
            continue;
        };
        if let Err(error) = stream.set_nodelay(true) {
            tracing::warn!("cannot set TCP_NODELAY: {error}");
        }
        let router = router.clone();
        let service = hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
            let mut request = request.map(|body| {
                let until = tokio::time::Instant::now() + timeout;
                Body::new(DeadlineBody { body, until, deadline: None, timeout })
            });
            request.extensions_mut().insert(axum::extract::ConnectInfo(peer));
            tower_service::Service::call(&mut router.clone(), request)
        });
        let connection = http.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
        let stop = stop.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                () = stop.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
    }
    // No new connections while the open ones finish (a load balancer's
    // is refused at once, not left hanging); each gives its place back
    // once it has closed.
    drop(listener);
    let _ = room.acquire_many(places as u32).await;
}

type Service = StreamableHttpService<McpServer, parking::Sessions>;

/// What the HTTP front needs: rmcp's service and its sessions.
pub(crate) struct Front {
    pub(crate) service: Service,
    pub(crate) sessions: Arc<parking::Sessions>,
    pub(crate) source: crate::ToolSource,
    /// Set when shutting down: `/readyz` says so, for load balancers.
    pub(crate) draining: Arc<std::sync::atomic::AtomicBool>,
    /// What answers a 2026-07-28 `tools/call` on its connection's task.
    pub(crate) direct: crate::stateless_call::Direct,
    /// The sessions whose plain `tools/call`s are answered on their
    /// connection's task too.
    pub(crate) session_calls: Arc<crate::session_call::SessionCalls>,
    /// How many sessions may be open, and how long a body may take.
    pub(crate) limits: HttpLimits,
    /// The bytes of request bodies the server may still hold
    /// ([`HttpLimits::body_bytes`]).
    pub(crate) bodies: Arc<tokio::sync::Semaphore>,
    /// Held while a session is admitted and opened, so that two opened at
    /// once are both counted.
    pub(crate) opening: tokio::sync::Mutex<()>,
    #[cfg(feature = "production")]
    pub(crate) auth: Option<Arc<crate::auth::Authenticator>>,
    #[cfg(feature = "production")]
    pub(crate) metrics: Option<Arc<crate::Metrics>>,
    /// The subject that opened each session: a session is its opener's
    /// alone (another token naming it is told it does not exist).
    #[cfg(feature = "production")]
    pub(crate) owners: Arc<std::sync::Mutex<std::collections::HashMap<String, String>>>,
}

/// How [`HttpServer`] serves.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpOptions {
    /// Where to listen (port 0: any free port).
    pub addr: SocketAddr,
    /// Browser origins allowed besides the server's own. A request with any
    /// other `Origin` header is refused with `403` (DNS rebinding).
    pub allowed_origins: Vec<String>,
    /// `Host` header values accepted besides the loopback names and the
    /// address bound (a name, or `name:port`); any other is refused with
    /// `403` (DNS rebinding).
    pub allowed_hosts: Vec<String>,
    /// On shutdown, how long to wait for the tool calls running to finish
    /// (requests are still answered meanwhile, and `/readyz` says `503`, so
    /// a load balancer sends new ones elsewhere) before the rest are
    /// cancelled. Default 30 s.
    pub drain_timeout: std::time::Duration,
    /// Who checks bearer tokens (none: every request is let in).
    #[cfg(feature = "production")]
    pub auth: Option<Arc<crate::auth::Authenticator>>,
    /// Metrics to serve at `/metrics` (none: no such endpoint).
    #[cfg(feature = "production")]
    pub metrics: Option<Arc<crate::Metrics>>,
    /// More routes served beside `/mcp` (the tool-set service's `/v1`
    /// API): they check their own requests.
    pub routes: Option<axum::Router>,
    /// Bounds on connections, sessions and slow requests.
    pub limits: HttpLimits,
    /// Cancelled when the server stops serving (after the drain): its own
    /// streams end then, and `routes` with long-lived answers end theirs
    /// on it too.
    pub stopping: tokio_util::sync::CancellationToken,
}

impl HttpOptions {
    /// Listen on `addr`, allowing only the server's own origins and hosts.
    pub fn new(addr: SocketAddr) -> Self {
        HttpOptions {
            addr,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            drain_timeout: std::time::Duration::from_secs(30),
            #[cfg(feature = "production")]
            auth: None,
            #[cfg(feature = "production")]
            metrics: None,
            routes: None,
            limits: HttpLimits::default(),
            stopping: tokio_util::sync::CancellationToken::new(),
        }
    }

    /// The token cancelled when the server stops serving: for routes whose
    /// answers stream, so that a shutdown does not wait on them.
    pub fn stopping(&self) -> tokio_util::sync::CancellationToken {
        self.stopping.clone()
    }

    /// Bound connections, sessions and slow requests by `limits`.
    pub fn with_limits(mut self, limits: HttpLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Serve `routes` too, beside `/mcp` (they do their own checks).
    pub fn with_routes(mut self, routes: axum::Router) -> Self {
        self.routes = Some(match self.routes.take() {
            Some(before) => before.merge(routes),
            None => routes,
        });
        self
    }

    /// Allow these browser origins too (e.g. `https://app.example`).
    pub fn allow_origins(mut self, origins: impl IntoIterator<Item = String>) -> Self {
        self.allowed_origins.extend(origins);
        self
    }

    /// On shutdown, wait at most `timeout` for running calls to finish.
    pub fn with_drain_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.drain_timeout = timeout;
        self
    }

    /// Accept these `Host` values too (the names clients and load
    /// balancers reach the server by).
    pub fn allow_hosts(mut self, hosts: impl IntoIterator<Item = String>) -> Self {
        self.allowed_hosts.extend(hosts);
        self
    }

    /// Check every `/mcp` request's bearer token with `auth`, and serve its
    /// protected-resource metadata.
    #[cfg(feature = "production")]
    pub fn with_auth(mut self, auth: Arc<crate::auth::Authenticator>) -> Self {
        self.auth = Some(auth);
        self
    }

    /// Serve `metrics` at `/metrics` (give the same to
    /// [`McpServer::with_metrics`]).
    #[cfg(feature = "production")]
    pub fn with_metrics(mut self, metrics: Arc<crate::Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The options of a toolsets file's `serve` section: hosts, origins, and
    /// (set up here) authorization; metrics when it asks for them. Relative
    /// paths in it (a JWKS file) are relative to `base`.
    #[cfg(feature = "production")]
    pub async fn from_settings(
        addr: SocketAddr,
        settings: &crate::ServeSettings,
        base: &std::path::Path,
        metrics: Option<Arc<crate::Metrics>>,
    ) -> Result<Self, crate::auth::AuthSetupError> {
        settings.check().map_err(|problem| crate::auth::AuthSetupError::Settings(problem.to_string()))?;
        let mut options = HttpOptions::new(addr)
            .allow_origins(settings.allowed_origins.iter().cloned())
            .allow_hosts(settings.allowed_hosts.iter().cloned())
            .allow_hosts(settings.resource_hosts())
            .with_limits(settings.limits.apply(HttpLimits::default()));
        if let (Some(auth), Some(resource)) = (&settings.auth, &settings.resource) {
            let auth = crate::auth::Authenticator::new(resource, auth.clone(), base).await?;
            options = options.with_auth(Arc::new(auth));
        }
        options.metrics = metrics;
        Ok(options)
    }
}

/// The `Host` values of a server bound at `bound`, besides those it is told.
fn own_hosts(bound: SocketAddr) -> Vec<String> {
    let mut hosts = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned(), "[::1]".to_owned()];
    if !bound.ip().is_unspecified() {
        hosts.push(bound.ip().to_string());
    }
    hosts
}

/// MCP over streamable HTTP at `/mcp`, bound and ready to serve.
pub struct HttpServer {
    listener: tokio::net::TcpListener,
    bound: SocketAddr,
    router: axum::Router,
    stop: tokio_util::sync::CancellationToken,
    draining: Arc<std::sync::atomic::AtomicBool>,
    drain_timeout: std::time::Duration,
    server: McpServer,
    limits: HttpLimits,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer").field("bound", &self.bound).finish_non_exhaustive()
    }
}

impl HttpServer {
    /// Open the listening socket for `server`.
    pub async fn bind(server: McpServer, options: HttpOptions) -> Result<HttpServer, ServeError> {
        let session_calls = Arc::new(crate::session_call::SessionCalls::default());
        let sessions = Arc::new(parking::Sessions::new(options.limits.session_park_after));
        let hooks = crate::session_call::Hooks::new(Arc::clone(&session_calls), Arc::clone(sessions.table()));
        let server = server.with_max_calls(options.limits.calls).with_session_hooks(Arc::new(hooks));
        let addr = options.addr;
        let bind_error = |source| ServeError::Bind { addr: addr.to_string(), source };
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(bind_error)?;
        let bound = listener.local_addr().map_err(bind_error)?;
        let mut origins = own_origins(bound);
        origins.extend(options.allowed_origins);
        let mut hosts = own_hosts(bound);
        hosts.extend(options.allowed_hosts);
        // The hosts as rmcp's service is given them, for the direct path.
        let direct_hosts = crate::stateless_call::Hosts::new(&hosts);
        let config = StreamableHttpServerConfig::default()
            .with_allowed_origins(origins)
            .enforce_origin_validation()
            .with_allowed_hosts(hosts)
            // A 2026-07-28 request (no session) whose first message is its
            // answer gets it as `application/json`, no event stream to
            // frame; anything sent before the answer (progress, a question
            // to the client) keeps the stream. rmcp streams a session's
            // answers (the front answers a session's plain calls itself).
            .with_json_response(true)
            // What the front reads, rmcp reads too (its own default is 4
            // MiB): a message is as large over a session as over stdio.
            .with_max_request_body_bytes(MAX_LINE);
        let mut config = config;
        config.cancellation_token = options.stopping.clone();
        // Where parked sessions' `initialize` parameters are, for rmcp to
        // restore them with.
        config.session_store = Some(sessions.store());
        let stop = config.cancellation_token.clone();
        let direct = crate::stateless_call::Direct { server: server.clone(), hosts: direct_hosts, stop: stop.clone() };
        tokio::spawn(Arc::clone(&sessions).sweep(stop.clone()));
        let source = server.source().clone();
        let counting = server.clone();
        let service = StreamableHttpService::new(move || Ok(server.for_session()), Arc::clone(&sessions), config);
        let draining = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let front = Front {
            service,
            sessions,
            source,
            draining: Arc::clone(&draining),
            direct,
            session_calls,
            limits: options.limits.clone(),
            bodies: Arc::new(tokio::sync::Semaphore::new(
                options.limits.body_bytes.min(tokio::sync::Semaphore::MAX_PERMITS),
            )),
            opening: tokio::sync::Mutex::new(()),
            #[cfg(feature = "production")]
            auth: options.auth.clone(),
            #[cfg(feature = "production")]
            metrics: options.metrics.clone(),
            #[cfg(feature = "production")]
            owners: Default::default(),
        };
        #[allow(unused_mut)]
        let mut router = axum::Router::new()
            .route("/mcp", axum::routing::any(http_front))
            .route("/healthz", axum::routing::get(healthz))
            .route("/readyz", axum::routing::get(readyz));
        #[cfg(feature = "production")]
        {
            if let Some(auth) = &options.auth {
                router = router
                    .route(&auth.metadata_path(), axum::routing::get(production::metadata))
                    .route("/.well-known/oauth-protected-resource", axum::routing::get(production::metadata));
            }
            if options.metrics.is_some() {
                router = router.route("/metrics", axum::routing::get(production::metrics));
            }
        }
        // Shared, not cloned per request (it holds rmcp's service and its
        // configuration, lists of hosts and origins among it).
        let mut router = router.with_state(Arc::new(front));
        if let Some(routes) = options.routes {
            router = router.merge(routes);
        }
        let (drain_timeout, limits) = (options.drain_timeout, options.limits);
        Ok(HttpServer { listener, bound, router, stop, draining, drain_timeout, server: counting, limits })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.bound
    }

    /// The MCP endpoint's URL, `http://ADDR/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.bound)
    }

    /// Serve until `shutdown` resolves; then drain: `/readyz` answers
    /// `503` while requests are still served, until no tool call is running
    /// or the drain timeout has passed; then end every session (its streams
    /// close and the calls left are cancelled) and wait at most
    /// [`SHUTDOWN_GRACE`] for connections to close.
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> Result<(), ServeError> {
        let HttpServer { listener, router, stop, draining, drain_timeout, server, limits, .. } = self;
        let serving = accept_loop(listener, router, stop.clone(), limits);
        tokio::pin!(serving);
        tokio::select! {
            () = &mut serving => {}
            () = shutdown => {
                draining.store(true, std::sync::atomic::Ordering::SeqCst);
                let deadline = tokio::time::Instant::now() + drain_timeout;
                if server.calls_running() > 0 {
                    tracing::info!("draining: waiting up to {drain_timeout:?} for {} calls", server.calls_running());
                }
                let drained = server.calls_running() > 0;
                while server.calls_running() > 0 && tokio::time::Instant::now() < deadline {
                    tokio::select! {
                        () = &mut serving => return Ok(()),
                        () = tokio::time::sleep(std::time::Duration::from_millis(20)) => {}
                    }
                }
                // A call stops counting once its answer is made, before
                // rmcp has written it to the client's stream: give the last
                // answers a moment to go out before the streams are ended.
                if drained {
                    let grace = ANSWER_GRACE.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
                    tokio::select! {
                        () = &mut serving => return Ok(()),
                        () = tokio::time::sleep(grace) => {}
                    }
                }
                tracing::info!("shutting down: ending sessions and streams, cancelling calls in flight");
                stop.cancel();
                match tokio::time::timeout(SHUTDOWN_GRACE, &mut serving).await {
                    Ok(()) => {}
                    Err(_) => tracing::warn!("connections still open after {SHUTDOWN_GRACE:?}; serving ends anyway"),
                }
            }
        }
        Ok(())
    }
}

/// A JSON response.
pub(crate) fn json_response(status: StatusCode, body: &Value) -> Response<Body> {
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
    response
}

fn is_json(request: &Request<Body>) -> bool {
    request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"))
}

async fn inner(front: &Front, request: Request<Body>) -> Response<Body> {
    // Boxed: rmcp's handling is a large future, and the handler's future
    // (which axum moves whole, twice, as it makes it) would otherwise have
    // room for it on every request, the direct path's too.
    Box::pin(front.service.handle(request)).await.map(Body::new)
}

/// The JSON-RPC answer in an rmcp response (JSON, or the `data:` lines of
/// an event stream).
async fn answer_in(response: Response<Body>) -> Option<Value> {
    let bytes = axum::body::to_bytes(response.into_body(), MAX_LINE).await.ok()?;
    let text = String::from_utf8_lossy(&bytes);
    if let Ok(value) = serde_json::from_str::<Value>(&text) {
        return Some(value);
    }
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|m| m.get("method").is_none() && (m.get("result").is_some() || m.get("error").is_some()))
}

/// `GET /healthz`: the process serves.
async fn healthz() -> Response<Body> {
    let mut response = Response::new(Body::from("ok\n"));
    response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("text/plain"));
    response
}

/// `GET /readyz`: `200` while serving, `503` once draining; the body says
/// each toolset's last sync state.
async fn readyz(axum::extract::State(front): axum::extract::State<Arc<Front>>) -> Response<Body> {
    let draining = front.draining.load(std::sync::atomic::Ordering::SeqCst);
    let mut toolsets = serde_json::Map::new();
    if let crate::ToolSource::Plugin(plugin) = &front.source {
        toolsets.insert(plugin.name().to_owned(), Value::from("SyncCompleted"));
    }
    #[cfg(feature = "production")]
    if let crate::ToolSource::Tenants(tenants) = &front.source {
        // Tenants' toolsets are theirs: unauthenticated probes get counts
        // of sync states, never names.
        let registries = tenants.registries();
        let mut states: std::collections::BTreeMap<&'static str, u64> = Default::default();
        for (_, registry) in &registries {
            for event in registry.last_syncs() {
                *states.entry(event.event.name()).or_default() += 1;
            }
        }
        let status = if draining { StatusCode::SERVICE_UNAVAILABLE } else { StatusCode::OK };
        return json_response(
            status,
            &serde_json::json!({"ready": !draining, "workspaces": registries.len(), "syncs": states}),
        );
    }
    for (_, registry) in front.source.registries() {
        for event in registry.last_syncs() {
            toolsets.insert(event.tool_set_id, Value::from(event.event.name()));
        }
    }
    let status = if draining { StatusCode::SERVICE_UNAVAILABLE } else { StatusCode::OK };
    json_response(status, &serde_json::json!({"ready": !draining, "toolsets": toolsets}))
}

async fn http_front(
    axum::extract::State(front): axum::extract::State<Arc<Front>>,
    request: Request<Body>,
) -> Response<Body> {
    // A session id that is not visible ASCII is no session id: rmcp reads
    // it as none (and an `initialize` so marked opened a session past the
    // caps, counted by no one).
    if request.headers().get_all("mcp-session-id").iter().any(|v| v.to_str().is_err()) {
        let error = error_response(Value::Null, -32600, "the Mcp-Session-Id header is not visible ASCII");
        return json_response(StatusCode::BAD_REQUEST, &error);
    }
    #[cfg(feature = "production")]
    let request = match Box::pin(production::authorize(&front, request)).await {
        Ok(request) => request,
        Err(refusal) => return *refusal,
    };
    // A request of a session holds it live until answered (its stream
    // closed): only sessions with none are parked.
    let session = request.headers().get("mcp-session-id").and_then(|v| v.to_str().ok());
    let busy = match session {
        Some(session) => front.sessions.table().enter(session).await,
        None => None,
    };
    let response = match *request.method() {
        Method::DELETE => Box::pin(delete(&front, request)).await,
        Method::POST if is_json(&request) => post(&front, request).await,
        _ => inner(&front, request).await,
    };
    match busy {
        Some(busy) => busy.hold(response),
        None => response,
    }
}

/// DELETE: `404` for a session that does not exist (or has ended), `204`
/// once a live one is closed.
async fn delete(front: &Front, request: Request<Body>) -> Response<Body> {
    let session = request.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(Arc::<str>::from);
    if let Some(session) = &session
        && !front.sessions.holds(session).await
    {
        let mut response = Response::new(Body::from("Not Found: no such session"));
        *response.status_mut() = StatusCode::NOT_FOUND;
        return response;
    }
    let mut response = inner(front, request).await;
    if response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::NO_CONTENT;
        *response.body_mut() = Body::empty();
    }
    response
}

/// Whether a message is an `initialize` (which opens a session).
fn is_initialize(message: &Value) -> bool {
    message.get("method").and_then(Value::as_str) == Some("initialize")
}

/// Whether a request opens a session: an `initialize` outside any.
fn opens_session(parts: &axum::http::request::Parts, message: &Value) -> bool {
    !parts.headers.contains_key("mcp-session-id") && is_initialize(message)
}

/// An `initialize` opening a session, if there is room for one more: in
/// all (`503` past [`HttpLimits::sessions`]) and of its client's (`429`
/// past [`HttpLimits::sessions_per_client`]). Sessions are admitted one
/// at a time, so none slips past while another is being opened.
async fn open_session(front: &Front, request: Request<Body>, message: &Value) -> Response<Body> {
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let _one_at_a_time = front.opening.lock().await;
    let open = front.sessions.open().await;
    if open >= front.limits.sessions {
        let text = format!(
            "the server has {open} sessions open, its most: close one (DELETE) or try again later; \
             a session ends after 5 minutes without a request"
        );
        let mut response = json_response(StatusCode::SERVICE_UNAVAILABLE, &error_response(id, -32000, text));
        response.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from_static("30"));
        return response;
    }
    #[cfg(feature = "production")]
    let subject = request.extensions().get::<crate::auth::Principal>().map(crate::auth::Principal::key);
    #[cfg(feature = "production")]
    if let Some(subject) = &subject {
        let held = production::sessions_of(front, subject).await;
        if held >= front.limits.sessions_per_client {
            let text =
                format!("this client has {held} sessions open, its most: close one (DELETE) before opening another");
            return json_response(StatusCode::TOO_MANY_REQUESTS, &error_response(id, -32000, text));
        }
    }
    let response = inner(front, request).await;
    #[cfg(feature = "production")]
    if let Some(subject) = subject
        && let Some(session) = response.headers().get("mcp-session-id").and_then(|v| v.to_str().ok())
    {
        production::opened(front, session.to_owned(), subject);
    }
    response
}

/// POST of JSON: malformed JSON is `400` with `-32700`; malformed
/// `tools/call` params are `-32602`; a batch is split into single requests
/// and their answers joined.
async fn post(front: &Front, request: Request<Body>) -> Response<Body> {
    let (parts, body) = request.into_parts();
    // The body's bytes count against the server's budget until the answer.
    let (bytes, _held) = match admission::read_body(front, &parts, body).await {
        Ok(read) => read,
        Err(refusal) => return refusal,
    };
    // (Each way of answering is boxed where it is awaited: axum moves the
    // handler's future whole, twice, as it makes it, and a future is as
    // large as the largest of its states. Unboxed, every request copied
    // room for rmcp's handling and a batch's twice: 9,500 instructions of
    // `memcpy` a direct call, by callgrind.)
    //
    // A well-formed 2026-07-28 tools/call: answered here, its body parsed
    // once, straight into the call.
    if let Some(call) = crate::stateless_call::admit(&front.direct.hosts, &parts, &bytes) {
        #[cfg(feature = "production")]
        if let Some(refusal) = production::scope_refusal_of(front, &parts, &call.1.name) {
            return refusal;
        }
        if let Some(refusal) = admission::calls_refusal(front, || serde_json::to_value(&call.0).unwrap_or(Value::Null))
        {
            return refusal;
        }
        return Box::pin(crate::stateless_call::answer(&front.direct.server, &front.direct.stop, parts, call)).await;
    }
    // A plain tools/call of an open session: answered here too.
    if let Some((session, call)) = crate::session_call::admit(&front.session_calls, &front.direct.hosts, &parts, &bytes)
        && session.open(&front.sessions, &front.session_calls).await
    {
        #[cfg(feature = "production")]
        if let Some(refusal) = production::scope_refusal_of(front, &parts, &call.1.name) {
            return refusal;
        }
        if let Some(refusal) = admission::calls_refusal(front, || serde_json::to_value(&call.0).unwrap_or(Value::Null))
        {
            return refusal;
        }
        return Box::pin(crate::session_call::answer(session, &front.direct.stop, parts, call)).await;
    }
    let message: Value = match serde_json::from_slice(&bytes) {
        Ok(message) => message,
        Err(e) => {
            return json_response(
                StatusCode::BAD_REQUEST,
                &error_response(Value::Null, -32700, format!("Parse error: {e}")),
            );
        }
    };
    let calls = match &message {
        Value::Array(batch) => batch.iter().find(|m| admission::is_call(m)),
        message => Some(message).filter(|m| admission::is_call(m)),
    };
    if let Some(call) = calls
        && let Some(refusal) = admission::calls_refusal(front, || call.get("id").cloned().unwrap_or(Value::Null))
    {
        return refusal;
    }
    match message {
        Value::Array(batch) => Box::pin(post_batch(front, parts, batch)).await,
        message => Box::pin(post_one(front, parts, message, bytes)).await,
    }
}

/// A session's `notifications/cancelled`: the session and the request it
/// names, for [`crate::session_call::SessionCalls::cancel`] once rmcp has
/// accepted the notification (rmcp knows no call answered on its
/// connection's task, and would let it run).
fn cancellation(parts: &axum::http::request::Parts, message: &Value) -> Option<(String, rmcp::model::RequestId)> {
    if message.get("method").and_then(Value::as_str) != Some("notifications/cancelled") {
        return None;
    }
    let session = parts.headers.get("mcp-session-id").and_then(|v| v.to_str().ok())?;
    let request = rmcp::model::RequestId::deserialize(message.pointer("/params/requestId")?).ok()?;
    Some((session.to_owned(), request))
}

/// The request again, for rmcp: the same head, this body.
fn rebuild(parts: axum::http::request::Parts, body: Body) -> Request<Body> {
    let mut request = Request::from_parts(parts, body);
    request.headers_mut().remove(header::CONTENT_LENGTH);
    request
}

/// One JSON-RPC message (not a batch), handed to rmcp unless it is a
/// malformed call or opens a session.
async fn post_one(
    front: &Front,
    parts: axum::http::request::Parts,
    mut message: Value,
    bytes: axum::body::Bytes,
) -> Response<Body> {
    if let Some(answer) = malformed_call(&message) {
        return json_response(StatusCode::OK, &answer);
    }
    #[cfg(feature = "production")]
    if let Some(refusal) = production::scope_refusal(front, &parts, &message) {
        return refusal;
    }
    let bytes = if crate::jsonrpc::accept_unversioned_client(&mut message) {
        axum::body::Bytes::from(message.to_string())
    } else {
        bytes
    };
    if opens_session(&parts, &message) {
        return open_session(front, rebuild(parts, Body::from(bytes)), &message).await;
    }
    // The session of a `notifications/initialized`, the one message
    // whose session the front waits on below.
    let initialized = (message.get("method").and_then(Value::as_str) == Some("notifications/initialized"))
        .then(|| parts.headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned))
        .flatten();
    let cancelled = cancellation(&parts, &message);
    // (The head moved, not copied; the body shared, not copied.)
    let response = inner(front, rebuild(parts, Body::from(bytes))).await;
    if let Some((session, request)) = cancelled
        && response.status() == StatusCode::ACCEPTED
    {
        front.session_calls.cancel(&session, &request);
    }
    // Once initialized, a session's calls are answered on their
    // connection's task: its client's next call finds it so.
    if let Some(session) = initialized
        && response.status() == StatusCode::ACCEPTED
    {
        front.session_calls.until_registered(&session, REGISTERING).await;
    }
    response
}

/// A JSON-RPC batch: refused in sessions of versions without batches,
/// empty or too long; otherwise each member in turn, their answers joined.
async fn post_batch(front: &Front, parts: axum::http::request::Parts, batch: Vec<Value>) -> Response<Body> {
    // Batches are 2025-03-26's (and before): a client of a later version
    // says so in every request's header.
    if let Some(version) = parts.headers.get("mcp-protocol-version").and_then(|v| v.to_str().ok())
        && !crate::jsonrpc::batches_allowed(version)
    {
        return json_response(StatusCode::BAD_REQUEST, &crate::jsonrpc::batch_not_in_version(version));
    }
    if batch.is_empty() {
        return json_response(
            StatusCode::BAD_REQUEST,
            &error_response(Value::Null, -32600, "an empty batch is not a request"),
        );
    }
    if batch.len() > crate::jsonrpc::MAX_BATCH {
        return json_response(StatusCode::BAD_REQUEST, &crate::jsonrpc::batch_too_long(batch.len()));
    }
    // A batch runs all of its calls or none: a call the token may not make
    // refuses the whole batch before any of it runs.
    #[cfg(feature = "production")]
    for message in &batch {
        if let Some(refusal) = production::scope_refusal(front, &parts, message) {
            return refusal;
        }
    }
    let mut answers = Vec::new();
    for message in batch {
        let message = match check_message(message) {
            Ok(message) => message,
            Err(answer) => {
                answers.push(answer);
                continue;
            }
        };
        // A session opened in a batch would have no way to tell its client
        // its id (the answers are joined, their headers dropped): it would
        // only take a place.
        if is_initialize(&message) {
            let id = message.get("id").cloned().unwrap_or(Value::Null);
            answers.push(error_response(id, -32600, "initialize cannot be batched: send it on its own"));
            continue;
        }
        let expects_answer = message.get("method").is_some() && message.get("id").is_some();
        let cancelled = cancellation(&parts, &message);
        let response = inner(front, rebuild(parts.clone(), Body::from(message.to_string()))).await;
        if !response.status().is_success() {
            return response;
        }
        if let Some((session, request)) = cancelled
            && response.status() == StatusCode::ACCEPTED
        {
            front.session_calls.cancel(&session, &request);
        }
        if expects_answer && let Some(answer) = answer_in(response).await {
            answers.push(answer);
        }
    }
    if answers.is_empty() {
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::ACCEPTED;
        return response;
    }
    json_response(StatusCode::OK, &Value::Array(answers))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_or_unspecified_server_knows_its_local_names_and_others_only_themselves() {
        let origins = own_origins("127.0.0.1:8080".parse().unwrap());
        assert_eq!(origins, ["http://127.0.0.1:8080", "http://localhost:8080", "http://[::1]:8080"]);
        let origins = own_origins("[::]:9000".parse().unwrap());
        assert!(origins.contains(&"http://[::]:9000".to_owned()), "{origins:?}");
        assert!(origins.contains(&"http://localhost:9000".to_owned()), "{origins:?}");
        assert_eq!(own_origins("10.0.0.5:80".parse().unwrap()), ["http://10.0.0.5:80"]);
        let hosts = own_hosts("10.0.0.5:80".parse().unwrap());
        assert!(hosts.contains(&"10.0.0.5".to_owned()) && hosts.contains(&"localhost".to_owned()), "{hosts:?}");
        assert!(!own_hosts("0.0.0.0:80".parse().unwrap()).contains(&"0.0.0.0".to_owned()));
    }

    fn parts(session: Option<&str>) -> axum::http::request::Parts {
        let mut request = Request::builder().method("POST").uri("/mcp");
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.body(()).unwrap().into_parts().0
    }

    #[test]
    fn only_an_initialize_outside_a_session_opens_one() {
        let initialize = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}});
        let call = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {}});
        assert!(opens_session(&parts(None), &initialize));
        assert!(!opens_session(&parts(Some("s-1")), &initialize));
        assert!(!opens_session(&parts(None), &call));
        assert!(!is_initialize(&serde_json::json!({"method": 7})));
    }

    #[test]
    fn a_json_request_says_so_in_its_content_type() {
        let with = |content_type: &str| {
            Request::builder().header(header::CONTENT_TYPE, content_type).body(Body::empty()).unwrap()
        };
        assert!(is_json(&with("application/json")));
        assert!(is_json(&with("application/json; charset=utf-8")));
        assert!(!is_json(&with("text/plain")));
        assert!(!is_json(&Request::builder().body(Body::empty()).unwrap()));
    }
}
