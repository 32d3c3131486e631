//! One plugin output, read by toolhost and by Extism's own host: both take
//! it as the same result, or both refuse it.
//!
//! The guest is the same Wasm module in both hosts, written against the
//! Extism kernel's host functions as every Extism plugin kit writes: it
//! takes a payload (toolhost hands it as the config value `out`, Extism as
//! the call's input), copies it into a fresh block eight bytes and then one
//! byte at a time, and ends as the payload's first byte says: `o` sets the
//! rest as its output and returns 0, `t` does so one byte short (cutting a
//! character in two when the last is wider than a byte), `e` sets the rest
//! as its error and returns 1, `r` returns 1 with no error, `z` sets the
//! output and still returns 1.
//!
//! toolhost reads the output frame and checks the result; the reference
//! is what an Extism-based MCP host does (hyper-mcp's, for one): Extism's
//! `Plugin::call`, then `serde_json` into rmcp's `CallToolResult`.
//! Where both take the output, rmcp reads toolhost's result as it reads
//! the plugin's output (toolhost also passes on members MCP does not name).
//! toolhost refuses some results Extism and rmcp take: each such rule is
//! named in [`stricter`], and any other disagreement is a failure.
#![no_main]

use std::cell::RefCell;
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

/// The guest's `describe` output: one tool, `echo`.
const DESCRIBE: &str = r#"{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}"#;

/// The guest: `describe` answers [`DESCRIBE`] (written in at `{describe}`,
/// its length at `{describe_len}`); `call` does what the payload's first
/// byte says.
const GUEST: &str = r#"
(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "length" (func $length (param i64) (result i64)))
  (import "extism:host/env" "load_u8" (func $load_u8 (param i64) (result i32)))
  (import "extism:host/env" "load_u64" (func $load_u64 (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "store_u64" (func $store_u64 (param i64 i64)))
  (import "extism:host/env" "input_length" (func $input_length (result i64)))
  (import "extism:host/env" "input_load_u8" (func $input_load_u8 (param i64) (result i32)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (import "extism:host/env" "error_set" (func $error_set (param i64)))
  (import "extism:host/env" "config_get" (func $config_get (param i64) (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 0) "out")
  (data (i32.const 16) "{describe}")

  ;; A new kernel block holding `len` bytes of the guest's memory at `ptr`.
  (func $from_guest (param $ptr i32) (param $len i32) (result i64)
    (local $block i64) (local $i i32)
    (local.set $block (call $alloc (i64.extend_i32_u (local.get $len))))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $len)))
        (call $store_u8
          (i64.add (local.get $block) (i64.extend_i32_u (local.get $i)))
          (i32.load8_u (i32.add (local.get $ptr) (local.get $i))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (local.get $block))

  ;; The call's input, in a new kernel block.
  (func $input (result i64)
    (local $block i64) (local $len i64) (local $i i64)
    (local.set $len (call $input_length))
    (local.set $block (call $alloc (local.get $len)))
    (block $done
      (loop $next
        (br_if $done (i64.ge_u (local.get $i) (local.get $len)))
        (call $store_u8
          (i64.add (local.get $block) (local.get $i))
          (call $input_load_u8 (local.get $i)))
        (local.set $i (i64.add (local.get $i) (i64.const 1)))
        (br $next)))
    (local.get $block))

  (func (export "describe") (result i32)
    (call $output_set (call $from_guest (i32.const 16) (i32.const {describe_len})) (i64.const {describe_len}))
    (i32.const 0))

  (func (export "call") (result i32)
    (local $payload i64) (local $len i64) (local $mode i32)
    (local $out i64) (local $i i64)
    (local.set $payload (call $config_get (call $from_guest (i32.const 0) (i32.const 3))))
    (if (i64.eqz (local.get $payload))
      (then (local.set $payload (call $input))))
    (local.set $len (call $length (local.get $payload)))
    (if (i64.eqz (local.get $len)) (then (return (i32.const 1))))
    (local.set $mode (call $load_u8 (local.get $payload)))
    (local.set $len (i64.sub (local.get $len) (i64.const 1)))
    (local.set $out (call $alloc (local.get $len)))
    ;; Eight bytes at a time, then the rest one by one.
    (block $done
      (loop $next
        (br_if $done (i64.gt_u (i64.add (local.get $i) (i64.const 8)) (local.get $len)))
        (call $store_u64
          (i64.add (local.get $out) (local.get $i))
          (call $load_u64 (i64.add (local.get $payload) (i64.add (local.get $i) (i64.const 1)))))
        (local.set $i (i64.add (local.get $i) (i64.const 8)))
        (br $next)))
    (block $done
      (loop $next
        (br_if $done (i64.ge_u (local.get $i) (local.get $len)))
        (call $store_u8
          (i64.add (local.get $out) (local.get $i))
          (call $load_u8 (i64.add (local.get $payload) (i64.add (local.get $i) (i64.const 1)))))
        (local.set $i (i64.add (local.get $i) (i64.const 1)))
        (br $next)))
    (if (i32.eq (local.get $mode) (i32.const 0x65)) ;; e
      (then (call $error_set (local.get $out)) (return (i32.const 1))))
    (if (i32.eq (local.get $mode) (i32.const 0x72)) ;; r
      (then (return (i32.const 1))))
    (if (i32.eq (local.get $mode) (i32.const 0x74)) ;; t
      (then
        (if (i64.gt_u (local.get $len) (i64.const 0))
          (then (local.set $len (i64.sub (local.get $len) (i64.const 1)))))))
    (call $output_set (local.get $out) (local.get $len))
    (if (i32.eq (local.get $mode) (i32.const 0x7a)) ;; z
      (then (return (i32.const 1))))
    (i32.const 0))
)
"#;

/// What one host made of the output.
#[derive(Debug)]
enum Read {
    /// The result, as JSON.
    Took(Value),
    /// Refused, with the host's reason.
    Refused(String),
}

struct Hosts {
    tokio: tokio::runtime::Runtime,
    toolhost: toolhost::Runtime,
    wasm: Arc<[u8]>,
    /// A compiled-module cache of this run, and a plugin that holds the
    /// guest's entry mapped: each input's load takes that module instead
    /// of compiling the guest again.
    cache: (tempfile::TempDir, toolhost::Plugin),
    extism: extism::Plugin,
}

thread_local! {
    static HOSTS: RefCell<Hosts> = RefCell::new(Hosts::new());
}

impl Hosts {
    fn new() -> Hosts {
        let guest = GUEST
            .replace("{describe}", &DESCRIBE.replace('"', "\\\""))
            .replace("{describe_len}", &DESCRIBE.len().to_string());
        let wasm: Arc<[u8]> = wat::parse_str(guest).expect("the guest assembles").into();
        let extism = extism::PluginBuilder::new(extism::Manifest::new([extism::Wasm::data(wasm.to_vec())]))
            .with_wasi(true)
            .with_cache_disabled()
            .build()
            .expect("Extism loads the guest");
        let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        let toolhost = toolhost::Runtime::new();
        let dir = tempfile::tempdir().expect("a cache directory");
        let held = tokio
            .block_on(
                toolhost
                    .plugin_from_bytes(wasm.clone())
                    .with_module_cache(toolhost::ModuleCache::at(dir.path()))
                    .build(),
            )
            .expect("toolhost loads the guest");
        Hosts { tokio, toolhost, wasm, cache: (dir, held), extism }
    }

    /// toolhost: the payload as the plugin's config, one call of `echo`.
    fn toolhost(&self, payload: &str) -> Read {
        let builder = self
            .toolhost
            .plugin_from_bytes(self.wasm.clone())
            .with_module_cache(toolhost::ModuleCache::at(self.cache.0.path()))
            .with_config("out", payload);
        self.tokio.block_on(async {
            let plugin = builder.build().await.expect("toolhost loads the guest");
            match plugin.call_tool("echo", json!({})).await {
                Ok(result) => Read::Took(serde_json::to_value(result).expect("a result serializes")),
                Err(error) => Read::Refused(error.to_string()),
            }
        })
    }

    /// Extism: the payload as the call's input, the output read as an
    /// Extism-based MCP host reads it.
    fn extism(&mut self, payload: &str) -> Read {
        let request = payload.as_bytes();
        match self.extism.call::<&[u8], &[u8]>("call", request) {
            Ok(output) => match serde_json::from_slice::<rmcp::model::CallToolResult>(output) {
                Ok(result) => Read::Took(serde_json::to_value(result).expect("a result serializes")),
                Err(error) => Read::Refused(error.to_string()),
            },
            Err(error) => Read::Refused(error.to_string()),
        }
    }
}

/// Why toolhost refuses a result that Extism and rmcp take, when it does:
/// each rule is one of MCP's schema that rmcp's type does not keep.
fn stricter(output: &[u8]) -> Option<&'static str> {
    let output: Value = serde_json::from_slice(output).ok()?;
    let result = output.as_object()?;
    if !result.contains_key("content") {
        return Some("a result must have `content` (rmcp fills in an empty list)");
    }
    None
}

/// The output the guest sets for `payload` (when it sets one).
fn output_of(payload: &[u8]) -> &[u8] {
    match payload.split_first() {
        Some((b't', rest)) => &rest[..rest.len().saturating_sub(1)],
        Some((_, rest)) => rest,
        None => &[],
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(payload) = std::str::from_utf8(data) else {
        return;
    };
    if payload.is_empty() {
        return;
    }
    HOSTS.with_borrow_mut(|hosts| {
        let ours = hosts.toolhost(payload);
        let theirs = hosts.extism(payload);
        match (&ours, &theirs) {
            (Read::Took(ours), Read::Took(theirs)) => {
                // toolhost passes on members of a result that MCP does not
                // name (a result may carry more); rmcp's type drops them.
                // What an rmcp client reads of toolhost's result is what
                // rmcp reads of the plugin's output.
                let read = serde_json::from_value::<rmcp::model::CallToolResult>(ours.clone())
                    .unwrap_or_else(|e| panic!("rmcp cannot read toolhost's result {ours}: {e}"));
                let read = serde_json::to_value(read).expect("a result serializes");
                assert_eq!(&read, theirs, "both hosts took the output as the same result")
            }
            (Read::Refused(_), Read::Refused(_)) => {}
            (Read::Took(ours), Read::Refused(why)) => {
                panic!("toolhost took {ours} where Extism and rmcp refuse it: {why}")
            }
            (Read::Refused(why), Read::Took(theirs)) => {
                if stricter(output_of(payload.as_bytes())).is_none() {
                    panic!("toolhost refused ({why}) what Extism and rmcp take as {theirs}")
                }
            }
        }
    });
});
