//! A `tools/call` in a session (MCP 2025-03-26 to 2025-11-25) answered on
//! the HTTP connection's own task.
//!
//! Through rmcp, a session's request goes from the connection's task to
//! the session's worker (a channel), which opens a stream for it (another
//! channel, and an answer back), hands it to the session's serve loop
//! (another), which spawns its handler, whose answer comes back through
//! the serve loop and the worker to the stream. Each hand-off may wake
//! another thread: at a few hundred calls a second they cost about twice
//! what the whole direct path does (DESIGN.md, `serve`, "What an HTTP
//! call costs"). A plain `tools/call` needs none of it, so one that every
//! check of rmcp's plainly passes is answered here, by the same
//! [`McpServer::serve_call`] of the session's own server (its log level,
//! its subscriptions), shaped as rmcp shapes a session's answer, as one
//! JSON object (which every revision lets a server answer a request with).
//!
//! What stays with rmcp: anything but `tools/call`; a session not yet
//! initialized, or ended; a call with a progress token (its progress would
//! ride the answer's event stream, which rmcp can resume); a client that
//! can be asked things during a call (elicitation, sampling, roots), whose
//! questions rmcp routes to the call's stream; a request with an `Origin`
//! header, `_meta.protocolVersion`, or a version header of 2026-07-28.
//!
//! A session's idle time is counted by the front, for calls answered here
//! as for any other request (see [`crate::http::parking`]). A client's
//! `notifications/cancelled` for a call answered here goes on to rmcp,
//! which knows no such request, and cancels the call once rmcp has
//! accepted it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{HeaderMap, Response, request::Parts};
use rmcp::model::{ClientCapabilities, Extensions};
use rmcp::model::{ProtocolVersion, RequestId};
use rmcp::service::{Peer, RoleServer};
use rmcp::transport::streamable_http_server::session::SessionManager as _;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::McpServer;
use crate::caller::{Caller, Outlet, Shape};
use crate::http::parking::{Sessions, Table};
use crate::server::{SessionHooks, SessionSettings};
use crate::stateless_call::{Admitted, Call, Hosts, plain_json_post, respond, sole};

/// The sessions whose calls may be answered here, by session id.
#[derive(Default)]
pub(crate) struct SessionCalls {
    sessions: Mutex<HashMap<Arc<str>, Arc<Entry>>>,
    /// Woken when a session is registered.
    registered: tokio::sync::Notify,
}

/// What the server tells the HTTP front of its sessions: each is
/// registered here once initialized, and what its client set is kept as
/// it parks and given back as it is restored.
pub(crate) struct Hooks {
    calls: Arc<SessionCalls>,
    table: Arc<Table>,
}

impl Hooks {
    /// Register sessions in `calls`, and keep their settings in `table`.
    pub(crate) fn new(calls: Arc<SessionCalls>, table: Arc<Table>) -> Hooks {
        Hooks { calls, table }
    }
}

impl SessionHooks for Hooks {
    fn register(&self, id: Arc<str>, server: McpServer, peer: Peer<RoleServer>) -> Box<dyn Send + Sync> {
        let entry = self.calls.register(Arc::clone(&id), server, peer);
        Box::new(Registered { calls: Arc::clone(&self.calls), table: Arc::clone(&self.table), entry })
    }

    fn restored(&self, id: &str) -> Option<SessionSettings> {
        self.table.settings(id)
    }
}

/// A session's registration: as the session ends, keeps what its client
/// set (for when it is restored) and forgets it here.
struct Registered {
    calls: Arc<SessionCalls>,
    table: Arc<Table>,
    entry: Arc<Entry>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.table.keep(&self.entry.id, self.entry.server.settings());
        self.calls.forget_entry(&self.entry);
    }
}

/// A session whose calls may be answered here.
pub(crate) struct Entry {
    id: Arc<str>,
    /// The session's server: its log level and subscriptions (not its
    /// lifetime: holding this does not keep the session going).
    server: McpServer,
    /// The session's peer: what a call tells the client goes through it.
    peer: Peer<RoleServer>,
    /// The calls answered here and running, so that a client's
    /// `notifications/cancelled` reaches them.
    running: Mutex<HashMap<RequestId, CancellationToken>>,
}

impl SessionCalls {
    /// Answer the calls of session `id` here, with the session's `server`
    /// and `peer`, until [`SessionCalls::forget`].
    fn register(&self, id: Arc<str>, server: McpServer, peer: Peer<RoleServer>) -> Arc<Entry> {
        let entry = Arc::new(Entry { id: Arc::clone(&id), server, peer, running: Default::default() });
        self.lock().insert(id, Arc::clone(&entry));
        self.registered.notify_waiters();
        entry
    }

    /// Wait (at most `within`) for session `id` to be registered: its
    /// `notifications/initialized` has reached rmcp, whose handler
    /// registers it, and its next call should find it.
    pub(crate) async fn until_registered(&self, id: &str, within: std::time::Duration) {
        let _ = tokio::time::timeout(within, async {
            loop {
                let registered = self.registered.notified();
                tokio::pin!(registered);
                registered.as_mut().enable();
                if self.lock().contains_key(id) {
                    return;
                }
                registered.await;
            }
        })
        .await;
    }

    /// The session `id` has ended.
    pub(crate) fn forget(&self, id: &str) {
        self.lock().remove(id);
    }

    /// The session of `entry` has ended (and not one registered since
    /// under its id).
    fn forget_entry(&self, entry: &Arc<Entry>) {
        let mut sessions = self.lock();
        if sessions.get(&entry.id).is_some_and(|held| Arc::ptr_eq(held, entry)) {
            sessions.remove(&entry.id);
        }
    }

    /// Cancel the call `request` of session `id`, if it is answered here.
    pub(crate) fn cancel(&self, id: &str, request: &RequestId) {
        let Some(entry) = self.lock().get(id).cloned() else { return };
        let token = entry.running.lock().unwrap_or_else(|e| e.into_inner()).get(request).cloned();
        if let Some(token) = token {
            tracing::info!(session = %id, %request, "the client cancelled a call");
            token.cancel();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Arc<Entry>>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The request, if it is a `tools/call` of a registered session that every
/// check of rmcp's plainly passes, with the session's entry; `None`: rmcp
/// answers it. Whether the session is still open is [`Entry::open`]'s.
pub(crate) fn admit(calls: &SessionCalls, hosts: &Hosts, parts: &Parts, body: &[u8]) -> Option<(Arc<Entry>, Admitted)> {
    let headers = &parts.headers;
    let session = sole(headers, "mcp-session-id")?;
    if !legacy_version(headers) || !plain_json_post(hosts, headers) {
        return None;
    }
    let entry = calls.lock().get(session).cloned()?;
    let (id, call, meta) = crate::jsonrpc::parse_tool_call(body)?;
    let meta = rmcp::model::RequestMetaObject::from(meta.unwrap_or_default());
    if meta.protocol_version().is_some() || meta.get_progress_token().is_some() {
        return None;
    }
    let capabilities = meta.client_capabilities().or_else(|| entry.peer.peer_info().map(|i| i.capabilities.clone()));
    if !asks_nothing(capabilities.as_ref()) {
        return None;
    }
    Some((entry, (id, call, meta)))
}

/// Whether the request's `MCP-Protocol-Version` (if any) is one of a
/// session's revisions, which rmcp checks no more of a session's request
/// than that it knows it (2026-07-28's headers it checks further).
fn legacy_version(headers: &HeaderMap) -> bool {
    let mut values = headers.get_all("mcp-protocol-version").iter();
    let Some(value) = values.next() else { return true };
    let Ok(version) = value.to_str() else { return false };
    values.next().is_none()
        && version < ProtocolVersion::V_2026_07_28.as_str()
        && ProtocolVersion::KNOWN_VERSIONS.iter().any(|known| known.as_str() == version)
}

/// Whether a client with these capabilities can be asked nothing during a
/// call (no elicitation, sampling or roots).
#[allow(deprecated)] // Sampling and roots are deprecated after 2025-11-25, which sessions still speak.
fn asks_nothing(capabilities: Option<&ClientCapabilities>) -> bool {
    capabilities.is_none_or(|c| c.elicitation.is_none() && c.sampling.is_none() && c.roots.is_none())
}

impl Entry {
    /// Whether the session is still open: rmcp has it, and its serve loop
    /// still runs. A session found ended is forgotten.
    pub(crate) async fn open(&self, sessions: &Sessions, calls: &SessionCalls) -> bool {
        let open = !self.peer.is_transport_closed() && sessions.has_session(&self.id).await.unwrap_or(false);
        if !open {
            calls.forget(&self.id);
        }
        open
    }
}

/// Removes a call from its session's running calls once it has its answer.
struct Running {
    entry: Arc<Entry>,
    id: RequestId,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.entry.running.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.id);
    }
}

/// Answer an admitted call of an open session, with the session's server.
/// `stop` ends the call when the server shuts down, as does the client's
/// `notifications/cancelled`; a client that goes away drops it.
pub(crate) async fn answer(
    entry: Arc<Entry>,
    stop: &CancellationToken,
    parts: Parts,
    (id, params, meta): Admitted,
) -> Response<Body> {
    let (sender, events) = mpsc::unbounded_channel();
    let ct = stop.child_token();
    entry.running.lock().unwrap_or_else(|e| e.into_inner()).insert(id.clone(), ct.clone());
    let info = entry.peer.peer_info();
    let mut extensions = Extensions::new();
    extensions.insert(parts);
    let caller = Caller {
        id: id.clone(),
        version: meta.protocol_version().or_else(|| info.as_ref().map(|i| i.protocol_version.clone())),
        capabilities: meta.client_capabilities().or_else(|| info.as_ref().map(|i| i.capabilities.clone())),
        meta,
        extensions,
        ct,
        outlet: Outlet::Session { stream: sender.clone(), peer: entry.peer.clone() },
    };
    // Shaped as rmcp's handler shapes it: by the version the client asked
    // for (a session's, but for one that asked `initialize` for 2026-07-28).
    let shape = match &caller.version {
        Some(version) if *version >= ProtocolVersion::V_2026_07_28 => Shape::Current,
        _ => Shape::Legacy,
    };
    let server = entry.server.clone();
    let guard = Running { entry, id };
    respond(Call { server, params, caller, shape, session: true, guard }, sender, events).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_version(version: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(version) = version {
            headers.insert("mcp-protocol-version", version.parse().expect("a header value"));
        }
        headers
    }

    #[test]
    fn only_a_sessions_revisions_are_answered_here() {
        for version in [None, Some("2025-03-26"), Some("2025-06-18"), Some("2025-11-25")] {
            assert!(legacy_version(&with_version(version)), "{version:?} is refused");
        }
        for version in ["2026-07-28", "2099-01-01", "2025-06-19", "latest", ""] {
            assert!(!legacy_version(&with_version(Some(version))), "{version} is let in");
        }
        let mut twice = with_version(Some("2025-06-18"));
        twice.append("mcp-protocol-version", "2025-06-18".parse().expect("a header value"));
        assert!(!legacy_version(&twice), "two version headers are let in");
    }

    #[test]
    #[allow(deprecated)]
    fn a_client_that_can_be_asked_things_stays_with_rmcp() {
        assert!(asks_nothing(None));
        assert!(asks_nothing(Some(&ClientCapabilities::default())));
        let elicits = ClientCapabilities::builder().enable_elicitation().build();
        let samples = ClientCapabilities::builder().enable_sampling().build();
        let roots = ClientCapabilities::builder().enable_roots().build();
        for capabilities in [elicits, samples, roots] {
            assert!(!asks_nothing(Some(&capabilities)), "{capabilities:?}");
        }
    }
}
