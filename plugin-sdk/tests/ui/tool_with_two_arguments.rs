use toolhost_plugin_sdk::prelude::*;

/// Adds.
#[tool]
fn add(a: f64, b: f64) -> f64 {
    a + b
}

plugin!(add);

fn main() {}
