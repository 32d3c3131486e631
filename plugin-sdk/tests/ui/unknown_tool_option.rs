use toolhost_plugin_sdk::prelude::*;

/// Fast.
#[tool(fast)]
fn quick() -> String {
    String::new()
}

fn main() {}
