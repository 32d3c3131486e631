//! `clock`: the current time. A tool with no input and structured output.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use toolhost_plugin_sdk::prelude::*;

/// The current time.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Now {
    /// The current time in UTC, RFC 3339 (for example `2026-01-02T03:04:05.678Z`).
    #[schemars(extend("format" = "date-time"))]
    pub timestamp: String,
    /// Seconds since the Unix epoch.
    pub unix_seconds: i64,
}

/// Get the current system time as an RFC 3339 timestamp (UTC).
#[tool(title = "Current time", read_only)]
pub fn now() -> Result<Structured<Now>, ToolError> {
    let now = OffsetDateTime::now_utc();
    let timestamp = now.format(&Rfc3339).map_err(|e| ToolError::new(format!("cannot format the time: {e}")))?;
    Ok(Structured::new(Now { timestamp: timestamp.clone(), unix_seconds: now.unix_timestamp() }).with_text(timestamp))
}

plugin!(now);
