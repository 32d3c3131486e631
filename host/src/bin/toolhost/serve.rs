//! `toolhost serve`: the MCP server over stdio or streamable HTTP, and the
//! watcher that applies a changed toolsets file.
//!
//! rmcp does the protocol. In front of it sit two thin layers that fix what
//! its transports get wrong for real clients (see DESIGN.md, `serve`):
//!
//! - on stdio, [`stdio_front`] reads the lines itself: an unparsable line is
//!   answered with `-32700` (id null), a line over [`MAX_LINE`] with
//!   `-32700` too instead of being dropped, a JSON-RPC batch is split and
//!   its answers joined again, and a `tools/call` with malformed params gets
//!   `-32602`;
//! - on HTTP, [`http_front`] does the same for POST bodies (malformed JSON
//!   is `400` with `-32700`), answers DELETE of an unknown session with
//!   `404` and of a live one with `204`, and the listener sets
//!   `TCP_NODELAY`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use axum::body::Body;
use axum::http::{Method, Request, Response, StatusCode, header};
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use toolhost::{McpServer, Registry, SecretProvider};

/// The longest JSON-RPC message (one line on stdio, one POST body on HTTP)
/// the server reads: rmcp's own limit.
pub(crate) const MAX_LINE: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// How long a shutdown waits for connections to close before the process
/// exits anyway.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// How `--http` serves.
#[derive(Debug, Clone)]
pub(crate) struct HttpOptions {
    /// Where to listen.
    pub addr: SocketAddr,
    /// Browser origins allowed besides the server's own (`--allow-origin`).
    pub allowed_origins: Vec<String>,
}

/// Run the MCP server until the client disconnects (stdio) or the process
/// gets SIGINT or SIGTERM (either transport).
pub(crate) async fn serve(server: McpServer, http: Option<HttpOptions>) -> anyhow::Result<()> {
    match http {
        None => serve_stdio(server).await,
        Some(options) => serve_http(server, options).await,
    }
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

async fn serve_stdio(server: McpServer) -> anyhow::Result<()> {
    use rmcp::ServiceExt;
    // rmcp talks to one end of an in-memory pipe; the front owns the real
    // stdin and stdout.
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (from_server, to_server) = tokio::io::split(ours);
    let front = tokio::spawn(stdio_front(tokio::io::stdin(), tokio::io::stdout(), from_server, to_server));
    let running = server.serve(tokio::io::split(theirs)).await.context("the MCP session failed to start")?;
    let cancel = running.cancellation_token();
    tokio::select! {
        outcome = running.waiting() => { outcome.context("the MCP session failed")?; }
        () = shutdown_signal() => {
            tracing::info!("shutting down on a signal");
            cancel.cancel();
        }
    }
    // The session is over: the front writes out what the server wrote and
    // ends (it does not wait for more input).
    if tokio::time::timeout(SHUTDOWN_GRACE, front).await.is_err() {
        tracing::warn!("the output did not drain within {SHUTDOWN_GRACE:?}");
    }
    Ok(())
}

/// A JSON-RPC error response.
fn error_response(id: Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

/// The `-32602` answer rmcp would not give (it says `-32601`): a
/// `tools/call` request without params, with a name that is not a string,
/// or with arguments that are not an object.
pub(crate) fn malformed_call(message: &Value) -> Option<Value> {
    if message.get("method").and_then(Value::as_str) != Some("tools/call") {
        return None;
    }
    let id = message.get("id")?.clone();
    let problem = match message.get("params") {
        None | Some(Value::Null) => "tools/call needs params: {name, arguments}",
        Some(Value::Object(params)) => match (params.get("name"), params.get("arguments")) {
            (Some(Value::String(_)), None | Some(Value::Null | Value::Object(_))) => return None,
            (Some(Value::String(_)), Some(_)) => "the arguments of tools/call must be an object",
            _ => "tools/call needs a tool name (a string) in params.name",
        },
        Some(_) => "the params of tools/call must be an object",
    };
    Some(error_response(id, -32602, problem))
}

/// What the front does with one incoming message (or batch).
enum Incoming {
    /// Hand these messages to rmcp, one line each.
    Forward(Vec<Value>),
    /// Answer at once, without rmcp.
    Answer(Value),
}

/// A batch waits for the answers to these request ids.
struct PendingBatch {
    waiting: Vec<Value>,
    answers: Vec<Value>,
}

/// Check one parsed message (not a batch): forward it or answer it.
fn check_message(message: Value) -> Result<Value, Value> {
    if !message.is_object() {
        return Err(error_response(Value::Null, -32600, "a JSON-RPC message must be an object"));
    }
    match malformed_call(&message) {
        Some(answer) => Err(answer),
        None => Ok(message),
    }
}

/// Read one line of at most [`MAX_LINE`] bytes. `Ok(None)` at the end of
/// input; `Ok(Some(Err(len)))` for a line that was too long (and skipped).
async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(
    input: &mut R,
    line: &mut Vec<u8>,
) -> std::io::Result<Option<Result<(), usize>>> {
    line.clear();
    let mut skipped = 0usize;
    loop {
        let buffer = input.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(if line.is_empty() && skipped == 0 {
                None
            } else if skipped > 0 {
                Some(Err(skipped))
            } else {
                Some(Ok(()))
            });
        }
        let (chunk, done) = match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => (&buffer[..at], Some(at + 1)),
            None => (buffer, None),
        };
        if skipped > 0 || line.len() + chunk.len() > MAX_LINE {
            skipped += line.len() + chunk.len();
            line.clear();
        } else {
            line.extend_from_slice(chunk);
        }
        let used = done.unwrap_or(buffer.len());
        input.consume(used);
        if done.is_some() {
            return Ok(Some(if skipped > 0 { Err(skipped) } else { Ok(()) }));
        }
    }
}

/// Classify one line of input.
fn classify(line: &[u8]) -> Option<Incoming> {
    let text = std::str::from_utf8(line).ok().map(str::trim);
    if text.is_some_and(str::is_empty) {
        return None;
    }
    let parsed: Result<Value, String> = match text {
        Some(text) => serde_json::from_str(text).map_err(|e| e.to_string()),
        None => Err("the line is not UTF-8".to_owned()),
    };
    Some(match parsed {
        Err(e) => Incoming::Answer(error_response(Value::Null, -32700, format!("Parse error: {e}"))),
        Ok(Value::Array(batch)) if batch.is_empty() => {
            Incoming::Answer(error_response(Value::Null, -32600, "an empty batch is not a request"))
        }
        Ok(Value::Array(batch)) => {
            // Checked answers stay in the batch: an answer array is only sent
            // once every forwarded request has its answer too.
            let mut forward = Vec::new();
            let mut answers = Vec::new();
            for message in batch {
                match check_message(message) {
                    Ok(message) => forward.push(message),
                    Err(answer) => answers.push(answer),
                }
            }
            return Some(Incoming::Forward(
                std::iter::once(json!({"__batch_answers": answers})).chain(forward).collect(),
            ));
        }
        Ok(message) => match check_message(message) {
            Ok(message) => Incoming::Forward(vec![message]),
            Err(answer) => Incoming::Answer(answer),
        },
    })
}

/// What the writer task is told.
enum Outgoing {
    /// A line rmcp wrote.
    FromServer(Vec<u8>),
    /// An answer of the front's own.
    Answer(Value),
    /// A batch whose answers are to be joined.
    Batch(PendingBatch),
    /// rmcp closed its end: the session is over.
    ServerDone,
}

/// The stdio front: reads messages from `input`, answers the ones rmcp
/// would mishandle, forwards the rest to rmcp (`to_server`), and writes
/// rmcp's output and its own answers to `output`.
pub(crate) async fn stdio_front<I, O, R, W>(input: I, mut output: O, from_server: R, mut to_server: W)
where
    I: tokio::io::AsyncRead + Unpin + Send + 'static,
    O: tokio::io::AsyncWrite + Unpin,
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, mut outgoing) = tokio::sync::mpsc::unbounded_channel::<Outgoing>();
    let server_lines = {
        let sender = sender.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(from_server);
            let mut line = Vec::new();
            while lines.read_until(b'\n', &mut line).await.is_ok_and(|n| n > 0) {
                if sender.send(Outgoing::FromServer(std::mem::take(&mut line))).is_err() {
                    break;
                }
            }
            let _ = sender.send(Outgoing::ServerDone);
        })
    };
    let reader = tokio::spawn(async move {
        let mut input = tokio::io::BufReader::new(input);
        let mut line = Vec::new();
        loop {
            let incoming = match read_line(&mut input, &mut line).await {
                Ok(None) | Err(_) => break,
                Ok(Some(Err(length))) => Some(Incoming::Answer(error_response(
                    Value::Null,
                    -32700,
                    format!(
                        "the message ({length} bytes) is larger than the limit of {MAX_LINE} bytes; it was not read"
                    ),
                ))),
                Ok(Some(Ok(()))) => classify(&line),
            };
            let messages = match incoming {
                None => continue,
                Some(Incoming::Answer(answer)) => {
                    let _ = sender.send(Outgoing::Answer(answer));
                    continue;
                }
                Some(Incoming::Forward(mut messages)) => {
                    if messages.first().is_some_and(|m| m.get("__batch_answers").is_some()) {
                        let answers = match messages.remove(0)["__batch_answers"].take() {
                            Value::Array(answers) => answers,
                            _ => Vec::new(),
                        };
                        let waiting = messages
                            .iter()
                            .filter(|m| m.get("method").is_some())
                            .filter_map(|m| m.get("id").cloned())
                            .collect();
                        // Registered before the requests go out, so no answer
                        // can overtake it.
                        let _ = sender.send(Outgoing::Batch(PendingBatch { waiting, answers }));
                    }
                    messages
                }
            };
            for message in messages {
                let mut bytes = message.to_string().into_bytes();
                bytes.push(b'\n');
                if to_server.write_all(&bytes).await.is_err() || to_server.flush().await.is_err() {
                    return;
                }
            }
        }
        // End of input: rmcp sees it too and ends the session.
        let _ = to_server.shutdown().await;
    });
    let mut batches: Vec<PendingBatch> = Vec::new();
    while let Some(message) = outgoing.recv().await {
        let line = match message {
            Outgoing::ServerDone => break,
            Outgoing::Batch(batch) => {
                batches.push(batch);
                None
            }
            Outgoing::Answer(answer) => Some(answer.to_string().into_bytes()),
            Outgoing::FromServer(line) => {
                let answer_of = if batches.is_empty() {
                    None
                } else {
                    serde_json::from_slice::<Value>(&line).ok().filter(|m| m.get("method").is_none())
                };
                let batch = answer_of.as_ref().and_then(|answer| {
                    let id = answer.get("id")?;
                    batches.iter().position(|b| b.waiting.contains(id))
                });
                match (batch, answer_of) {
                    (Some(at), Some(answer)) => {
                        let batch = &mut batches[at];
                        batch.waiting.retain(|id| Some(id) != answer.get("id"));
                        batch.answers.push(answer);
                        None
                    }
                    _ => Some(line),
                }
            }
        };
        let mut lines: Vec<Vec<u8>> = line.into_iter().collect();
        // Batches that are complete go out as one array each.
        while let Some(at) = batches.iter().position(|b| b.waiting.is_empty()) {
            let batch = batches.remove(at);
            if !batch.answers.is_empty() {
                lines.push(Value::Array(batch.answers).to_string().into_bytes());
            }
        }
        for mut line in lines {
            if line.last() != Some(&b'\n') {
                line.push(b'\n');
            }
            if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
                break;
            }
        }
    }
    reader.abort();
    server_lines.abort();
}

/// The origins a browser page served by this server itself would send.
fn own_origins(bound: SocketAddr) -> Vec<String> {
    let port = bound.port();
    let mut hosts = vec![match bound.ip() {
        std::net::IpAddr::V4(ip) => ip.to_string(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
    }];
    if bound.ip().is_loopback() || bound.ip().is_unspecified() {
        hosts.extend(["localhost".to_owned(), "127.0.0.1".to_owned(), "[::1]".to_owned()]);
    }
    hosts.dedup();
    hosts.into_iter().map(|host| format!("http://{host}:{port}")).collect()
}

/// The listener with `TCP_NODELAY` on every accepted connection: responses
/// are written in several pieces, and Nagle's algorithm would hold each
/// later piece back until the client's delayed ACK (~40 ms per request on a
/// kept-alive connection).
fn nodelay(
    listener: tokio::net::TcpListener,
) -> impl axum::serve::Listener<Io = tokio::net::TcpStream, Addr = SocketAddr> {
    use axum::serve::ListenerExt;
    listener.tap_io(|stream| {
        if let Err(error) = stream.set_nodelay(true) {
            tracing::warn!("cannot set TCP_NODELAY: {error}");
        }
    })
}

type Service = StreamableHttpService<McpServer, LocalSessionManager>;

/// What the HTTP front needs: rmcp's service and its sessions.
#[derive(Clone)]
struct Front {
    service: Service,
    sessions: Arc<LocalSessionManager>,
}

async fn serve_http(server: McpServer, options: HttpOptions) -> anyhow::Result<()> {
    let addr = options.addr;
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))?;
    let bound = listener.local_addr().context("no local address")?;
    let mut origins = own_origins(bound);
    origins.extend(options.allowed_origins);
    let config = StreamableHttpServerConfig::default().with_allowed_origins(origins).enforce_origin_validation();
    let stop = config.cancellation_token.clone();
    let sessions = Arc::new(LocalSessionManager::default());
    let service = StreamableHttpService::new(move || Ok(server.clone()), Arc::clone(&sessions), config);
    let router =
        axum::Router::new().route("/mcp", axum::routing::any(http_front)).with_state(Front { service, sessions });
    eprintln!("toolhost: serving MCP over streamable HTTP at http://{bound}/mcp");
    let serving = {
        let stop = stop.clone();
        async move { axum::serve(nodelay(listener), router).with_graceful_shutdown(stop.cancelled_owned()).await }
    };
    tokio::pin!(serving);
    tokio::select! {
        outcome = &mut serving => outcome.context("the HTTP server failed")?,
        () = shutdown_signal() => {
            eprintln!("toolhost: shutting down: ending sessions and streams, cancelling calls in flight");
            // Ends every session: its streams close and its calls are cancelled.
            stop.cancel();
            match tokio::time::timeout(SHUTDOWN_GRACE, &mut serving).await {
                Ok(outcome) => outcome.context("the HTTP server failed")?,
                Err(_) => eprintln!("toolhost: connections still open after {SHUTDOWN_GRACE:?}; exiting anyway"),
            }
        }
    }
    Ok(())
}

/// A JSON response.
fn json_response(status: StatusCode, body: &Value) -> Response<Body> {
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
    front.service.handle(request).await.map(Body::new)
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

async fn http_front(
    axum::extract::State(front): axum::extract::State<Front>,
    request: Request<Body>,
) -> Response<Body> {
    match *request.method() {
        Method::DELETE => delete(&front, request).await,
        Method::POST if is_json(&request) => post(&front, request).await,
        _ => inner(&front, request).await,
    }
}

/// DELETE: `404` for a session that does not exist (or has ended), `204`
/// once a live one is closed.
async fn delete(front: &Front, request: Request<Body>) -> Response<Body> {
    let session = request.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(Arc::<str>::from);
    if let Some(session) = &session
        && !front.sessions.has_session(session).await.unwrap_or(false)
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

/// POST of JSON: malformed JSON is `400` with `-32700`; malformed
/// `tools/call` params are `-32602`; a batch is split into single requests
/// and their answers joined.
async fn post(front: &Front, request: Request<Body>) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_LINE).await {
        Ok(bytes) => bytes,
        Err(_) => {
            let error =
                error_response(Value::Null, -32600, format!("the request body is larger than {MAX_LINE} bytes"));
            return json_response(StatusCode::PAYLOAD_TOO_LARGE, &error);
        }
    };
    let message: Value = match serde_json::from_slice(&bytes) {
        Ok(message) => message,
        Err(e) => {
            return json_response(
                StatusCode::BAD_REQUEST,
                &error_response(Value::Null, -32700, format!("Parse error: {e}")),
            );
        }
    };
    let rebuild = |body: Vec<u8>| {
        let mut request = Request::from_parts(parts.clone(), Body::from(body));
        request.headers_mut().remove(header::CONTENT_LENGTH);
        request
    };
    match message {
        Value::Array(batch) => {
            if batch.is_empty() {
                return json_response(
                    StatusCode::BAD_REQUEST,
                    &error_response(Value::Null, -32600, "an empty batch is not a request"),
                );
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
                let expects_answer = message.get("method").is_some() && message.get("id").is_some();
                let response = inner(front, rebuild(message.to_string().into_bytes())).await;
                if !response.status().is_success() {
                    return response;
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
        message => match malformed_call(&message) {
            Some(answer) => json_response(StatusCode::OK, &answer),
            None => inner(front, rebuild(bytes.to_vec())).await,
        },
    }
}

/// The metadata a reload depends on: size and modification time of a file.
type Stamp = Option<(u64, SystemTime)>;

fn stamp(path: &Path) -> Stamp {
    let metadata = std::fs::metadata(path).ok()?;
    Some((metadata.len(), metadata.modified().ok()?))
}

/// The files a configuration depends on (the toolsets file first, then its
/// plugin files) and their stamps when it was last read.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Stamps(Vec<(PathBuf, Stamp)>);

impl Stamps {
    /// Stamps of `file` and of `plugins`, now.
    pub(crate) fn of(file: &Path, plugins: impl IntoIterator<Item = PathBuf>) -> Stamps {
        let mut paths = vec![file.to_path_buf()];
        paths.extend(plugins);
        Stamps(paths.into_iter().map(|path| (path.clone(), stamp(&path))).collect())
    }

    /// Whether any of the files has changed (or appeared, or gone) since.
    pub(crate) fn changed(&self) -> bool {
        self.0.iter().any(|(path, seen)| stamp(path) != *seen)
    }
}

/// The plugin files a configuration names.
fn plugin_files(toolsets: &[toolhost::ToolsetConfig]) -> Vec<PathBuf> {
    toolsets
        .iter()
        .filter_map(|t| match &t.source {
            Some(toolhost::PluginSource::File(path)) => Some(path.clone()),
            _ => None,
        })
        .collect()
}

/// Reload the toolsets file when it (or a plugin file) changes: the files'
/// metadata is looked at every 500 ms, and only a change makes the file be
/// read again (and its secrets resolved) and the registry synced, which
/// applies the new configuration as one swap and announces it once.
pub(crate) async fn watch_config(file: PathBuf, secrets: Arc<dyn SecretProvider>, registry: Arc<Registry>) {
    let mut plugins = match toolhost::load_toolsets(&file, secrets.as_ref()) {
        Ok(parsed) => plugin_files(&parsed.toolsets),
        Err(_) => Vec::new(),
    };
    let mut seen = Stamps::of(&file, plugins.clone());
    let mut ticker = tokio::time::interval(Duration::from_millis(500));
    loop {
        ticker.tick().await;
        if !seen.changed() {
            continue;
        }
        // Stamp before reading: a change while reading is seen next time.
        seen = Stamps::of(&file, plugins.clone());
        tracing::debug!(file = %file.display(), "configuration changed: reading it again");
        match toolhost::load_toolsets(&file, secrets.as_ref()) {
            Ok(parsed) => {
                plugins = plugin_files(&parsed.toolsets);
                seen = Stamps::of(&file, plugins.clone());
                let report = registry.sync(parsed.toolsets).await;
                crate::print_load_report(&report);
            }
            Err(error) => {
                eprintln!("warning: the changed configuration was not applied: {}", crate::escaped(&error.to_string()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn accepted_connections_have_nodelay_set() {
        use axum::serve::Listener;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let mut listener = nodelay(listener);
        let client = tokio::net::TcpStream::connect(addr);
        let (accepted, client) = tokio::join!(listener.accept(), client);
        let _client = client.expect("connect");
        assert!(accepted.0.nodelay().expect("nodelay"), "TCP_NODELAY is off on an accepted connection");
    }

    #[test]
    fn stamps_change_only_when_a_file_does() {
        let dir = std::env::temp_dir().join(format!("toolhost-stamps-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("t.json");
        let plugin = dir.join("p.wasm");
        std::fs::write(&file, "{}").expect("write");
        std::fs::write(&plugin, "x").expect("write");
        let stamps = Stamps::of(&file, [plugin.clone()]);
        assert!(!stamps.changed());
        std::fs::write(&plugin, "xy").expect("write");
        assert!(stamps.changed(), "a plugin file grew");
        let stamps = Stamps::of(&file, [plugin.clone()]);
        assert!(!stamps.changed());
        std::fs::remove_file(&file).expect("remove");
        assert!(stamps.changed(), "the configuration is gone");
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn malformed_tool_calls_are_invalid_params() {
        for params in [None, Some(json!([1])), Some(json!({"name": 3})), Some(json!({"name": "a", "arguments": [1]}))] {
            let mut message = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call"});
            if let Some(params) = params {
                message["params"] = params;
            }
            let answer = malformed_call(&message).expect("an answer");
            assert_eq!(answer["error"]["code"], -32602);
            assert_eq!(answer["id"], 7);
        }
        let fine = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "a", "arguments": {}}});
        assert!(malformed_call(&fine).is_none());
    }
}
