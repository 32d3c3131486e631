use toolhost_plugin_sdk::prelude::*;

/// A tool.
#[tool]
fn a_tool() -> String {
    String::new()
}

plugin! { tools: [a_tool], widgets: [a_tool] }

fn main() {}
