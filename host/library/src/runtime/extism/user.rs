//! hyper-mcp's host functions (`extism:host/user`), which its plugins (v1
//! and v2) import: elicitation, sampling, roots, logging, progress, list
//! changes, keyring secrets and OAuth tokens.
//!
//! Everything a plugin passes is hostile input: it is parsed as JSON,
//! rebuilt with only the fields the protocol defines, its strings redacted
//! of the plugin's secrets, and a progress notice carries the call's own
//! token (a plugin cannot speak for another call). Requests reach the
//! call's [`CallClient`](crate::CallClient) within the call's deadline (and
//! the plugin's own timeout for an elicitation); without a client the
//! plugin gets a refusal in the answer's shape, as hyper-mcp answers when
//! its client lacks the capability. Notices are at most
//! [`MAX_NOTICES_PER_RUN`] per run. A keyring secret is handed only when
//! the person running toolhost granted that entry, and only to tool calls.

use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use wasmtime::{Caller, Linker, ValType};

use std::sync::Arc;

use super::{State, kernel_parts, write_new};
use crate::client::{CallClient, ClientNotice, ClientRequest};
use crate::context::LogLevel;
use crate::runtime::guest::{self, GuestCore};
use crate::runtime::outcome::Stop;

/// The import module of hyper-mcp's host functions.
pub(crate) const USER: &str = "extism:host/user";
/// hyper-mcp's function by which a plugin says its tool list changed (a
/// plugin that imports it keeps its list in its instance).
pub(crate) const NOTIFY_TOOL_LIST_CHANGED: &str = "notify_tool_list_changed";

/// Notices (progress, list changes, resource updates) a run may send; past
/// this they are dropped.
pub(crate) const MAX_NOTICES_PER_RUN: u32 = 1024;
/// Bytes of notices (their parameters as JSON) a run may send; past this
/// they are dropped. The count alone let 1024 progress messages of 16 MiB
/// each into the client's queue.
pub(crate) const MAX_NOTICE_BYTES_PER_RUN: usize = 1 << 20;

/// Requests (sampling, elicitation, roots) a run may make of its client;
/// past this they are refused, as a client without the capability refuses
/// them. Each may hold a client's model or user for as long as the call's
/// deadline allows: a loop of them was one plugin's without end.
pub(crate) const MAX_REQUESTS_PER_RUN: u32 = 64;

/// Every function toolhost serves in `extism:host/user`: its name, and
/// whether it takes a memory handle and returns one.
pub(crate) const FUNCTIONS: &[(&str, bool, bool)] = &[
    ("create_elicitation", true, true),
    ("create_message", true, true),
    ("get_access_token", true, true),
    ("get_keyring_secret", true, true),
    ("list_roots", false, true),
    ("notify_logging_message", true, false),
    ("notify_progress", true, false),
    ("notify_prompt_list_changed", false, false),
    ("notify_resource_list_changed", false, false),
    ("notify_resource_updated", true, false),
    (NOTIFY_TOOL_LIST_CHANGED, false, false),
    ("notify_url_elicitation_completed", true, false),
];

/// The Wasm type of a served function, `(param i64?) (result i64?)`.
pub(crate) fn signature(takes: bool, returns: bool) -> (Vec<ValType>, Vec<ValType>) {
    (if takes { vec![ValType::I64] } else { vec![] }, if returns { vec![ValType::I64] } else { vec![] })
}

/// Define every function of [`FUNCTIONS`] in `linker`.
pub(crate) fn define(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    define_requests(linker)?;
    define_notices(linker)?;
    define_secrets(linker)
}

/// The requests a plugin makes of the call's client: elicitation, sampling
/// and roots.
fn define_requests(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    linker.func_wrap_async(USER, "create_elicitation", |mut c: Caller<'_, State>, (h,): (u64,)| {
        Box::new(async move {
            let mut params = json_argument(&mut c, h, "create_elicitation")?;
            // hyper-mcp's `timeout`, in seconds, bounds the wait (within the
            // call's deadline, which bounds it anyway).
            let timeout = params
                .remove("timeout")
                .and_then(|t| t.as_f64())
                .filter(|t| t.is_finite() && *t > 0.0)
                .map(|t| Duration::from_secs_f64(t.min(86_400.0)));
            let core = &mut c.data_mut().core;
            let params = core
                .checked_request(ClientRequest::Elicitation, params)
                .map_err(|m| host_error("create_elicitation", m))?;
            let answer = match core.ask(ClientRequest::Elicitation, params, timeout).await {
                Ok(answer) => answer,
                Err(why) => json!({"action": "decline", "content": {"error": why}}),
            };
            write_json(&mut c, &answer)
        })
    })?;
    linker.func_wrap_async(USER, "create_message", |mut c: Caller<'_, State>, (h,): (u64,)| {
        Box::new(async move {
            let params = json_argument(&mut c, h, "create_message")?;
            let core = &mut c.data_mut().core;
            let params =
                core.checked_request(ClientRequest::Sampling, params).map_err(|m| host_error("create_message", m))?;
            let answer = match core.ask(ClientRequest::Sampling, params, None).await {
                Ok(answer) => answer,
                Err(why) => json!({
                    "role": "assistant",
                    "content": {"type": "text", "text": why},
                    "model": "",
                    "stopReason": "error",
                }),
            };
            write_json(&mut c, &answer)
        })
    })?;
    linker.func_wrap_async(USER, "list_roots", |mut c: Caller<'_, State>, (): ()| {
        Box::new(async move {
            let answer = match c.data_mut().core.ask(ClientRequest::Roots, Map::new(), None).await {
                Ok(answer) => answer,
                Err(why) => {
                    c.data_mut().core.log(LogLevel::Warn, format!("list_roots: {why}; answered no roots").as_bytes());
                    json!({"roots": []})
                }
            };
            write_json(&mut c, &answer)
        })
    })?;
    Ok(())
}

/// The notices a plugin sends: log lines, progress, list changes and
/// resource updates.
fn define_notices(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    linker.func_wrap(USER, "notify_logging_message", |mut c: Caller<'_, State>, h: u64| -> wasmtime::Result<()> {
        let params = json_argument(&mut c, h, "notify_logging_message")?;
        let state = c.data_mut();
        let level = log_level(&params).map_err(|m| host_error("notify_logging_message", m))?;
        if !state.core.wants_log(level) {
            return Ok(());
        }
        state.core.log(level, log_line(&params).as_bytes());
        Ok(())
    })?;
    linker.func_wrap_async(USER, "notify_progress", |mut c: Caller<'_, State>, (h,): (u64,)| {
        Box::new(async move {
            let params = json_argument(&mut c, h, "notify_progress")?;
            let state = c.data_mut();
            let Some(progress) = params.get("progress").filter(|p| p.is_number()).cloned() else {
                return Err(host_error("notify_progress", "its `progress` is not a number".into()));
            };
            let total = params.get("total").filter(|t| t.is_number()).cloned();
            let message = params.get("message").and_then(Value::as_str).map(str::to_owned);
            let Some(notice) = state.core.progress_notice(progress, total, message) else { return Ok(()) };
            state.core.tell(notice).await;
            Ok(())
        })
    })?;
    linker.func_wrap_async(USER, "notify_prompt_list_changed", |mut c: Caller<'_, State>, (): ()| {
        Box::new(async move {
            c.data_mut().core.tell(ClientNotice::PromptListChanged).await;
            Ok(())
        })
    })?;
    linker.func_wrap_async(USER, "notify_resource_list_changed", |mut c: Caller<'_, State>, (): ()| {
        Box::new(async move {
            c.data_mut().core.tell(ClientNotice::ResourceListChanged).await;
            Ok(())
        })
    })?;
    linker.func_wrap_async(USER, "notify_resource_updated", |mut c: Caller<'_, State>, (h,): (u64,)| {
        Box::new(async move {
            let params = json_argument(&mut c, h, "notify_resource_updated")?;
            let notice = c
                .data()
                .core
                .notice("notifications/resources/updated", Some(params))
                .map_err(|m| host_error("notify_resource_updated", m))?;
            c.data_mut().core.tell(notice).await;
            Ok(())
        })
    })?;
    linker.func_wrap_async(USER, "notify_url_elicitation_completed", |mut c: Caller<'_, State>, (h,): (u64,)| {
        Box::new(async move {
            let params = json_argument(&mut c, h, "notify_url_elicitation_completed")?;
            let notice = c
                .data()
                .core
                .notice("notifications/elicitation/complete", Some(params))
                .map_err(|m| host_error("notify_url_elicitation_completed", m))?;
            c.data_mut().core.tell(notice).await;
            Ok(())
        })
    })?;
    linker.func_wrap(USER, NOTIFY_TOOL_LIST_CHANGED, |c: Caller<'_, State>| {
        // The plugin's tool list is read again by whoever follows it (a
        // registry), which then tells its own clients. Only a call (a tool,
        // a prompt or resource read) may say so: from `describe` (or
        // start-up code), the reading again would itself say so again, a
        // loop with no end that every client of the registry would hear.
        if c.data().core.is_call {
            c.data().core.env.changes.send_modify(|n| *n = n.wrapping_add(1));
        }
    })?;
    Ok(())
}

/// The secrets a plugin asks for: granted keyring entries and (refused)
/// OAuth tokens.
fn define_secrets(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    linker.func_wrap(USER, "get_keyring_secret", |mut c: Caller<'_, State>, h: u64| -> wasmtime::Result<u64> {
        let params = json_argument(&mut c, h, "get_keyring_secret")?;
        let state = c.data_mut();
        let (Some(service), Some(user)) =
            (params.get("service").and_then(Value::as_str), params.get("user").and_then(Value::as_str))
        else {
            return Err(host_error("get_keyring_secret", "it needs `service` and `user` strings".into()));
        };
        let key = (service.to_owned(), user.to_owned());
        let value = match state.core.env.keyring.get(&key) {
            Some(value) if state.core.is_call => value.clone(),
            Some(_) => {
                state.core.log(LogLevel::Warn, b"get_keyring_secret: secrets are handed to tool calls only, not to listing tools; answered empty");
                String::new()
            }
            None => {
                // Names only: what the plugin asked for, never a value.
                let line = format!(
                    "get_keyring_secret: the keyring entry (service {service:?}, user {user:?}) is not granted to this plugin; answered empty"
                );
                state.core.log(LogLevel::Warn, line.as_bytes());
                String::new()
            }
        };
        write_new(&mut c, value.as_bytes())
    })?;
    linker.func_wrap(USER, "get_access_token", |mut c: Caller<'_, State>, h: u64| -> wasmtime::Result<u64> {
        json_argument(&mut c, h, "get_access_token")?;
        c.data_mut().core.log(
            LogLevel::Warn,
            b"get_access_token: toolhost has no OAuth client configured for plugins; answered no token",
        );
        write_json(&mut c, &Value::Null)
    })?;
    Ok(())
}

/// The level of a logging notice, as the protocol names it.
fn log_level(params: &Map<String, Value>) -> Result<LogLevel, String> {
    match params.get("level").and_then(Value::as_str) {
        Some("debug") => Ok(LogLevel::Debug),
        Some("info" | "notice") => Ok(LogLevel::Info),
        Some("warning") => Ok(LogLevel::Warn),
        Some("error" | "critical" | "alert" | "emergency") => Ok(LogLevel::Error),
        _ => Err("its `level` is not one of debug, info, notice, warning, error, critical, alert, emergency".into()),
    }
}

/// A logging notice's line: its logger's name, then its data as text.
fn log_line(params: &Map<String, Value>) -> String {
    let text = match params.get("data") {
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    match params.get("logger").and_then(Value::as_str) {
        Some(logger) => format!("{logger}: {text}"),
        None => text,
    }
}

fn host_error(function: &str, message: String) -> wasmtime::Error {
    wasmtime::Error::new(Stop::Host(format!("bad argument to the host function `{function}`: {message}")))
}

/// A request's parameters as the protocol has them, or what is wrong.
fn request_params(request: ClientRequest, params: Map<String, Value>) -> Result<Map<String, Value>, String> {
    match request {
        ClientRequest::Elicitation => elicitation_params(params),
        ClientRequest::Sampling => sampling_params(params),
        _ => Ok(Map::new()),
    }
}

/// An object with only the string field `key`.
fn only_string(params: &Map<String, Value>, key: &str) -> Result<Map<String, Value>, String> {
    match params.get(key) {
        Some(Value::String(value)) => Ok(Map::from_iter([(key.to_owned(), Value::String(value.clone()))])),
        _ => Err(format!("its `{key}` is not a string")),
    }
}

/// Copy the fields in `keys` that are present.
fn pick(params: &Map<String, Value>, keys: &[&str]) -> Map<String, Value> {
    keys.iter().filter_map(|&k| params.get(k).map(|v| (k.to_owned(), v.clone()))).collect()
}

/// An elicitation's parameters, as the protocol has them: a form
/// (`message`, `requestedSchema`) or a URL (`message`, `url`,
/// `elicitationId`).
fn elicitation_params(params: Map<String, Value>) -> Result<Map<String, Value>, String> {
    if !params.get("message").is_some_and(Value::is_string) {
        return Err("its `message` is not a string".into());
    }
    match params.get("mode").and_then(Value::as_str).unwrap_or("form") {
        "form" => {
            if !params.get("requestedSchema").is_some_and(Value::is_object) {
                return Err("a form elicitation needs a `requestedSchema` object".into());
            }
            Ok(pick(&params, &["mode", "message", "requestedSchema"]))
        }
        "url" => {
            if !params.get("url").is_some_and(Value::is_string)
                || !params.get("elicitationId").is_some_and(Value::is_string)
            {
                return Err("a URL elicitation needs `url` and `elicitationId` strings".into());
            }
            Ok(pick(&params, &["mode", "message", "url", "elicitationId"]))
        }
        other => Err(format!("its `mode` {other:?} is neither \"form\" nor \"url\"")),
    }
}

/// A sampling request's parameters, as the protocol has them.
fn sampling_params(params: Map<String, Value>) -> Result<Map<String, Value>, String> {
    if !params.get("messages").is_some_and(Value::is_array) {
        return Err("its `messages` is not an array".into());
    }
    if !params.get("maxTokens").is_some_and(Value::is_u64) {
        return Err("its `maxTokens` is not a non-negative integer".into());
    }
    Ok(pick(
        &params,
        &[
            "messages",
            "modelPreferences",
            "systemPrompt",
            "includeContext",
            "temperature",
            "maxTokens",
            "stopSequences",
            "metadata",
            "tools",
            "toolChoice",
        ],
    ))
}

/// The JSON object a plugin passed to `function` (the block is read, not
/// freed: the guest owns it).
pub(crate) fn json_argument(
    c: &mut Caller<'_, State>,
    handle: u64,
    function: &str,
) -> wasmtime::Result<Map<String, Value>> {
    let (mem, state) = kernel_parts(c)?;
    let bytes = state
        .kernel
        .block(mem, handle)
        .ok_or_else(|| host_error(function, format!("invalid memory handle {handle}")))?;
    // Within the output's bound: a block of `[0,0,…]` the size of the
    // kernel memory would otherwise become sixteen times its size in the
    // host, outside the memory limit. The bound weighs values, not the
    // whitespace between them, so the block's length is bounded too: a
    // parse inside a host call is not interrupted by the call's deadline.
    let max = state.core.env.limits.max_output_bytes;
    if bytes.len() > max {
        return Err(host_error(
            function,
            format!("its argument is {} bytes, more than the output limit of {max}", bytes.len()),
        ));
    }
    crate::runtime::output::parse_object(bytes, max).map_err(|problem| host_error(function, problem))
}

/// `value` as a new block of JSON.
fn write_json(c: &mut Caller<'_, State>, value: &Value) -> wasmtime::Result<u64> {
    let bytes = serde_json::to_vec(value).map_err(|e| wasmtime::Error::new(Stop::Host(e.to_string())))?;
    write_new(c, &bytes)
}

impl GuestCore {
    /// `params` with every secret value the plugin holds replaced (nothing,
    /// if redacting would blow the bound).
    pub(crate) fn redacted(&self, params: Map<String, Value>) -> Map<String, Value> {
        let mut value = Value::Object(params);
        if self.env.redactor.redact_json(&mut value, self.env.limits.max_output_bytes).is_err() {
            return Map::new();
        }
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    /// A progress notice of the running call: the call's own token,
    /// whatever the plugin wrote (`None` when the caller asked for no
    /// progress), the message redacted.
    pub(crate) fn progress_notice(
        &self,
        progress: Value,
        total: Option<Value>,
        message: Option<String>,
    ) -> Option<ClientNotice> {
        let token = self.progress_token.clone()?;
        let mut notice = Map::new();
        notice.insert("progressToken".into(), token);
        notice.insert("progress".into(), progress);
        if let Some(total) = total {
            notice.insert("total".into(), total);
        }
        if let Some(message) = message {
            notice.insert("message".into(), Value::String(message));
        }
        Some(ClientNotice::Progress(self.redacted(notice)))
    }

    /// `params` for `request`, as the protocol has them (what is wrong, if
    /// they are not), redacted.
    pub(crate) fn checked_request(
        &self,
        request: ClientRequest,
        params: Map<String, Value>,
    ) -> Result<Map<String, Value>, String> {
        Ok(self.redacted(request_params(request, params)?))
    }

    /// Ask the running call's client (none: refused), within `timeout` (and
    /// the call's deadline, which bounds the whole run); the answer, or why
    /// there is none, as the plugin is told. `params`: checked
    /// ([`checked_request`](Self::checked_request)).
    pub(crate) async fn ask(
        &mut self,
        request: ClientRequest,
        params: Map<String, Value>,
        timeout: Option<Duration>,
    ) -> Result<Value, String> {
        let Some(client) = self.client.clone() else {
            return Err(format!("{request} refused: this call was made without a client to ask"));
        };
        self.requests = self.requests.saturating_add(1);
        if self.requests > MAX_REQUESTS_PER_RUN {
            return Err(format!(
                "{request} refused: a call may make at most {MAX_REQUESTS_PER_RUN} requests of its client"
            ));
        }
        let asked = async move { Ok(CallClient::request(&*client, request, params).await) };
        let answer = match timeout {
            Some(timeout) => match guest::bounded(&self.env.ticker, Instant::now().checked_add(timeout), asked).await {
                Ok(answer) => answer,
                Err(_) => Err(format!("no answer within {timeout:?}")),
            },
            None => asked.await.unwrap_or_else(|e: wasmtime::Error| Err(e.to_string())),
        };
        answer.map_err(|why| format!("{request} failed: {why}"))
    }

    /// The notice of the MCP notification `method` a plugin sends, with
    /// `params` checked and redacted (progress has its own,
    /// [`progress_notice`](Self::progress_notice)); what is wrong, if it is
    /// not one the host relays.
    pub(crate) fn notice(&self, method: &str, params: Option<Map<String, Value>>) -> Result<ClientNotice, String> {
        let params = || params.ok_or_else(|| format!("the notification {method} needs parameters (a JSON object)"));
        Ok(match method {
            "notifications/prompts/list_changed" => ClientNotice::PromptListChanged,
            "notifications/resources/list_changed" => ClientNotice::ResourceListChanged,
            "notifications/resources/updated" => {
                ClientNotice::ResourceUpdated(self.redacted(only_string(&params()?, "uri")?))
            }
            "notifications/elicitation/complete" => {
                ClientNotice::ElicitationComplete(self.redacted(only_string(&params()?, "elicitationId")?))
            }
            other => return Err(format!("`{other}` is not a notification the host relays for a plugin")),
        })
    }

    /// Send the running call's client `notice`, within the run's notice
    /// budget.
    pub(crate) async fn tell(&mut self, notice: ClientNotice) {
        if let Some(client) = self.admit_notice(&notice) {
            client.notify(notice).await;
        }
    }

    /// The client to send a notice to, if there is one and the run's
    /// notice budget allows.
    fn admit_notice(&mut self, notice: &ClientNotice) -> Option<Arc<dyn CallClient>> {
        let client = self.client.clone()?;
        // Weighed only when there is a client to send it to.
        let bytes = match notice {
            ClientNotice::Progress(params)
            | ClientNotice::ResourceUpdated(params)
            | ClientNotice::ElicitationComplete(params) => serde_json::to_vec(params).map_or(0, |json| json.len()),
            _ => 0,
        };
        let over_before = self.notices > MAX_NOTICES_PER_RUN || self.notice_bytes > MAX_NOTICE_BYTES_PER_RUN;
        self.notices = self.notices.saturating_add(1);
        self.notice_bytes = self.notice_bytes.saturating_add(bytes);
        if self.notices > MAX_NOTICES_PER_RUN || self.notice_bytes > MAX_NOTICE_BYTES_PER_RUN {
            if !over_before {
                let line = format!(
                    "more than {MAX_NOTICES_PER_RUN} notices or {MAX_NOTICE_BYTES_PER_RUN} bytes of them in one \
                     call; the rest are dropped"
                );
                self.log(LogLevel::Warn, line.as_bytes());
            }
            return None;
        }
        Some(client)
    }
}
