//! How `serve --http` runs in production: the toolsets file's `serve`
//! section (checked against toolhost's schema when the file is read), or
//! the same built in code.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::auth::AuthSettings;

/// The `serve` section: where the server is, who may call it, how often,
/// and what it reports. Every part is off unless given.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct ServeSettings {
    /// This server's canonical resource URI (RFC 8707), e.g.
    /// `https://tools.example.com/mcp`: the audience tokens are issued
    /// for, named by the protected-resource metadata. Its host is accepted
    /// in `Host` headers.
    pub resource: Option<String>,
    /// `Host` header values accepted besides the loopback names and the
    /// resource's host.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Browser origins allowed besides the server's own.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// Bearer-token authorization.
    pub auth: Option<AuthSettings>,
    /// Limits on `tools/call`.
    #[serde(default)]
    pub rate_limits: RateLimits,
    /// Metrics and logs.
    #[serde(default)]
    pub telemetry: TelemetrySettings,
    /// Bounds on connections, sessions and slow requests (each defaults to
    /// [`HttpLimits`](crate::http_limits::HttpLimits)'s).
    #[serde(default)]
    pub limits: LimitSettings,
    /// The tool-set service (`toolhost-service` reads it): its store, the
    /// hosts and plugin directories tenants may name.
    pub service: Option<serde_json::Value>,
}

impl ServeSettings {
    /// Read the `serve` section of a toolsets file (already checked
    /// against the schema); a problem names its JSON pointer.
    pub fn from_section(section: &serde_json::Value) -> Result<ServeSettings, SettingsError> {
        let settings: ServeSettings = serde_json::from_value(section.clone())
            .map_err(|e| SettingsError { pointer: "/serve".to_owned(), message: e.to_string() })?;
        settings.check()?;
        Ok(settings)
    }

    /// The rules the schema cannot say.
    pub fn check(&self) -> Result<(), SettingsError> {
        let problem = |pointer: &str, message: &str| {
            Err(SettingsError { pointer: pointer.to_owned(), message: message.to_owned() })
        };
        if let Some(auth) = &self.auth {
            if self.resource.is_none() {
                return problem(
                    "/serve/resource",
                    "serve.auth needs serve.resource: the URI tokens are issued for and clients are told of",
                );
            }
            if auth.jwt.is_none() && auth.api_keys.is_empty() {
                return problem("/serve/auth", "give serve.auth.jwt, serve.auth.apiKeys, or both");
            }
            for (index, key) in auth.api_keys.iter().enumerate() {
                // (The key's value is never quoted.)
                if key.key.chars().count() < 16 {
                    return problem(
                        &format!("/serve/auth/apiKeys/{index}/key"),
                        "an API key is at least 16 characters (a guessable key is no key)",
                    );
                }
            }
        }
        if let Some(resource) = &self.resource
            && url_host(resource).is_none()
        {
            return problem(
                "/serve/resource",
                "the resource is an absolute http(s) URL, like https://tools.example.com/mcp",
            );
        }
        Ok(())
    }

    /// The `Host` values the resource URI adds (`host` and `host:port`).
    pub(crate) fn resource_hosts(&self) -> Vec<String> {
        let Some(authority) = self.resource.as_deref().and_then(url_host) else { return Vec::new() };
        let mut hosts = vec![authority.to_owned()];
        if let Some((host, port)) = authority.rsplit_once(':')
            && !host.ends_with(']')
            && port.chars().all(|c| c.is_ascii_digit())
        {
            hosts.push(host.to_owned());
        }
        hosts
    }
}

/// The authority (`host[:port]`) of an absolute http(s) URL.
fn url_host(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    (!authority.is_empty() && !authority.contains('@')).then_some(authority)
}

/// The `serve.limits` section: what clients may hold at once.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct LimitSettings {
    /// Connections served at once.
    pub connections: Option<usize>,
    /// Tool calls running at once.
    pub calls: Option<usize>,
    /// Bytes of request bodies held at once.
    pub body_bytes: Option<usize>,
    /// MCP sessions open at once, all clients together.
    pub sessions: Option<usize>,
    /// Sessions one authenticated client may have open.
    pub sessions_per_client: Option<usize>,
    /// Seconds without a request before a session is parked.
    pub session_park_seconds: Option<u64>,
    /// Seconds a request's head, and then its body, may take to arrive.
    pub request_timeout_seconds: Option<u64>,
}

impl LimitSettings {
    /// `limits` with what this section gives instead.
    pub fn apply(&self, mut limits: crate::http_limits::HttpLimits) -> crate::http_limits::HttpLimits {
        if let Some(connections) = self.connections {
            limits.connections = connections;
        }
        if let Some(calls) = self.calls {
            limits.calls = calls;
        }
        if let Some(bytes) = self.body_bytes {
            limits.body_bytes = bytes;
        }
        if let Some(sessions) = self.sessions {
            limits.sessions = sessions;
        }
        if let Some(per_client) = self.sessions_per_client {
            limits.sessions_per_client = per_client;
        }
        if let Some(seconds) = self.session_park_seconds {
            limits.session_park_after = std::time::Duration::from_secs(seconds);
        }
        if let Some(seconds) = self.request_timeout_seconds {
            limits.request_timeout = std::time::Duration::from_secs(seconds);
        }
        limits
    }
}

/// A problem in the `serve` section.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{pointer}: {message}")]
pub struct SettingsError {
    /// The JSON pointer of the value, from the document's root.
    pub pointer: String,
    /// What is wrong.
    pub message: String,
}

/// A sustained rate with a burst.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rate {
    /// Calls per second, sustained.
    pub per_second: f64,
    /// Calls allowed at once above the rate (default: the rate, at least 1).
    pub burst: Option<u32>,
}

/// Limits on `tools/call`: a call over one is refused at once, saying
/// which limit and when to retry.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct RateLimits {
    /// Each client's calls (a client: the token's subject, else the peer's
    /// address).
    pub per_client: Option<Rate>,
    /// Calls one client may have running at once.
    pub concurrent_per_client: Option<u32>,
    /// Each tool's calls, from all clients together.
    pub per_tool: Option<Rate>,
    /// Limits of single tools by namespaced name, replacing `per_tool`.
    #[serde(default)]
    pub tools: BTreeMap<String, Rate>,
}

impl RateLimits {
    /// Whether any limit is set.
    pub fn any(&self) -> bool {
        self.per_client.is_some()
            || self.concurrent_per_client.is_some()
            || self.per_tool.is_some()
            || !self.tools.is_empty()
    }
}

/// What the server reports (its logs' format is the CLI's `--log-format`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct TelemetrySettings {
    /// Serve Prometheus metrics at `/metrics`.
    #[serde(default)]
    pub metrics: bool,
    /// Export a span per `tools/call` over OTLP.
    pub otlp: Option<crate::telemetry::OtlpSettings>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resource_host_is_accepted_with_and_without_its_port() {
        let settings =
            ServeSettings { resource: Some("https://tools.example.com:8443/mcp".into()), ..Default::default() };
        assert_eq!(settings.resource_hosts(), ["tools.example.com:8443", "tools.example.com"]);
        let settings = ServeSettings { resource: Some("https://[::1]/mcp".into()), ..Default::default() };
        assert_eq!(settings.resource_hosts(), ["[::1]"]);
    }

    #[test]
    fn auth_without_a_resource_is_refused_at_its_pointer() {
        let section = serde_json::json!({"auth": {"apiKeys": [{"key": "0123456789abcdef", "subject": "ci"}]}});
        let error = ServeSettings::from_section(&section).expect_err("refused");
        assert_eq!(error.pointer, "/serve/resource");
    }
}
