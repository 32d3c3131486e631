//! Secrets: where the host gets them, which a plugin may have, and keeping
//! them out of what a plugin returns.
//!
//! A tool declares the secrets it needs in `requirements` (in its `_meta`, or
//! beside its description), as `shared/spec/tool-definition.md` describes:
//! `{"secrets": [{"id": "API_KEY"}], "authorization": [...], "user_id": true}`.
//! The host asks a [`SecretProvider`] for exactly those, hands them to the
//! plugin as config values (key = the secret's id), refuses a call whose tool
//! needs a secret the provider does not have, and scans every result for the
//! values it handed out.

use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;
use toolhost_protocol::{CallToolResult, Content, Tool};

/// A secret lookup that failed (not a missing secret: that is `Ok(None)`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SecretError(pub String);

/// Where the host gets secret values.
pub trait SecretProvider: Send + Sync {
    /// The value of the secret `name`; `Ok(None)` if there is none.
    fn secret(&self, name: &str) -> Result<Option<String>, SecretError>;

    /// What the provider is, for messages (`environment`, `directory /run/secrets`).
    fn describe(&self) -> String;
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
    fn secret(&self, name: &str) -> Result<Option<String>, SecretError> {
        match std::env::var(format!("{}{name}", self.prefix)) {
            Ok(value) => Ok(Some(value)),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => {
                Err(SecretError(format!("environment variable {}{name} is not UTF-8", self.prefix)))
            }
        }
    }

    fn describe(&self) -> String {
        if self.prefix.is_empty() {
            "environment".to_owned()
        } else {
            format!("environment, prefix {}", self.prefix)
        }
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
    fn secret(&self, name: &str) -> Result<Option<String>, SecretError> {
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

    fn describe(&self) -> String {
        format!("directory {}", self.dir.display())
    }
}

/// No secrets at all.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSecrets;

impl SecretProvider for NoSecrets {
    fn secret(&self, _name: &str) -> Result<Option<String>, SecretError> {
        Ok(None)
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
        let declared = tool
            .meta
            .as_ref()
            .and_then(|meta| meta.get("requirements"))
            .or_else(|| tool.extra.get("requirements"));
        match declared {
            None | Some(Value::Null) => Ok(Requirements::default()),
            Some(value) => serde_json::from_value(value.clone()).map_err(|e| format!("invalid requirements: {e}")),
        }
    }
}

/// The secrets handed to one plugin, by id.
#[derive(Clone, Default)]
pub(crate) struct HandedSecrets {
    values: Vec<(String, String)>,
}

impl fmt::Debug for HandedSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.values.iter().map(|(id, _)| id)).finish()
    }
}

impl HandedSecrets {
    pub(crate) fn push(&mut self, id: String, value: String) {
        self.values.push((id, value));
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Replace every handed-out value in `text`; the ids of those found.
    pub(crate) fn redact_str(&self, text: &mut String, found: &mut Vec<String>) {
        for (id, value) in &self.values {
            if !value.is_empty() && text.contains(value.as_str()) {
                *text = text.replace(value.as_str(), &format!("[redacted secret {id}]"));
                if !found.contains(id) {
                    found.push(id.clone());
                }
            }
        }
    }

    fn redact_value(&self, value: &mut Value, found: &mut Vec<String>) {
        match value {
            Value::String(text) => self.redact_str(text, found),
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_value(v, found)),
            Value::Object(map) => {
                for v in map.values_mut() {
                    self.redact_value(v, found);
                }
            }
            _ => {}
        }
    }

    /// Redact every handed-out value from a result's text, resource text
    /// and structured content; the ids of the secrets found.
    pub(crate) fn redact_result(&self, result: &mut CallToolResult) -> Vec<String> {
        let mut found = Vec::new();
        if self.is_empty() {
            return found;
        }
        for item in &mut result.content {
            match item {
                Content::Text(text) => self.redact_str(&mut text.text, &mut found),
                Content::Resource(resource) => {
                    if let Some(text) = &mut resource.resource.text {
                        self.redact_str(text, &mut found);
                    }
                }
                Content::ResourceLink(link) => {
                    self.redact_str(&mut link.uri, &mut found);
                    if let Some(description) = &mut link.description {
                        self.redact_str(description, &mut found);
                    }
                }
                Content::Image(_) | Content::Audio(_) => {}
            }
        }
        if let Some(structured) = &mut result.structured_content {
            self.redact_value(structured, &mut found);
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn file_provider_reads_one_file_per_secret() {
        let dir = std::env::temp_dir().join(format!("toolhost-secrets-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("API_KEY"), "s3cr3t\n").unwrap();
        let provider = FileSecretProvider::new(&dir);
        assert_eq!(provider.secret("API_KEY"), Ok(Some("s3cr3t".to_owned())));
        assert_eq!(provider.secret("MISSING"), Ok(None));
        assert!(provider.secret("../etc").is_err());
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

    #[test]
    fn redaction_covers_text_resources_and_structured_content() {
        let mut handed = HandedSecrets::default();
        handed.push("KEY".into(), "hunter2".into());
        let mut result: CallToolResult = serde_json::from_value(json!({
            "content": [
                {"type": "text", "text": "the key is hunter2!"},
                {"type": "resource", "resource": {"uri": "mem://x", "text": "hunter2"}}
            ],
            "structuredContent": {"nested": ["a", {"k": "xhunter2x"}]}
        }))
        .unwrap();
        assert_eq!(handed.redact_result(&mut result), ["KEY"]);
        let text = serde_json::to_string(&result).unwrap();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("[redacted secret KEY]"), "{text}");
    }
}
