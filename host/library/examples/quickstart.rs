//! The library in a few lines: load a plugin and call one of its tools,
//! then serve a tool of your own program beside plugins in a registry.
//!
//! ```console
//! $ cargo xtask build-plugins
//! $ cargo run -q -p toolhost --example quickstart
//! calculator add -> 5
//! host__add -> {"sum":5.0}
//! ```

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolhost::{ApproveAll, BuiltinTool, BuiltinToolset, NoSecrets, Registry};

/// The arguments of the program's own `add`.
#[derive(Deserialize, JsonSchema)]
struct Add {
    a: f64,
    b: f64,
}

/// Its answer.
#[derive(Serialize, JsonSchema)]
struct Sum {
    sum: f64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let plugin = toolhost::Plugin::builder_from_file("target/plugins/calculator.wasm")
        .with_timeout(std::time::Duration::from_secs(5))
        .build()
        .await?;
    let result = plugin.call_tool("add", serde_json::json!({"a": 2, "b": 3})).await?;
    assert_eq!(result.texts().next(), Some("5"));
    println!("calculator add -> {}", result.texts().collect::<String>());

    let registry = Registry::new(Arc::new(NoSecrets));
    let host = BuiltinToolset::new("host").with_tool(BuiltinTool::typed(
        "add",
        "Add two numbers.",
        |Add { a, b }| async move {
            Ok::<_, String>(Sum { sum: a + b }) // schemas from Add and Sum
        },
    ));
    registry.register_builtin(host).await?; // before or after loading a file
    let result = registry.call_tool("host__add", json!({"a": 2, "b": 3}), &ApproveAll).await?;
    println!("host__add -> {}", serde_json::to_string(&result.structured_content)?);
    Ok(())
}
