//! The service's settings: the toolsets file's `serve.service` section
//! (and `--store`).

use std::path::PathBuf;

use serde::Deserialize;

/// `serve.service`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct ServiceSettings {
    /// `sqlite://PATH` or `postgres://USER@HOST/DB`.
    pub store: String,
    /// The hosts `mcp` and `http` adapters may reach (`host`, `host:port`,
    /// `*.domain`; `*` for any): what a tenant names must be here.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Directories whose `.wasm` files `uri` adapters may name with
    /// `file://` (none: only `https://` with a digest and `oci://`).
    #[serde(default)]
    pub plugin_dirs: Vec<PathBuf>,
    /// How often to look for other instances' changes, in milliseconds
    /// (default 1000).
    pub poll_millis: Option<u64>,
    /// The most tool sets one workspace may have (default 1,000).
    pub max_tool_sets: Option<u64>,
    /// The most tools one `http` tool set may have (default 1,000).
    pub max_tools: Option<u64>,
    /// The requests to `/v1` one workspace may make (a rate with a burst;
    /// none by default): over it, `429` with `Retry-After`.
    pub per_workspace: Option<toolhost_mcp::Rate>,
    /// Every plugin a tenant's `uri` adapter downloads (`https://`,
    /// `oci://`) must carry a signature by [`ServiceSettings::signature_key`];
    /// one without is refused (its sync fails, saying why). Plugin files of
    /// `pluginDirs` are the operator's and are used as they are.
    #[serde(default)]
    pub require_signatures: bool,
    /// The key tenants' downloaded plugins are verified with: the
    /// toolsets file's top-level `verify.key` (a cosign public key, PEM),
    /// an absolute path. Not a member of `serve.service`.
    #[serde(skip)]
    pub signature_key: Option<PathBuf>,
}

/// A setting that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("serve.service: {0}")]
pub struct SettingsError(pub String);

impl ServiceSettings {
    /// Settings for a store, nothing else allowed.
    pub fn new(store: impl Into<String>) -> Self {
        ServiceSettings {
            store: store.into(),
            allowed_hosts: Vec::new(),
            plugin_dirs: Vec::new(),
            poll_millis: None,
            max_tool_sets: None,
            max_tools: None,
            per_workspace: None,
            require_signatures: false,
            signature_key: None,
        }
    }

    /// Read the `serve.service` section.
    pub fn from_section(section: &serde_json::Value) -> Result<Self, SettingsError> {
        serde_json::from_value(section.clone()).map_err(|e| SettingsError(e.to_string()))
    }

    /// Check what serde cannot.
    pub fn check(&self) -> Result<(), SettingsError> {
        if !(self.store.starts_with("sqlite://")
            || self.store.starts_with("postgres://")
            || self.store.starts_with("postgresql://"))
        {
            return Err(SettingsError(format!(
                "store `{}` is neither sqlite://PATH nor postgres://...",
                redact(&self.store)
            )));
        }
        for (name, value) in
            [("pollMillis", self.poll_millis), ("maxToolSets", self.max_tool_sets), ("maxTools", self.max_tools)]
        {
            if value == Some(0) {
                return Err(SettingsError(format!("{name} must be at least 1")));
            }
        }
        if let Some(rate) = &self.per_workspace
            && !(rate.per_second.is_finite() && rate.per_second > 0.0)
        {
            return Err(SettingsError("perWorkspace.perSecond must be a number above 0".to_owned()));
        }
        for pattern in &self.allowed_hosts {
            toolhost::check_host_pattern(pattern).map_err(|e| SettingsError(format!("allowedHosts: {e}")))?;
        }
        if self.require_signatures && self.signature_key.is_none() {
            return Err(SettingsError(
                "requireSignatures needs the key tenants' plugins are signed with: the file's top-level \
                 `verify: {key: cosign.pub}`"
                    .to_owned(),
            ));
        }
        for dir in &self.plugin_dirs {
            if !dir.is_absolute() {
                return Err(SettingsError(format!("pluginDirs: `{}` is not an absolute path", dir.display())));
            }
        }
        Ok(())
    }

    /// The store's URL without its password (for messages).
    pub fn store_redacted(&self) -> String {
        redact(&self.store)
    }

    /// How often to poll the store.
    pub fn poll_interval(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.poll_millis.unwrap_or(1000))
    }

    /// The most tool sets one workspace may have.
    pub fn tool_set_quota(&self) -> i64 {
        self.max_tool_sets.unwrap_or(1000).try_into().unwrap_or(i64::MAX)
    }

    /// The most tools one `http` tool set may have.
    pub fn tool_quota(&self) -> i64 {
        self.max_tools.unwrap_or(1000).try_into().unwrap_or(i64::MAX)
    }

    /// Whether a tenant's adapter may reach `host` (`port`): the patterns
    /// of `allowedHosts` match as a plugin's host grants do
    /// ([`toolhost::host_matches`]).
    pub fn allows_host(&self, host: &str, port: Option<u16>) -> bool {
        toolhost::host_matches(&self.allowed_hosts, host, port)
    }

    /// Whether a tenant's adapter may reach `url`'s host: why not.
    pub fn reaches(&self, url: &url::Url) -> Result<(), String> {
        let host = url.host_str().unwrap_or("");
        if self.allows_host(host, url.port_or_known_default()) {
            Ok(())
        } else {
            Err(format!("the host `{host}` is not one this service may reach (serve.service.allowedHosts)"))
        }
    }

    /// Whether `path` is a file inside one of the plugin directories (both
    /// resolved, so `..` and links cannot leave them).
    pub fn holds_plugin(&self, path: &str) -> bool {
        std::fs::canonicalize(path).is_ok_and(|real| {
            self.plugin_dirs.iter().any(|dir| std::fs::canonicalize(dir).is_ok_and(|dir| real.starts_with(dir)))
        })
    }
}

/// A store URL without its password.
pub(crate) fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_allowed_by_name_port_and_domain() {
        let mut settings = ServiceSettings::new("sqlite:///tmp/x.db");
        settings.allowed_hosts = vec!["127.0.0.1:8080".into(), "*.example.com".into(), "api.test".into()];
        assert!(settings.allows_host("127.0.0.1", Some(8080)));
        assert!(!settings.allows_host("127.0.0.1", Some(9090)));
        assert!(settings.allows_host("tools.example.com", Some(443)));
        assert!(!settings.allows_host("example.com.evil", Some(443)));
        assert!(settings.allows_host("API.test", None));
        assert!(!settings.allows_host("169.254.169.254", Some(80)));
    }

    #[test]
    fn a_password_is_not_shown() {
        assert_eq!(redact("postgres://u:secret@db/x"), "postgres://u:***@db/x");
    }
}
