//! A `tools/call` over stdio answered beside rmcp's serve loop.
//!
//! Through rmcp, the stdio front hands a call to the serve loop (the front
//! is its transport, so the loop reads it), which spawns the handler,
//! whose answer comes back to the loop through a channel, which spawns a
//! task to hand it to the front's writer. Each of those hand-offs may wake
//! another thread. A `tools/call` needs none of it: once the session is
//! initialized, the front spawns the call's task itself, which runs the
//! same [`McpServer::serve_call`] of the session's server (its log level,
//! its subscriptions) with the session's peer (what the call tells the
//! client, and asks it, goes through it as rmcp's handler's does), shapes
//! the answer as rmcp's handler shapes it, and gives it to the writer.
//!
//! On stdio there is one stream, so nothing a call does depends on which
//! request it came with: progress, log lines and requests to the client
//! (elicitation, sampling, roots) all go through the peer either way.
//! What stays with rmcp: anything but `tools/call`; a call before the
//! `initialize` handshake is over; a call naming `_meta.protocolVersion`
//! (rmcp checks it); every call of a session of 2026-07-28 or later.
//!
//! As rmcp does: a client's `notifications/cancelled` cancels the call,
//! whose answer is then not sent; when the input ends (or the server shuts
//! down), running calls are waited for (5 s; 2 s), their answers written,
//! and the rest cancelled.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rmcp::model::{Extensions, ProtocolVersion, RequestId, ServerJsonRpcMessage};
use rmcp::service::{Peer, RoleServer};
use tokio_util::sync::CancellationToken;

use crate::McpServer;
use crate::caller::{Caller, Outlet, Shape, answer_message};

/// The calls of a stdio session answered beside rmcp.
#[derive(Default)]
pub(crate) struct StdioCalls {
    /// The session's server and peer, once its handshake is over.
    session: OnceLock<(McpServer, Peer<RoleServer>)>,
    /// The running calls the client may still cancel, by request id (with
    /// the number of their start, which a client reusing an id does not
    /// share), and their tokens.
    running: Mutex<RunningCalls>,
    /// How many calls were started.
    started: AtomicUsize,
    /// How many calls run (cancelled or not).
    count: AtomicUsize,
    /// Told when the last running call ends.
    idle: tokio::sync::Notify,
    /// Cancelled when the session is over: every call stops.
    stop: CancellationToken,
    /// Set once the handshake is over and [`StdioCalls::open`] has said
    /// which path the session's calls take.
    decided: tokio::sync::watch::Sender<bool>,
}

/// The running calls by request id: the number of their start and their
/// token (ids hashed with a per-process seed: a client cannot choose
/// collisions).
type RunningCalls = HashMap<RequestId, (usize, CancellationToken), foldhash::fast::RandomState>;

/// A call admitted to the direct path: its id, params and `_meta`.
pub(crate) type Admitted = crate::jsonrpc::CallParts;

impl StdioCalls {
    /// Answer the session's calls here from now on, with its `server` (a
    /// [state copy](McpServer::state_copy)) and its `peer`. A session of
    /// 2026-07-28 or later, or one whose client is not known, stays with
    /// rmcp.
    pub(crate) fn open(&self, server: McpServer, peer: Peer<RoleServer>) {
        let legacy = peer.peer_info().is_some_and(|info| info.protocol_version < ProtocolVersion::V_2026_07_28);
        if legacy {
            let _ = self.session.set((server, peer));
        }
        self.decided.send_replace(true);
    }

    /// Wait until [`StdioCalls::open`] has run: the front reads no call
    /// after the handshake's answer before then, so that which path a
    /// call takes does not depend on which thread ran first.
    pub(crate) async fn until_open(&self) {
        let mut decided = self.decided.subscribe();
        let _ = decided.wait_for(|decided| *decided).await;
    }

    /// A line's call, if it is one answered here (`None`: it goes to rmcp).
    pub(crate) fn admit(&self, line: &str) -> Option<Admitted> {
        self.session.get()?;
        let (id, params, meta) = crate::jsonrpc::parse_tool_call_text(line)?;
        // rmcp checks a version a request names against those it serves.
        if meta.as_ref().is_some_and(|meta| meta.contains_key("protocolVersion")) {
            return None;
        }
        Some((id, params, meta))
    }

    /// Run an admitted call: its answer, shaped as rmcp shapes a session's,
    /// or `None` if the client cancelled it (rmcp then sends none).
    ///
    /// The future holds the call's parts and borrows the session's server
    /// from `self` as it runs: a call clones no server (a dozen shared
    /// handles), and its state is built once, where it runs.
    pub(crate) fn answer(
        self: &Arc<Self>,
        (id, params, meta): Admitted,
    ) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send + 'static {
        let ct = self.stop.child_token();
        let start = self.started.fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::SeqCst);
        self.lock().insert(id.clone(), (start, ct.clone()));
        let guard = Running { calls: Arc::clone(self), id, start };
        async move {
            let (server, peer) = guard.calls.session.get()?;
            let meta = rmcp::model::RequestMetaObject::from(meta.unwrap_or_default());
            let info = peer.peer_info();
            let caller = Caller {
                id: guard.id.clone(),
                version: info.as_ref().map(|i| i.protocol_version.clone()),
                capabilities: meta.client_capabilities().or_else(|| info.as_ref().map(|i| i.capabilities.clone())),
                meta,
                extensions: Extensions::new(),
                ct,
                outlet: Outlet::Peer(peer.clone()),
            };
            tracing::debug!(tool = %params.name, "tools/call answered beside rmcp's serve loop");
            // Boxed: the future that holds this one (and that tokio's task
            // is made of) then carries a pointer, not the call's state.
            let answer = Box::pin(server.serve_call(params, caller)).await;
            // Cancelled by the client: no answer, as rmcp sends none.
            let id = guard.id.clone();
            guard.finish().then(|| answer_message(answer, id, Shape::Legacy))
        }
    }

    /// Cancel the call `id`, if it runs here: its answer is not sent.
    pub(crate) fn cancel(&self, id: &RequestId) {
        if let Some((_, token)) = self.lock().remove(id) {
            tracing::info!(%id, "the client cancelled a call");
            token.cancel();
        }
    }

    /// The session is over: wait (at most `within`) for the running calls
    /// to end, then cancel the rest.
    pub(crate) async fn drain(&self, within: Duration) {
        let ended = tokio::time::timeout(within, async {
            loop {
                let idle = self.idle.notified();
                tokio::pin!(idle);
                idle.as_mut().enable();
                if self.count.load(Ordering::SeqCst) == 0 {
                    return;
                }
                idle.await;
            }
        })
        .await;
        if ended.is_err() {
            tracing::warn!("calls still running when the session ended were cancelled");
        }
        self.stop.cancel();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RunningCalls> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running call: counted until it ends (or is dropped).
struct Running {
    calls: Arc<StdioCalls>,
    id: RequestId,
    start: usize,
}

impl Running {
    /// The call has its answer: whether it is still to be sent (the client
    /// did not cancel it).
    fn finish(self) -> bool {
        self.forget()
    }

    /// Take the call off the running calls the client may cancel, if it is
    /// still there (not cancelled, nor its id taken by a later call):
    /// whether it was.
    fn forget(&self) -> bool {
        let mut running = self.calls.lock();
        let ours = running.get(&self.id).is_some_and(|(start, _)| *start == self.start);
        if ours {
            running.remove(&self.id);
        }
        ours
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.forget();
        if self.calls.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.calls.idle.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of what `call` returns, without calling it.
    fn returned<A, R>(_: impl FnOnce(A) -> R) -> usize {
        size_of::<R>()
    }

    /// A call's future is moved as its task is made, and each layer moves
    /// the next into place: the outer layers hold the call's parts and a
    /// pointer to the rest, not the rest (a span, a failure's notice).
    #[test]
    fn a_call_s_future_holds_its_parts_and_a_pointer() {
        let answer = returned(|(calls, call): (&'static Arc<StdioCalls>, Admitted)| calls.answer(call));
        assert!(answer <= 512, "the task's future is {answer} bytes");
        let serve =
            returned(|(server, params, caller): (&'static McpServer, rmcp::model::CallToolRequestParams, Caller)| {
                server.serve_call(params, caller)
            });
        assert!(serve <= 1280, "serve_call's future is {serve} bytes");
    }
}
