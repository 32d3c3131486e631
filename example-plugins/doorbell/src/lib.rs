//! `doorbell`: ring a doorbell by its id. A tool with input and no output.

use toolhost_plugin_sdk::prelude::*;

/// Which doorbell to ring.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Ring {
    /// The id of the doorbell, for example `front-door`.
    #[schemars(length(min = 1, max = 64))]
    pub doorbell_id: String,
}

/// Ring a doorbell given its id. Returns no content.
#[tool(title = "Ring doorbell", idempotent = false, destructive = false)]
pub fn ring(Ring { doorbell_id }: Ring) -> Result<(), ToolError> {
    if doorbell_id.trim().is_empty() {
        return Err(ToolError::new("the doorbell id is blank"));
    }
    // A real plugin would call the doorbell's API here (with an HTTP grant).
    Ok(())
}

plugin!(ring);
