//! Idle sessions parked, and brought back by their next request.
//!
//! rmcp holds a live session in two tasks (its worker and its serve loop)
//! and seven channels, each of which allocates its first block of 32
//! messages as it is made: about 73 KiB a session, idle or not. A session
//! with no request in flight (a stream open counts as one) and none begun
//! for [`HttpLimits::session_park_after`] (30 s unless told) is parked:
//! rmcp's session ends, and what it takes to bring it back stays here, a
//! few hundred bytes: the client's `initialize` parameters (rmcp replays
//! them to restore the session, as this is its [`SessionStore`]) and what
//! the client set in it (its log level and subscriptions). The session's
//! next request finds it gone from rmcp, and rmcp restores it before
//! answering; the client sees the same session. A session ends for good 5
//! minutes after its last request, parked or not, as it did before.
//!
//! What a parked session does not keep: notifications the server sent
//! while no stream of its was open (rmcp buffers up to 16 for a later
//! `GET`), and the event caches of requests answered over 30 s before
//! (rmcp keeps them 60 s for a client resuming a stream); a call still
//! running for a client whose stream has gone is cancelled. A client that
//! wants notifications holds a `GET` stream, and such a session is never
//! parked.
//!
//! One sweep a few times a park period does the work, for every session:
//! no timer per session.
//!
//! [`HttpLimits::session_park_after`]: crate::HttpLimits::session_park_after

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_core::Stream;
use rmcp::model::{ClientJsonRpcMessage, InitializeRequestParams, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, LocalSessionManagerError};
use rmcp::transport::streamable_http_server::session::{
    RestoreOutcome, ServerSseMessage, SessionId, SessionManager, SessionState, SessionStore, SessionStoreError,
};
use tokio_util::sync::CancellationToken;

use crate::server::SessionSettings;

/// How long a session may go without a request before it ends.
pub(crate) const SESSION_END: Duration = Duration::from_secs(300);

/// How long a request waits for its session to finish parking before it
/// goes on (rmcp then restores the session, or answers `404`).
const PARKING_WAIT: Duration = Duration::from_secs(5);

/// rmcp's sessions, with the idle ones parked: the [`SessionManager`] the
/// HTTP front gives rmcp.
pub(crate) struct Sessions {
    /// rmcp's own, for live sessions.
    local: LocalSessionManager,
    table: Arc<Table>,
}

/// Every session initialized and not yet ended, live or parked.
pub(crate) struct Table {
    records: Mutex<HashMap<Arc<str>, Record>>,
    /// Woken whenever a session has finished parking.
    parked: tokio::sync::Notify,
    park_after: Duration,
    end_after: Duration,
}

/// What is kept of a session.
struct Record {
    /// The client's `initialize` parameters, as JSON (a parked session is
    /// restored with them).
    params: Box<str>,
    /// What the client set in the session, once it has parked.
    settings: Option<SessionSettings>,
    /// Requests of the session being answered (an open stream is one).
    in_flight: u32,
    /// When the last request began or ended.
    last: Instant,
    phase: Phase,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// rmcp has the session.
    Live,
    /// rmcp's session is ending, since this instant: requests wait.
    Parking(Instant),
    /// Only this record is left.
    Parked,
}

/// Whether a request of a session has begun.
enum Entered {
    /// It has (`None`: the session is not known).
    Now(Option<Busy>),
    /// The session is being parked: the request waits.
    Later,
}

/// A request of a session in flight: the session is not parked while it
/// lives.
pub(crate) struct Busy {
    table: Arc<Table>,
    id: Arc<str>,
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(record) = self.table.lock().get_mut(&*self.id) {
            record.in_flight = record.in_flight.saturating_sub(1);
            record.last = Instant::now();
        }
    }
}

impl Busy {
    /// `response`, holding this until its body has been sent (or dropped).
    pub(crate) fn hold(
        self,
        response: axum::http::Response<axum::body::Body>,
    ) -> axum::http::Response<axum::body::Body> {
        response.map(|body| axum::body::Body::new(HeldBody { body, _busy: self }))
    }
}

/// A response body, and the request it answers held in flight with it.
struct HeldBody {
    body: axum::body::Body,
    _busy: Busy,
}

impl http_body::Body for HeldBody {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

impl Table {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Record>> {
        self.records.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A request of session `id` begins: `None` if the session is not
    /// known (rmcp answers `404`). A session being parked is waited for.
    pub(crate) async fn enter(self: &Arc<Self>, id: &str) -> Option<Busy> {
        if let Entered::Now(busy) = self.try_enter(id, false) {
            return busy;
        }
        let deadline = tokio::time::Instant::now() + PARKING_WAIT;
        loop {
            // Listening before the record is read again: the end of the
            // parking cannot slip between the two.
            let parked = self.parked.notified();
            tokio::pin!(parked);
            parked.as_mut().enable();
            if let Entered::Now(busy) = self.try_enter(id, tokio::time::Instant::now() >= deadline) {
                return busy;
            }
            let _ = tokio::time::timeout_at(deadline, parked).await;
        }
    }

    /// A request of session `id` begins, unless the session is being
    /// parked and not `anyway`.
    fn try_enter(self: &Arc<Self>, id: &str, anyway: bool) -> Entered {
        let mut records = self.lock();
        let Some((key, _)) = records.get_key_value(id) else { return Entered::Now(None) };
        let key = Arc::clone(key);
        let Some(record) = records.get_mut(id) else { return Entered::Now(None) };
        if matches!(record.phase, Phase::Parking(_)) && !anyway {
            return Entered::Later;
        }
        record.in_flight += 1;
        record.last = Instant::now();
        Entered::Now(Some(Busy { table: Arc::clone(self), id: key }))
    }

    /// Whether session `id` is live or parked.
    pub(crate) fn holds(&self, id: &str) -> bool {
        self.lock().contains_key(id)
    }

    /// The sessions live or parked.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Keep what the client set in session `id`, as its rmcp session ends.
    pub(crate) fn keep(&self, id: &str, settings: SessionSettings) {
        if let Some(record) = self.lock().get_mut(id) {
            record.settings = Some(settings);
        }
    }

    /// What the client set in session `id` before it parked.
    pub(crate) fn settings(&self, id: &str) -> Option<SessionSettings> {
        self.lock().get(id).and_then(|record| record.settings.clone())
    }

    /// rmcp's session `id` has ended: the session is parked (until its
    /// client deletes it, or it ends).
    fn ended(&self, id: &str) {
        if let Some(record) = self.lock().get_mut(id) {
            record.phase = Phase::Parked;
        }
        self.parked.notify_waiters();
    }

    /// The sessions to park now, and those to end (removed here already;
    /// the live ones among them are returned).
    fn due(&self, now: Instant) -> (Vec<Arc<str>>, Vec<Arc<str>>) {
        let (mut park, mut end) = (Vec::new(), Vec::new());
        let mut woke = false;
        self.lock().retain(|id, record| {
            let idle = record.in_flight == 0;
            let quiet = now.saturating_duration_since(record.last);
            match record.phase {
                Phase::Live if idle && quiet >= self.end_after => {
                    end.push(Arc::clone(id));
                    return false;
                }
                Phase::Live if idle && quiet >= self.park_after => {
                    record.phase = Phase::Parking(now);
                    park.push(Arc::clone(id));
                }
                Phase::Parked if idle && quiet >= self.end_after => return false,
                // rmcp never said the session ended (it had already).
                Phase::Parking(since) if now.saturating_duration_since(since) >= PARKING_WAIT => {
                    record.phase = Phase::Parked;
                    woke = true;
                }
                _ => {}
            }
            true
        });
        if woke {
            self.parked.notify_waiters();
        }
        (park, end)
    }
}

impl Sessions {
    /// rmcp's sessions, parked after `park_after` without a request (at
    /// least a second, at most [`SESSION_END`]).
    pub(crate) fn new(park_after: Duration) -> Sessions {
        let mut local = LocalSessionManager::default();
        // Idle sessions are ended here (parked, then ended): rmcp's own
        // idle end counts neither a request in flight nor an open stream.
        local.session_config.keep_alive = None;
        let table = Table {
            records: Default::default(),
            parked: Default::default(),
            park_after: park_after.clamp(Duration::from_secs(1), SESSION_END),
            end_after: SESSION_END,
        };
        Sessions { local, table: Arc::new(table) }
    }

    /// The sessions, live and parked.
    pub(crate) fn table(&self) -> &Arc<Table> {
        &self.table
    }

    /// Whether session `id` is live or parked.
    pub(crate) async fn holds(&self, id: &str) -> bool {
        self.table.holds(id) || self.local.sessions.read().await.contains_key(id)
    }

    /// How many sessions are open, live or parked.
    pub(crate) async fn open(&self) -> usize {
        let live = self.local.sessions.read().await.len();
        live.max(self.table.len())
    }

    /// The ids of the sessions open, live or parked.
    #[cfg(feature = "production")]
    pub(crate) async fn ids(&self) -> std::collections::HashSet<Arc<str>> {
        let mut ids: std::collections::HashSet<Arc<str>> = self.local.sessions.read().await.keys().cloned().collect();
        ids.extend(self.table.lock().keys().cloned());
        ids
    }

    /// The store rmcp keeps the sessions' `initialize` parameters in.
    pub(crate) fn store(&self) -> Arc<dyn SessionStore> {
        Arc::new(Store(Arc::clone(&self.table)))
    }

    /// Park the idle sessions and end the quiet ones, a few times a park
    /// period, until `stop`.
    pub(crate) async fn sweep(self: Arc<Self>, stop: CancellationToken) {
        let every = (self.table.park_after / 3).clamp(Duration::from_millis(250), Duration::from_secs(10));
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                () = stop.cancelled() => return,
            }
            let (park, end) = self.table.due(Instant::now());
            for (id, parking) in park.iter().map(|id| (id, true)).chain(end.iter().map(|id| (id, false))) {
                let live = self.local.has_session(id).await.unwrap_or(false);
                if live {
                    if parking {
                        tracing::debug!(session = %id, "an idle session is parked");
                    } else {
                        tracing::debug!(session = %id, "a session ends, {SESSION_END:?} after its last request");
                    }
                    // rmcp's worker ends, then its serve loop, which then
                    // closes the session here (`close_session`): parked,
                    // or gone if it ended.
                    if let Err(error) = self.local.close_session(id).await {
                        tracing::debug!(session = %id, "the session's worker had already ended: {error}");
                    }
                } else {
                    self.table.ended(id);
                }
            }
        }
    }
}

impl SessionManager for Sessions {
    type Error = LocalSessionManagerError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        self.local.create_session().await
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.local.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.local.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let closed = self.local.close_session(id).await;
        self.table.ended(id);
        closed
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.local.create_stream(id, message).await
    }

    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), Self::Error> {
        self.local.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.local.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.local.resume(id, last_event_id).await
    }

    async fn restore_session(&self, id: SessionId) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        let restored = self.local.restore_session(Arc::clone(&id)).await?;
        if matches!(restored, RestoreOutcome::Restored(_)) {
            tracing::debug!(session = %id, "a parked session is restored");
            if let Some(record) = self.table.lock().get_mut(&*id) {
                record.phase = Phase::Live;
                record.last = Instant::now();
            }
        }
        Ok(restored)
    }
}

/// rmcp's [`SessionStore`]: the sessions' `initialize` parameters, here.
struct Store(Arc<Table>);

type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, SessionStoreError>> + Send + 'a>>;

impl SessionStore for Store {
    fn load<'a, 'b, 'f>(&'a self, id: &'b str) -> StoreFuture<'f, Option<SessionState>>
    where
        'a: 'f,
        'b: 'f,
    {
        let params = self.0.lock().get(id).map(|record| record.params.clone());
        Box::pin(async move {
            let Some(params) = params else { return Ok(None) };
            let params: InitializeRequestParams = serde_json::from_str(&params)?;
            Ok(Some(SessionState::new(params)))
        })
    }

    fn store<'a, 'b, 'c, 'f>(&'a self, id: &'b str, state: &'c SessionState) -> StoreFuture<'f, ()>
    where
        'a: 'f,
        'b: 'f,
        'c: 'f,
    {
        let stored = serde_json::to_string(&state.initialize_params).map(|params| {
            let record = Record {
                params: params.into_boxed_str(),
                settings: None,
                in_flight: 0,
                last: Instant::now(),
                phase: Phase::Live,
            };
            self.0.lock().insert(Arc::from(id), record);
        });
        Box::pin(async move { Ok(stored?) })
    }

    fn delete<'a, 'b, 'f>(&'a self, id: &'b str) -> StoreFuture<'f, ()>
    where
        'a: 'f,
        'b: 'f,
    {
        self.0.lock().remove(id);
        Box::pin(async { Ok(()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(park_after: Duration) -> Arc<Table> {
        let sessions = Sessions::new(park_after);
        let store = Store(Arc::clone(&sessions.table));
        let params: InitializeRequestParams = serde_json::from_value(serde_json::json!({
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}
        }))
        .expect("initialize parameters");
        run(store.store("s", &SessionState::new(params))).expect("stored");
        sessions.table
    }

    /// Runs a future that never waits.
    fn run<T>(future: impl Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread().build().expect("a runtime").block_on(future)
    }

    #[test]
    fn a_session_parks_only_once_idle_and_quiet_and_ends_after_five_minutes() {
        let table = table(Duration::from_secs(30));
        let start = table.lock()["s"].last;
        assert_eq!(table.due(start + Duration::from_secs(29)), (vec![], vec![]), "parked before its time");
        table.lock().get_mut("s").expect("the session").in_flight = 1;
        assert_eq!(table.due(start + Duration::from_secs(200)), (vec![], vec![]), "parked with a request in flight");
        table.lock().get_mut("s").expect("the session").in_flight = 0;
        let (park, end) = table.due(start + Duration::from_secs(31));
        assert_eq!((park.len(), end.len()), (1, 0));
        table.ended("s");
        assert!(table.holds("s"), "a parked session is forgotten");
        assert_eq!(table.due(start + Duration::from_secs(299)), (vec![], vec![]));
        assert!(table.holds("s"));
        table.due(start + SESSION_END);
        assert!(!table.holds("s"), "a session quiet for 5 minutes is kept");
    }

    #[test]
    fn the_store_gives_back_what_the_client_sent_and_forgets_a_deleted_session() {
        let table = table(Duration::from_secs(30));
        let store = Store(Arc::clone(&table));
        let state = run(store.load("s")).expect("loaded").expect("a session");
        assert_eq!(state.initialize_params.client_info.name, "c");
        assert!(run(store.load("other")).expect("loaded").is_none());
        run(store.delete("s")).expect("deleted");
        assert!(!table.holds("s"));
    }
}
