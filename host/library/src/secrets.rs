//! Secrets: where the host gets them, which a plugin may have, and keeping
//! them out of what a plugin returns.
//!
//! A tool declares the secrets it needs in `requirements` (in its `_meta`, or
//! beside its description), as `spec/tool-definition.md` describes:
//! `{"secrets": [{"id": "API_KEY"}], "authorization": [...], "user_id": true}`.
//! A plugin never chooses what it gets: the person running toolhost grants
//! secrets by name (`--secret NAME`, or `secrets: [NAME]` on a toolset), and
//! a secret is handed over only when it is both granted and declared. The
//! host asks a [`SecretProvider`] for those, hands each to the calls of the
//! tools that declare it (as a config value keyed by the secret's id),
//! refuses a call whose tool needs a secret that was not granted or that the
//! provider does not have, and redacts every value it handed out (and every
//! secret value in the plugin's config) from everything the plugin sends
//! back: results, errors and log lines.

use std::fmt;
use std::path::PathBuf;

use aho_corasick::{AhoCorasick, MatchKind};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Deserialize;
use serde_json::Value;
use toolhost_protocol::{CallToolResult, Tool};

/// Every secret handed out, kept out of the process's log lines.
pub(crate) mod in_logs;

/// A secret lookup that failed (not a missing secret: that is `Ok(None)`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SecretError(pub String);

/// A boxed, sendable future, as toolhost's hooks (secret providers,
/// approvers) return.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// Where the host gets secret values. Asynchronous, so that a lookup in a
/// vault or a KMS waits without blocking a worker thread.
pub trait SecretProvider: Send + Sync {
    /// The value of the secret `name`; `Ok(None)` if there is none.
    fn secret<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<String>, SecretError>>;

    /// What the provider is, for messages (`environment`, `directory /run/secrets`).
    fn describe(&self) -> String;

    /// The files or directories the provider reads secrets from. A plugin
    /// given this provider may not be granted any of them, nor a directory
    /// that holds one, read-only or read-write: it would read every secret
    /// there, granted or not (its load is refused, naming the grant). None
    /// by default.
    fn files(&self) -> Vec<std::path::PathBuf> {
        Vec::new()
    }
}

/// Secrets from the host's environment: the secret `NAME` is the variable
/// `<prefix>NAME`.
#[derive(Debug, Clone, Default)]
pub struct EnvSecretProvider {
    prefix: String,
}

impl EnvSecretProvider {
    /// Secrets are environment variables of the same name.
    pub fn new() -> Self {
        Self::default()
    }

    /// Secrets are environment variables named `<prefix><NAME>`
    /// (for example `TOOLHOST_SECRET_`).
    pub fn with_prefix(prefix: impl Into<String>) -> Self {
        EnvSecretProvider { prefix: prefix.into() }
    }
}

impl SecretProvider for EnvSecretProvider {
    fn secret<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<String>, SecretError>> {
        let value = match std::env::var(format!("{}{name}", self.prefix)) {
            Ok(value) => Ok(Some(value)),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => {
                Err(SecretError(format!("environment variable {}{name} is not UTF-8", self.prefix)))
            }
        };
        Box::pin(std::future::ready(value))
    }

    fn describe(&self) -> String {
        if self.prefix.is_empty() { "environment".to_owned() } else { format!("environment, prefix {}", self.prefix) }
    }
}

/// Secrets from files: the secret `NAME` is the content of `<dir>/NAME`
/// (one trailing newline dropped), as with `/run/secrets`.
#[derive(Debug, Clone)]
pub struct FileSecretProvider {
    dir: PathBuf,
}

impl FileSecretProvider {
    /// Secrets are the files of this directory.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        FileSecretProvider { dir: dir.into() }
    }
}

impl SecretProvider for FileSecretProvider {
    /// Reads the file (a small local one) on the calling thread.
    fn secret<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<String>, SecretError>> {
        Box::pin(std::future::ready(self.read(name)))
    }

    fn describe(&self) -> String {
        format!("directory {}", self.dir.display())
    }

    fn files(&self) -> Vec<PathBuf> {
        vec![self.dir.clone()]
    }
}

impl FileSecretProvider {
    fn read(&self, name: &str) -> Result<Option<String>, SecretError> {
        if name.is_empty() || name.contains(['/', '\\']) || name == "." || name == ".." {
            return Err(SecretError(format!("`{name}` is not a valid secret name")));
        }
        let path = self.dir.join(name);
        match std::fs::read_to_string(&path) {
            Ok(mut value) => {
                if value.ends_with('\n') {
                    value.pop();
                    if value.ends_with('\r') {
                        value.pop();
                    }
                }
                Ok(Some(value))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(SecretError(format!("cannot read {}: {e}", path.display()))),
        }
    }
}

/// No secrets at all.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSecrets;

impl SecretProvider for NoSecrets {
    fn secret<'a>(&'a self, _name: &'a str) -> BoxFuture<'a, Result<Option<String>, SecretError>> {
        Box::pin(std::future::ready(Ok(None)))
    }

    fn describe(&self) -> String {
        "none".to_owned()
    }
}

/// What a tool needs besides its arguments (`requirements`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
pub struct Requirements {
    /// Secrets, by id.
    #[serde(default)]
    pub secrets: Vec<SecretRequirement>,
    /// Authorization methods (OAuth 2.0 scopes); reported, not provided by
    /// toolhost.
    #[serde(default)]
    pub authorization: Vec<Value>,
    /// Whether the tool needs a user id.
    #[serde(default)]
    pub user_id: bool,
}

/// One required secret.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct SecretRequirement {
    /// The secret's id, for example `TWILIO_API_KEY`.
    pub id: String,
}

impl Requirements {
    /// The requirements a tool declares, in `_meta.requirements` or a
    /// top-level `requirements` field; `Err` when they are malformed.
    pub fn of(tool: &Tool) -> Result<Requirements, String> {
        let declared =
            tool.meta.as_ref().and_then(|meta| meta.get("requirements")).or_else(|| tool.extra.get("requirements"));
        match declared {
            None | Some(Value::Null) => Ok(Requirements::default()),
            Some(value) => serde_json::from_value(value.clone()).map_err(|e| format!("invalid requirements: {e}")),
        }
    }
}

/// Values a plugin must never send back, by the name they are known by:
/// the secrets handed to its tools and the secret values in its config
/// (`${secret:NAME}` in a toolsets file). No `Debug` of the values.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SensitiveValues {
    values: Vec<(String, String)>,
}

impl fmt::Debug for SensitiveValues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.values.iter().map(|(name, _)| name)).finish()
    }
}

impl SensitiveValues {
    /// No values.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a value, known in messages by `name` (never by its value).
    /// The value is kept out of the process's log lines from now on too
    /// ([`remember_secret`](crate::remember_secret)).
    pub fn push(&mut self, name: impl Into<String>, value: impl Into<String>) {
        let (name, value) = (name.into(), value.into());
        crate::secrets::in_logs::remember_secret(&name, &value);
        self.values.push((name, value));
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The names, in the order they were added.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.values.iter().map(|(name, _)| name.as_str())
    }

    pub(crate) fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values.iter().map(|(name, value)| (name.as_str(), value.as_str()))
    }
}

/// How much redaction may add to what it redacts, when no output cap
/// applies (errors, log lines): past it, the whole text is withheld.
const TEXT_GROWTH: usize = 64 * 1024;

/// Finds and replaces the sensitive values of one plugin wherever they
/// appear in what the plugin sends back: every string, object key and
/// number of a result (base64 fields decoded first), every error text and
/// every log line. One pass per string, whatever the number of values
/// (Aho-Corasick, leftmost-longest).
#[derive(Default)]
pub(crate) struct Redactor {
    /// Per pattern of the matcher: the name, the value and its replacement.
    names: Vec<String>,
    values: Vec<String>,
    markers: Vec<String>,
    matcher: Option<AhoCorasick>,
    /// The longest value's length.
    longest: usize,
}

/// Redaction would add more than it may.
#[derive(Debug)]
pub(crate) struct TooLarge;

/// The names of the values found, and how many bytes redaction may still add.
pub(crate) struct Found {
    pub(crate) names: Vec<String>,
    room: usize,
}

impl Found {
    fn new(room: usize) -> Self {
        Found { names: Vec::new(), room }
    }

    fn note(&mut self, name: &str) {
        if !self.names.iter().any(|n| n == name) {
            self.names.push(name.to_owned());
        }
    }
}

/// What redacting a result came to.
pub(crate) enum Redacted {
    /// Nothing sensitive in it: the result as it was.
    Clean(CallToolResult),
    /// Sensitive values found (their names), replaced in the result.
    Replaced(CallToolResult, Vec<String>),
    /// Sensitive values found (their names), and the redacted result would
    /// be larger than the output cap.
    TooLarge(Vec<String>),
    /// Sensitive values found (their names) where replacing them breaks the
    /// result (an object key the protocol needs, say).
    Unusable(Vec<String>),
}

impl Redactor {
    /// A redactor for these values (empty values are ignored: they match
    /// everywhere and reveal nothing).
    pub(crate) fn new(values: &SensitiveValues) -> Self {
        Redactor::of_pairs(values.pairs())
    }

    /// A redactor for these values, each known by its name (the first name
    /// of a value given twice).
    pub(crate) fn of_pairs<'a>(values: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut names = Vec::new();
        let mut patterns: Vec<&str> = Vec::new();
        for (name, value) in values {
            if value.is_empty() || patterns.contains(&value) {
                continue;
            }
            names.push(name.to_owned());
            patterns.push(value);
        }
        if patterns.is_empty() {
            return Redactor::default();
        }
        let matcher = AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest).build(&patterns).ok();
        let markers = names.iter().map(|name| format!("[redacted secret {name}]")).collect();
        let longest = patterns.iter().map(|p| p.len()).max().unwrap_or(0);
        let values = patterns.into_iter().map(str::to_owned).collect();
        Redactor { names, values, markers, matcher, longest }
    }

    /// Whether there is nothing to redact.
    pub(crate) fn is_empty(&self) -> bool {
        self.matcher.is_none()
    }

    fn found_in(&self, haystack: &[u8]) -> bool {
        self.matcher.as_ref().is_some_and(|m| m.is_match(haystack))
    }

    /// `haystack` with every value replaced, or `None` when it has none.
    fn replace(&self, haystack: &[u8], found: &mut Found) -> Result<Option<Vec<u8>>, TooLarge> {
        let Some(matcher) = &self.matcher else { return Ok(None) };
        let mut out = Vec::new();
        let mut last = 0;
        for hit in matcher.find_iter(haystack) {
            let i = hit.pattern().as_usize();
            let marker = self.markers[i].as_bytes();
            let growth = marker.len().saturating_sub(hit.len());
            found.room = found.room.checked_sub(growth).ok_or(TooLarge)?;
            found.note(&self.names[i]);
            if out.is_empty() {
                out.reserve(haystack.len());
            }
            out.extend_from_slice(&haystack[last..hit.start()]);
            out.extend_from_slice(marker);
            last = hit.end();
        }
        if last == 0 && out.is_empty() {
            return Ok(None);
        }
        out.extend_from_slice(&haystack[last..]);
        Ok(Some(out))
    }

    fn redact_string(&self, text: &mut String, found: &mut Found) -> Result<bool, TooLarge> {
        match self.replace(text.as_bytes(), found)? {
            Some(bytes) => {
                // Whole UTF-8 values replaced by UTF-8 markers at match
                // boundaries: still UTF-8.
                *text = String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// A string that may be base64 (the protocol's form of binary data):
    /// redact inside its decoded bytes.
    fn redact_base64(&self, text: &mut String, found: &mut Found) -> Result<(), TooLarge> {
        let Some(decoded) = base64_decoded(text) else { return Ok(()) };
        if let Some(bytes) = self.replace(&decoded, found)? {
            let encoded = BASE64.encode(bytes);
            found.room = found.room.checked_sub(encoded.len().saturating_sub(text.len())).ok_or(TooLarge)?;
            *text = encoded;
        }
        Ok(())
    }

    /// Redact every string, object key and number of a JSON value.
    fn redact_value(&self, value: &mut Value, found: &mut Found) -> Result<(), TooLarge> {
        match value {
            Value::String(text) => {
                if !self.redact_string(text, found)? {
                    self.redact_base64(text, found)?;
                }
            }
            Value::Number(number) => {
                let mut text = number.to_string();
                if self.redact_string(&mut text, found)? {
                    *value = Value::String(text);
                }
            }
            Value::Array(items) => {
                for item in items {
                    self.redact_value(item, found)?;
                }
            }
            Value::Object(map) => {
                if map.keys().any(|key| self.found_in(key.as_bytes())) {
                    let entries = std::mem::take(map);
                    for (mut key, item) in entries {
                        self.redact_string(&mut key, found)?;
                        map.insert(key, item);
                    }
                }
                for item in map.values_mut() {
                    self.redact_value(item, found)?;
                }
            }
            Value::Null | Value::Bool(_) => {}
        }
        Ok(())
    }

    /// Whether any value appears anywhere in `value` (keys, strings,
    /// numbers, decoded base64).
    fn found_in_value(&self, value: &Value) -> bool {
        match value {
            Value::String(text) => {
                self.found_in(text.as_bytes()) || base64_decoded(text).is_some_and(|bytes| self.found_in(&bytes))
            }
            Value::Number(number) => self.found_in(number.to_string().as_bytes()),
            Value::Array(items) => items.iter().any(|item| self.found_in_value(item)),
            Value::Object(map) => {
                map.iter().any(|(key, item)| self.found_in(key.as_bytes()) || self.found_in_value(item))
            }
            Value::Null | Value::Bool(_) => false,
        }
    }

    /// Redact a result, every field of it (content of every type, `_meta`,
    /// annotations, structured content, fields the protocol does not know),
    /// never letting it grow past `max_output_bytes`.
    pub(crate) fn redact_result(&self, result: CallToolResult, max_output_bytes: usize) -> Redacted {
        if self.is_empty() {
            return Redacted::Clean(result);
        }
        let Ok(mut value) = serde_json::to_value(&result) else {
            // Our own types always serialize.
            return Redacted::Clean(result);
        };
        if !self.found_in_value(&value) {
            return Redacted::Clean(result);
        }
        let size = serde_json::to_vec(&value).map_or(usize::MAX, |bytes| bytes.len());
        let mut found = Found::new(max_output_bytes.saturating_sub(size));
        if self.redact_value(&mut value, &mut found).is_err() {
            return Redacted::TooLarge(found.names);
        }
        match serde_json::from_value(value) {
            Ok(result) => Redacted::Replaced(result, found.names),
            Err(_) => Redacted::Unusable(found.names),
        }
    }

    /// Redact a JSON document the plugin returned (its `describe` output),
    /// letting it grow by at most `room` bytes: the names found, or `Err`
    /// with them when it would grow more.
    pub(crate) fn redact_json(&self, value: &mut Value, room: usize) -> Result<Vec<String>, Vec<String>> {
        if self.is_empty() {
            return Ok(Vec::new());
        }
        let mut found = Found::new(room);
        match self.redact_value(value, &mut found) {
            Ok(()) => Ok(found.names),
            Err(TooLarge) => Err(found.names),
        }
    }

    /// Whether a result holds any sensitive value (for the policy that
    /// refuses such results without redacting them): the names found.
    pub(crate) fn scan_result(&self, result: &CallToolResult) -> Vec<String> {
        if self.is_empty() {
            return Vec::new();
        }
        // The redacting walk over a copy names what it finds (and copies
        // nothing where it finds nothing).
        let Ok(mut copy) = serde_json::to_value(result) else { return Vec::new() };
        let mut found = Found::new(usize::MAX);
        let _ = self.redact_value(&mut copy, &mut found);
        found.names
    }

    /// The start of `bytes` that a cut at `max` bytes would keep, redacted
    /// first over a window reaching past the cut by the longest value, so
    /// that a value the cut falls in is redacted whole rather than left as
    /// an unrecognisable fragment. The caller then cuts the result at `max`.
    /// Reads at most `max` + the longest value's length.
    pub(crate) fn redact_head(&self, bytes: &[u8], max: usize) -> Vec<u8> {
        let window = &bytes[..bytes.len().min(max.saturating_add(self.longest))];
        match self.replace(window, &mut Found::new(usize::MAX)) {
            Ok(Some(redacted)) => redacted,
            _ => window.to_vec(),
        }
    }

    /// `bytes` with every value replaced, however much that adds (a log
    /// line's text, which no output cap bounds); `None` when it has none.
    pub(crate) fn redact_bytes(&self, bytes: &[u8]) -> Option<Vec<u8>> {
        self.replace(bytes, &mut Found::new(usize::MAX)).ok().flatten()
    }

    /// A text whose start was cut off (the last lines of a stream): redact
    /// it, and a fragment of a value it starts with (the end of a value the
    /// cut fell in) too.
    pub(crate) fn redact_tail(&self, text: &mut String) {
        self.redact_text(text, &mut Vec::new());
        // A cut is often marked with an ellipsis.
        let lead = if text.starts_with('…') { '…'.len_utf8() } else { 0 };
        for (i, value) in self.values.iter().enumerate() {
            // The longest proper suffix of the value the text starts with.
            let body = &text[lead..];
            let fragment = (1..value.len())
                .filter(|&at| value.is_char_boundary(at))
                .map(|at| &value[at..])
                .find(|suffix| body.starts_with(suffix));
            if let Some(fragment) = fragment {
                *text = format!("{}{}{}", &text[..lead], self.markers[i], &body[fragment.len()..]);
                return;
            }
        }
    }

    /// Redact every text of an error that may quote the plugin; the names
    /// of the values found.
    pub(crate) fn redact_error(&self, error: &mut crate::Error) -> Vec<String> {
        let mut found = Vec::new();
        if !self.is_empty() {
            error.plugin_texts_mut(&mut |text| self.redact_text(text, &mut found));
        }
        found
    }

    /// Redact a text the plugin chose that goes into an error or a log
    /// line; a text that would grow too much is withheld whole. The names
    /// found are added to `names`.
    pub(crate) fn redact_text(&self, text: &mut String, names: &mut Vec<String>) {
        if self.is_empty() || !self.found_in(text.as_bytes()) {
            return;
        }
        let mut found = Found::new(TEXT_GROWTH);
        if self.redact_string(text, &mut found).is_err() {
            *text = format!("[text withheld: it contains secret {}]", found.names.join(", "));
        }
        for name in found.names {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
}

/// The bytes a string decodes to, when it is padded standard base64 (the
/// protocol's form of binary data).
fn base64_decoded(text: &str) -> Option<Vec<u8>> {
    let base64 = |b: u8| b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'=';
    if text.len() < 4 || !text.len().is_multiple_of(4) || !text.bytes().all(base64) {
        return None;
    }
    BASE64.decode(text.as_bytes()).ok()
}

/// What the host does when a plugin's result contains the value of a secret
/// it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum SecretOutput {
    /// Replace the value with `[redacted secret NAME]` and log that it did.
    #[default]
    Redact,
    /// Refuse the whole result as invalid output.
    Refuse,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn file_provider_reads_one_file_per_secret() {
        let dir = std::env::temp_dir().join(format!("toolhost-secrets-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("API_KEY"), "s3cr3t\n").unwrap();
        let provider = FileSecretProvider::new(&dir);
        assert_eq!(provider.secret("API_KEY").await, Ok(Some("s3cr3t".to_owned())));
        assert_eq!(provider.secret("MISSING").await, Ok(None));
        assert!(provider.secret("../etc").await.is_err());
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn requirements_from_meta_or_beside_the_description() {
        let mut tool = Tool::new("send", "Sends.", Default::default());
        assert_eq!(Requirements::of(&tool), Ok(Requirements::default()));
        tool.extra.insert("requirements".into(), json!({"secrets": [{"id": "A"}], "user_id": true}));
        let found = Requirements::of(&tool).unwrap();
        assert_eq!((found.secrets[0].id.as_str(), found.user_id), ("A", true));
        tool.meta = Some(json!({"requirements": {"secrets": [{"id": "B"}]}}).as_object().unwrap().clone());
        assert_eq!(Requirements::of(&tool).unwrap().secrets[0].id, "B");
        tool.meta = Some(json!({"requirements": {"secrets": "B"}}).as_object().unwrap().clone());
        assert!(Requirements::of(&tool).is_err());
    }

    fn redactor(pairs: &[(&str, &str)]) -> Redactor {
        let mut values = SensitiveValues::new();
        for (name, value) in pairs {
            values.push(*name, *value);
        }
        Redactor::new(&values)
    }

    #[test]
    fn redaction_covers_every_field_of_a_result() {
        let redactor = redactor(&[("KEY", "hunter2"), ("PIN", "90210")]);
        let b64 = |bytes: &[u8]| BASE64.encode(bytes);
        let result: CallToolResult = serde_json::from_value(json!({
            "content": [
                {"type": "text", "text": "the key is hunter2!", "_meta": {"k": "hunter2"}, "annotations": {"lastModified": "hunter2"}},
                {"type": "resource", "resource": {"uri": "mem://hunter2", "mimeType": "text/hunter2", "text": "hunter2"}},
                {"type": "resource", "resource": {"uri": "mem://b", "blob": b64(b"\x00binary hunter2 inside")}},
                {"type": "resource_link", "uri": "mem://x", "name": "hunter2", "title": "hunter2 title"},
                {"type": "image", "data": b64(b"\x89PNG hunter2"), "mimeType": "image/hunter2"},
                {"type": "audio", "data": b64(b"RIFF hunter2"), "mimeType": "audio/wav"}
            ],
            "structuredContent": {"nested": ["a", {"k": "xhunter2x"}], "hunter2": 1, "pin": 90210, "pins": [1902101]},
            "_meta": {"leak": "hunter2"},
            "unknownField": "hunter2"
        }))
        .unwrap();
        let Redacted::Replaced(result, mut names) = redactor.redact_result(result, 1 << 20) else {
            panic!("not redacted")
        };
        names.sort();
        assert_eq!(names, ["KEY", "PIN"]);
        let text = serde_json::to_string(&result).unwrap();
        assert!(!text.contains("hunter2") && !text.contains("90210"), "{text}");
        assert!(!text.contains(&b64(b"RIFF hunter2")), "{text}");
        assert!(text.contains("[redacted secret KEY]"), "{text}");
        for item in &result.content {
            let value = serde_json::to_value(item).unwrap();
            for field in ["data", "blob"] {
                if let Some(data) = value.get(field).or_else(|| value.get("resource").and_then(|r| r.get(field))) {
                    let bytes = BASE64.decode(data.as_str().unwrap()).unwrap();
                    assert!(!String::from_utf8_lossy(&bytes).contains("hunter2"));
                }
            }
        }
        assert_eq!(redactor.scan_result(&result), Vec::<String>::new());
    }

    #[test]
    fn redaction_never_grows_a_result_past_the_cap() {
        let redactor = redactor(&[("ONE", "a")]);
        let result = CallToolResult::text("a".repeat(100_000));
        assert!(matches!(redactor.redact_result(result.clone(), 16 << 20), Redacted::Replaced(..)));
        assert!(matches!(redactor.redact_result(result, 200_000), Redacted::TooLarge(names) if names == ["ONE"]));
    }

    #[test]
    fn error_text_is_redacted_or_withheld() {
        let redactor = redactor(&[("KEY", "hunter2")]);
        let mut names = Vec::new();
        let mut text = "failed with hunter2".to_owned();
        redactor.redact_text(&mut text, &mut names);
        assert_eq!((text.as_str(), names.as_slice()), ("failed with [redacted secret KEY]", &["KEY".to_owned()][..]));
        let one = redactor_one();
        let mut long = "x".repeat(10_000);
        one.redact_text(&mut long, &mut names);
        assert_eq!(long, "[text withheld: it contains secret X]");
    }

    fn redactor_one() -> Redactor {
        redactor(&[("X", "x")])
    }

    #[test]
    fn a_cut_never_leaves_a_fragment_of_a_value() {
        let redactor = redactor(&[("KEY", "hunter2-hunter2")]);
        // A cut at 10 falls inside the value: the window reaches past it.
        let head = redactor.redact_head(b"abcdefhunter2-hunter2 and more", 10);
        assert!(String::from_utf8_lossy(&head).starts_with("abcdef[redacted secret KEY]"));
        // A tail that starts inside the value.
        let mut tail = "ter2-hunter2 | panicked".to_owned();
        redactor.redact_tail(&mut tail);
        assert_eq!(tail, "[redacted secret KEY] | panicked");
        let mut tail = "…2-hunter2 | panicked".to_owned();
        redactor.redact_tail(&mut tail);
        assert_eq!(tail, "…[redacted secret KEY] | panicked");
        let mut clean = "nothing here".to_owned();
        redactor.redact_tail(&mut clean);
        assert_eq!(clean, "nothing here");
    }

    #[test]
    fn empty_values_match_nothing() {
        let redactor = redactor(&[("EMPTY", "")]);
        assert!(redactor.is_empty());
    }
}
