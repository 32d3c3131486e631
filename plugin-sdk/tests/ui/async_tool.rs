use toolhost_plugin_sdk::prelude::*;

/// Waits.
#[tool]
async fn wait() -> String {
    String::new()
}

fn main() {}
