//! The host's typed errors.
//!
//! Three kinds of failure are kept apart:
//!
//! - the **caller's fault**: an unknown tool, arguments that are not an
//!   object or break the tool's `inputSchema` ([`Error::UnknownTool`],
//!   [`Error::InvalidArguments`]);
//! - the **plugin's fault**: a trap, an Extism error, a limit hit, output that
//!   is not valid ([`Error::PluginFailed`], [`Error::InvalidOutput`]), or a
//!   plugin that cannot be loaded ([`Error::Load`]);
//! - a **tool error** is neither: it is a normal
//!   [`CallToolResult`](toolhost_protocol::CallToolResult) with `isError: true`.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// A boxed error from a lower layer (Extism, wasmtime, the file system).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything that can go wrong when loading or calling a plugin.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The plugin file could not be read.
    #[error("cannot read plugin file {}: {source}", path.display())]
    #[non_exhaustive]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },

    /// The plugin's policy cannot be honoured (a granted directory that does
    /// not exist, a zero limit, ...). Nothing was run.
    #[error("plugin `{plugin}`: {source}")]
    #[non_exhaustive]
    Policy {
        /// The plugin's name.
        plugin: String,
        /// What is wrong.
        #[source]
        source: PolicyError,
    },

    /// The plugin could not be compiled or instantiated, or does not have the
    /// interface (`describe` and `call` exports).
    #[error("plugin `{plugin}` cannot be loaded: {message}")]
    #[non_exhaustive]
    Load {
        /// The plugin's name.
        plugin: String,
        /// What is wrong, in one sentence.
        message: String,
        /// The underlying error, if any.
        #[source]
        source: Option<BoxError>,
    },

    /// The plugin's `describe` output breaks the protocol or the tool rules:
    /// bad names, duplicates, schemas that do not compile, bad metadata.
    #[error("plugin `{plugin}` describes its tools wrongly ({} problem{}): {}", problems.len(), if problems.len() == 1 { "" } else { "s" }, join(problems))]
    #[non_exhaustive]
    InvalidPlugin {
        /// The plugin's name.
        plugin: String,
        /// Every problem found.
        problems: Vec<LoadProblem>,
    },

    /// The plugin does not describe a tool of that name; the call was refused
    /// before the plugin ran.
    #[error("plugin `{plugin}` has no tool `{tool}`; its tools are: {}", list_or_none(available))]
    #[non_exhaustive]
    UnknownTool {
        /// The plugin's name.
        plugin: String,
        /// The name asked for.
        tool: String,
        /// The names the plugin does describe, sorted.
        available: Vec<String>,
    },

    /// No available tool of a registry has that name (it may not exist, be
    /// disabled or be filtered out); the call was refused.
    #[error("no tool `{tool}` is available; the tools are: {}", list_or_none(available))]
    #[non_exhaustive]
    NoSuchTool {
        /// The name asked for.
        tool: String,
        /// The namespaced names that are available, sorted.
        available: Vec<String>,
    },

    /// No plugin (of a registry) offers the prompt, resource or template
    /// asked for.
    #[error("nothing here offers {what}")]
    #[non_exhaustive]
    NotOffered {
        /// What was asked for (`prompt `x``, `resource `a://b``).
        what: String,
    },

    /// The arguments were refused before the plugin ran.
    #[error("invalid arguments for tool `{tool}` of plugin `{plugin}`: {}", join_violations(violations))]
    #[non_exhaustive]
    InvalidArguments {
        /// The plugin's name.
        plugin: String,
        /// The tool.
        tool: String,
        /// Every problem found, each with the JSON pointer of the offending value.
        violations: Vec<Violation>,
    },

    /// The tool declares a secret that was not granted, or that the secret
    /// provider does not have; the call was refused before the plugin ran.
    #[error("tool `{tool}` of plugin `{plugin}` needs the secret `{secret}`, which {reason}")]
    #[non_exhaustive]
    MissingSecret {
        /// The plugin's name.
        plugin: String,
        /// The tool.
        tool: String,
        /// The id of the missing secret.
        secret: String,
        /// Why it is missing.
        reason: MissingSecretReason,
    },

    /// The plugin's code failed: it trapped, returned an Extism error, exited,
    /// or hit a limit.
    #[error("plugin `{plugin}` failed in {operation}: {fault}")]
    #[non_exhaustive]
    PluginFailed {
        /// The plugin's name.
        plugin: String,
        /// What was running: `describe` or `tool `NAME``.
        operation: Operation,
        /// What happened.
        #[source]
        fault: Fault,
    },

    /// The plugin returned output that is not a valid answer.
    #[error("plugin `{plugin}` returned invalid output from {operation}: {problem}")]
    #[non_exhaustive]
    InvalidOutput {
        /// The plugin's name.
        plugin: String,
        /// What was running.
        operation: Operation,
        /// What is wrong with the output.
        problem: OutputProblem,
    },

    /// The tool declares `requirements.user_id`, and the call's
    /// [`CallContext`](crate::CallContext) names no user; the call was
    /// refused before the plugin ran.
    #[error("tool `{tool}` of plugin `{plugin}` acts for a user and needs a user id, which the call does not give")]
    #[non_exhaustive]
    MissingUserId {
        /// The plugin's name.
        plugin: String,
        /// The tool.
        tool: String,
    },

    /// The call was cancelled by its caller (its
    /// [`CallContext`](crate::CallContext)'s token) or by the runtime
    /// shutting down: the guest was stopped where it was and its instance
    /// discarded.
    #[error("the call to tool `{tool}` of plugin `{plugin}` was cancelled: {reason}")]
    #[non_exhaustive]
    Cancelled {
        /// The plugin's name.
        plugin: String,
        /// The tool.
        tool: String,
        /// Who cancelled it.
        reason: String,
    },

    /// The plugin's [`Runtime`](crate::Runtime) has shut down: nothing more
    /// is loaded or called on it.
    #[error("the runtime has shut down; plugin `{plugin}` runs no more calls")]
    #[non_exhaustive]
    ShutDown {
        /// The plugin's name.
        plugin: String,
    },

    /// A registry conflict: a duplicate toolset id or tool name collision.
    #[error(transparent)]
    Registry(#[from] RegistryError),

    /// The host itself failed (a worker thread died, for example). Not the
    /// plugin's fault and not the caller's.
    #[error("host error: {0}")]
    Host(String),
}

impl Error {
    /// The text a model should read when this error ends its tool call:
    /// what went wrong, in words it can act on (for invalid arguments, each
    /// problem with its JSON pointer, and that the tool did not run). An
    /// agent loop puts it in the tool's result; the MCP server answers with
    /// it as an `isError` result.
    pub fn model_text(&self) -> String {
        match self {
            Error::InvalidArguments { tool, violations, .. } => {
                format!("invalid arguments for `{tool}`; the tool did not run: {}", join_violations(violations))
            }
            other => other.to_string(),
        }
    }

    /// [`model_text`](Self::model_text) as a tool result (`isError: true`).
    pub fn to_tool_result(&self) -> toolhost_protocol::CallToolResult {
        toolhost_protocol::CallToolResult::error(self.model_text())
    }

    /// Visit every text of the error that may quote what a plugin chose
    /// (messages, paths into its output, tool names), to redact it.
    pub(crate) fn plugin_texts_mut(&mut self, visit: &mut dyn FnMut(&mut String)) {
        let violations = |violations: &mut Vec<Violation>, visit: &mut dyn FnMut(&mut String)| {
            for violation in violations {
                visit(&mut violation.instance_path);
                visit(&mut violation.message);
            }
        };
        match self {
            Error::Load { message, .. } => visit(message),
            Error::InvalidPlugin { problems, .. } => {
                for problem in problems {
                    if let Some(tool) = &mut problem.tool {
                        visit(tool);
                    }
                    visit(&mut problem.pointer);
                    visit(&mut problem.message);
                }
            }
            Error::UnknownTool { available, .. } | Error::NoSuchTool { available, .. } => {
                for name in available {
                    visit(name);
                }
            }
            Error::InvalidArguments { violations: found, .. } => violations(found, visit),
            Error::PluginFailed { fault, operation, .. } => {
                fault.texts_mut(visit);
                if let Operation::Tool(text) | Operation::Offer(text) = operation {
                    visit(text);
                }
            }
            Error::InvalidOutput { problem, operation, .. } => {
                match problem {
                    OutputProblem::NotJson { message } => visit(message),
                    OutputProblem::Invalid { violations: found } => violations(found, visit),
                    OutputProblem::NotUtf8 { .. } | OutputProblem::SecretLeak { .. } => {}
                }
                if let Operation::Tool(text) | Operation::Offer(text) = operation {
                    visit(text);
                }
            }
            Error::Host(message) => visit(message),
            Error::NotOffered { what } => visit(what),
            Error::Cancelled { tool, .. } | Error::MissingUserId { tool, .. } => visit(tool),
            Error::Read { .. }
            | Error::Policy { .. }
            | Error::MissingSecret { .. }
            | Error::ShutDown { .. }
            | Error::Registry(_) => {}
        }
    }

    /// Its kind as a short label, as in spans, call records and metrics:
    /// `invalid_arguments`, `trap`, `timeout`, `unknown_tool`...
    pub fn outcome(&self) -> &'static str {
        match self {
            Error::UnknownTool { .. } | Error::NoSuchTool { .. } => "unknown_tool",
            Error::NotOffered { .. } => "not_offered",
            Error::InvalidArguments { .. } => "invalid_arguments",
            Error::MissingSecret { .. } => "missing_secret",
            Error::MissingUserId { .. } => "missing_user_id",
            Error::Cancelled { .. } => "cancelled",
            Error::ShutDown { .. } => "shut_down",
            Error::InvalidOutput { .. } => "invalid_output",
            Error::InvalidPlugin { .. } => "invalid_plugin",
            Error::Read { .. } | Error::Load { .. } => "load_failed",
            Error::Policy { .. } => "policy",
            Error::Registry(_) => "registry",
            Error::Host(_) => "host_error",
            Error::PluginFailed { fault, .. } => match fault.kind {
                FaultKind::Trap => "trap",
                FaultKind::Error => "plugin_error",
                FaultKind::Exit => "exit",
                FaultKind::Timeout => "timeout",
                FaultKind::MemoryLimit => "memory_limit",
                FaultKind::FuelExhausted => "fuel_exhausted",
                FaultKind::OutputTooLarge => "output_too_large",
                FaultKind::Cancelled => "cancelled",
                FaultKind::Denied => "denied",
                FaultKind::Runtime => "runtime",
            },
        }
    }

    /// The plugin's `describe` output has problems (every one is listed).
    pub fn is_invalid_plugin(&self) -> bool {
        matches!(self, Error::InvalidPlugin { .. })
    }

    /// The call was cancelled (by its caller, or by the runtime shutting
    /// down).
    pub fn is_cancelled(&self) -> bool {
        matches!(self, Error::Cancelled { .. })
    }

    /// The runtime has shut down.
    pub fn is_shut_down(&self) -> bool {
        matches!(self, Error::ShutDown { .. })
    }

    /// The tool name was not one the plugin describes.
    pub fn is_unknown_tool(&self) -> bool {
        matches!(self, Error::UnknownTool { .. } | Error::NoSuchTool { .. })
    }

    /// The arguments were refused (the caller's fault).
    pub fn is_invalid_arguments(&self) -> bool {
        matches!(self, Error::InvalidArguments { .. })
    }

    /// The plugin returned output that is not a valid answer.
    pub fn is_invalid_output(&self) -> bool {
        matches!(self, Error::InvalidOutput { .. })
    }

    /// The plugin could not be loaded.
    pub fn is_load(&self) -> bool {
        matches!(self, Error::Read { .. } | Error::Load { .. } | Error::InvalidPlugin { .. })
    }

    /// A secret the tool declares was not granted or is not available.
    pub fn is_missing_secret(&self) -> bool {
        matches!(self, Error::MissingSecret { .. })
    }

    /// The call was refused before the plugin ran, for the caller or the
    /// host's configuration to fix: unknown tool, invalid arguments, missing
    /// secret.
    pub fn is_caller_error(&self) -> bool {
        self.is_unknown_tool()
            || self.is_invalid_arguments()
            || self.is_missing_secret()
            || matches!(self, Error::MissingUserId { .. })
    }

    /// The plugin is at fault: it failed to load, failed while running, or
    /// returned invalid output.
    pub fn is_plugin_error(&self) -> bool {
        matches!(
            self,
            Error::Read { .. }
                | Error::Load { .. }
                | Error::InvalidPlugin { .. }
                | Error::PluginFailed { .. }
                | Error::InvalidOutput { .. }
        )
    }

    /// The fault, when the plugin's code failed.
    pub fn fault(&self) -> Option<&Fault> {
        match self {
            Error::PluginFailed { fault, .. } => Some(fault),
            _ => None,
        }
    }

    /// The plugin trapped (a Wasm trap: a Rust panic, `abort`, `unreachable`,
    /// an out-of-bounds access, ...).
    pub fn is_trap(&self) -> bool {
        self.fault().is_some_and(|f| f.kind == FaultKind::Trap)
    }

    /// The plugin reported an Extism error (non-zero return with an error
    /// message).
    pub fn is_plugin_error_message(&self) -> bool {
        self.fault().is_some_and(|f| f.kind == FaultKind::Error)
    }

    /// The call ran past its time limit.
    pub fn is_timeout(&self) -> bool {
        self.fault().is_some_and(|f| f.kind == FaultKind::Timeout)
    }

    /// The plugin hit its memory limit.
    pub fn is_memory_limit(&self) -> bool {
        self.fault().is_some_and(|f| f.kind == FaultKind::MemoryLimit)
    }

    /// The plugin's output was over the size cap.
    pub fn is_output_too_large(&self) -> bool {
        self.fault().is_some_and(|f| f.kind == FaultKind::OutputTooLarge)
    }

    /// The plugin ran out of its fuel budget.
    pub fn is_fuel_exhausted(&self) -> bool {
        self.fault().is_some_and(|f| f.kind == FaultKind::FuelExhausted)
    }

    /// The plugin was refused a capability it was not granted.
    pub fn is_denied(&self) -> bool {
        self.fault().is_some_and(|f| f.kind == FaultKind::Denied)
    }
}

/// What a plugin was running when it failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Operation {
    /// The `describe` export, at load.
    Describe,
    /// Starting an instance (its language runtime's initialisation).
    Instantiate,
    /// The `call` export, for this tool.
    Tool(String),
    /// One of the exports of what a plugin offers besides tools (its
    /// prompts, resources and completions): what was asked, as a phrase
    /// (`prompt `greeting``, `the resource list`).
    Offer(String),
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operation::Describe => f.write_str("`describe`"),
            Operation::Instantiate => f.write_str("instantiation"),
            Operation::Tool(name) => write!(f, "tool `{name}`"),
            Operation::Offer(what) => f.write_str(what),
        }
    }
}

/// How a plugin's code failed.
///
/// Where the runtime said more than [`message`](Fault::message) does (a
/// trap's Wasm backtrace, the error chain of a failure on the host's side),
/// that is kept as the fault's [`source`](std::error::Error::source).
/// Equality looks at the kind and the message only.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Fault {
    /// The kind of failure.
    pub kind: FaultKind,
    /// What the runtime or the plugin said.
    pub message: String,
    /// What the runtime said, whole.
    pub(crate) source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl Fault {
    /// A fault of `kind`, saying `message`.
    pub fn new(kind: FaultKind, message: impl Into<String>) -> Self {
        Fault { kind, message: message.into(), source: None }
    }

    /// The same, with `source` as the error it came from.
    pub(crate) fn with_source(mut self, source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        self.source = Some(Arc::from(source.into()));
        self
    }
}

impl Fault {
    /// Visit the texts a plugin may have put in this fault (the message, and
    /// the source's chain, rendered): a source whose text the visitor
    /// changes is replaced by the changed text.
    pub(crate) fn texts_mut(&mut self, visit: &mut dyn FnMut(&mut String)) {
        visit(&mut self.message);
        if let Some(source) = &self.source {
            let said = chain_text(source.as_ref());
            let mut text = said.clone();
            visit(&mut text);
            if text != said {
                self.source = Some(Arc::new(Said(text)));
            }
        }
    }
}

/// An error's text and its sources', joined by `: `.
fn chain_text(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(source) = next {
        text.push_str(": ");
        text.push_str(&source.to_string());
        next = source.source();
    }
    text
}

/// An error that is only a text (a source, redacted).
#[derive(Debug)]
struct Said(String);

impl fmt::Display for Said {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Said {}

impl PartialEq for Fault {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.message == other.message
    }
}

impl Eq for Fault {}

impl std::error::Error for Fault {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            FaultKind::Trap => write!(f, "the plugin trapped ({})", self.message),
            FaultKind::Error => write!(f, "the plugin returned an error: {}", self.message),
            FaultKind::Exit => write!(f, "the plugin exited ({})", self.message),
            FaultKind::Timeout => write!(f, "the call timed out ({})", self.message),
            FaultKind::MemoryLimit => write!(f, "the memory limit was hit ({})", self.message),
            FaultKind::FuelExhausted => write!(f, "the fuel budget ran out ({})", self.message),
            FaultKind::OutputTooLarge => write!(f, "the output is too large ({})", self.message),
            FaultKind::Cancelled => write!(f, "the call was cancelled ({})", self.message),
            FaultKind::Denied => write!(f, "the plugin was refused a capability: {}", self.message),
            FaultKind::Runtime => write!(f, "the runtime failed: {}", self.message),
        }
    }
}

/// Why a secret a tool declares was not handed to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MissingSecretReason {
    /// Whoever runs the host did not grant it (the CLI's `--secret NAME`, a
    /// toolset's `secrets: [NAME]`, [`PluginBuilder::grant_secret`](crate::PluginBuilder::grant_secret)).
    /// A plugin declaring a secret never grants it to itself.
    NotGranted,
    /// It was granted, but the secret provider has no value for it (or the
    /// lookup failed; the log says why).
    NotAvailable,
}

impl fmt::Display for MissingSecretReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MissingSecretReason::NotGranted => "was not granted",
            MissingSecretReason::NotAvailable => "was granted but is not available from the secret provider",
        })
    }
}

/// The kinds of [`Fault`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FaultKind {
    /// A Wasm trap: panic, abort, `unreachable`, out-of-bounds access...
    Trap,
    /// The plugin returned non-zero, usually with an Extism error message.
    Error,
    /// The plugin called WASI `proc_exit` with a non-zero code.
    Exit,
    /// The call ran past its time limit.
    Timeout,
    /// The plugin tried to grow its memory past the limit.
    MemoryLimit,
    /// The plugin ran out of its fuel (instruction) budget.
    FuelExhausted,
    /// The output was larger than the output size cap; it was not copied.
    OutputTooLarge,
    /// The caller cancelled the call (dropped its future); the guest was
    /// stopped.
    Cancelled,
    /// The plugin asked for something it was not granted (an HTTP request to
    /// a host outside its grants).
    Denied,
    /// The runtime failed around the call (instantiation, memory access).
    Runtime,
}

/// What is wrong with a plugin's output.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OutputProblem {
    /// The output is not UTF-8.
    #[non_exhaustive]
    NotUtf8 {
        /// Length of the valid UTF-8 prefix in bytes.
        valid_up_to: usize,
    },
    /// The output is not JSON.
    #[non_exhaustive]
    NotJson {
        /// What the parser said, with line and column.
        message: String,
    },
    /// The output is JSON but not a valid protocol value (or breaks the tool's
    /// `outputSchema`).
    #[non_exhaustive]
    Invalid {
        /// Every problem found.
        violations: Vec<Violation>,
    },
    /// The output contained secrets handed to the plugin, and the policy is
    /// to refuse such results.
    #[non_exhaustive]
    SecretLeak {
        /// The ids of the secrets found (never their values).
        secrets: Vec<String>,
    },
}

impl fmt::Display for OutputProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OutputProblem::NotUtf8 { valid_up_to } => {
                write!(f, "it is not UTF-8 (invalid byte at offset {valid_up_to})")
            }
            OutputProblem::NotJson { message } => write!(f, "it is not JSON ({message})"),
            OutputProblem::Invalid { violations } => f.write_str(&join_violations(violations)),
            OutputProblem::SecretLeak { secrets } => {
                write!(f, "it contains the value of secret {}, refused by policy", secrets.join(", "))
            }
        }
    }
}

/// One problem in a JSON value, located by JSON pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Violation {
    /// JSON pointer (RFC 6901) of the offending value in the instance; empty
    /// for the root.
    pub instance_path: String,
    /// The schema keyword or protocol rule that failed (`type`, `required`,
    /// ...).
    pub keyword: String,
    /// A readable explanation.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.instance_path.is_empty() { "/" } else { &self.instance_path };
        write!(f, "at {path}: {} ({})", self.message, self.keyword)
    }
}

fn join_violations(violations: &[Violation]) -> String {
    join(violations)
}

fn join<T: fmt::Display>(items: &[T]) -> String {
    items.iter().map(T::to_string).collect::<Vec<_>>().join("; ")
}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "(none)".to_owned()
    } else {
        names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
    }
}

/// A policy value that cannot be honoured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// A directory grant.
    #[error("invalid path grant `{grant}`: {reason}")]
    Path {
        /// The grant as written.
        grant: String,
        /// What is wrong.
        reason: String,
    },
    /// A host pattern.
    #[error("invalid host pattern `{pattern}`: {reason}")]
    Host {
        /// The pattern as written.
        pattern: String,
        /// What is wrong.
        reason: String,
    },
    /// A duration like `500ms`.
    #[error("invalid duration `{0}`: expected a number with a unit, like 500ms, 10s or 2m")]
    Duration(String),
    /// A size like `64MiB`.
    #[error("invalid size `{0}`: expected a number with an optional unit, like 65536, 64KiB, 16MB or 1GiB")]
    Size(String),
    /// A limit that makes no sense.
    #[error("invalid limit: {0}")]
    Limit(String),
}

/// Errors of the registry itself (not of a plugin).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// Two tools would have the same namespaced name.
    #[error("tool name collision: `{name}` comes from both {first} and {second}")]
    Collision {
        /// The namespaced name.
        name: String,
        /// One source.
        first: String,
        /// The other.
        second: String,
    },
    /// A toolset of that id is already loaded.
    #[error("a toolset with id `{0}` is already loaded")]
    Duplicate(String),
    /// A toolset id that cannot namespace tool names.
    #[error(
        "invalid toolset id `{0}`: use letters, digits, `-` and single `_` (`__` separates the id from tool names)"
    )]
    InvalidId(String),
}

/// One problem in a plugin's `describe` output.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LoadProblem {
    /// The tool it concerns (its name, or `#N` when the name is unusable);
    /// `None` for the document as a whole.
    pub tool: Option<String>,
    /// JSON pointer of the offending value in the `describe` output.
    pub pointer: String,
    /// The rule or schema keyword that failed.
    pub rule: String,
    /// A readable explanation.
    pub message: String,
}

impl LoadProblem {
    /// The rule of the warning that a plugin's `describe` returned one tool
    /// object rather than a `ListToolsResult` (an early shape of the servlet
    /// interface, which is loaded as a list of that tool).
    pub const ONE_TOOL_SHAPE: &'static str = "oneToolShape";

    /// How it reads as a load warning: a tool that lenient validation left
    /// out, or a shape that was accepted.
    pub fn as_warning(&self) -> String {
        if self.rule == Self::ONE_TOOL_SHAPE { self.message.clone() } else { format!("left out {self}") }
    }
}

impl fmt::Display for LoadProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(tool) = &self.tool {
            write!(f, "tool `{tool}`: ")?;
        }
        let pointer = if self.pointer.is_empty() { "/" } else { &self.pointer };
        write!(f, "at {pointer}: {} ({})", self.message, self.rule)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_a_visitor_changes_is_replaced_by_the_changed_text() {
        let io = std::io::Error::other("the value hunter2 leaked");
        let mut fault = Fault::new(FaultKind::Runtime, "it failed").with_source(io);
        let mut redact = |text: &mut String| *text = text.replace("hunter2", "[REDACTED]");
        fault.texts_mut(&mut redact);
        let source = std::error::Error::source(&fault).expect("a source");
        assert_eq!(source.to_string(), "the value [REDACTED] leaked");
        // Untouched: the original error is kept.
        let mut fault = Fault::new(FaultKind::Runtime, "it failed").with_source(std::io::Error::other("nothing"));
        fault.texts_mut(&mut redact);
        let source = std::error::Error::source(&fault).expect("a source");
        assert!(source.downcast_ref::<std::io::Error>().is_some());
        assert_eq!(fault, Fault::new(FaultKind::Runtime, "it failed"), "equality ignores the source");
    }
}
