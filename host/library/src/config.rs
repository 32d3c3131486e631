//! Toolsets configuration files: many plugins, their grants, filters and
//! approval rules in one document.
//!
//! The format is `spec/toolsets.md` (its schema ships in
//! `host/library/schema/`), in JSON, YAML (`.yaml`, `.yml`) or TOML (`.toml`). A
//! toolset of `kind: "uri"` names its plugin in `server.url` (a path, relative
//! to the file, or a `file://` URL), with its sandbox [`Policy`] beside it in
//! `server`. Filters and approval rules live in the toolset's `extensions`
//! (`includeTools`, `excludeTools`, `toolApprovals`). What toolhost requires on
//! top of the format is itself a schema, `host/library/schema/toolhost-toolsets.schema.json`.
//!
//! Strings in `server` and `headers` may use `${env:NAME}` (the host
//! environment) and `${secret:NAME}` (a [`SecretProvider`]). A reference that
//! cannot be resolved is an error naming the reference; resolved values never
//! appear in errors.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use jsonschema::Validator;
use serde::Deserialize;
use serde_json::Value;

use crate::filter::{ToolApprovals, ToolFilter};
use crate::sandbox::{Limits, Policy};
use crate::secrets::{SecretError, SecretOutput, SecretProvider, SensitiveValues};
use crate::source::{RemotePlugin, Sha256Digest, Verification};
pub use crate::tool::NAMESPACE_SEPARATOR;
use crate::validate::{self, ValidationOptions};

/// A toolsets document, read and checked.
#[derive(Clone)]
pub struct ToolsetsFile {
    /// Where it was read from.
    pub path: PathBuf,
    /// Its toolsets, in the document's order.
    pub toolsets: Vec<ToolsetConfig>,
    /// Its `serve` section (how `toolhost serve` runs: authorization, rate
    /// limits, telemetry), checked against toolhost's schema, with its
    /// `${env:}` and `${secret:}` references resolved: it may hold API
    /// keys, so it is left out of `Debug`.
    pub serve: Option<Value>,
    /// Its top-level `verify`: the signatures downloaded plugins need.
    pub verify: VerifyPolicy,
}

/// A toolsets file's top-level `verify`: which downloaded plugins
/// (`https://`, `oci://`) must be signed, and by whom when their toolset
/// does not say.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct VerifyPolicy {
    /// `required`: every downloaded plugin is verified, with its toolset's
    /// own `server.verify` or [`VerifyPolicy::default`]; one that has
    /// neither is refused. (Local files are the operator's own and are
    /// used as they are.)
    pub required: bool,
    /// `key`: the verification of every downloaded plugin whose toolset
    /// gives none (the path resolved against the file's folder).
    pub default: Option<Verification>,
}

impl std::fmt::Debug for ToolsetsFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolsetsFile")
            .field("path", &self.path)
            .field("toolsets", &self.toolsets)
            .field("serve", &self.serve.as_ref().map(|_| "..."))
            .field("verify", &self.verify)
            .finish()
    }
}

/// One toolset of a configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolsetConfig {
    /// Its id; its tools are listed as `<id>__<tool>`.
    pub id: String,
    /// `uri` for Wasm plugins; other kinds are reported when loading.
    pub kind: String,
    /// Its optional version.
    pub version: Option<String>,
    /// Where the plugin comes from (`kind: "uri"`).
    pub source: Option<PluginSource>,
    /// What the plugin is granted, and its limits.
    pub policy: Policy,
    /// How strictly it is validated.
    pub validation: ValidationOptions,
    /// What to do when a result contains a secret handed to the plugin.
    pub secret_output: SecretOutput,
    /// The secrets granted to the toolset (`secrets: [NAME, ...]`): its
    /// tools that declare one of them get it; nothing else grants a secret.
    pub secrets: Vec<String>,
    /// Keyring entries granted to a hyper-mcp plugin (`keyring:`): its
    /// `get_keyring_secret` of one is answered with the named secret.
    pub keyring: Vec<KeyringEntry>,
    /// The values `${secret:NAME}` references resolved to in `server` (the
    /// plugin's config, say), by name: kept out of its output like handed
    /// secrets.
    pub sensitive: SensitiveValues,
    /// Defaults for tools the `tools` list does not name.
    pub defaults: ToolSettings,
    /// Per-tool settings, by the plugin's own tool name.
    pub tools: BTreeMap<String, ToolOverride>,
    /// Only tools matching this filter are available (all when absent).
    pub include: Option<ToolFilter>,
    /// Tools matching this filter are not available.
    pub exclude: Option<ToolFilter>,
    /// Rules that mark tools as requiring approval.
    pub approvals: ToolApprovals,
    /// `extensions.requiredScopes`: the scopes a caller must hold, all of
    /// them, to see and call this toolset's tools (and its prompts and
    /// resources) when it names its scopes
    /// ([`CallContext::with_scopes`](crate::CallContext::with_scopes)); a
    /// tool entry's own `extensions.requiredScopes` replaces them for it.
    pub required_scopes: Vec<String>,
    /// Where a toolset of another kind (`mcp`) is: its `server` and
    /// `headers`, references resolved.
    pub remote: RemoteServer,
    /// The toolset's JSON pointer in its file, for messages.
    pub pointer: String,
    /// The file it came from (for messages), if any.
    pub file: Option<PathBuf>,
}

/// A keyring entry granted to a toolset (`keyring: [{service, user,
/// secret}]`): a hyper-mcp plugin's `get_keyring_secret` of (`service`,
/// `user`) is answered with the secret `secret` from the secret provider,
/// during tool calls only.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct KeyringEntry {
    /// The keyring service the plugin asks for.
    pub service: String,
    /// The keyring user the plugin asks for.
    pub user: String,
    /// The secret that answers it.
    pub secret: String,
}

/// Where a plugin comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PluginSource {
    /// A `.wasm` file.
    File(PathBuf),
    /// An `https://` URL, pinned by `server.digest` (the module's SHA-256).
    Https(RemotePlugin),
    /// An OCI reference, `oci://registry/repository[:tag]@sha256:...`,
    /// pinned by the manifest digest it names.
    Oci(RemotePlugin),
}

/// Where a toolset of a kind other than `uri` is (an MCP server): the
/// entry's `server` object and `headers`, `${env:}` and `${secret:}`
/// references resolved. Its `Debug` shows the keys only: values may be
/// secrets.
#[derive(Clone, PartialEq, Default)]
pub struct RemoteServer {
    /// `server` (`url`, `command`, `args`, `env`...).
    pub server: serde_json::Map<String, Value>,
    /// `headers`, for HTTP transports.
    pub headers: BTreeMap<String, String>,
}

impl fmt::Debug for RemoteServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteServer")
            .field("server", &self.server.keys().collect::<Vec<_>>())
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl ToolsetConfig {
    /// A toolset of `kind: builtin` with this id and the defaults of a
    /// toolsets file entry that says nothing else: every tool available,
    /// none needing approval, the default limits.
    pub fn builtin(id: impl Into<String>) -> Self {
        ToolsetConfig {
            id: id.into(),
            kind: "builtin".to_owned(),
            version: None,
            source: None,
            policy: Policy::default(),
            validation: ValidationOptions::default(),
            secret_output: SecretOutput::default(),
            secrets: Vec::new(),
            keyring: Vec::new(),
            sensitive: SensitiveValues::new(),
            defaults: ToolSettings { enabled: true, requires_approval: false },
            tools: BTreeMap::new(),
            include: None,
            exclude: None,
            approvals: ToolApprovals::default(),
            required_scopes: Vec::new(),
            remote: RemoteServer::default(),
            pointer: String::new(),
            file: None,
        }
    }
}

/// Whether a tool is available and whether it needs a person's approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolSettings {
    /// Available to callers.
    pub enabled: bool,
    /// A person must approve each call.
    pub requires_approval: bool,
}

impl Default for ToolSettings {
    fn default() -> Self {
        ToolSettings { enabled: true, requires_approval: false }
    }
}

/// A `tools` entry: overrides of the defaults for one tool.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolOverride {
    /// Overrides `toolsetDefaults.enabled`.
    pub enabled: Option<bool>,
    /// Overrides `toolsetDefaults.requiresApproval`.
    pub requires_approval: Option<bool>,
    /// `extensions.requiredScopes`: replaces the toolset's required scopes
    /// for this tool.
    pub required_scopes: Option<Vec<String>>,
}

/// A configuration that cannot be used: every problem, with the file and the
/// JSON pointer of the offending value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", render(file, problems))]
pub struct ConfigError {
    /// The file.
    pub file: PathBuf,
    /// Every problem found.
    pub problems: Vec<ConfigProblem>,
}

/// One problem in a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    /// JSON pointer of the offending value (empty for the document).
    pub pointer: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pointer = if self.pointer.is_empty() { "/" } else { &self.pointer };
        write!(f, "at {pointer}: {}", self.message)
    }
}

fn render(file: &Path, problems: &[ConfigProblem]) -> String {
    let list: Vec<String> = problems.iter().map(ToString::to_string).collect();
    format!("invalid configuration {}: {}", file.display(), list.join("; "))
}

impl ConfigError {
    fn one(file: &Path, pointer: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            file: file.to_path_buf(),
            problems: vec![ConfigProblem { pointer: pointer.into(), message: message.into() }],
        }
    }
}

fn schemas() -> &'static [Validator; 2] {
    static SCHEMAS: OnceLock<[Validator; 2]> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        let compile = |text: &str| {
            let value: Value = serde_json::from_str(text).expect("shipped schema is JSON");
            jsonschema::options().build(&value).expect("shipped schema compiles")
        };
        [
            compile(include_str!("../schema/toolsets.schema.json")),
            compile(include_str!("../schema/toolhost-toolsets.schema.json")),
        ]
    })
}

/// Read a toolsets file (JSON, YAML or TOML by extension; YAML and TOML with
/// the `yaml` and `toml` features, on by default), check it against
/// the format and toolhost's rules, and resolve `${env:..}` and
/// `${secret:..}` references.
pub async fn load_toolsets(path: &Path, secrets: &dyn SecretProvider) -> Result<ToolsetsFile, ConfigError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| ConfigError::one(path, "", format!("cannot read the file ({e})")))?;
    read_toolsets(path, &text, secrets).await
}

/// [`load_toolsets`] of a file's text, read already.
pub(crate) async fn read_toolsets(
    path: &Path,
    text: &str,
    secrets: &dyn SecretProvider,
) -> Result<ToolsetsFile, ConfigError> {
    let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    let document: Value = match extension.as_str() {
        "json" => serde_json::from_str(text).map_err(|e| format!("it is not valid JSON ({e})")),
        #[cfg(feature = "yaml")]
        "yaml" | "yml" => serde_norway::from_str(text).map_err(|e| format!("it is not valid YAML ({e})")),
        #[cfg(feature = "toml")]
        "toml" => toml::from_str::<Value>(text).map_err(|e| format!("it is not valid TOML ({e})")),
        #[cfg(not(feature = "yaml"))]
        "yaml" | "yml" => {
            Err("YAML toolsets files need toolhost's `yaml` feature, which this build leaves out".to_owned())
        }
        #[cfg(not(feature = "toml"))]
        "toml" => Err("TOML toolsets files need toolhost's `toml` feature, which this build leaves out".to_owned()),
        other => Err(format!("unknown format `.{other}`: use .json, .yaml, .yml or .toml")),
    }
    .map_err(|message| ConfigError::one(path, "", message))?;
    parse_toolsets(path, &document, secrets).await
}

/// Check and read an already-parsed toolsets document. `path` names it in
/// messages and anchors relative plugin paths. The secrets its
/// `${secret:..}` references name are looked up first (each once), then
/// the document is read.
pub async fn parse_toolsets(
    path: &Path,
    document: &Value,
    secrets: &dyn SecretProvider,
) -> Result<ToolsetsFile, ConfigError> {
    let secrets = &Prefetched::of(document, secrets).await;
    let mut problems: Vec<ConfigProblem> = schemas()
        .iter()
        .flat_map(|schema| validate::violations(schema, document))
        .map(|v| ConfigProblem { pointer: v.instance_path, message: v.message })
        .collect();
    problems.sort_by(|a, b| a.pointer.cmp(&b.pointer));
    problems.dedup();
    if !problems.is_empty() {
        return Err(ConfigError { file: path.to_path_buf(), problems });
    }

    let base = path.parent().unwrap_or(Path::new("."));
    let verify = match document.get("verify").cloned().map(serde_json::from_value::<RawVerify>) {
        None => VerifyPolicy::default(),
        Some(Ok(raw)) if raw.bundle.is_some() => {
            problems.push(ConfigProblem {
                pointer: "/verify".to_owned(),
                message: "`bundle` names one plugin's bundle: give it in that toolset's `verify`".to_owned(),
            });
            VerifyPolicy::default()
        }
        Some(Ok(raw)) => match verification(base, &raw) {
            Ok(default) => VerifyPolicy { required: raw.required.unwrap_or(false) || default.is_some(), default },
            Err(message) => {
                problems.push(ConfigProblem { pointer: "/verify".to_owned(), message });
                VerifyPolicy::default()
            }
        },
        Some(Err(e)) => {
            problems.push(ConfigProblem { pointer: "/verify".to_owned(), message: e.to_string() });
            VerifyPolicy::default()
        }
    };
    let mut toolsets = Vec::new();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let raw_toolsets = document.get("toolsets").and_then(Value::as_array).cloned().unwrap_or_default();
    for (index, raw) in raw_toolsets.into_iter().enumerate() {
        let pointer = format!("/toolsets/{index}");
        match parse_toolset(base, &pointer, raw, secrets, &verify) {
            Ok(mut toolset) => {
                if let Some(first) = seen.insert(toolset.id.clone(), pointer.clone()) {
                    problems.push(ConfigProblem {
                        pointer: format!("{pointer}/id"),
                        message: format!("duplicate toolset id `{}` (first at {first})", toolset.id),
                    });
                }
                toolset.file = Some(path.to_path_buf());
                toolsets.push(toolset);
            }
            Err(mut found) => problems.append(&mut found),
        }
    }
    let mut serve = document.get("serve").cloned();
    if let Some(serve) = &mut serve {
        let mut resolved = Vec::new();
        if let Err(mut found) = resolve_references(serve, "/serve", secrets, &mut resolved) {
            problems.append(&mut found);
        }
    }
    if problems.is_empty() {
        Ok(ToolsetsFile { path: path.to_path_buf(), toolsets, serve, verify })
    } else {
        Err(ConfigError { file: path.to_path_buf(), problems })
    }
}

/// The parts of a toolset entry toolhost reads.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawToolset {
    id: String,
    kind: String,
    version: Option<String>,
    #[serde(default)]
    server: Option<Value>,
    #[serde(default)]
    headers: Option<Value>,
    #[serde(default)]
    secrets: Vec<String>,
    #[serde(default)]
    keyring: Vec<KeyringEntry>,
    #[serde(default)]
    tools: Vec<RawTool>,
    #[serde(default)]
    toolset_defaults: RawDefaults,
    #[serde(default)]
    extensions: RawExtensions,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawTool {
    name: String,
    enabled: Option<bool>,
    requires_approval: Option<bool>,
    #[serde(default)]
    extensions: RawToolExtensions,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawToolExtensions {
    required_scopes: Option<Vec<String>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawDefaults {
    enabled: Option<bool>,
    requires_approval: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawExtensions {
    include_tools: Option<ToolFilter>,
    exclude_tools: Option<ToolFilter>,
    #[serde(default)]
    tool_approvals: ToolApprovals,
    #[serde(default)]
    required_scopes: Vec<String>,
}

/// `server` of a `uri` toolset: the plugin and its policy.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawServer {
    url: String,
    #[serde(default)]
    digest: Option<String>,
    #[serde(default)]
    ca_file: Option<String>,
    #[serde(default)]
    verify: Option<RawVerify>,
    #[serde(flatten)]
    policy: Policy,
    #[serde(default)]
    validation: RawValidation,
    #[serde(default)]
    secret_output: SecretOutput,
}

/// `server.verify`, or the file's `verify`: whose signature a downloaded
/// plugin must carry.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawVerify {
    /// The file's only: every downloaded plugin must be verified.
    #[serde(default)]
    required: Option<bool>,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    identity: Option<String>,
    #[serde(default)]
    issuer: Option<String>,
    #[serde(default)]
    trusted_root: Option<String>,
    /// A toolset's only: where an https:// plugin's sigstore bundle is.
    #[serde(default)]
    bundle: Option<String>,
}

/// What a toolset of a kind other than `uri` (a remote MCP server, the
/// program's built-in tools) sets of its calls in `server`: the limits that
/// apply to any tool (time, sizes), the checks and the secret policy.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct CallSettings {
    #[serde(default)]
    limits: Limits,
    #[serde(default)]
    validation: RawValidation,
    #[serde(default)]
    secret_output: SecretOutput,
}

/// Members of `server` that bound or grant a Wasm guest's sandbox, which a
/// toolset of another kind has not: refused rather than ignored.
const WASM_ONLY: [(&str, &str); 7] = [
    ("/allowedPaths", "directories granted to a Wasm plugin"),
    ("/allowedHosts", "hosts granted to a Wasm plugin"),
    ("/config", "a Wasm plugin's config values"),
    ("/digest", "the pin of a downloaded Wasm plugin"),
    ("/caFile", "the certificate authorities of a Wasm plugin's download"),
    ("/limits/memoryLimit", "a Wasm plugin's linear memory"),
    ("/limits/fuel", "a Wasm plugin's instruction budget"),
];

/// Take the call settings out of the `server` of a toolset of `kind` (not
/// `uri`): the limits, `validation` and `secretOutput`, which apply to its
/// calls as to a plugin's. A problem is the member it is about (a JSON
/// pointer under `server`) and what is wrong.
fn take_call_settings(
    server: &mut serde_json::Map<String, Value>,
    kind: &str,
) -> Result<CallSettings, (String, String)> {
    for (at, what) in WASM_ONLY {
        if member(server, at).is_some_and(|value| !value.is_null()) {
            return Err((
                at.to_owned(),
                format!("`{}` sets {what}; a toolset of kind `{kind}` runs no Wasm plugin", &at[1..]),
            ));
        }
    }
    let taken: serde_json::Map<String, Value> = ["limits", "validation", "secretOutput"]
        .into_iter()
        .filter_map(|key| server.remove(key).map(|value| (key.to_owned(), value)))
        .collect();
    let settings: CallSettings =
        serde_json::from_value(Value::Object(taken)).map_err(|e| (String::new(), e.to_string()))?;
    settings.limits.check().map_err(|e| ("/limits".to_owned(), e.to_string()))?;
    Ok(settings)
}

/// The member of `map` at `at`, a pointer of one or two members
/// (`/config`, `/limits/fuel`).
fn member<'a>(map: &'a serde_json::Map<String, Value>, at: &str) -> Option<&'a Value> {
    let (first, second) = match at[1..].split_once('/') {
        Some((first, second)) => (first, Some(second)),
        None => (&at[1..], None),
    };
    let value = map.get(first)?;
    match second {
        Some(key) => value.get(key),
        None => Some(value),
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawValidation {
    #[serde(default)]
    enforce_formats: bool,
    #[serde(default)]
    lenient: bool,
}

/// The problems found in one toolset, each at a pointer under it.
struct Problems<'a> {
    pointer: &'a str,
    found: Vec<ConfigProblem>,
}

impl Problems<'_> {
    fn add(&mut self, at: &str, message: String) {
        self.found.push(ConfigProblem { pointer: format!("{}{at}", self.pointer), message });
    }
}

/// What a toolset's `server` sets: for `uri`, the plugin's source and its
/// whole policy; for other kinds, the call settings, the rest of `server`
/// going to the kind's connector.
#[derive(Default)]
struct ServerParts {
    source: Option<PluginSource>,
    policy: Policy,
    validation: ValidationOptions,
    secret_output: SecretOutput,
    remote: serde_json::Map<String, Value>,
}

fn parse_toolset(
    base: &Path,
    pointer: &str,
    raw: Value,
    secrets: &Prefetched,
    verify: &VerifyPolicy,
) -> Result<ToolsetConfig, Vec<ConfigProblem>> {
    let mut problems = Problems { pointer, found: Vec::new() };
    let raw: RawToolset = match serde_json::from_value(raw) {
        Ok(raw) => raw,
        Err(e) => {
            problems.add("", e.to_string());
            return Err(problems.found);
        }
    };
    let mut resolved = Vec::new();
    if raw.id.contains(NAMESPACE_SEPARATOR) {
        problems.add("/id", format!("a toolset id may not contain `{NAMESPACE_SEPARATOR}`"));
    }
    // References in `headers` (checked now, used by remote kinds) and `server`.
    let mut remote = RemoteServer::default();
    if let Some(mut headers) = raw.headers.clone() {
        match resolve_references(&mut headers, &format!("{pointer}/headers"), secrets, &mut resolved) {
            Err(found) => problems.found.extend(found),
            Ok(()) => remote.headers = read_headers(headers, &mut problems),
        }
    }
    let mut parts = ServerParts::default();
    if let Some(mut server) = raw.server.clone() {
        match resolve_references(&mut server, &format!("{pointer}/server"), secrets, &mut resolved) {
            Err(found) => problems.found.extend(found),
            Ok(()) => parts = read_server(base, &raw.kind, server, &mut problems, verify),
        }
    }
    remote.server = std::mem::take(&mut parts.remote);
    check_filters(&raw.extensions, &mut problems);
    if !problems.found.is_empty() {
        // A parse error may quote a value; secret values never leave.
        for problem in &mut problems.found {
            for (name, value) in &resolved {
                if !value.is_empty() {
                    problem.message = problem.message.replace(value.as_str(), &format!("[secret {name}]"));
                }
            }
        }
        return Err(problems.found);
    }
    let mut sensitive = SensitiveValues::new();
    for (name, value) in resolved {
        sensitive.push(name, value);
    }
    Ok(ToolsetConfig {
        defaults: ToolSettings {
            enabled: raw.toolset_defaults.enabled.unwrap_or(true),
            requires_approval: raw.toolset_defaults.requires_approval.unwrap_or(false),
        },
        tools: tool_overrides(raw.tools),
        id: raw.id,
        kind: raw.kind,
        version: raw.version,
        source: parts.source,
        policy: parts.policy,
        validation: parts.validation,
        secret_output: parts.secret_output,
        secrets: raw.secrets,
        keyring: raw.keyring,
        sensitive,
        include: raw.extensions.include_tools,
        exclude: raw.extensions.exclude_tools,
        approvals: raw.extensions.tool_approvals,
        required_scopes: raw.extensions.required_scopes,
        remote,
        pointer: pointer.to_owned(),
        file: None,
    })
}

/// `headers` (references resolved) as names and values; what is not a
/// string is a problem at its member.
fn read_headers(headers: Value, problems: &mut Problems) -> BTreeMap<String, String> {
    let mut read = BTreeMap::new();
    let Value::Object(headers) = headers else {
        problems.add("/headers", "headers are an object of strings".to_owned());
        return read;
    };
    for (name, value) in headers {
        match value {
            Value::String(value) => {
                read.insert(name, value);
            }
            _ => {
                let at = format!("/headers/{}", name.replace('~', "~0").replace('/', "~1"));
                problems.add(&at, "a header value is a string".to_owned());
            }
        }
    }
    read
}

/// What `server` (references resolved) sets for a toolset of `kind`.
fn read_server(base: &Path, kind: &str, server: Value, problems: &mut Problems, verify: &VerifyPolicy) -> ServerParts {
    let mut parts = ServerParts::default();
    if kind == "uri" {
        match serde_json::from_value::<RawServer>(server) {
            Ok(server) => {
                match plugin_source(base, &server, verify) {
                    Ok(found) => parts.source = Some(found),
                    Err((at, message)) => problems.add(&format!("/server/{at}"), message),
                }
                if let Err(e) = server.policy.check() {
                    problems.add("/server", e.to_string());
                }
                parts.policy = server.policy;
                parts.validation.enforce_formats = server.validation.enforce_formats;
                parts.validation.lenient = server.validation.lenient;
                parts.secret_output = server.secret_output;
            }
            Err(e) => problems.add("/server", e.to_string()),
        }
        return parts;
    }
    if let Value::Object(mut server) = server {
        match take_call_settings(&mut server, kind) {
            Ok(settings) => {
                parts.policy.limits = settings.limits;
                parts.validation.enforce_formats = settings.validation.enforce_formats;
                parts.validation.lenient = settings.validation.lenient;
                parts.secret_output = settings.secret_output;
            }
            Err((at, message)) => problems.add(&format!("/server{at}"), message),
        }
        parts.remote = server;
    }
    parts
}

/// The filters of `extensions` that the registry would refuse.
fn check_filters(extensions: &RawExtensions, problems: &mut Problems) {
    for (name, filter) in [("includeTools", &extensions.include_tools), ("excludeTools", &extensions.exclude_tools)] {
        if let Some(Err(message)) = filter.as_ref().map(ToolFilter::check) {
            problems.add(&format!("/extensions/{name}"), message);
        }
    }
    if let Some(Err(message)) = extensions.tool_approvals.only.as_ref().map(ToolFilter::check) {
        problems.add("/extensions/toolApprovals/only", message);
    }
}

/// The settings the `tools` list gives tools, by name.
fn tool_overrides(tools: Vec<RawTool>) -> BTreeMap<String, ToolOverride> {
    tools
        .into_iter()
        .map(|t| {
            let listed = ToolOverride {
                enabled: t.enabled,
                requires_approval: t.requires_approval,
                required_scopes: t.extensions.required_scopes,
            };
            (t.name, listed)
        })
        .collect()
}

/// Where a `uri` toolset's plugin is: a path (relative to the configuration
/// file) or `file://` URL, or a pinned `https://` or `oci://` URL. A problem
/// is the `server` member it is about and what is wrong.
fn plugin_source(
    base: &Path,
    server: &RawServer,
    policy: &VerifyPolicy,
) -> Result<PluginSource, (&'static str, String)> {
    let url = server.url.as_str();
    let own = match &server.verify {
        Some(raw) => verification(base, raw).map_err(|message| ("verify", message))?,
        None => None,
    };
    // Where an https:// plugin's bundle is: a URL as given, a file from here.
    let bundle = server.verify.as_ref().and_then(|raw| raw.bundle.as_ref()).map(|place| {
        if place.starts_with("https://") {
            place.clone()
        } else {
            base.join(place.strip_prefix("file://").unwrap_or(place)).display().to_string()
        }
    });
    let local =
        matches!(url.split_once("://").map(|(scheme, _)| scheme.to_ascii_lowercase()).as_deref(), None | Some("file"));
    let verify = match own {
        _ if bundle.is_some() && local => None,
        Some(own) => Some(own),
        None if local => None,
        None => match (&policy.default, policy.required) {
            (Some(default), _) => Some(default.clone()),
            (None, true) => {
                return Err((
                    "verify",
                    "this file requires every downloaded plugin to be verified (its top-level `verify.required`): \
                     give this toolset `verify` (`key: cosign.pub`), or the file a default `verify.key`"
                        .to_owned(),
                ));
            }
            (None, false) => None,
        },
    };
    if bundle.is_some() && verify.is_none() && !local {
        return Err((
            "verify",
            "`bundle` says where the signature is; `key`, or `identity`, `issuer` and `trustedRoot`, say whose it \
             must be: give them here or in the file's top-level `verify`"
                .to_owned(),
        ));
    }
    let digest = match &server.digest {
        Some(text) => Some(text.parse::<Sha256Digest>().map_err(|e| ("digest", e.to_string()))?),
        None => None,
    };
    let ca_file = server.ca_file.as_ref().map(|file| base.join(file.strip_prefix("file://").unwrap_or(file)));
    let (scheme, _) = url.split_once("://").unwrap_or(("", url));
    match scheme.to_ascii_lowercase().as_str() {
        "" | "file" => {
            if digest.is_some() || ca_file.is_some() || verify.is_some() || bundle.is_some() {
                let member = match (&digest, &ca_file) {
                    (Some(_), _) => "digest",
                    (None, Some(_)) => "caFile",
                    (None, None) => "verify",
                };
                return Err((
                    member,
                    format!("`{member}` is for downloaded plugins (https://, oci://); a local file is used as it is"),
                ));
            }
            Ok(PluginSource::File(match url.strip_prefix("file://") {
                Some(path) => PathBuf::from(path),
                None => base.join(url),
            }))
        }
        "https" => {
            let Some(digest) = digest else {
                return Err((
                    "digest",
                    "an https:// plugin must be pinned: add `digest: \"sha256:<64 hex digits>\"`, the SHA-256 of the \
                     .wasm file (`sha256sum plugin.wasm` prints it)"
                        .to_owned(),
                ));
            };
            Ok(PluginSource::Https(RemotePlugin { url: url.to_owned(), digest, ca_file, verify, bundle }))
        }
        "oci" => {
            let named =
                url.rsplit_once('@').map(|(_, d)| d.parse::<Sha256Digest>().map_err(|e| ("url", e.to_string())));
            let digest = match (named.transpose()?, digest) {
                (Some(named), Some(given)) if named != given => {
                    return Err(("digest", format!("`digest` ({given}) is not the digest the URL names ({named})")));
                }
                (Some(named), _) => named,
                (None, Some(given)) => given,
                (None, None) => {
                    return Err((
                        "url",
                        "an oci:// plugin must be pinned by its manifest digest: \
                         `oci://registry/repository:tag@sha256:<64 hex digits>`"
                            .to_owned(),
                    ));
                }
            };
            // The reference pulled is by digest, whichever way it was given.
            let reference = url.rsplit_once('@').map_or(url, |(name, _)| name);
            if bundle.is_some() {
                return Err((
                    "verify",
                    "`bundle` is for https:// plugins: an oci:// plugin's signatures are in its registry".to_owned(),
                ));
            }
            Ok(PluginSource::Oci(RemotePlugin {
                url: format!("{reference}@{digest}"),
                digest,
                ca_file,
                verify,
                bundle: None,
            }))
        }
        "http" => Err(("url", "plain http:// is not accepted for plugins: use https:// (with `digest`)".to_owned())),
        other => {
            Err(("url", format!("`{other}://` is not a plugin source: use a file path, file://, https:// or oci://")))
        }
    }
}

/// The verification a `verify` object asks for (`None` for one that only
/// says `required`); else what is wrong with it.
fn verification(base: &Path, raw: &RawVerify) -> Result<Option<Verification>, String> {
    let path = |file: &String| base.join(file.strip_prefix("file://").unwrap_or(file));
    match raw {
        RawVerify { key: Some(key), identity: None, issuer: None, trusted_root: None, .. } => {
            Ok(Some(Verification::Key(path(key))))
        }
        RawVerify { key: Some(_), .. } => {
            Err("`key` verifies a signature made with a key; `identity`, `issuer` and `trustedRoot` are for keyless \
             signatures: give one or the other"
                .to_owned())
        }
        RawVerify { key: None, identity: None, issuer: None, trusted_root: None, .. } => Ok(None),
        RawVerify { key: None, identity: Some(identity), issuer: Some(issuer), trusted_root: Some(root), .. } => {
            Ok(Some(Verification::Keyless {
                identity: identity.clone(),
                issuer: issuer.clone(),
                trusted_root: path(root),
            }))
        }
        RawVerify { key: None, identity, issuer, trusted_root, .. } => {
            let missing: Vec<&str> = [
                ("identity", identity.is_none()),
                ("issuer", issuer.is_none()),
                ("trustedRoot", trusted_root.is_none()),
            ]
            .into_iter()
            .filter_map(|(member, missing)| missing.then_some(member))
            .collect();
            Err(format!(
                "a keyless signature is verified with `identity`, `issuer` and `trustedRoot` (sigstore's \
                 trusted_root.json) together: `{}` is missing",
                missing.join("`, `")
            ))
        }
    }
}

/// Replace every `${env:NAME}` and `${secret:NAME}` in the strings of `value`.
fn resolve_references(
    value: &mut Value,
    pointer: &str,
    secrets: &Prefetched,
    resolved: &mut Vec<(String, String)>,
) -> Result<(), Vec<ConfigProblem>> {
    let mut problems = Vec::new();
    walk_strings(value, pointer, &mut |text, at| match substitute(text, secrets, resolved) {
        Ok(Some(resolved)) => Some(resolved),
        Ok(None) => None,
        Err(message) => {
            problems.push(ConfigProblem { pointer: at.to_owned(), message });
            None
        }
    });
    if problems.is_empty() { Ok(()) } else { Err(problems) }
}

fn walk_strings(value: &mut Value, pointer: &str, visit: &mut dyn FnMut(&str, &str) -> Option<String>) {
    match value {
        Value::String(text) => {
            if let Some(new) = visit(text, pointer) {
                *text = new;
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                walk_strings(item, &format!("{pointer}/{i}"), visit);
            }
        }
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                let escaped = key.replace('~', "~0").replace('/', "~1");
                walk_strings(item, &format!("{pointer}/{escaped}"), visit);
            }
        }
        _ => {}
    }
}

/// The secrets a document's `${secret:NAME}` references name, looked up
/// from the provider before the (synchronous) reading of the document.
struct Prefetched {
    values: BTreeMap<String, Result<Option<String>, SecretError>>,
    describe: String,
}

impl Prefetched {
    async fn of(document: &Value, provider: &dyn SecretProvider) -> Prefetched {
        let mut names = std::collections::BTreeSet::new();
        let mut stack = vec![document];
        while let Some(value) = stack.pop() {
            match value {
                Value::String(text) => {
                    let mut rest = text.as_str();
                    while let Some(start) = rest.find("${secret:") {
                        let after = &rest[start + "${secret:".len()..];
                        let Some(end) = after.find('}') else { break };
                        names.insert(after[..end].to_owned());
                        rest = &after[end + 1..];
                    }
                }
                Value::Array(items) => stack.extend(items),
                Value::Object(map) => stack.extend(map.values()),
                _ => {}
            }
        }
        let mut values = BTreeMap::new();
        for name in names {
            let value = provider.secret(&name).await;
            values.insert(name, value);
        }
        Prefetched { values, describe: provider.describe() }
    }

    fn secret(&self, name: &str) -> Result<Option<String>, SecretError> {
        self.values.get(name).cloned().unwrap_or(Ok(None))
    }

    fn describe(&self) -> String {
        self.describe.clone()
    }
}

/// The string with its references resolved; `None` when it has none.
fn substitute(
    text: &str,
    secrets: &Prefetched,
    resolved: &mut Vec<(String, String)>,
) -> Result<Option<String>, String> {
    if !text.contains("${") {
        return Ok(None);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or_else(|| format!("unterminated reference in `{text}`"))?;
        let reference = &after[..end];
        let (kind, name) = reference
            .split_once(':')
            .ok_or_else(|| format!("`${{{reference}}}` is not a reference: use ${{env:NAME}} or ${{secret:NAME}}"))?;
        let value = match kind {
            "env" => std::env::var(name)
                .map_err(|_| format!("`${{env:{name}}}` cannot be resolved: environment variable {name} is not set"))?,
            "secret" => match secrets.secret(name) {
                Ok(Some(value)) => {
                    // Kept out of every log line, whatever it configures
                    // (a toolset's server, or `serve`'s keys).
                    crate::secrets::in_logs::remember_secret(name, &value);
                    resolved.push((name.to_owned(), value.clone()));
                    value
                }
                Ok(None) => {
                    return Err(format!(
                        "`${{secret:{name}}}` cannot be resolved: the secret provider ({}) has no secret {name}",
                        secrets.describe()
                    ));
                }
                Err(SecretError(message)) => {
                    return Err(format!("`${{secret:{name}}}` cannot be resolved: {message}"));
                }
            },
            other => return Err(format!("unknown reference kind `{other}` in `${{{reference}}}`: use env or secret")),
        };
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(Some(out))
}
