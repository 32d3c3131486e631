//! What both kinds of plugin instance share: the part of a store's data
//! that holds the plugin's grants and limits, the memory budget, the
//! running call's deadline and the guest's captured output; the store
//! built around it; and how a failed run is told apart.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::{Store, StoreContextMut, UpdateDeadline};
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};

use super::extism::{HostEnv, MemoryBudget};
use super::files::OpenFiles;
use super::output::{LogBudget, LogLine};
use super::stdio::Tail;
use super::{EngineKind, Stop, engine};
use crate::error::{Fault, FaultKind};
use crate::sandbox::{Access, Limits, format_size};

/// What every store's data holds, whatever the kind of plugin.
pub(crate) struct GuestCore {
    /// The plugin's name, config, grants and limits.
    pub(crate) env: Arc<HostEnv>,
    /// Linear memories (and Extism kernel memory) against the limit.
    pub(crate) memory: MemoryBudget,
    /// When the running call must stop.
    pub(crate) deadline: Option<Instant>,
    /// The ids of the secrets the running call may read: those its tool
    /// declares and was handed. None during `describe`.
    in_reach: ToolSecrets,
    /// What the running call may still log.
    pub(crate) logs: LogBudget,
    /// Files the instance holds open (at most [`super::files::MAX_OPEN_FILES`]).
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
            in_reach: ToolSecrets::default(),
            logs: LogBudget::default(),
            files: OpenFiles::default(),
            stdout: Tail::default(),
            stderr: Tail::default(),
        };
        let mut wasi = WasiCtxBuilder::new();
        wasi.stdout(core.stdout.clone())
            .stderr(core.stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        for grant in &env.allowed_paths {
            let perms = match grant.access {
                Access::ReadOnly => FsPerms::ReadOnly,
                Access::ReadWrite => FsPerms::ReadWrite,
            };
            let guest = grant.guest_path().to_string_lossy();
            wasi.preopened_dir(&grant.host, guest.as_ref(), perms).map_err(|e| Fault {
                kind: FaultKind::Runtime,
                message: format!("cannot open the granted directory {}: {e}", grant.host.display()),
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
    pub(crate) fn log_line(&self, message: &str) -> String {
        let mut line = message.to_owned();
        self.env.redactor.redact_text(&mut line, &mut Vec::new());
        line
    }

    /// Whether (and what of) a log line of `len` bytes may be written under
    /// the call's log budget; `head` holds at least its first
    /// [`super::output::MAX_LOG_LINE_BYTES`]. Once the budget is spent, the
    /// note saying so is returned once, then `None`.
    pub(crate) fn admit_log(&mut self, head: &[u8], len: usize) -> Option<String> {
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
    pub(crate) fn check_output_size(&self, size: u64) -> Result<(), Fault> {
        let limit = self.env.limits.max_output_bytes as u64;
        if size > limit {
            return Err(Fault {
                kind: FaultKind::OutputTooLarge,
                message: format!("{size} bytes of output, over the limit of {}", format_size(limit)),
            });
        }
        Ok(())
    }

    /// The fault of an instance that hit its memory limit.
    pub(crate) fn memory_fault(&self) -> Fault {
        memory_fault(&self.env.limits)
    }

    /// Turn a failed run into a [`Fault`].
    pub(crate) fn fault(&self, error: &wasmtime::Error) -> Fault {
        classify(error, &self.env.limits, || self.stderr_words())
    }
}

/// The data of a store, as the shared machinery needs it.
pub(crate) trait Guest: Send + 'static {
    /// The shared part.
    fn core(&self) -> &GuestCore;
    /// The shared part, to change.
    fn core_mut(&mut self) -> &mut GuestCore;
}

/// A store for `state` on the shared engine: limited, with the epoch
/// callback, armed for its first run (instantiation and start-up code).
pub(crate) fn new_store<T: Guest>(kind: EngineKind, state: T) -> Result<Store<T>, Fault> {
    let engine = engine(kind).map_err(|message| Fault { kind: FaultKind::Runtime, message })?;
    let mut store = Store::new(engine, state);
    store.limiter(|state| &mut state.core_mut().memory);
    store.epoch_deadline_callback(on_tick::<T>);
    arm(&mut store);
    Ok(store)
}

/// Before a call: forget what the guest printed last time, renew its log
/// budget, put the call's secrets in reach (none for `describe`), and arm.
pub(crate) fn prepare<T: Guest>(store: &mut Store<T>, secrets: &ToolSecrets) {
    let core = store.data_mut().core_mut();
    core.stdout.clear();
    core.stderr.clear();
    core.logs.reset();
    core.in_reach = ToolSecrets::clone(secrets);
    arm(store);
}

/// The ids of the secrets one tool's calls may read.
pub(crate) type ToolSecrets = Arc<[String]>;

/// Set the deadline of whatever runs next in this store, and its fuel.
fn arm<T: Guest>(store: &mut Store<T>) {
    let limits = &store.data().core().env.limits;
    let deadline = limits.timeout.map(|t| Instant::now() + t);
    let fuel = limits.fuel;
    store.data_mut().core_mut().deadline = deadline;
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
/// tokio runtime, with or without its time driver. Callers hold a
/// [`super::ticker::running`] guard meanwhile, which keeps the ticker ticking.
pub(crate) async fn bounded<R>(
    deadline: Option<Instant>,
    run: impl std::future::Future<Output = wasmtime::Result<R>>,
) -> wasmtime::Result<R> {
    use std::task::Poll;
    let Some(deadline) = deadline else { return run.await };
    let mut run = std::pin::pin!(run);
    let mut alarm = super::ticker::Alarm::new(deadline);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(ran) = run.as_mut().poll(cx) {
            return Poll::Ready(ran);
        }
        // Checked only once the run is pending: a call that finishes in
        // one poll never touches the alarm.
        if alarm.poll(cx).is_ready() {
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
    Fault { kind: FaultKind::MemoryLimit, message: format!("the instance tried to grow its memory past {limit}") }
}

fn timeout_fault(limits: &Limits) -> Fault {
    let limit = limits.timeout.map_or_else(|| "its limit".to_owned(), |t| format!("{t:?}"));
    Fault { kind: FaultKind::Timeout, message: format!("it ran longer than {limit}") }
}

/// Turn a failed run into a [`Fault`], given the limits it ran under and
/// what the guest wrote to stderr.
fn classify(error: &wasmtime::Error, limits: &Limits, stderr: impl Fn() -> Option<String>) -> Fault {
    let with_stderr = |message: String| match stderr() {
        Some(words) => format!("{message}; its stderr ends with: {words}"),
        None => message,
    };
    if let Some(stop) = error.chain().find_map(|e| e.downcast_ref::<Stop>()) {
        return match stop {
            Stop::Timeout => timeout_fault(limits),
            Stop::MemoryLimit => memory_fault(limits),
            Stop::Denied(message) => Fault { kind: FaultKind::Denied, message: message.clone() },
            Stop::Host(message) => Fault { kind: FaultKind::Error, message: message.clone() },
        };
    }
    if let Some(trap) = error.downcast_ref::<wasmtime::Trap>() {
        return match trap {
            wasmtime::Trap::Interrupt => timeout_fault(limits),
            wasmtime::Trap::OutOfFuel => {
                let budget = limits.fuel.map_or_else(|| "its".to_owned(), |f| format!("the {f}-unit"));
                Fault {
                    kind: FaultKind::FuelExhausted,
                    message: format!("the call used up {budget} instruction budget"),
                }
            }
            wasmtime::Trap::UnreachableCodeReached => Fault {
                kind: FaultKind::Trap,
                message: with_stderr("`unreachable` executed: the plugin panicked or aborted".to_owned()),
            },
            other => Fault { kind: FaultKind::Trap, message: with_stderr(other.to_string()) },
        };
    }
    if let Some(exit) = error.downcast_ref::<I32Exit>() {
        return Fault { kind: FaultKind::Exit, message: with_stderr(format!("WASI exit code {}", exit.0)) };
    }
    // Anything else (a WASI host error, an instantiation failure): the root
    // cause is the sentence that says what happened.
    Fault { kind: FaultKind::Trap, message: with_stderr(error.root_cause().to_string()) }
}
