//! A 2026-07-28 `tools/call` answered on the HTTP connection's own task.
//!
//! rmcp answers each stateless request through a service made for it: a
//! peer, channels and cancellation tokens, a spawned serve loop, which
//! spawns the handler, whose answer comes back through a channel. Each of
//! those hand-offs may wake another thread, and together they cost several
//! times the call itself (DESIGN.md, `serve`, "What an HTTP call costs").
//! A `tools/call` of protocol 2026-07-28 needs none of it: it has no
//! session and no server-to-client requests. So one that passes, here,
//! every check rmcp would make of it (the `Host` and `Accept` headers,
//! the content type, `MCP-Protocol-Version` against `_meta`, the SEP-2243
//! `Mcp-Method` and `Mcp-Name` headers, `_meta`'s required keys) is
//! built into rmcp's own types and answered by the same
//! [`McpServer::serve_call`] as through rmcp, with the same answer. Any
//! request these checks do not plainly pass (a foreign `Origin` header or
//! any `Origin` at all, `Mcp-Param-*` headers, a Base64 `Mcp-Name`, a
//! session, another version) goes to rmcp, which answers it or says what
//! is wrong with it.
//!
//! What the call tells its client before the answer (progress, list
//! changes) turns the answer into an event stream, as rmcp does: the
//! events, then the answer.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Response, StatusCode, header, request::Parts};
use axum::response::IntoResponse as _;
use axum::response::sse::{Event, KeepAlive, Sse};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ErrorCode, Extensions, ProtocolVersion, RequestId, ServerJsonRpcMessage,
};
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::McpServer;
use crate::caller::{Caller, Outlet, Shape, answer_message};

/// The only protocol version answered here.
const VERSION: &str = "2026-07-28";

/// How often an event stream's connection is kept alive (rmcp's default).
const KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(15);

/// The `Host` header values rmcp's service accepts, parsed as it parses
/// them: a name (or address) and, if given, the only port allowed.
pub(crate) struct Hosts(Vec<(String, Option<u16>)>);

impl Hosts {
    /// The hosts rmcp's service is configured with.
    pub(crate) fn new(allowed: &[String]) -> Hosts {
        let parse = |allowed: &String| {
            let allowed = allowed.trim();
            if allowed.is_empty() {
                return None;
            }
            Some(match axum::http::uri::Authority::try_from(allowed) {
                Ok(authority) => (normalize(authority.host()), authority.port_u16()),
                Err(_) => (normalize(allowed), None),
            })
        };
        Hosts(allowed.iter().filter_map(parse).collect())
    }

    /// Whether rmcp would let a request with these headers in.
    pub(crate) fn allow(&self, headers: &HeaderMap) -> bool {
        let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else { return false };
        let Ok(authority) = axum::http::uri::Authority::try_from(host) else { return false };
        // Compared as `normalize` makes the allowed names, without making a
        // string of it on every request.
        let (host, port) = (unbracket(authority.host()), authority.port_u16());
        !self.0.is_empty()
            && self
                .0
                .iter()
                .any(|(name, only)| name.eq_ignore_ascii_case(host) && only.is_none_or(|only| port == Some(only)))
    }
}

/// A host as the allowed names are kept: without brackets, in lower case.
fn normalize(host: &str) -> String {
    unbracket(host).to_ascii_lowercase()
}

/// An IPv6 address without its brackets (any other host as it is).
fn unbracket(host: &str) -> &str {
    host.trim_matches('[').trim_matches(']')
}

/// The sole value of the header `name`, if it has exactly one and it is
/// text.
pub(crate) fn sole<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    values.next().is_none().then(|| value.to_str().ok()).flatten()
}

/// Whether the `Accept` headers name both JSON and event streams (a
/// weight of zero excludes a type), as rmcp requires. Quoted parameters
/// are left to rmcp.
pub(crate) fn accepts_both(headers: &HeaderMap) -> bool {
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else { continue };
        if value.contains('"') {
            return false;
        }
        for entry in value.split(',') {
            let mut parts = entry.split(';');
            let essence = parts.next().unwrap_or_default().trim();
            let weighted_out = parts.any(|parameter| {
                parameter.split_once('=').is_some_and(|(name, value)| {
                    name.trim().eq_ignore_ascii_case("q") && !acceptable_weight(value.trim())
                })
            });
            if !weighted_out {
                json |= essence.eq_ignore_ascii_case("application/json");
                sse |= essence.eq_ignore_ascii_case("text/event-stream");
            }
        }
    }
    json && sse
}

/// A weight other than an explicit zero (a malformed one counts, as in
/// rmcp).
fn acceptable_weight(weight: &str) -> bool {
    let (whole, fraction) = weight.split_once('.').unwrap_or((weight, ""));
    if fraction.len() > 3 || !fraction.bytes().all(|digit| digit.is_ascii_digit()) {
        return true;
    }
    whole != "0" || fraction.bytes().any(|digit| digit != b'0')
}

/// An admitted call: its id, params and `_meta` (which rmcp keeps apart
/// from the params, in the request's extensions).
pub(crate) type Admitted = (RequestId, CallToolRequestParams, rmcp::model::RequestMetaObject);

/// The request, if it is a 2026-07-28 `tools/call` that every check of
/// rmcp's passes, its headers looked at before its `body` is parsed.
/// `None`: rmcp answers it.
pub(crate) fn admit(hosts: &Hosts, parts: &Parts, body: &[u8]) -> Option<Admitted> {
    let headers = &parts.headers;
    if sole(headers, "mcp-method") != Some("tools/call")
        || sole(headers, "mcp-protocol-version") != Some(VERSION)
        || headers.contains_key("mcp-session-id")
        || !plain_json_post(hosts, headers)
        || headers.keys().any(|name| name.as_str().starts_with("mcp-param-"))
    {
        return None;
    }
    let name = sole(headers, "mcp-name")?;
    if name.starts_with("=?base64?") {
        return None;
    }
    let (id, call, meta) = parse(body)?;
    let version = ProtocolVersion::V_2026_07_28;
    if call.name != name
        || meta.protocol_version().as_ref() != Some(&version)
        || !meta.missing_required_keys(&version).is_empty()
    {
        return None;
    }
    Some((id, call, meta))
}

/// Whether a POST's headers pass the checks rmcp makes of every POST
/// before it reads the body: no `Origin` (rmcp checks one against its
/// allowed list; the front leaves that to it), an allowed `Host`, an
/// `Accept` naming JSON and event streams, and one `Content-Type` whose
/// essence is `application/json`.
pub(crate) fn plain_json_post(hosts: &Hosts, headers: &HeaderMap) -> bool {
    if headers.contains_key(header::ORIGIN) || !hosts.allow(headers) || !accepts_both(headers) {
        return false;
    }
    let Some(content_type) = sole(headers, header::CONTENT_TYPE.as_str()) else { return false };
    let essence = content_type.split_once(';').map_or(content_type, |(essence, _)| essence);
    essence.trim().eq_ignore_ascii_case("application/json")
}

/// A `tools/call` body as rmcp's types, as rmcp's parse would make them;
/// `None` if it is not one, or is not plainly one.
fn parse(body: &[u8]) -> Option<Admitted> {
    let (id, call, meta) = crate::jsonrpc::parse_tool_call(body)?;
    Some((id, call, rmcp::model::RequestMetaObject::from(meta.unwrap_or_default())))
}

/// Answer an admitted call: run it with a fresh session's state (as rmcp
/// makes one per stateless request), answer with JSON, or with an event
/// stream if the call tells the client something first. `stop` ends the
/// call when the server shuts down; a client that goes away drops it.
pub(crate) async fn answer(
    server: &McpServer,
    stop: &CancellationToken,
    parts: Parts,
    (id, params, meta): Admitted,
) -> Response<Body> {
    let (sender, events) = mpsc::unbounded_channel();
    let ct = stop.child_token();
    let mut extensions = Extensions::new();
    extensions.insert(parts);
    let caller = Caller {
        id,
        version: meta.protocol_version(),
        capabilities: meta.client_capabilities(),
        meta,
        extensions,
        ct,
        outlet: Outlet::Stream(sender.clone()),
    };
    // The server itself, not a session's copy of it: what a session holds
    // of its own (a log level, subscriptions) is set only by requests of a
    // session, never on this path, and stays as a fresh session's.
    let call = Call { server: server.clone(), params, caller, shape: Shape::Current, session: false, guard: () };
    respond(call, sender, events).await
}

/// A call to answer on the connection's task.
pub(crate) struct Call<G> {
    /// The server (or session's server) that answers it.
    pub(crate) server: McpServer,
    pub(crate) params: CallToolRequestParams,
    /// Its caller, whose outlet sends to the `sender` given with it.
    pub(crate) caller: Caller,
    pub(crate) shape: Shape,
    /// Whether it is a session's: its answer is `200` whatever it says, as
    /// rmcp streams a session's answers.
    pub(crate) session: bool,
    /// Held until the call has its answer (then dropped).
    pub(crate) guard: G,
}

/// Run `call` and answer it: with JSON, or with an event stream if the
/// call sends its `events` first (their `sender` is the caller's outlet's).
/// The caller's token ends the call; a client that goes away drops it.
pub(crate) async fn respond<G: Send + 'static>(
    call: Call<G>,
    sender: mpsc::UnboundedSender<ServerJsonRpcMessage>,
    mut events: mpsc::UnboundedReceiver<ServerJsonRpcMessage>,
) -> Response<Body> {
    let Call { server, params, caller, shape, session, guard } = call;
    let (id, ct) = (caller.id.clone(), caller.ct.clone());
    tracing::debug!(tool = %params.name, "tools/call answered on its connection's task");
    let mut gone = Gone(Some(params.name.to_string()));
    // Its type erased: the futures of the calls of both paths, nested
    // through the guest's, are too deep for the compiler to prove `Send`
    // again in every handler that awaits them.
    let mut call: Pin<Box<dyn Future<Output = Result<CallToolResponse, rmcp::ErrorData>> + Send>> =
        Box::pin(async move {
            let answer = server.serve_call(params, caller).await;
            drop(guard);
            answer
        });
    let mut pending = std::collections::VecDeque::new();
    tokio::select! {
        biased;
        Some(first) = events.recv() => pending.push_back(first),
        answer = &mut call => {
            gone.0 = None;
            let message = answer_message(answer, id, shape);
            while let Ok(event) = events.try_recv() {
                pending.push_back(event);
            }
            if pending.is_empty() {
                let status = if session { StatusCode::OK } else { status(&message) };
                // (Room for a small answer at once.)
                let mut body = Vec::with_capacity(256);
                return match serde_json::to_writer(&mut body, &message) {
                    Ok(()) => {
                        let mut response =
                            (status, [(header::CONTENT_TYPE, "application/json")], Bytes::from(body)).into_response();
                        if status == StatusCode::SERVICE_UNAVAILABLE {
                            let retry = header::HeaderValue::from(crate::jsonrpc::SHED_RETRY_SECONDS);
                            response.headers_mut().insert(header::RETRY_AFTER, retry);
                        }
                        response
                    }
                    Err(e) => {
                        (StatusCode::INTERNAL_SERVER_ERROR, format!("the answer cannot be encoded: {e}")).into_response()
                    }
                };
            }
            // Told something first: the events, then the answer.
            pending.push_back(message);
            return stream(Events { pending, events: None, _cancel: None });
        }
    }
    // The rest of the call runs beside the stream; the stream's end (the
    // client gone) cancels it.
    gone.0 = None;
    tokio::spawn(async move {
        let answer = call.await;
        let _ = sender.send(answer_message(answer, id, shape));
    });
    stream(Events { pending, events: Some(events), _cancel: Some(ct.drop_guard()) })
}

/// Says, when dropped while it holds a tool's name, that the client went
/// away before its call was answered (the call's future is dropped with
/// the connection's, which stops its guest).
struct Gone(Option<String>);

impl Drop for Gone {
    fn drop(&mut self) {
        if let Some(tool) = self.0.take() {
            tracing::info!(%tool, "call cancelled: the client went away");
        }
    }
}

/// An event stream's response, as rmcp's.
fn stream(events: Events) -> Response<Body> {
    let mut response = Sse::new(events).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)).into_response();
    response.headers_mut().insert("x-accel-buffering", axum::http::HeaderValue::from_static("no"));
    response
}

/// The HTTP status of an answer, as rmcp gives it for a 2026-07-28
/// request whose `_meta` was complete.
fn status(message: &ServerJsonRpcMessage) -> StatusCode {
    let ServerJsonRpcMessage::Error(error) = message else { return StatusCode::OK };
    match error.error.code {
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
        | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
        ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        // Refused because the server runs its most calls: shed, as the
        // front sheds a call it sees first.
        ErrorCode(crate::jsonrpc::LIMITED)
            if error.error.data.as_ref().and_then(|d| d.get("limit")).and_then(|l| l.as_str())
                == Some("calls_in_flight") =>
        {
            StatusCode::SERVICE_UNAVAILABLE
        }
        _ => StatusCode::OK,
    }
}

/// A call's messages as server-sent events, ending with its answer.
struct Events {
    /// Messages to send before any more are received.
    pending: std::collections::VecDeque<ServerJsonRpcMessage>,
    /// More, until the answer (none: the answer is pending already).
    events: Option<mpsc::UnboundedReceiver<ServerJsonRpcMessage>>,
    /// Cancels the call if the stream is dropped before its answer.
    _cancel: Option<DropGuard>,
}

impl futures_core::Stream for Events {
    type Item = Result<Event, std::convert::Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let message = match self.pending.pop_front() {
            Some(message) => message,
            None => match self.events.as_mut().map(|events| events.poll_recv(cx)) {
                None | Some(Poll::Ready(None)) => return Poll::Ready(None),
                Some(Poll::Ready(Some(message))) => message,
                Some(Poll::Pending) => return Poll::Pending,
            },
        };
        if matches!(message, ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_)) {
            // The answer is the last event.
            self.events = None;
            self.pending.clear();
            if let Some(cancel) = self._cancel.take() {
                cancel.disarm();
            }
        }
        let data = serde_json::to_string(&message).unwrap_or_else(|e| {
            tracing::error!("a message of an event stream could not be encoded: {e}");
            String::new()
        });
        Poll::Ready(Some(Ok(Event::default().data(data))))
    }
}

/// What the HTTP front keeps for answering here.
pub(crate) struct Direct {
    /// The server whose calls it answers (a fresh session's state each).
    pub(crate) server: McpServer,
    /// The `Host` values rmcp's service allows.
    pub(crate) hosts: Hosts,
    /// Cancelled when the server stops: calls running end.
    pub(crate) stop: CancellationToken,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_host(host: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, host.parse().expect("a header value"));
        headers
    }

    #[test]
    fn hosts_are_matched_as_rmcp_matches_them() {
        let hosts = Hosts::new(&["localhost".to_owned(), "[::1]".to_owned(), "Tools.Example:8443".to_owned()]);
        for allowed in ["localhost", "LOCALHOST:3000", "[::1]:3000", "tools.example:8443", "TOOLS.example:8443"] {
            assert!(hosts.allow(&with_host(allowed)), "{allowed} is refused");
        }
        for refused in ["evil.example", "localhost.evil.example", "tools.example", "tools.example:8444", "[::2]"] {
            assert!(!hosts.allow(&with_host(refused)), "{refused} is let in");
        }
        assert!(!hosts.allow(&HeaderMap::new()), "a request without Host is let in");
        assert!(!Hosts::new(&[]).allow(&with_host("localhost")), "no hosts allowed, yet one is let in");
    }
}
