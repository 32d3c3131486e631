//! # toolhost-mcp
//!
//! An MCP server in front of toolhost: the tools of one [`Plugin`] or of a
//! [`Registry`] (a toolsets file) served to any MCP client, every call
//! through the validating host.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use toolhost_mcp::{McpServer, ToolSource};
//!
//! let plugin = toolhost::Plugin::load("target/plugins/calculator.wasm").await?;
//! let server = McpServer::new(ToolSource::Plugin(plugin), Arc::new(toolhost::ApproveAll));
//! toolhost_mcp::serve_stdio(server, std::future::pending()).await?;
//! # Ok(()) }
//! ```
//!
//! Transports are features: `stdio` ([`serve_stdio`]) and `http`
//! ([`HttpServer`], streamable HTTP at `/mcp` with Origin and Host checks,
//! `/healthz` and `/readyz`), both on by default. `production` adds what
//! running in front of many agents needs: bearer-token authorization
//! ([`auth`]), rate limits ([`limits`]) and Prometheus metrics
//! ([`Metrics`]), configured by a toolsets file's `serve` section
//! ([`ServeSettings`]). Without either, [`McpServer`] is an rmcp `ServerHandler` to
//! put on a transport of your own.
//!
//! [`Plugin`]: toolhost::Plugin
//! [`Registry`]: toolhost::Registry

#![deny(missing_docs)]

#[cfg(feature = "production")]
pub mod auth;
mod call_relay;
mod caller;
#[cfg(feature = "client")]
mod connector;
mod elicit;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
#[cfg(feature = "http")]
mod http;
#[cfg(feature = "http")]
mod http_limits;
mod jsonrpc;
#[cfg(feature = "production")]
pub mod limits;
mod listings;
#[cfg(feature = "production")]
mod metrics;
#[cfg(feature = "client")]
mod resolve;
mod server;
#[cfg(feature = "http")]
mod session_call;
#[cfg(feature = "production")]
mod settings;
#[cfg(feature = "http")]
mod stateless_call;
#[cfg(feature = "stdio")]
mod stdio;
#[cfg(feature = "stdio")]
mod stdio_call;
#[cfg(feature = "production")]
pub mod telemetry;
mod tool_source;
mod wire;

#[cfg(feature = "client")]
pub use connector::{McpConnector, WithoutProgressTokens};
#[cfg(feature = "http")]
pub use http::{HttpLimits, HttpOptions, HttpServer};
pub use jsonrpc::{MAX_LINE, SHUTDOWN_GRACE};
#[cfg(feature = "production")]
pub use metrics::Metrics;
#[cfg(feature = "client")]
pub use resolve::GrantedAddresses;
pub use server::{Approvals, McpServer};
#[cfg(feature = "production")]
pub use settings::{LimitSettings, Rate, RateLimits, ServeSettings, SettingsError, TelemetrySettings};
#[cfg(feature = "stdio")]
pub use stdio::{serve_stdio, serve_stdio_on};
#[cfg(feature = "production")]
pub use tool_source::Tenants;
pub use tool_source::ToolSource;

/// Why serving failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The listening socket could not be opened.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The MCP session could not start (the client's `initialize` failed).
    #[error("the MCP session failed to start: {0}")]
    Start(String),
    /// The MCP session or the HTTP server failed while running.
    #[error("the MCP server failed: {0}")]
    Failed(String),
}

/// The cargo features this build of the MCP front was compiled with, in the
/// order its `Cargo.toml` lists them (for `toolhost --version`).
pub fn features() -> Vec<&'static str> {
    [
        ("stdio", cfg!(feature = "stdio")),
        ("http", cfg!(feature = "http")),
        ("client", cfg!(feature = "client")),
        ("production", cfg!(feature = "production")),
        ("fuzzing", cfg!(feature = "fuzzing")),
    ]
    .into_iter()
    .filter_map(|(name, on)| on.then_some(name))
    .collect()
}
