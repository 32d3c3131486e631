use toolhost_plugin_sdk::prelude::*;

/// A tool.
#[tool]
fn listed() -> String {
    String::new()
}

fn not_a_tool() {}

plugin!(listed, not_a_tool);

fn main() {}
