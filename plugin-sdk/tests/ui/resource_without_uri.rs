use toolhost_plugin_sdk::prelude::*;

/// Somewhere.
#[resource(mime_type = "text/plain")]
fn nowhere() -> String {
    String::new()
}

fn main() {}
