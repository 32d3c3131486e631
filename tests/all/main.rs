//! Integration tests against real Wasm plugins built from the workspace's
//! sources (see `tests/build.rs`). One test binary, with a module per area.

mod check;
mod cli;
mod faults;
mod plugins;
mod properties;
mod runtime;
mod sandbox;
mod scaffold;
mod serve;
mod toolsets;
mod validation;
