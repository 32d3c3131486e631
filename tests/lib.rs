//! What the integration tests (`tests/all`) and the benchmarks share: the
//! plugins and the `toolhost` binary the build made, the official MCP
//! clients, throwaway HTTP servers and the external services they start.

mod support {
    pub mod clients;
    pub mod http;
    pub mod plugins;
    pub mod services;
}

pub use support::clients::*;
pub use support::http::*;
pub use support::plugins::*;
pub use support::services::*;
