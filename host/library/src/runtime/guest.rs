//! What both kinds of plugin instance share: the part of a store's data
//! that holds the plugin's grants and limits, the memory budget, the
//! running call's deadline and the guest's captured output; the store
//! built around it; and how a failed run is told apart.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::{Engine, ResourceLimiter, Store, StoreContextMut, UpdateDeadline};
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};

use super::kernel::{Budget, OutOfBudget};
use super::outcome::Stop;
use super::output::{LogBudget, LogLine};
use super::stdio::Tail;
use super::ticker::Ticker;
use crate::client::CallClient;
use crate::context::{LogLevel, LogSink};
use crate::error::{Fault, FaultKind};
use crate::sandbox::{Access, Limits, PathGrant, format_size};
use std::collections::{BTreeMap, BTreeSet};

/// What every store's data holds, whatever the kind of plugin.
pub(crate) struct GuestCore {
    /// The plugin's name, config, grants and limits.
    pub(crate) env: Arc<HostEnv>,
    /// Linear memories (and Extism kernel memory) against the limit.
    pub(crate) memory: MemoryBudget,
    /// When the running call must stop.
    pub(crate) deadline: Option<Instant>,
    /// Whether that is the caller's deadline (earlier than the plugin's
    /// timeout), which a timeout's message then names.
    callers_deadline: bool,
    /// The ids of the secrets the running call may read: those its tool
    /// declares and was handed. None during `describe`.
    in_reach: ToolSecrets,
    /// What the running call may still log.
    pub(crate) logs: LogBudget,
    /// Where the running call's log lines go besides `tracing`.
    log_sink: Option<LogSink>,
    /// The client of the running call, as the plugin may reach it.
    pub(crate) client: Option<Arc<dyn CallClient>>,
    /// The running call's progress token.
    pub(crate) progress_token: Option<serde_json::Value>,
    /// Whether a tool call is running (not `describe`).
    pub(crate) is_call: bool,
    /// Notices the running call has sent its client.
    pub(crate) notices: u32,
    /// Their bytes (their parameters as JSON).
    pub(crate) notice_bytes: usize,
    /// Requests (sampling, elicitation, roots) the running call has made
    /// of its client.
    pub(crate) requests: u32,
    /// Bytes of output the last run returned.
    output_bytes: u64,
    /// Files the instance holds open (at most [`MAX_OPEN_FILES`]).
    pub(crate) files: OpenFiles,
    stdout: Tail,
    stderr: Tail,
}

impl GuestCore {
    /// The core of a new instance, and a WASI context builder that grants
    /// the policy's directories and nothing else, with stdout and stderr
    /// kept in the core.
    pub(crate) fn new(env: &Arc<HostEnv>) -> Result<(GuestCore, WasiCtxBuilder), Fault> {
        let core = GuestCore {
            env: Arc::clone(env),
            memory: MemoryBudget::new(env.limits.memory_max_bytes),
            deadline: None,
            callers_deadline: false,
            in_reach: ToolSecrets::default(),
            logs: LogBudget::default(),
            log_sink: None,
            client: None,
            progress_token: None,
            is_call: false,
            notices: 0,
            notice_bytes: 0,
            requests: 0,
            output_bytes: 0,
            files: OpenFiles::default(),
            stdout: Tail::default(),
            stderr: Tail::default(),
        };
        let mut wasi = WasiCtxBuilder::new();
        wasi.stdout(core.stdout.clone())
            .stderr(core.stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            // File operations on the calling thread, not a blocking-pool hop
            // each; what could block forever is refused or made a timer in
            // `files`.
            .allow_blocking_current_thread(true);
        for grant in &env.allowed_paths {
            let perms = match grant.access {
                Access::ReadOnly => FsPerms::ReadOnly,
                Access::ReadWrite => FsPerms::ReadWrite,
            };
            let guest = grant.guest_path().to_string_lossy();
            wasi.preopened_dir(&grant.host, guest.as_ref(), perms).map_err(|e| {
                Fault::new(
                    FaultKind::Runtime,
                    format!("cannot open the granted directory {}: {e}", grant.host.display()),
                )
            })?;
        }
        Ok((core, wasi))
    }

    /// A config value as the running call sees it: a secret only when the
    /// call's tool declares it and was handed it, else the plugin's config.
    pub(crate) fn config_value(&self, key: &str) -> Option<&str> {
        if self.in_reach.iter().any(|id| id == key)
            && let Some(value) = self.env.secrets.get(key)
        {
            return Some(value);
        }
        self.env.config.get(key).map(String::as_str)
    }

    /// A log line of the guest's, with every sensitive value redacted.
    fn log_line(&self, message: &str) -> String {
        let mut line = message.to_owned();
        self.env.redactor.redact_text(&mut line, &mut Vec::new());
        line
    }

    /// Whether a log line at `level` goes anywhere.
    pub(crate) fn wants_log(&self, level: LogLevel) -> bool {
        self.log_sink.is_some() || tracing_takes(level)
    }

    /// The most detailed level that goes anywhere (`None`: logging is off):
    /// everything when the call has a log sink, else what `tracing` takes.
    pub(crate) fn log_level(&self) -> Option<LogLevel> {
        if self.log_sink.is_some() {
            return Some(LogLevel::Trace);
        }
        [LogLevel::Trace, LogLevel::Debug, LogLevel::Info, LogLevel::Warn, LogLevel::Error]
            .into_iter()
            .find(|&level| tracing_takes(level))
    }

    /// A log line of the guest's, at `level`: redacted, cut to a line's
    /// worth, within the call's log budget; to `tracing` (target
    /// `toolhost::guest`, field `plugin`) and to the call's log sink.
    pub(crate) fn log(&mut self, level: LogLevel, bytes: &[u8]) {
        // Redacted before it is cut, so no secret is cut in two.
        let head = self.env.redactor.redact_head(bytes, super::output::MAX_LOG_LINE_BYTES);
        let Some(message) = self.admit_log(&head, bytes.len()) else { return };
        let message = self.log_line(&message);
        let plugin = self.env.name.as_str();
        if tracing_takes(level) {
            let line = one_line(&message);
            match level {
                LogLevel::Error => tracing::error!(target: LOG_TARGET, plugin, "{line}"),
                LogLevel::Warn => tracing::warn!(target: LOG_TARGET, plugin, "{line}"),
                LogLevel::Info => tracing::info!(target: LOG_TARGET, plugin, "{line}"),
                LogLevel::Debug => tracing::debug!(target: LOG_TARGET, plugin, "{line}"),
                LogLevel::Trace => tracing::trace!(target: LOG_TARGET, plugin, "{line}"),
            }
        }
        if let Some(sink) = &self.log_sink {
            sink(crate::context::GuestLog { plugin, level, message: &message });
        }
    }

    /// Whether (and what of) a log line of `len` bytes may be written under
    /// the call's log budget; `head` holds at least its first
    /// [`super::output::MAX_LOG_LINE_BYTES`]. Once the budget is spent, the
    /// note saying so is returned once, then `None`.
    fn admit_log(&mut self, head: &[u8], len: usize) -> Option<String> {
        match self.logs.admit(head, len) {
            LogLine::Write(line) => Some(line),
            LogLine::Note => Some(LogBudget::note()),
            LogLine::Drop => None,
        }
    }

    /// The last lines the guest wrote to stderr, if any, redacted (their
    /// start may cut a secret in two: its end is redacted too).
    pub(crate) fn stderr_words(&self) -> Option<String> {
        let mut words = self.stderr.last_words()?;
        self.env.redactor.redact_tail(&mut words);
        Some(words)
    }

    /// Refuse output of `size` bytes over the limit.
    pub(crate) fn check_output_size(&mut self, size: u64) -> Result<(), Fault> {
        self.output_bytes = size;
        let limit = self.env.limits.max_output_bytes as u64;
        if size > limit {
            return Err(Fault::new(
                FaultKind::OutputTooLarge,
                format!("{size} bytes of output, over the limit of {}", format_size(limit)),
            ));
        }
        Ok(())
    }

    /// The fault of an instance that hit its memory limit.
    pub(crate) fn memory_fault(&self) -> Fault {
        memory_fault(&self.env.limits)
    }

    /// Turn a failed run into a [`Fault`]; a trap's or the host's fault
    /// keeps wasmtime's error (the Wasm backtrace, the chain of causes) as
    /// its source.
    pub(crate) fn fault(&self, error: wasmtime::Error) -> Fault {
        let fault = classify(&error, &self.env.limits, self.callers_deadline, || self.stderr_words());
        match fault.kind {
            FaultKind::Trap | FaultKind::Runtime => fault.with_source(error),
            _ => fault,
        }
    }
}

/// A guest's log line as `tracing` gets it: line breaks and every other
/// control character escaped (`\n`, `\u{1b}`), so that a plugin cannot
/// start a line of the host's log that looks like the host's own. (The
/// call's log sink gets the line as the plugin wrote it.)
fn one_line(message: &str) -> std::borrow::Cow<'_, str> {
    if !message.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(message);
    }
    let mut line = String::with_capacity(message.len() + 8);
    for c in message.chars() {
        if c.is_control() {
            line.extend(c.escape_default());
        } else {
            line.push(c);
        }
    }
    std::borrow::Cow::Owned(line)
}

/// The target of the plugins' own log events (`TOOLHOST_LOG=toolhost::guest=info`).
const LOG_TARGET: &str = "toolhost::guest";

/// Whether `tracing` takes a guest's log line at `level`.
fn tracing_takes(level: LogLevel) -> bool {
    match level {
        LogLevel::Error => tracing::enabled!(target: LOG_TARGET, tracing::Level::ERROR),
        LogLevel::Warn => tracing::enabled!(target: LOG_TARGET, tracing::Level::WARN),
        LogLevel::Info => tracing::enabled!(target: LOG_TARGET, tracing::Level::INFO),
        LogLevel::Debug => tracing::enabled!(target: LOG_TARGET, tracing::Level::DEBUG),
        LogLevel::Trace => tracing::enabled!(target: LOG_TARGET, tracing::Level::TRACE),
    }
}

/// The data of a store, as the shared machinery needs it.
pub(crate) trait Guest: Send + 'static {
    /// The shared part.
    fn core(&self) -> &GuestCore;
    /// The shared part, to change.
    fn core_mut(&mut self) -> &mut GuestCore;
}

/// A store for `state` on `engine`: limited, with the epoch callback,
/// armed for its first run (instantiation and start-up code).
pub(crate) fn new_store<T: Guest>(engine: &Engine, state: T) -> Store<T> {
    let mut store = Store::new(engine, state);
    store.limiter(|state| &mut state.core_mut().memory);
    store.epoch_deadline_callback(on_tick::<T>);
    arm(&mut store, None);
    store
}

/// What one run is given besides its input: the secrets in reach (none for
/// `describe`), a deadline of the caller's, where its log lines go.
#[derive(Clone, Default)]
pub(crate) struct RunOptions<'a> {
    /// The ids of the secrets the run may read (`None`: none). Borrowed from
    /// the plugin: a clone per call would write the list's reference count,
    /// which every core calling the tool shares.
    pub(crate) secrets: Option<&'a ToolSecrets>,
    /// The caller's deadline, when it is earlier than the plugin's timeout.
    pub(crate) deadline: Option<Instant>,
    /// Where its log lines go besides `tracing`.
    pub(crate) log: Option<LogSink>,
    /// The client the call is made for, as the plugin may reach it.
    pub(crate) client: Option<Arc<dyn CallClient>>,
    /// The call's progress token (from its `_meta`): the only one the
    /// plugin's progress notices may carry.
    pub(crate) progress_token: Option<serde_json::Value>,
    /// Whether the run is a tool call (keyring secrets are handed to calls
    /// only, never to `describe`).
    pub(crate) is_call: bool,
}

impl<'a> RunOptions<'a> {
    /// The options of a tool call (or a request for what a plugin offers)
    /// made in `context`: the caller's deadline, log sink, client and
    /// progress token; `secrets`, the ids it may read.
    pub(crate) fn for_call(context: &crate::context::CallContext, secrets: Option<&'a ToolSecrets>) -> RunOptions<'a> {
        RunOptions {
            secrets,
            deadline: context.deadline(),
            log: context.log_sink().cloned(),
            client: context.client().cloned(),
            progress_token: context.meta().and_then(|meta| meta.get("progressToken")).cloned(),
            is_call: true,
        }
    }
}

/// Before a run: forget what the guest printed last time, renew its log
/// budget, put the run's secrets in reach, and arm.
pub(crate) fn prepare<T: Guest>(store: &mut Store<T>, run: &RunOptions<'_>) {
    let core = store.data_mut().core_mut();
    core.stdout.clear();
    core.stderr.clear();
    core.logs.reset();
    // The same tool called again on this instance: its secrets are in reach
    // already (cloning them anew would write their reference count, which
    // every core calling the tool shares).
    match run.secrets {
        Some(secrets) if !Arc::ptr_eq(&core.in_reach, secrets) => core.in_reach = ToolSecrets::clone(secrets),
        Some(_) => {}
        None if core.in_reach.is_empty() => {}
        None => core.in_reach = ToolSecrets::default(),
    }
    core.log_sink = run.log.clone();
    core.client = run.client.clone();
    core.progress_token = run.progress_token.clone();
    core.is_call = run.is_call;
    core.notices = 0;
    core.notice_bytes = 0;
    core.requests = 0;
    core.output_bytes = 0;
    core.memory.peak = core.memory.used;
    arm(store, run.deadline);
}

/// After a run: let go of what belongs to its caller (the client, the log
/// sink, the progress token), so that an idle instance holds nothing of
/// its last call: not a session's channel to its client, nor the task that
/// forwards the call's log lines, which ends when its sink is dropped.
pub(crate) fn release<T: Guest>(store: &mut Store<T>) {
    let core = store.data_mut().core_mut();
    core.log_sink = None;
    core.client = None;
    core.progress_token = None;
}

/// What the last run in `store` used.
pub(crate) fn usage<T: Guest>(store: &Store<T>) -> super::outcome::Usage {
    let core = store.data().core();
    super::outcome::Usage {
        fuel_consumed: core.env.limits.fuel.map(|budget| budget.saturating_sub(store.get_fuel().unwrap_or(0))),
        peak_memory_bytes: core.memory.peak(),
        output_bytes: core.output_bytes,
    }
}

/// The ids of the secrets one tool's calls may read.
pub(crate) type ToolSecrets = Arc<[String]>;

/// Set the deadline of whatever runs next in this store (the plugin's
/// timeout, or the caller's deadline if that is earlier), and its fuel.
fn arm<T: Guest>(store: &mut Store<T>, caller_deadline: Option<Instant>) {
    let limits = &store.data().core().env.limits;
    let (deadline, callers) = match (limits.timeout.map(|t| Instant::now() + t), caller_deadline) {
        (Some(own), Some(callers)) => (Some(own.min(callers)), callers < own),
        (None, Some(callers)) => (Some(callers), true),
        (own, None) => (own, false),
    };
    let fuel = limits.fuel;
    let core = store.data_mut().core_mut();
    core.deadline = deadline;
    core.callers_deadline = callers;
    if let Some(fuel) = fuel {
        // Only fails on an engine without fuel, which a fuel limit never gets.
        let _ = store.set_fuel(fuel);
    }
    store.set_epoch_deadline(1);
}

/// Run a guest's future (a call, an instantiation) under `deadline`,
/// wherever the guest is: the epoch callback stops Wasm code that runs past
/// it, but a guest waiting in a host call (a WASI sleep or `poll_oneoff`, a
/// slow file read, an HTTP request) runs no Wasm code, so the wait itself is
/// bounded here. Past the deadline the future is dropped (its fiber with
/// it) and the run fails with [`Stop::Timeout`]: the instance must then be
/// discarded, as after any fault.
///
/// The deadline is kept by toolhost's epoch ticker thread
/// ([`super::ticker::Alarm`]), not by tokio's timer, so this works on any
/// tokio runtime, with or without its time driver.
pub(crate) async fn bounded<R>(
    ticker: &Ticker,
    deadline: Option<Instant>,
    run: impl std::future::Future<Output = wasmtime::Result<R>>,
) -> wasmtime::Result<R> {
    use std::task::Poll;
    let Some(deadline) = deadline else { return run.await };
    let mut run = std::pin::pin!(run);
    let mut alarm = ticker.alarm(deadline);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(ran) = run.as_mut().poll(cx) {
            return Poll::Ready(ran);
        }
        // Checked only once the run is pending: a call that finishes in
        // one poll never touches the alarm.
        if alarm.poll_alarm(cx).is_ready() {
            return Poll::Ready(Err(wasmtime::Error::new(Stop::Timeout)));
        }
        Poll::Pending
    })
    .await
}

/// At every epoch tick: stop the call if its deadline passed, else yield to
/// the executor and run on.
fn on_tick<T: Guest>(store: StoreContextMut<'_, T>) -> wasmtime::Result<UpdateDeadline> {
    if store.data().core().deadline.is_some_and(|deadline| Instant::now() >= deadline) {
        return Err(wasmtime::Error::new(Stop::Timeout));
    }
    Ok(UpdateDeadline::Yield(1))
}

fn memory_fault(limits: &Limits) -> Fault {
    let limit = limits.memory_max_bytes.map_or_else(|| "4GiB".to_owned(), format_size);
    Fault::new(FaultKind::MemoryLimit, format!("the instance tried to grow its memory past {limit}"))
}

fn timeout_fault(limits: &Limits, callers_deadline: bool) -> Fault {
    if callers_deadline {
        return Fault::new(FaultKind::Timeout, "it ran past its caller's deadline");
    }
    let limit = limits.timeout.map_or_else(|| "its limit".to_owned(), |t| format!("{t:?}"));
    Fault::new(FaultKind::Timeout, format!("it ran longer than {limit}"))
}

/// Turn a failed run into a [`Fault`], given the limits it ran under and
/// what the guest wrote to stderr.
fn classify(
    error: &wasmtime::Error,
    limits: &Limits,
    callers_deadline: bool,
    stderr: impl Fn() -> Option<String>,
) -> Fault {
    let with_stderr = |message: String| match stderr() {
        Some(words) => format!("{message}; its stderr ends with: {words}"),
        None => message,
    };
    if let Some(stop) = error.chain().find_map(|e| e.downcast_ref::<Stop>()) {
        return match stop {
            Stop::Timeout => timeout_fault(limits, callers_deadline),
            Stop::MemoryLimit => memory_fault(limits),
            Stop::Denied(message) => Fault::new(FaultKind::Denied, message.clone()),
            Stop::Host(message) => Fault::new(FaultKind::Error, message.clone()),
        };
    }
    if let Some(trap) = error.downcast_ref::<wasmtime::Trap>() {
        return match trap {
            wasmtime::Trap::Interrupt => timeout_fault(limits, callers_deadline),
            wasmtime::Trap::OutOfFuel => {
                let budget = limits.fuel.map_or_else(|| "its".to_owned(), |f| format!("the {f}-unit"));
                Fault::new(FaultKind::FuelExhausted, format!("the call used up {budget} instruction budget"))
            }
            wasmtime::Trap::UnreachableCodeReached => Fault::new(
                FaultKind::Trap,
                with_stderr("`unreachable` executed: the plugin panicked or aborted".to_owned()),
            ),
            other => Fault::new(FaultKind::Trap, with_stderr(other.to_string())),
        };
    }
    if let Some(exit) = error.downcast_ref::<I32Exit>() {
        return Fault::new(FaultKind::Exit, with_stderr(format!("WASI exit code {}", exit.0)));
    }
    // wasmtime's own error type for it is private: its message is matched.
    if error.chain().any(|e| e.to_string().contains(HOSTCALL_FUEL_EXHAUSTED)) {
        return Fault::new(
            FaultKind::OutputTooLarge,
            format!(
                "it handed the host more than {} at once (a component's bound on what crosses: its output limit \
                 and 1 MiB)",
                format_size(crossing_bytes(limits) as u64)
            ),
        );
    }
    // Anything else failed on the host's side (a WASI host error, an
    // instantiation failure): not a trap of the guest's. The root cause is
    // the sentence that says what happened.
    Fault::new(FaultKind::Runtime, with_stderr(error.root_cause().to_string()))
}

/// What wasmtime says when a component hands the host more data in one
/// crossing than its hostcall fuel allows.
const HOSTCALL_FUEL_EXHAUSTED: &str = "fuel allocated for hostcalls has been exhausted";

/// The most bytes a component may hand the host in one crossing (the
/// arguments of one host call, or the result of an export), as wasmtime
/// counts them while lifting (strings' bytes, lists' elements at their
/// size in the guest): its output limit and 1 MiB for the rest of a
/// result. wasmtime's default, 128 MiB, let a result of millions of empty
/// items become several times that in the host before the output cap was
/// checked.
pub(crate) fn crossing_bytes(limits: &Limits) -> usize {
    limits.max_output_bytes.saturating_add(1 << 20)
}

/// Most elements a table may grow to, whatever the memory limit.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;
/// Bytes a table element is charged against the memory limit: wasmtime
/// keeps a funcref as a pointer (8 bytes) and a continuation as two; we
/// charge the larger, so a table never holds more host memory than counted.
pub(crate) const TABLE_ELEMENT_BYTES: usize = 16;

/// What every instance of one plugin shares: its name, grants and limits.
/// (No `Debug`: the config holds secrets.)
#[derive(Clone)]
pub(crate) struct HostEnv {
    /// The plugin's name, for logs.
    pub(crate) name: String,
    /// Config values (`config_get`).
    pub(crate) config: BTreeMap<String, String>,
    /// The secrets handed to the plugin, by id: `config_get` of one answers
    /// only during calls of a tool that declares it.
    pub(crate) secrets: BTreeMap<String, String>,
    /// The plugin's sensitive values (its secrets and the secret values of
    /// its config), kept out of its log lines.
    pub(crate) redactor: Arc<crate::secrets::Redactor>,
    /// Host patterns HTTP requests may go to.
    pub(crate) allowed_hosts: Vec<String>,
    /// Directories the plugin sees.
    pub(crate) allowed_paths: Vec<PathGrant>,
    /// Limits of every call.
    pub(crate) limits: Limits,
    /// The ticker of the plugin's runtime: it keeps the deadlines.
    pub(crate) ticker: Ticker,
    /// Keyring entries (hyper-mcp's `get_keyring_secret`) the person
    /// running toolhost granted, by (service, user): their secret values.
    pub(crate) keyring: BTreeMap<(String, String), String>,
    /// Where the plugin says its tool list changed.
    pub(crate) changes: Arc<tokio::sync::watch::Sender<u64>>,
}

/// The memory an instance holds: its linear memories and its kernel memory,
/// against one limit.
#[derive(Debug)]
pub(crate) struct MemoryBudget {
    max: Option<usize>,
    used: usize,
    /// The most held since the running call started.
    peak: usize,
}

impl MemoryBudget {
    pub(crate) fn new(max: Option<u64>) -> Self {
        MemoryBudget { max: max.map(|m| usize::try_from(m).unwrap_or(usize::MAX)), used: 0, peak: 0 }
    }

    /// Bytes held now.
    pub(crate) fn used(&self) -> usize {
        self.used
    }

    /// Bytes it may still take before the limit (`usize::MAX`: no limit).
    pub(crate) fn room(&self) -> usize {
        self.max.map_or(usize::MAX, |max| max.saturating_sub(self.used))
    }

    /// The most bytes held since the running call started.
    pub(crate) fn peak(&self) -> usize {
        self.peak
    }
}

impl Budget for MemoryBudget {
    fn charge(&mut self, bytes: usize) -> Result<(), OutOfBudget> {
        let total = self.used.checked_add(bytes).ok_or(OutOfBudget)?;
        if self.max.is_some_and(|max| total > max) {
            return Err(OutOfBudget);
        }
        self.used = total;
        self.peak = self.peak.max(total);
        Ok(())
    }

    fn refund(&mut self, bytes: usize) {
        self.used = self.used.saturating_sub(bytes);
    }
}

impl ResourceLimiter for MemoryBudget {
    fn memory_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        if maximum.is_some_and(|m| desired > m) {
            return Ok(false);
        }
        self.charge(desired.saturating_sub(current)).map_err(|_| wasmtime::Error::new(Stop::MemoryLimit))?;
        Ok(true)
    }

    /// Tables live in host memory: their elements count against the same
    /// limit as linear memories (a module's initial tables too, charged at
    /// instantiation, so a huge declared table is refused, not allocated).
    fn table_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > maximum.unwrap_or(usize::MAX).min(MAX_TABLE_ELEMENTS) {
            return Ok(false);
        }
        let bytes = desired.saturating_sub(current).saturating_mul(TABLE_ELEMENT_BYTES);
        self.charge(bytes).map_err(|_| wasmtime::Error::new(Stop::MemoryLimit))?;
        Ok(true)
    }
}

/// Most files an instance may hold open.
pub(crate) const MAX_OPEN_FILES: usize = 256;

/// The files an instance opened and still holds: a module's by handle (a
/// WASI 0.1 file descriptor), a component's as the files themselves.
#[derive(Debug, Default)]
pub(crate) struct OpenFiles {
    handles: BTreeSet<u32>,
    /// A component's: the operating system's files its descriptors opened,
    /// held while anything holds them (a descriptor, or a stream of it
    /// that outlives the descriptor).
    #[cfg(feature = "component")]
    files: Vec<std::sync::Weak<std::fs::File>>,
}

impl OpenFiles {
    /// No more may be opened.
    pub(crate) fn full(&self) -> bool {
        #[cfg(feature = "component")]
        let components = self.files.len();
        #[cfg(not(feature = "component"))]
        let components = 0;
        self.handles.len() + components >= MAX_OPEN_FILES
    }

    /// A component opened this file.
    #[cfg(feature = "component")]
    pub(crate) fn opened_file(&mut self, file: std::sync::Weak<std::fs::File>) {
        self.files.push(file);
    }

    /// Forget the files of a component's that nothing holds any more.
    #[cfg(feature = "component")]
    pub(crate) fn forget_closed(&mut self) {
        self.files.retain(|file| file.strong_count() > 0);
    }

    /// How many are held.
    #[cfg(test)]
    pub(crate) fn count(&self) -> usize {
        self.handles.len()
    }

    pub(crate) fn opened(&mut self, handle: u32) {
        self.handles.insert(handle);
    }

    pub(crate) fn closed(&mut self, handle: u32) {
        self.handles.remove(&handle);
    }

    /// `fd_renumber(from, to)`: `to` was closed and `from` moved there.
    pub(crate) fn renumbered(&mut self, from: u32, to: u32) {
        if self.handles.remove(&from) {
            self.handles.insert(to);
        } else {
            self.handles.remove(&to);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_files_follow_opens_closes_and_renumbering() {
        let mut files = OpenFiles::default();
        files.opened(4);
        files.opened(5);
        files.renumbered(5, 9);
        assert_eq!(files.handles.iter().copied().collect::<Vec<_>>(), [4, 9]);
        // A preopen (not counted) moved onto a counted descriptor closes it.
        files.renumbered(3, 4);
        assert_eq!(files.count(), 1);
        files.closed(9);
        assert_eq!(files.count(), 0);
        for fd in 0..MAX_OPEN_FILES as u32 {
            files.opened(fd);
        }
        assert!(files.full());
    }
}
