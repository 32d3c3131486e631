//! A tool that `plugin!` does not list is dead code, which the compiler
//! reports at the tool's name (an error here, a warning by default): it
//! does not silently vanish from the plugin.
#![deny(dead_code)]

use toolhost_plugin_sdk::prelude::*;

/// Listed.
#[tool]
pub fn listed() -> String {
    String::new()
}

/// Forgotten.
#[tool]
pub fn forgotten() -> String {
    String::new()
}

plugin!(listed);

fn main() {}
