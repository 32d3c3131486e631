//! Secrets kept out of the process's log lines, whoever writes them.
//!
//! Results, errors and a plugin's own log lines are redacted per plugin
//! ([`crate::secrets`]). Log lines are also written by code that knows
//! nothing of secrets: a dependency's own events (rmcp logs every
//! notification a remote MCP server sends, whole), or toolhost's `trace`
//! events of results. So every secret value this process hands out (the
//! secrets granted to plugins' tools, keyring entries, `${secret:NAME}`
//! values of a toolsets file, any [`SensitiveValues`](crate::SensitiveValues))
//! is remembered here, and [`RedactingWriter`] replaces each of them in
//! every log line before it is written, as `[redacted secret NAME]`.
//!
//! A value is found as it is, and in the forms a log line writes a string
//! in: escaped as JSON (a JSON log line) or as Rust's `Debug` (`{:?}` of
//! a message or a field), each of these escaped once more (a `Debug` text
//! inside a JSON line), and in base64 at any alignment (values of 6 bytes
//! or more: a shorter one matches too much by chance).
//!
//! The values are kept until the process ends, each once: a secret that was
//! handed out once may still be quoted by a server or a log line later.

use std::borrow::Cow;
use std::io::{self, Write};
use std::sync::{Arc, LazyLock, RwLock};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};

use super::Redactor;

/// The values remembered, and the redactor of every form of each.
#[derive(Default)]
struct Remembered {
    /// Name and value, each pair once.
    values: Vec<(String, String)>,
    /// Rebuilt when a value is added; `None` while there is none.
    redactor: Option<Arc<Redactor>>,
}

static REMEMBERED: LazyLock<RwLock<Remembered>> = LazyLock::new(|| RwLock::new(Remembered::default()));

/// Shortest value looked for in base64 too.
pub(crate) const MIN_BASE64_VALUE: usize = 6;

/// Remember a secret value handed out (known by `name`): from now on, it is
/// redacted from every line a [`RedactingWriter`] writes. Empty values are
/// ignored (they match everywhere and reveal nothing).
pub fn remember_secret(name: &str, value: &str) {
    if value.is_empty() {
        return;
    }
    let mut remembered = REMEMBERED.write().unwrap_or_else(|poisoned| poisoned.into_inner());
    if remembered.values.iter().any(|(n, v)| n == name && v == value) {
        return;
    }
    remembered.values.push((name.to_owned(), value.to_owned()));
    let forms: Vec<(&str, String)> = (remembered.values.iter())
        .flat_map(|(name, value)| forms(value).into_iter().map(move |form| (name.as_str(), form)))
        .collect();
    let redactor = Redactor::of_pairs(forms.iter().map(|(name, form)| (*name, form.as_str())));
    remembered.redactor = (!redactor.is_empty()).then(|| Arc::new(redactor));
}

/// The forms a value may take in a log line.
pub(crate) fn forms(value: &str) -> Vec<String> {
    let json = |text: &str| {
        let quoted = serde_json::to_string(text).unwrap_or_default();
        quoted[1..quoted.len().saturating_sub(1).max(1)].to_owned()
    };
    let debug = |text: &str| {
        let quoted = format!("{text:?}");
        quoted[1..quoted.len().saturating_sub(1).max(1)].to_owned()
    };
    let mut forms = vec![value.to_owned()];
    for _ in 0..2 {
        let escaped: Vec<String> = forms.iter().flat_map(|form| [json(form), debug(form)]).collect();
        for form in escaped {
            if !forms.contains(&form) {
                forms.push(form);
            }
        }
    }
    if value.len() >= MIN_BASE64_VALUE {
        forms.extend(base64_forms(value.as_bytes()));
    }
    forms
}

/// The base64 text a value's bytes always encode to, at each of the three
/// alignments it may have inside longer data: the characters whose six bits
/// all come from the value.
fn base64_forms(value: &[u8]) -> Vec<String> {
    let mut forms = Vec::new();
    for shift in 0..3usize {
        let mut data = vec![0u8; shift];
        data.extend_from_slice(value);
        let first_bit = 8 * shift;
        let end_bit = 8 * data.len();
        // Characters i with 6i >= first_bit and 6i + 6 <= end_bit.
        let first = first_bit.div_ceil(6);
        let last = end_bit / 6;
        for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
            let encoded = engine.encode(&data);
            if last > first && last <= encoded.len() {
                let form = encoded[first..last].to_owned();
                if !forms.contains(&form) {
                    forms.push(form);
                }
            }
        }
    }
    forms
}

/// The redactor of the values remembered so far, if any.
fn redactor() -> Option<Arc<Redactor>> {
    REMEMBERED.read().unwrap_or_else(|poisoned| poisoned.into_inner()).redactor.clone()
}

/// `text` with every remembered secret value replaced by
/// `[redacted secret NAME]` (as it is, escaped or in base64).
pub fn redact_log_text(text: &[u8]) -> Cow<'_, [u8]> {
    match redactor().and_then(|redactor| redactor.redact_bytes(text)) {
        Some(redacted) => Cow::Owned(redacted),
        None => Cow::Borrowed(text),
    }
}

/// A writer for log lines that redacts every remembered secret value
/// ([`redact_log_text`]) from what is written through it: it holds what is
/// written until it is flushed or dropped, then writes it redacted. Made
/// once per log event, as `tracing-subscriber`'s `MakeWriter` does:
///
/// ```no_run
/// # fn make() -> impl std::io::Write {
/// toolhost::RedactingWriter::new(std::io::stderr())
/// # }
/// ```
///
/// (with tracing-subscriber: `fmt().with_writer(|| RedactingWriter::new(std::io::stderr()))`).
#[derive(Debug)]
pub struct RedactingWriter<W: Write> {
    inner: W,
    held: Vec<u8>,
}

impl<W: Write> RedactingWriter<W> {
    /// A writer that redacts what it writes into `inner`.
    pub fn new(inner: W) -> Self {
        RedactingWriter { inner, held: Vec::new() }
    }

    fn write_held(&mut self) -> io::Result<()> {
        if self.held.is_empty() {
            return Ok(());
        }
        let held = std::mem::take(&mut self.held);
        self.inner.write_all(&redact_log_text(&held))
    }
}

impl<W: Write> Write for RedactingWriter<W> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.held.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.write_held()?;
        self.inner.flush()
    }
}

impl<W: Write> Drop for RedactingWriter<W> {
    fn drop(&mut self) {
        let _ = self.write_held();
        let _ = self.inner.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redacted(text: &str) -> String {
        String::from_utf8(redact_log_text(text.as_bytes()).into_owned()).unwrap()
    }

    #[test]
    fn a_remembered_value_is_redacted_in_every_form_a_log_line_writes() {
        let value = "lg-\"quoted\"\\path\u{7}-v4lue";
        remember_secret("LOG_TEST", value);
        let marker = "[redacted secret LOG_TEST]";
        let debug = format!("{value:?}");
        let json = serde_json::to_string(value).unwrap();
        let debug_in_json = serde_json::to_string(&format!("received {debug}")).unwrap();
        let json_in_debug = format!("{:?}", format!("body {json}"));
        for line in [
            format!("plain {value} end"),
            format!("debug {debug} end"),
            format!("json {json} end"),
            format!("{{\"message\":{debug_in_json}}}"),
            json_in_debug,
        ] {
            let out = redacted(&line);
            assert!(out.contains(marker), "{line} -> {out}");
            for fragment in ["v4lue", "quoted"] {
                assert!(!out.contains(fragment), "{line} -> {out}");
            }
        }
    }

    #[test]
    fn a_value_is_found_in_base64_at_every_alignment() {
        let value = "b64-secret-value-91";
        remember_secret("LOG_B64", value);
        for prefix in ["", "x", "xy", "xyz"] {
            for engine in [&base64::engine::general_purpose::STANDARD, &URL_SAFE_NO_PAD] {
                let encoded = engine.encode(format!("{prefix}{value}!tail"));
                let out = redacted(&format!("data: {encoded}"));
                assert!(out.contains("[redacted secret LOG_B64]"), "{prefix:?}: {encoded} -> {out}");
            }
        }
    }

    #[test]
    fn the_writer_redacts_what_it_holds_and_writes_it_once() {
        remember_secret("LOG_WRITER", "wr1t3r-s3cr3t");
        let mut out = Vec::new();
        {
            let mut writer = RedactingWriter::new(&mut out);
            // Cut in two writes: found whole all the same.
            writer.write_all(b"a line with wr1t3r").unwrap();
            writer.write_all(b"-s3cr3t in it\n").unwrap();
        }
        assert_eq!(String::from_utf8(out).unwrap(), "a line with [redacted secret LOG_WRITER] in it\n");
    }

    #[test]
    fn lines_without_values_are_written_as_they_are() {
        remember_secret("LOG_OTHER", "never-in-this-line");
        assert!(matches!(redact_log_text(b"nothing to see"), Cow::Borrowed(_)));
        remember_secret("LOG_EMPTY", "");
    }
}
