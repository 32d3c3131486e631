//! `spec.adapter.http`: tools defined through the API, each a validated
//! HTTP request against the tool set's `baseUrl`.
//!
//! A tool's `config.http` says the request: `requestMethod`, `path` and
//! `query` (where `{name}` is the argument `name`, percent-encoded),
//! `headers` (the tool set's, then the tool's), and for `POST`, `PUT` and
//! `PATCH` a body: `requestBodyTemplate` with `{name}` replaced by the
//! argument's JSON (in a JSON body) or its text (otherwise), or, without a
//! template, the arguments object as JSON. Arguments are checked against
//! the tool's `parameters` before the request is made (the registry does
//! it, as for every toolset). The request goes only to a host the
//! operator allows (`serve.service.allowedHosts`), follows no redirect,
//! takes at most 30 s, and reads at most 1 MiB of answer: a `4xx`/`5xx` is
//! a tool error (`isError`) quoting the status and body; an answer that
//! cannot be had (refused, timed out, too large) is a failure of the call.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use toolhost::{BoxFuture, BuiltinCall, BuiltinError, BuiltinTool, BuiltinToolset, CallToolResult, ToolsetConfig};
use toolhost_protocol::{JsonObject, Tool};

use crate::model::ConfigHttp;
use crate::settings::ServiceSettings;

/// The most of an answer read.
const MAX_ANSWER: usize = 1024 * 1024;
/// The longest a request may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Connects `kind: http` toolsets: their `remote.server` holds the base
/// URL, the headers and the tools (as the store has them).
pub(crate) struct HttpConnector {
    settings: Arc<ServiceSettings>,
    /// (None only where TLS could not be set up: its tools fail, saying so.)
    client: Option<reqwest::Client>,
}

impl HttpConnector {
    pub(crate) fn new(settings: Arc<ServiceSettings>) -> HttpConnector {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(TIMEOUT)
            // Only to addresses `allowedHosts` lets it reach: an allowed name
            // pointed at an internal address does not get a tenant's request
            // there (DNS rebinding).
            .dns_resolver(toolhost_mcp::GrantedAddresses::new(settings.allowed_hosts.clone()))
            .build();
        if let Err(error) = &client {
            tracing::error!("the http adapter has no HTTP client, its tools will fail: {error}");
        }
        HttpConnector { settings, client: client.ok() }
    }
}

/// One tool as the connector is given it.
#[derive(serde::Deserialize)]
struct HttpTool {
    name: String,
    description: String,
    parameters: JsonObject,
    http: ConfigHttp,
}

impl toolhost::ToolsetConnector for HttpConnector {
    fn connect<'a>(&'a self, config: &'a ToolsetConfig) -> BoxFuture<'a, Result<BuiltinToolset, String>> {
        Box::pin(async move {
            let server = &config.remote.server;
            let tools: Vec<HttpTool> = serde_json::from_value(server.get("tools").cloned().unwrap_or_default())
                .map_err(|e| format!("the tools: {e}"))?;
            let base = server.get("baseUrl").and_then(Value::as_str).unwrap_or_default();
            if base.is_empty() && tools.is_empty() {
                // A tool set made without an adapter: nothing to load yet.
                return Ok(BuiltinToolset::new(config.id.clone()));
            }
            let base = url::Url::parse(base).map_err(|e| format!("baseUrl: {e}"))?;
            self.settings.reaches(&base)?;
            let headers: BTreeMap<String, String> = config.remote.headers.clone();
            let mut toolset = BuiltinToolset::new(config.id.clone());
            for tool in tools {
                let client = self.client.clone().ok_or("the http adapter has no HTTP client (see the log)")?;
                let request =
                    Arc::new(Request { client, base: base.clone(), headers: headers.clone(), http: tool.http });
                let described = Tool::new(tool.name, tool.description, tool.parameters);
                toolset = toolset.with_tool(BuiltinTool::from_tool(described, move |call: BuiltinCall| {
                    let request = Arc::clone(&request);
                    async move { request.send(call.arguments).await }
                }));
            }
            Ok(toolset)
        })
    }
}

/// What one tool's calls send.
struct Request {
    client: reqwest::Client,
    base: url::Url,
    headers: BTreeMap<String, String>,
    http: ConfigHttp,
}

/// An error and its causes, `: `-joined (reqwest's own text is only the
/// outermost).
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(cause) = next {
        text.push_str(&format!(": {cause}"));
        next = cause.source();
    }
    text
}

/// An argument as text: a string as it is, anything else as its JSON.
fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// `template` with each `{name}` replaced by `value(argument)` (an unknown
/// name is left as it is).
fn fill(template: &str, arguments: &JsonObject, value: impl Fn(&Value) -> String) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close)
                if !after[..close].is_empty()
                    && after[..close].bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') =>
            {
                let name = &after[..close];
                match arguments.get(name) {
                    Some(argument) => out.push_str(&value(argument)),
                    None => out.push_str(&rest[open..open + close + 2]),
                }
                rest = &after[close + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

impl Request {
    async fn send(&self, arguments: JsonObject) -> Result<CallToolResult, BuiltinError> {
        let path = self.http.path.as_deref().unwrap_or("");
        let path = fill(path, &arguments, |v| {
            percent_encoding::utf8_percent_encode(&text_of(v), percent_encoding::NON_ALPHANUMERIC).to_string()
        });
        let mut url = self.base.clone();
        let joined = format!("{}{}", url.path().trim_end_matches('/'), path);
        url.set_path(&joined);
        if url.host_str() != self.base.host_str() {
            return Err(BuiltinError::Tool("the path leaves the tool set's host".to_owned()));
        }
        {
            let mut query = url.query_pairs_mut();
            for (name, template) in &self.http.query.0 {
                query.append_pair(name, &fill(template, &arguments, text_of));
            }
        }
        if url.query() == Some("") {
            url.set_query(None);
        }
        let method = reqwest::Method::from_bytes(self.http.request_method.as_bytes())
            .map_err(|_| BuiltinError::Tool(format!("`{}` is not an HTTP method", self.http.request_method)))?;
        let mut request = self.client.request(method.clone(), url);
        for (name, value) in self.headers.iter().chain(&self.http.headers) {
            // (Refused at the API; a row stored before is refused here.)
            if let Some(header) = toolhost::transport_header(name) {
                return Err(BuiltinError::Tool(format!("a tool set may not set the `{header}` header")));
            }
            request = request.header(name, fill(value, &arguments, text_of));
        }
        if matches!(method, reqwest::Method::POST | reqwest::Method::PUT | reqwest::Method::PATCH) {
            let content_type = self.http.request_body_content_type.clone().unwrap_or("application/json".to_owned());
            let json = content_type.split(';').next().is_some_and(|t| t.trim().ends_with("json"));
            let body = match &self.http.request_body_template {
                Some(template) if json => fill(template, &arguments, Value::to_string),
                Some(template) => fill(template, &arguments, text_of),
                None => Value::Object(arguments.clone()).to_string(),
            };
            request = request.header(reqwest::header::CONTENT_TYPE, content_type).body(body);
        }
        let mut response = request
            .send()
            .await
            .map_err(|e| BuiltinError::Unavailable(format!("the request failed: {}", chain(&e))))?;
        let status = response.status();
        let mut body = Vec::new();
        while let Some(chunk) =
            response.chunk().await.map_err(|e| BuiltinError::Unavailable(format!("the answer broke off: {e}")))?
        {
            if body.len() + chunk.len() > MAX_ANSWER {
                return Err(BuiltinError::Unavailable(format!("the answer is larger than {MAX_ANSWER} bytes")));
            }
            body.extend_from_slice(&chunk);
        }
        let text = String::from_utf8_lossy(&body).into_owned();
        if status.is_client_error() || status.is_server_error() {
            return Ok(CallToolResult::error(format!("HTTP {status}: {text}")));
        }
        let mut result = CallToolResult::text(text.clone());
        if let Ok(Value::Object(object)) = serde_json::from_str::<Value>(&text) {
            result.structured_content = Some(Value::Object(object));
        }
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_take_arguments_by_name() {
        let arguments: JsonObject =
            serde_json::from_value(serde_json::json!({"city": "São Paulo", "days": 3})).expect("an object");
        assert_eq!(fill("/weather/{city}", &arguments, text_of), "/weather/São Paulo");
        assert_eq!(
            fill(r#"{"q": {city}, "n": {days}}"#, &arguments, Value::to_string),
            r#"{"q": "São Paulo", "n": 3}"#
        );
        assert_eq!(fill("{missing} {} {not a name}", &arguments, text_of), "{missing} {} {not a name}");
    }
}
