//! What a caller tells one call: who it is for, when it must end, how to
//! cancel it, and where the plugin's log lines go.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use toolhost_protocol::JsonObject;

use crate::client::CallClient;

/// The key under which a tool that declares `requirements.user_id` finds
/// the caller's user id in the request's `params._meta`.
pub const USER_ID_META_KEY: &str = "toolhost/userId";

/// The context of one call ([`Plugin::call_tool_with`](crate::Plugin::call_tool_with),
/// [`Registry::call_with`](crate::Registry::call_with)).
///
/// Everything is optional; `CallContext::default()` is a plain call.
///
/// ```
/// use std::time::Duration;
/// let cancel = tokio_util::sync::CancellationToken::new();
/// let context = toolhost::CallContext::new()
///     .with_call_id("req-42")
///     .with_user_id("alice")
///     .with_timeout(Duration::from_secs(5))
///     .with_cancellation(cancel.clone());
/// assert_eq!(context.call_id(), Some("req-42"));
/// ```
#[derive(Clone, Default)]
pub struct CallContext {
    call_id: Option<String>,
    user_id: Option<String>,
    deadline: Option<Instant>,
    cancel: Option<CancellationToken>,
    meta: Option<JsonObject>,
    log: Option<LogSink>,
    client: Option<Arc<dyn CallClient>>,
    scopes: Option<Arc<Scopes>>,
}

/// The scopes a caller holds (an OAuth token's `scope`, an API key's).
pub type Scopes = std::collections::BTreeSet<String>;

/// Whether a caller holding `held` (`None`: not known) may use what
/// requires `required`.
pub(crate) fn permits(required: &[String], held: Option<&Scopes>) -> bool {
    match held {
        None => true,
        Some(held) => required.iter().all(|scope| held.contains(scope)),
    }
}

impl std::fmt::Debug for CallContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallContext")
            .field("call_id", &self.call_id)
            .field("user_id", &self.user_id)
            .field("deadline", &self.deadline)
            .field("cancellable", &self.cancel.is_some())
            .field("meta", &self.meta)
            .field("log_sink", &self.log.is_some())
            .field("client", &self.client.is_some())
            .field("scopes", &self.scopes)
            .finish()
    }
}

impl CallContext {
    /// A context with nothing set.
    pub fn new() -> Self {
        Self::default()
    }

    /// The caller's id for this call (a request id, an MCP request id): in
    /// the call's `tracing` span and its [`CallRecord`](crate::CallRecord).
    pub fn with_call_id(mut self, id: impl Into<String>) -> Self {
        self.call_id = Some(id.into());
        self
    }

    /// The user the call is made for. A tool that declares
    /// `requirements.user_id: true` gets it in the request's
    /// `params._meta` under [`USER_ID_META_KEY`], and cannot be called
    /// without one; other tools never see it.
    pub fn with_user_id(mut self, id: impl Into<String>) -> Self {
        self.user_id = Some(id.into());
        self
    }

    /// The call must have ended by then. The plugin's own timeout still
    /// applies: the earlier of the two stops the call.
    pub fn with_deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// [`with_deadline`](Self::with_deadline), `timeout` from now.
    pub fn with_timeout(self, timeout: Duration) -> Self {
        let deadline = Instant::now().checked_add(timeout);
        match deadline {
            Some(deadline) => self.with_deadline(deadline),
            None => self,
        }
    }

    /// Cancelling this token stops the call: the guest is stopped where it
    /// is, its instance discarded, and the call returns
    /// [`Error::Cancelled`](crate::Error::Cancelled).
    pub fn with_cancellation(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// Metadata passed to the plugin as the request's `params._meta` (an
    /// MCP client's `progressToken`, trace context...). toolhost's own keys
    /// (`toolhost/...`) are set by toolhost alone: the caller's are dropped.
    pub fn with_meta(mut self, meta: JsonObject) -> Self {
        self.meta = Some(meta);
        self
    }

    /// Where the plugin's log lines of this call go, besides `tracing`:
    /// redacted and within the call's log budget, as they are logged.
    pub fn with_log_sink(mut self, sink: impl Fn(GuestLog<'_>) + Send + Sync + 'static) -> Self {
        self.log = Some(Arc::new(sink));
        self
    }

    /// The client the call is made for, as the plugin may reach it:
    /// elicitation, sampling, roots, progress and list changes
    /// ([`CallClient`]). Without one, a plugin that asks gets a clear
    /// refusal and its notices are dropped.
    pub fn with_client(mut self, client: Arc<dyn CallClient>) -> Self {
        self.client = Some(client);
        self
    }

    /// The scopes the caller holds (checked by a server that authenticates
    /// its callers). A registry's tool whose toolset requires scopes
    /// (`extensions.requiredScopes`) the caller does not all hold does not
    /// exist for this call, nor do that toolset's prompts and resources.
    /// Without this, scopes are not checked: the caller is trusted.
    pub fn with_scopes(mut self, scopes: impl IntoIterator<Item = String>) -> Self {
        self.scopes = Some(Arc::new(scopes.into_iter().collect()));
        self
    }

    /// The scopes the caller holds, if the context says.
    pub fn scopes(&self) -> Option<&Scopes> {
        self.scopes.as_deref()
    }

    /// The client the call is made for.
    pub fn client(&self) -> Option<&Arc<dyn CallClient>> {
        self.client.as_ref()
    }

    /// The caller's id for the call.
    pub fn call_id(&self) -> Option<&str> {
        self.call_id.as_deref()
    }

    /// The user the call is made for.
    pub fn user_id(&self) -> Option<&str> {
        self.user_id.as_deref()
    }

    /// When the call must have ended.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The token that cancels the call.
    pub fn cancellation(&self) -> Option<&CancellationToken> {
        self.cancel.as_ref()
    }

    /// The metadata passed to the plugin.
    pub fn meta(&self) -> Option<&JsonObject> {
        self.meta.as_ref()
    }

    /// The `_meta` a plugin may see: the caller's, less toolhost's own keys
    /// (`toolhost/...`, which toolhost alone sets).
    /// Borrowed when the caller's has none of those keys (as on every call
    /// but a forged one), so that a call does not copy its `_meta`.
    pub(crate) fn plugin_meta(&self) -> Option<std::borrow::Cow<'_, JsonObject>> {
        let meta = self.meta.as_ref()?;
        let host_key = |key: &String| key.starts_with("toolhost/");
        if !meta.keys().any(host_key) {
            return Some(std::borrow::Cow::Borrowed(meta));
        }
        Some(std::borrow::Cow::Owned(
            meta.iter().filter(|(key, _)| !host_key(key)).map(|(k, v)| (k.clone(), v.clone())).collect(),
        ))
    }

    pub(crate) fn log_sink(&self) -> Option<&LogSink> {
        self.log.as_ref()
    }
}

/// Receives a call's log lines.
pub(crate) type LogSink = Arc<dyn Fn(GuestLog<'_>) + Send + Sync>;

/// One log line a plugin wrote during a call.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct GuestLog<'a> {
    /// The plugin's name.
    pub plugin: &'a str,
    /// Its level.
    pub level: LogLevel,
    /// The line, redacted.
    pub message: &'a str,
}

/// The level of a plugin's log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum LogLevel {
    /// `error`.
    Error,
    /// `warn`.
    Warn,
    /// `info`.
    Info,
    /// `debug`.
    Debug,
    /// `trace`.
    Trace,
}

impl std::fmt::Display for LogLevel {
    /// `error`, `warn`, `info`, `debug` or `trace`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
            LogLevel::Trace => "trace",
        })
    }
}
