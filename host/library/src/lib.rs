//! # toolhost
//!
//! A WebAssembly plugin host for AI-agent tools.
//!
//! A **plugin** is a Wasm module (built with Extism's plugin kits, or with
//! `toolhost-plugin-sdk`) that exports `describe`, returning its tools, and
//! `call`, running one; or a component of the `toolhost:plugin` world
//! (`wit/plugin.wit`) with the same two exports, typed. This crate loads
//! either kind (telling them apart by itself), keeps their tool list, and
//! calls tools from async Rust:
//!
//! ```no_run
//! # async fn demo() -> Result<(), toolhost::Error> {
//! let plugin = toolhost::Plugin::load("target/plugins/calculator.wasm").await?;
//! for tool in plugin.tools() {
//!     println!("{}: {}", tool.name, tool.description.as_deref().unwrap_or(""));
//! }
//! let result = plugin.call_tool("add", serde_json::json!({"a": 2, "b": 3})).await?;
//! assert!(!result.is_error());
//! # Ok(()) }
//! ```
//!
//! Every failure is a typed [`Error`]: the caller's (unknown tool, invalid
//! arguments), the plugin's (trap, Extism error, limit, invalid output) or the
//! host's. A tool error is not an `Error`: it is a normal
//! [`CallToolResult`] with `isError: true`.
//!
//! Plugins run with WASI on and nothing granted: no files, no network, no
//! environment variables; every call is bounded by [`Limits`]. They run on
//! toolhost's own runtime on wasmtime (the Extism ABI implemented natively):
//! one shared engine, compiled modules cached on disk when asked (the
//! `cache` feature's `ModuleCache`), a bounded pool of instances per
//! plugin, guests on the calling task with a deadline per call.
//!
//! ## Features
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `component` | yes | component plugins (`wit/plugin.wit`); without it a component is refused at load, saying why |
//! | `http` | yes | the HTTP host function, to granted hosts; without it every request is refused |
//! | `wasi-http` | no | `wasi:http/outgoing-handler` for components, through the same client and grants; without it a component importing `wasi:http` is refused at load |
//! | `https` | yes | plugins from `https://` URLs pinned by a `sha256:` digest, kept in a `DownloadCache` |
//! | `oci` | no | plugins from OCI registries (`oci://registry/repository:tag@sha256:...`) |
//! | `yaml`, `toml` | yes | toolsets files in YAML and TOML (JSON always) |
//! | `watch` | yes | `ToolsetsWatcher`: a toolsets file applied again when it changes |
//! | `cache` | no | `ModuleCache`: compiled modules kept on disk between processes |

#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod approval;
mod builtin;
mod cache_folder;
mod client;
mod config;
mod context;
mod error;
mod filter;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod host_fn;
mod model;
mod plugin;
mod pool;
mod registry;
#[cfg(any(feature = "http", feature = "https"))]
mod resolve;
mod runtime;
mod sandbox;
mod secrets;
mod source;
mod sync_events;
mod telemetry;
mod tool;
mod validate;
#[cfg(feature = "watch")]
mod watch;

pub use approval::{Approval, ApprovalRequest, ApproveAll, Approver, DenyAll};
pub use builtin::{BuiltinCall, BuiltinError, BuiltinHandler, BuiltinTool, BuiltinToolset, ToolsetConnector};
pub use cache_folder::CACHE_DIR_ENV;
pub use client::{CallClient, ClientNotice, ClientRequest};
pub use config::{
    ConfigError, ConfigProblem, KeyringEntry, NAMESPACE_SEPARATOR, PluginSource, RemoteServer, ToolOverride,
    ToolSettings, ToolsetConfig, ToolsetsFile, VerifyPolicy, load_toolsets, parse_toolsets,
};
pub use context::{CallContext, GuestLog, LogLevel, Scopes, USER_ID_META_KEY};
pub use error::{
    BoxError, Error, Fault, FaultKind, LoadProblem, MissingSecretReason, Operation, OutputProblem, PolicyError,
    RegistryError, Violation,
};
pub use filter::{Attribute, FilterClause, Matcher, Operator, ToolApprovals, ToolFilter};
pub use host_fn::{HostCall, HostFunction};
pub use model::{AnthropicTool, ModelTool, OpenAiTool};
pub use plugin::{Offers, Plugin, PluginBuilder, PoolStats};
pub use registry::{LoadReport, Registry, ToolsSnapshot, ToolsetFailure};
#[cfg(feature = "cache")]
#[cfg_attr(docsrs, doc(cfg(feature = "cache")))]
pub use runtime::cache::ModuleCache;
pub use runtime::compile::{CacheStatus, CompileInfo};
pub use runtime::{Compilers, PluginKind, Runtime, RuntimeBuilder, ShutdownReport, Tier};
pub use sandbox::{
    Access, AddressRefused, Limits, PathGrant, Policy, TRANSPORT_HEADERS, address_allowed, check_host_pattern,
    host_matches, is_public, parse_duration, parse_size, transport_header,
};
pub use secrets::in_logs::{RedactingWriter, redact_log_text, remember_secret};
pub use secrets::{
    BoxFuture, EnvSecretProvider, FileSecretProvider, NoSecrets, Requirements, SecretError, SecretOutput,
    SecretProvider, SecretRequirement, SensitiveValues,
};
pub use source::{
    DigestParseError, DownloadCache, MAX_PLUGIN_BYTES, MAX_UNPACKED_BYTES, RemotePlugin, Sha256Digest, Signer,
    SourceError, Verification,
};
pub use sync_events::{SyncEvent, ToolStatus, ToolsetEvent};
pub use telemetry::{CallObserver, CallRecord};
pub use tokio_util::sync::CancellationToken;
pub use tool::RegisteredTool;
pub use toolhost_protocol as protocol;
pub use toolhost_protocol::{CallToolResult, Content, ListToolsResult, Tool};
pub use validate::ValidationOptions;
#[cfg(feature = "watch")]
#[cfg_attr(docsrs, doc(cfg(feature = "watch")))]
pub use watch::{ToolsetsWatcher, WatchEvent, WatchHandle};

/// The cargo features this build of the library was compiled with, in the
/// order its `Cargo.toml` lists them (for `toolhost --version`, and for a
/// program that embeds the library to report what it can load).
pub fn features() -> Vec<&'static str> {
    [
        ("component", cfg!(feature = "component")),
        ("http", cfg!(feature = "http")),
        ("wasi-http", cfg!(feature = "wasi-http")),
        ("https", cfg!(feature = "https")),
        ("oci", cfg!(feature = "oci")),
        ("signatures", cfg!(feature = "signatures")),
        ("cache", cfg!(feature = "cache")),
        ("watch", cfg!(feature = "watch")),
        ("schemars", cfg!(feature = "schemars")),
        ("winch", cfg!(feature = "winch")),
        ("yaml", cfg!(feature = "yaml")),
        ("toml", cfg!(feature = "toml")),
        ("fuzzing", cfg!(feature = "fuzzing")),
    ]
    .into_iter()
    .filter_map(|(name, on)| on.then_some(name))
    .collect()
}
