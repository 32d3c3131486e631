use toolhost_plugin_sdk::prelude::*;

#[tool]
fn undocumented() -> String {
    String::new()
}

plugin!(undocumented);

fn main() {}
