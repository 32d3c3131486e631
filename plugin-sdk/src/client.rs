//! Talking back to the client a call is made for, the same on both
//! targets: log messages, progress, and requests (elicitation, sampling,
//! roots) that the host relays to the caller's MCP client.
//!
//! On `wasm32-wasip1` these are hyper-mcp's `extism:host/user` host
//! functions (and Extism's log functions), which toolhost serves; on
//! `wasm32-wasip2` the `client` interface of `wit/plugin.wit`. A plugin
//! that never calls them imports neither. Every wait is bounded by the
//! call's deadline; a call made without a client gets an error saying so.
//!
//! ```no_run
//! use toolhost_plugin_sdk::client;
//! use toolhost_plugin_sdk::prelude::*;
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct Count {
//!     /// How far to count.
//!     n: u32,
//! }
//!
//! /// Count to `n`, reporting progress.
//! #[tool]
//! fn count(Count { n }: Count) -> String {
//!     client::log(client::LogLevel::Info, format!("counting to {n}"));
//!     for i in 1..=n {
//!         client::progress(f64::from(i), Some(f64::from(n)), None);
//!     }
//!     format!("counted to {n}")
//! }
//! ```

use serde_json::{Value, json};

use crate::ToolError;

/// How much a log message matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    /// Details for debugging.
    Debug,
    /// Normal operation.
    Info,
    /// Something to look at.
    Warn,
    /// Something failed.
    Error,
}

/// Send a log message: to the host's log, and to the caller's MCP client
/// when it asked for log messages at this level.
pub fn log(level: LogLevel, message: impl AsRef<str>) {
    imp::log(level, message.as_ref());
}

/// Report the call's progress (`progress` rising; `total` if known). Sent
/// only when the caller asked for progress.
pub fn progress(progress: f64, total: Option<f64>, message: Option<&str>) {
    imp::progress(progress, total, message);
}

/// Ask the user for input (`elicitation/create`): `message` and a
/// `requested_schema` (a flat object of primitive properties, as the
/// protocol allows). The client's answer: `{"action": "accept" |
/// "decline" | "cancel", "content": {...}}`.
pub fn elicit(message: &str, requested_schema: Value) -> Result<Value, ToolError> {
    request("elicitation/create", json!({"message": message, "requestedSchema": requested_schema}))
}

/// Ask the client's model (`sampling/createMessage`) with one user message;
/// the client's result (`role`, `content`, `model`, `stopReason`).
pub fn sample(prompt: &str, max_tokens: u32) -> Result<Value, ToolError> {
    request(
        "sampling/createMessage",
        json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
            "maxTokens": max_tokens,
        }),
    )
}

/// The client's roots (`roots/list`): `{"roots": [{"uri", "name"}]}`.
pub fn roots() -> Result<Value, ToolError> {
    request("roots/list", json!({}))
}

/// Make `method` of the client with `params` (a JSON object):
/// `elicitation/create`, `sampling/createMessage` or `roots/list`. The
/// client's result, or why there is none.
pub fn request(method: &str, params: Value) -> Result<Value, ToolError> {
    imp::request(method, params).map_err(ToolError::new)
}

#[cfg(not(all(target_os = "wasi", target_env = "p2")))]
mod imp {
    use extism_pdk::{Json, host_fn};
    use serde_json::{Value, json};

    use super::LogLevel;

    #[host_fn]
    extern "ExtismHost" {
        fn create_elicitation(input: Json<Value>) -> Json<Value>;
        fn create_message(input: Json<Value>) -> Json<Value>;
        fn list_roots() -> Json<Value>;
        fn notify_progress(input: Json<Value>);
    }

    pub(super) fn log(level: LogLevel, message: &str) {
        let level = match level {
            LogLevel::Debug => extism_pdk::LogLevel::Debug,
            LogLevel::Info => extism_pdk::LogLevel::Info,
            LogLevel::Warn => extism_pdk::LogLevel::Warn,
            LogLevel::Error => extism_pdk::LogLevel::Error,
        };
        extism_pdk::log!(level, "{message}");
    }

    pub(super) fn progress(progress: f64, total: Option<f64>, message: Option<&str>) {
        let mut params = json!({"progressToken": "", "progress": progress});
        if let Some(total) = total {
            params["total"] = json!(total);
        }
        if let Some(message) = message {
            params["message"] = json!(message);
        }
        // Progress is best-effort: a host that cannot take it loses it.
        let _ = unsafe { notify_progress(Json(params)) };
    }

    pub(super) fn request(method: &str, params: Value) -> Result<Value, String> {
        let answer = match method {
            "elicitation/create" => unsafe { create_elicitation(Json(params)) },
            "sampling/createMessage" => unsafe { create_message(Json(params)) },
            "roots/list" => unsafe { list_roots() },
            other => return Err(format!("`{other}` is not a request a plugin may make of the client")),
        };
        let Json(answer) = answer.map_err(|e| e.to_string())?;
        // The host answers a refused request in the answer's shape (as
        // hyper-mcp does): a decline carrying an error, a sampling result
        // that stopped on `error`.
        if answer["action"] == "decline"
            && let Some(error) = answer["content"]["error"].as_str()
        {
            return Err(error.to_owned());
        }
        if answer["stopReason"] == "error" {
            return Err(answer["content"]["text"].as_str().unwrap_or("sampling failed").to_owned());
        }
        Ok(answer)
    }
}

#[cfg(all(target_os = "wasi", target_env = "p2"))]
mod imp {
    use serde_json::Value;

    use super::LogLevel;
    use crate::__component::bindings::toolhost::plugin::{client, host};

    pub(super) fn log(level: LogLevel, message: &str) {
        let level = match level {
            LogLevel::Debug => host::LogLevel::Debug,
            LogLevel::Info => host::LogLevel::Info,
            LogLevel::Warn => host::LogLevel::Warn,
            LogLevel::Error => host::LogLevel::Error,
        };
        host::log(level, message);
    }

    pub(super) fn progress(progress: f64, total: Option<f64>, message: Option<&str>) {
        client::progress(progress, total, message);
    }

    pub(super) fn request(method: &str, params: Value) -> Result<Value, String> {
        let answer = client::request(method, &params.to_string())?;
        serde_json::from_str(&answer).map_err(|e| format!("the client's answer is not JSON ({e})"))
    }
}
