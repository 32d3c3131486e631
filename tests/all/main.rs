//! Integration tests against real Wasm plugins built from the workspace's
//! sources (see `tests/build.rs`). One test binary, with a module per area.

/// Run `async fn name(flavour: Flavour)` tests against both builds of their
/// plugins: `name::extism` and `name::component`.
macro_rules! both_flavours {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test]
                async fn extism() {
                    super::$name(toolhost_tests::Flavour::Extism).await
                }

                #[tokio::test]
                async fn component() {
                    super::$name(toolhost_tests::Flavour::Component).await
                }
            }
        )*
    };
}

mod api;
mod approval;
mod bounds;
mod builtin;
mod check;
mod cli;
mod component;
mod conformance;
mod console;
mod deploy;
mod docs;
mod embed;
mod faults;
mod features;
mod floors;
mod http_limits;
mod hyper;
mod lifecycle;
mod outbound;
mod plugins;
mod production;
mod properties;
mod python;
mod remote;
mod runtime;
mod sandbox;
mod scaffold;
mod scaleout;
mod secrets;
mod serve;
mod service;
mod service_api;
mod service_cli;
mod signatures;
mod sources;
mod store_faults;
mod talkback;
mod telemetry;
mod tiers;
mod toolsets;
mod validation;
