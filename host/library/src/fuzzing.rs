//! The parsers and bounds of hostile input, reached as the host reaches
//! them, for the fuzz targets in `fuzz/`. Each function panics when a
//! property the host relies on does not hold (a panic is what the fuzzer
//! reports); none is a stable API: the module exists only with the
//! `fuzzing` feature, which nothing else turns on.

use serde_json::Value;

use crate::runtime::kernel::{Budget, Kernel, OutOfBudget, Refused};
use crate::runtime::output;
use crate::secrets::Redactor;
use crate::validate;

/// The most a fuzzed kernel memory may grow to (the real bound is the
/// instance's memory limit; a fuzzer's memory is smaller).
const MAX_FUZZ_MEMORY: u64 = 16 << 20;

/// A budget that counts what the kernel's book-keeping holds.
struct Counted {
    left: usize,
    held: usize,
}

impl Budget for Counted {
    fn charge(&mut self, bytes: usize) -> Result<(), OutOfBudget> {
        self.left = self.left.checked_sub(bytes).ok_or(OutOfBudget)?;
        self.held += bytes;
        Ok(())
    }

    fn refund(&mut self, bytes: usize) {
        self.held = self.held.checked_sub(bytes).expect("the kernel refunds no more than it was charged");
        self.left += bytes;
    }
}

/// One host function of the Extism kernel, with the arguments a guest
/// chose.
#[derive(Debug, Clone, Copy)]
pub enum KernelCall {
    /// `alloc(n)` (`zero`: the host's own allocations clear no bytes).
    Alloc { n: u64, zero: bool },
    /// `free(handle)`.
    Free(u64),
    /// `length(handle)`.
    Length(u64),
    /// `input_set(handle, len)`.
    InputSet(u64, u64),
    /// `output_set(handle, len)`.
    OutputSet(u64, u64),
    /// `error_set(handle)`.
    ErrorSet(u64),
    /// A host function reading the block at `handle` (a key, a message).
    Read(u64),
    /// The guest stores `byte` at `offset` of the kernel memory (the Wasm
    /// half lets it only within the blocks in use).
    Poke { offset: u64, byte: u8 },
    /// The host's `reset` before the next call.
    Reset,
}

/// Run the kernel's host functions on a guest memory, in the order and
/// with the arguments given, growing the memory when the kernel asks as
/// the Wasm half does: whatever the arguments, no call panics, every block
/// and the output lie in the memory and in the blocks in use, blocks never
/// overlap, and the budget is charged exactly what the book-keeping holds.
pub fn kernel(calls: &[KernelCall], budget: usize) {
    let mut memory = vec![0u8; 64];
    let mut kernel = Kernel::default();
    let mut counted = Counted { left: budget, held: 0 };
    kernel.reset(&mut memory, &mut counted);
    for call in calls {
        match *call {
            KernelCall::Alloc { n, zero } => loop {
                match kernel.alloc(&mut memory, n, zero, &mut counted) {
                    Ok(handle) => {
                        assert!(handle == 0 || kernel.length(handle) == n, "a new block has the length asked");
                        break;
                    }
                    Err(Refused::Grow(to)) if to <= MAX_FUZZ_MEMORY => {
                        assert!(to > memory.len() as u64, "the kernel asks to grow only when it must");
                        memory.resize(to.next_multiple_of(64 * 1024) as usize, 0);
                    }
                    Err(_) => break,
                }
            },
            KernelCall::Free(handle) => kernel.free(&mut memory, handle),
            KernelCall::Length(handle) => {
                let length = kernel.length(handle);
                assert_eq!(kernel.block(&memory, handle).map_or(0, |b| b.len() as u64), length);
            }
            KernelCall::InputSet(handle, len) => kernel.input_set(&mut memory, handle, len),
            KernelCall::OutputSet(handle, len) => kernel.output_set(handle, len),
            KernelCall::ErrorSet(handle) => kernel.error_set(handle),
            KernelCall::Read(handle) => {
                let _ = kernel.block(&memory, handle);
            }
            KernelCall::Poke { offset, byte } => {
                if kernel.guest_may_store(offset)
                    && let Some(slot) = memory.get_mut(offset as usize)
                {
                    *slot = byte;
                }
            }
            KernelCall::Reset => kernel.reset(&mut memory, &mut counted),
        }
        kernel.assert_consistent(&memory);
        let _ = kernel.output(&memory);
        let _ = kernel.error_message(&memory);
        assert_eq!(counted.held, kernel.charged(), "the budget holds what the book-keeping was charged");
    }
    kernel.reset(&mut memory, &mut counted);
    kernel.assert_consistent(&memory);
}

/// Every reader of a plugin's output frame, on the same bytes: none
/// panics; what the bounded reader takes, `serde_json` reads to the same
/// value; the fast reader of plain results gives what the general reader
/// and the plain shape give, and takes nothing the general reader refuses.
pub fn output_frame(bytes: &[u8], max_bytes: usize) {
    let general = output::parse_json(bytes, max_bytes, true);
    if let Ok(value) = &general {
        let reference: Value = serde_json::from_slice(bytes).expect("serde_json reads what the frame reader took");
        assert_eq!(&reference, value, "the frame reader reads what serde_json reads");
    }
    if let Some(fast) = output::parse_plain_result(bytes, max_bytes) {
        let Ok(value) = general.as_ref() else {
            panic!("the fast reader took what the general reader refuses");
        };
        let value = value.clone();
        let plain = validate::plain::plain_result(value).expect("what the fast reader takes has the plain shape");
        assert_eq!(fast, plain, "the fast reader gives what the general reader gives");
    }
    if let Ok(value) = output::parse_value(bytes, max_bytes) {
        let reference: Value = serde_json::from_slice(bytes).expect("serde_json reads what the value reader took");
        assert_eq!(reference, value, "the value reader reads what serde_json reads");
    }
}

/// The evaluations a fuzzed check may take at most: small, so that a
/// schema whose cost bound is wrong shows as a slow input (the fuzzer's
/// timeout) rather than hiding in a large budget.
pub const FUZZ_EVALUATIONS: u64 = 1_000_000;

/// A plugin's schema and an instance, as the host takes them: the schema's
/// cost bounds, then its compilation; the instance checked only if its
/// weight times the schema's cost per place fits [`FUZZ_EVALUATIONS`].
/// Nothing panics; a check the bound admits finishes within the fuzzer's
/// timeout; the listed violations agree with the quick verdict.
pub fn schema(schema: &Value, instance: &Value) {
    let Value::Object(object) = schema else {
        return;
    };
    let Ok(compiled) = validate::compile_schema(object, true) else {
        return;
    };
    if validate::cost::fits(instance, compiled.cost, compiled.reads_text, FUZZ_EVALUATIONS) {
        let valid = compiled.validator.is_valid(instance);
        let violations = validate::schema_violations(&compiled, instance);
        assert_eq!(valid, violations.is_empty(), "the listed violations agree with the verdict");
    }
}

/// How a secret is written into a log line or a result.
#[derive(Debug, Clone, Copy)]
pub enum Written {
    /// As it is.
    Plain,
    /// Escaped as a JSON string's body.
    Json,
    /// Escaped as Rust's `Debug` of a string.
    Debug,
    /// `Debug` inside a JSON line.
    DebugInJson,
    /// JSON inside a `Debug` text.
    JsonInDebug,
    /// The whole line's bytes in standard base64.
    Base64,
    /// The whole line's bytes in URL-safe base64.
    Base64Url,
}

fn escaped(text: &str, written: Written) -> String {
    let json = |text: &str| {
        let quoted = serde_json::to_string(text).expect("a string is JSON");
        quoted[1..quoted.len() - 1].to_owned()
    };
    let debug = |text: &str| {
        let quoted = format!("{text:?}");
        quoted[1..quoted.len() - 1].to_owned()
    };
    match written {
        Written::Plain => text.to_owned(),
        Written::Json => json(text),
        Written::Debug => debug(text),
        Written::DebugInJson => json(&debug(text)),
        Written::JsonInDebug => debug(&json(text)),
        Written::Base64 | Written::Base64Url => unreachable!("base64 is of the whole line"),
    }
}

/// A secret in a log line, between `before` and `after`, written as
/// `written`, the line handed to the log writer in pieces cut at `cuts`:
/// what reaches the log holds the secret in no form, and neither does a
/// plugin's text output cut anywhere by the output bound.
pub fn redaction(secret: &str, before: &str, after: &str, written: Written, cuts: &[usize]) {
    use base64::Engine as _;
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    if secret.is_empty() {
        return;
    }
    let forms = crate::secrets::in_logs::forms(secret);
    let redactor = Redactor::of_pairs(forms.iter().map(|form| ("S", form.as_str())));
    let whole = format!("{before}{secret}{after}");
    let (line, leaked): (String, Vec<String>) = match written {
        Written::Base64 | Written::Base64Url => {
            if secret.len() < crate::secrets::in_logs::MIN_BASE64_VALUE {
                return;
            }
            let engine = if matches!(written, Written::Base64) { &STANDARD_NO_PAD } else { &URL_SAFE_NO_PAD };
            let encoded = engine.encode(whole.as_bytes());
            // The characters whose six bits all come from the secret.
            let first = (8 * before.len()).div_ceil(6);
            let last = 8 * (before.len() + secret.len()) / 6;
            (encoded.clone(), vec![encoded[first..last].to_owned()])
        }
        _ => (escaped(&whole, written), vec![escaped(secret, written)]),
    };
    // The log writer: cut into pieces, joined, redacted as one line.
    let mut pieces = Vec::new();
    let mut at = 0;
    for &cut in cuts {
        let cut = at + cut % (line.len() - at + 1);
        pieces.push(&line.as_bytes()[at..cut]);
        at = cut;
    }
    pieces.push(&line.as_bytes()[at..]);
    let joined: Vec<u8> = pieces.concat();
    let out = redactor.redact_bytes(&joined).unwrap_or(joined);
    for leak in &leaked {
        assert!(!survives(&out, leak), "the secret survives in {:?}", String::from_utf8_lossy(&out));
    }
    // A plugin's text, cut by the output bound anywhere: no whole secret
    // before the cut.
    let plain = Redactor::of_pairs([("S", secret)]);
    for &max in cuts {
        let max = max % (whole.len() + 1);
        let head = plain.redact_head(whole.as_bytes(), max);
        let kept = &head[..head.len().min(max)];
        assert!(!survives(kept, secret), "the secret survives the cut at {max}: {:?}", String::from_utf8_lossy(kept));
    }
}

/// Whether `text` holds `leak` outside the markers that replaced secrets
/// (a marker may spell part of a secret; one cut short ends the text).
fn survives(text: &[u8], leak: &str) -> bool {
    const MARKER: &str = "[redacted secret S]";
    let text = String::from_utf8_lossy(text);
    let mut pieces: Vec<&str> = text.split(MARKER).collect();
    if let Some(last) = pieces.last_mut() {
        let cut_marker = (1..MARKER.len()).rev().find(|&n| last.ends_with(&MARKER[..n]));
        if let Some(n) = cut_marker {
            *last = &last[..last.len() - n];
        }
    }
    pieces.iter().any(|piece| piece.contains(leak))
}

/// A URI template and a URI: matching ends within its budget and, for a
/// template of simple and reserved variables, the variables it gives put
/// back into the template make the URI again.
pub fn uri_template(template: &str, uri: &str) {
    let Some(variables) = toolhost_protocol::match_uri_template(template, uri) else {
        return;
    };
    // A name given twice holds one value: the expansion need not agree.
    let names: Vec<&str> = (template.split('{').skip(1))
        .filter_map(|rest| rest.split_once('}'))
        .map(|(expression, _)| expression.trim_start_matches(['+', '#', '/', '?', '&', ';', '.']))
        .collect();
    if names.iter().enumerate().any(|(i, name)| names[..i].contains(name)) {
        return;
    }
    let mut expanded = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            return;
        };
        expanded.push_str(&rest[..open]);
        let expression = &rest[open + 1..open + close];
        let name = expression.strip_prefix('+').unwrap_or(expression);
        if name.starts_with(['#', '/', '?', '&', ';', '.']) {
            return;
        }
        match variables.get(name).and_then(Value::as_str) {
            Some(value) => expanded.push_str(value),
            None => return,
        }
        rest = &rest[open + close + 1..];
    }
    expanded.push_str(rest);
    assert_eq!(expanded, uri, "the variables of a match make the URI again");
}

/// A toolsets file's text in a format (`json`, `yaml` or `toml`): it is
/// read, checked and resolved, or refused with a message; never a panic.
pub fn toolsets(text: &str, format: &str) {
    thread_local! {
        /// One runtime for every input, not one made per input.
        static RUNTIME: tokio::runtime::Runtime =
            tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
    }
    let path = std::path::PathBuf::from(format!("/fuzz/toolsets.{format}"));
    let _ = RUNTIME.with(|runtime| runtime.block_on(crate::config::read_toolsets(&path, text, &crate::NoSecrets)));
}

/// An OCI manifest or index, as a registry serves it: read, and its
/// platform entry chosen or its layers listed.
#[cfg(feature = "oci")]
pub fn oci_manifest(bytes: &[u8]) {
    let _ = crate::source::fuzz_manifest(bytes);
}

/// A signature as a registry or a server hands it (a cosign layer's
/// annotations and payload, split at the first NUL; the whole as a
/// sigstore bundle), checked with a key and keyless under roots whose
/// private halves nobody has: nothing verifies.
#[cfg(all(feature = "oci", feature = "https"))]
pub fn signature(bytes: &[u8]) {
    crate::source::fuzz_signature(bytes);
}

/// An OCI layer as a registry serves it (tar, gzip'd tar or anything): its
/// Wasm files found within the unpacking budget.
#[cfg(feature = "oci")]
pub fn oci_layer(bytes: &[u8], budget: u64) {
    crate::source::fuzz_layer(bytes, budget);
}
