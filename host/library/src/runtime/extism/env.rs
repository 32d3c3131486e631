//! Extism's host functions (`extism:host/env`), as Extism gives them: the
//! kernel's host half (blocks, input, output, error), config and
//! variables, HTTP through the allowed-host grants, and logs.
//!
//! A plugin passes handles and lengths of its choosing: each is checked
//! against the kernel's blocks, and a block is copied out only up to the
//! most its function accepts.

use std::collections::BTreeMap;

use wasmtime::{AsContextMut, Caller, Engine, FuncType, Linker};

use super::{ENV, ENV_FUNCTIONS, State, kernel_parts, user, write_new};
use crate::context::LogLevel;
use crate::runtime::guest::GuestCore;
use crate::runtime::kernel;
use crate::runtime::outcome::Stop;
use crate::sandbox::format_size;

/// Most bytes of variables an instance may keep (Extism's default).
const MAX_VAR_BYTES: usize = 1024 * 1024;
/// What a variable costs the host beyond its key and value bytes (its
/// place in the map, two allocations), counted against [`MAX_VAR_BYTES`]:
/// a million one-byte variables would otherwise hold tens of MiB.
const VAR_OVERHEAD: usize = 64;

/// An instance's variables (Extism's `var_get`/`var_set`), kept between
/// calls, with their total cost kept as they change.
#[derive(Default)]
pub(super) struct Vars {
    map: BTreeMap<String, Vec<u8>>,
    /// Bytes of keys and values, plus [`VAR_OVERHEAD`] each.
    held: usize,
}

impl Vars {
    fn cost(key: &str, value: &[u8]) -> usize {
        key.len() + value.len() + VAR_OVERHEAD
    }

    fn remove(&mut self, key: &str) {
        if let Some(value) = self.map.remove(key) {
            self.held -= Self::cost(key, &value);
        }
    }

    /// Set `key`, unless the store would then hold more than
    /// [`MAX_VAR_BYTES`].
    fn set(&mut self, key: String, value: Vec<u8>) -> Result<(), String> {
        let replaced = self.map.get(&key).map_or(0, |old| Self::cost(&key, old));
        let held = self.held - replaced + Self::cost(&key, &value);
        if held > MAX_VAR_BYTES {
            return Err(format!(
                "the variable store is full ({} at most, each variable counted with {VAR_OVERHEAD} bytes more)",
                format_size(MAX_VAR_BYTES as u64)
            ));
        }
        self.held = held;
        self.map.insert(key, value);
        Ok(())
    }
}
/// The bytes of a live block, copied, and the block freed (host functions
/// take ownership of the handles they are given). A block of more than
/// `max` bytes is refused before it is copied: the copy is the host's
/// memory, outside the plugin's limit.
fn take_block(
    store: &mut impl AsContextMut<Data = State>,
    handle: u64,
    what: &str,
    max: usize,
) -> wasmtime::Result<Vec<u8>> {
    let (mem, state) = kernel_parts(store.as_context_mut())?;
    let length = state.kernel.length(handle);
    if length > max as u64 {
        state.kernel.free(mem, handle);
        return Err(wasmtime::Error::new(Stop::Host(format!(
            "the {what} is {length} bytes, more than the {max} a plugin may pass"
        ))));
    }
    let bytes = state
        .kernel
        .block(mem, handle)
        .ok_or_else(|| wasmtime::Error::new(Stop::Host(format!("invalid memory handle {handle} for the {what}"))))?
        .to_vec();
    state.kernel.free(mem, handle);
    Ok(bytes)
}

/// [`take_block`] of UTF-8 text.
fn take_string(
    store: &mut impl AsContextMut<Data = State>,
    handle: u64,
    what: &str,
    max: usize,
) -> wasmtime::Result<String> {
    let bytes = take_block(store, handle, what, max)?;
    String::from_utf8(bytes).map_err(|_| wasmtime::Error::new(Stop::Host(format!("the {what} is not UTF-8"))))
}

/// The linker of an engine: every host function of `extism:host/env` and
/// WASI 0.1 (a runtime makes it once per engine).
pub(crate) fn linker(engine: &Engine) -> Result<Linker<State>, String> {
    define(engine).map_err(|e| format!("cannot define the host functions: {e}"))
}

fn define(engine: &Engine) -> wasmtime::Result<Linker<State>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p1::add_to_linker_async(&mut linker, |state: &mut State| &mut state.wasi)?;
    crate::runtime::files::cap_p1(&mut linker)?;
    define_kernel(engine, &mut linker)?;
    define_vars(&mut linker)?;
    define_http(&mut linker)?;
    define_logs(&mut linker)?;
    // hyper-mcp's host functions: talking back to the client.
    user::define(&mut linker)?;
    Ok(linker)
}

/// The kernel's host half: blocks, output and error. (Its Wasm half, the
/// functions that copy bytes, is linked per instance.)
fn define_kernel(engine: &Engine, linker: &mut Linker<State>) -> wasmtime::Result<()> {
    linker.func_wrap(ENV, "alloc", |mut c: Caller<'_, State>, n: u64| -> wasmtime::Result<u64> {
        kernel::alloc(&mut c, n, true).map_err(|_| wasmtime::Error::new(Stop::MemoryLimit))
    })?;
    linker.func_wrap(ENV, "free", |mut c: Caller<'_, State>, h: u64| -> wasmtime::Result<()> {
        let (mem, state) = kernel_parts(&mut c)?;
        state.kernel.free(mem, h);
        Ok(())
    })?;
    linker.func_wrap(ENV, "length", |c: Caller<'_, State>, h: u64| c.data().kernel.length(h))?;
    linker.func_wrap(ENV, "length_unsafe", |c: Caller<'_, State>, h: u64| c.data().kernel.length(h))?;
    linker.func_wrap(ENV, "input_set", |mut c: Caller<'_, State>, h: u64, n: u64| -> wasmtime::Result<()> {
        let (mem, state) = kernel_parts(&mut c)?;
        state.kernel.input_set(mem, h, n);
        Ok(())
    })?;
    linker.func_wrap(ENV, "output_set", |mut c: Caller<'_, State>, h: u64, n: u64| {
        c.data_mut().kernel.output_set(h, n)
    })?;
    linker.func_wrap(ENV, "output_length", |c: Caller<'_, State>| c.data().kernel.output_length())?;
    linker.func_wrap(ENV, "output_offset", |c: Caller<'_, State>| c.data().kernel.output_offset())?;
    linker.func_wrap(ENV, "error_set", |mut c: Caller<'_, State>, h: u64| c.data_mut().kernel.error_set(h))?;
    linker.func_wrap(ENV, "error_get", |c: Caller<'_, State>| c.data().kernel.error_get())?;
    linker.func_wrap(ENV, "memory_bytes", |c: Caller<'_, State>| c.data().kernel.memory_bytes())?;
    linker.func_wrap(ENV, "reset", |mut c: Caller<'_, State>| -> wasmtime::Result<()> {
        let (mem, state) = kernel_parts(&mut c)?;
        state.kernel.reset(mem, &mut state.core.memory);
        Ok(())
    })?;
    // The Wasm half's functions, declared with their types so that a
    // plugin's imports are checked in full at load. An instance imports the
    // Wasm half's own functions in their place (`instantiate`): these are
    // never called.
    for &name in kernel::WASM_FUNCTIONS {
        let Some((_, params, results)) = ENV_FUNCTIONS.iter().find(|(n, _, _)| *n == name) else {
            return Err(wasmtime::format_err!("the kernel's `{name}` has no signature"));
        };
        let ty = FuncType::new(engine, params.iter().cloned(), results.iter().cloned());
        linker.func_new(ENV, name, ty, move |_, _, _| {
            Err(wasmtime::Error::new(Stop::Host(format!("`{name}` is the kernel's Wasm half's, linked per instance"))))
        })?;
    }
    Ok(())
}

/// Config and variables.
fn define_vars(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    linker.func_wrap(ENV, "config_get", |mut c: Caller<'_, State>, key: u64| -> wasmtime::Result<u64> {
        let key = take_string(&mut c, key, "config key", MAX_VAR_BYTES)?;
        match c.data().core.config_value(&key).map(str::to_owned) {
            Some(value) => write_new(&mut c, value.as_bytes()),
            None => Ok(0),
        }
    })?;
    linker.func_wrap(ENV, "var_get", |mut c: Caller<'_, State>, key: u64| -> wasmtime::Result<u64> {
        let key = take_string(&mut c, key, "var key", MAX_VAR_BYTES)?;
        match c.data().vars.map.get(&key).cloned() {
            Some(value) => write_new(&mut c, &value),
            None => Ok(0),
        }
    })?;
    linker.func_wrap(ENV, "var_set", |mut c: Caller<'_, State>, key: u64, value: u64| -> wasmtime::Result<()> {
        let key = take_string(&mut c, key, "var key", MAX_VAR_BYTES)?;
        if value == 0 {
            c.data_mut().vars.remove(&key);
            return Ok(());
        }
        let value = take_block(&mut c, value, "var value", MAX_VAR_BYTES)?;
        c.data_mut().vars.set(key, value).map_err(|full| wasmtime::Error::new(Stop::Host(full)))
    })?;
    Ok(())
}

/// HTTP, through the allowed-host grants.
fn define_http(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    linker.func_wrap_async(ENV, "http_request", |mut c: Caller<'_, State>, (request, body): (u64, u64)| {
        Box::new(async move {
            let description =
                take_block(&mut c, request, "HTTP request description", crate::runtime::http::MAX_DESCRIPTION_BYTES)?;
            let body = match body {
                0 => None,
                body => {
                    Some(take_block(&mut c, body, "HTTP request body", crate::runtime::http::MAX_REQUEST_BODY_BYTES)?)
                }
            };
            let state = c.data_mut();
            state.http_status = 0;
            state.http_headers = None;
            let (allowed, deadline) = (state.core.env.allowed_hosts.clone(), state.core.deadline);
            // The body goes into the kernel's memory, under the limit.
            let limit = crate::runtime::http::BodyLimit::within(
                state.core.memory.room(),
                "more than the plugin's memory limit leaves room for",
            );
            let response = crate::runtime::http::request(&description, body, allowed, deadline, limit, ()).await?;
            let state = c.data_mut();
            state.http_status = response.status;
            state.http_headers = Some(response.headers);
            write_new(&mut c, &response.body)
        })
    })?;
    linker.func_wrap(ENV, "http_status_code", |c: Caller<'_, State>| i32::from(c.data().http_status))?;
    linker.func_wrap(ENV, "http_headers", |mut c: Caller<'_, State>| -> wasmtime::Result<u64> {
        let Some(json) = c.data().http_headers.as_ref().map(|headers| serde_json::to_vec(headers).unwrap_or_default())
        else {
            return Ok(0);
        };
        write_new(&mut c, &json)
    })?;
    Ok(())
}

/// Logs, into the host's tracing, tagged with the plugin's name, and to the
/// call's log sink.
fn define_logs(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    linker.func_wrap(ENV, "log_error", |c: Caller<'_, State>, h: u64| log(c, LogLevel::Error, h))?;
    linker.func_wrap(ENV, "log_warn", |c: Caller<'_, State>, h: u64| log(c, LogLevel::Warn, h))?;
    linker.func_wrap(ENV, "log_info", |c: Caller<'_, State>, h: u64| log(c, LogLevel::Info, h))?;
    linker.func_wrap(ENV, "log_debug", |c: Caller<'_, State>, h: u64| log(c, LogLevel::Debug, h))?;
    linker.func_wrap(ENV, "log_trace", |c: Caller<'_, State>, h: u64| log(c, LogLevel::Trace, h))?;
    linker.func_wrap(ENV, "get_log_level", |c: Caller<'_, State>| log_level(&c.data().core))?;
    Ok(())
}

fn log(mut caller: Caller<'_, State>, level: LogLevel, handle: u64) -> wasmtime::Result<()> {
    let (mem, state) = kernel_parts(&mut caller)?;
    if !state.core.wants_log(level) {
        state.kernel.free(mem, handle);
        return Ok(());
    }
    // At most a line's worth is read, within the call's log budget.
    let Some(bytes) = state.kernel.block(mem, handle) else {
        return Err(wasmtime::Error::new(Stop::Host(format!("invalid memory handle {handle} for log message"))));
    };
    state.core.log(level, bytes);
    state.kernel.free(mem, handle);
    Ok(())
}

/// Extism's numbering: trace 0 … error 4, `i32::MAX` when logging is off.
fn log_level(core: &GuestCore) -> i32 {
    match core.log_level() {
        None => i32::MAX,
        Some(LogLevel::Trace) => 0,
        Some(LogLevel::Debug) => 1,
        Some(LogLevel::Info) => 2,
        Some(LogLevel::Warn) => 3,
        Some(_) => 4,
    }
}
