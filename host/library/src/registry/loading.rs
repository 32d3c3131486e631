//! Loading one toolset into a registry: its plugin (or built-in tools, or
//! a connected server) prepared with its sync events recorded, its tools'
//! settings worked out, and whether it may join the others.

use super::*;

/// Whether `loaded` may join `toolsets`: a valid id, not taken, and no tool
/// name that another toolset already has.
pub(super) fn admit(
    toolsets: &BTreeMap<String, Arc<LoadedToolset>>,
    loaded: &LoadedToolset,
) -> Result<(), RegistryError> {
    let id = loaded.plugin.name();
    if !valid_id(id) {
        return Err(RegistryError::InvalidId(id.to_owned()));
    }
    if toolsets.contains_key(id) {
        return Err(RegistryError::Duplicate(id.to_owned()));
    }
    // Every tool is named `<toolset id>__<tool>` and found by that id, so a
    // name can only be taken in the toolset its prefix names: looking
    // there, not through every tool of the registry, keeps loading 1,000
    // toolsets linear.
    let mut own: std::collections::HashSet<&str> = std::collections::HashSet::with_capacity(loaded.tools.len());
    for tool in &loaded.tools {
        let elsewhere = tool
            .name
            .split_once(NAMESPACE_SEPARATOR)
            .and_then(|(owner, _)| toolsets.get(owner))
            .and_then(|owner| owner.tools.iter().find(|other| other.name == tool.name));
        let first = match elsewhere {
            Some(other) => Some(other.source.as_str()),
            None => (!own.insert(tool.name.as_str())).then_some(tool.source.as_str()),
        };
        if let Some(first) = first {
            return Err(RegistryError::Collision {
                name: tool.name.clone(),
                first: first.to_owned(),
                second: tool.source.clone(),
            });
        }
    }
    Ok(())
}

/// What a loading task yields: the toolset's id, its source, and the
/// loaded toolset with its warnings (or why it failed).
pub(super) type Loading = (String, String, Result<(LoadedToolset, Vec<String>), Error>);

/// A loading task's outcome; one that failed to finish (it panicked) is
/// reported as a failure instead.
pub(super) async fn finished(task: tokio::task::JoinHandle<Loading>, report: &mut LoadReport) -> Option<Loading> {
    match task.await {
        Ok(done) => Some(done),
        Err(e) => {
            report.failures.push(ToolsetFailure {
                toolset: "?".to_owned(),
                source: "?".to_owned(),
                error: Error::Host(format!("a loading task failed: {e}")),
            });
            None
        }
    }
}

/// Letters, digits, `-` and single `_`, not at either end.
pub(super) fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && !id.contains(NAMESPACE_SEPARATOR)
        && !id.starts_with('_')
        && !id.ends_with('_')
}

pub(super) fn source_of(config: &ToolsetConfig) -> String {
    match &config.file {
        Some(file) => format!("toolset `{}` ({}#{})", config.id, file.display(), config.pointer),
        None => format!("toolset `{}`", config.id),
    }
}

/// The built-in toolsets a registry knows, by id.
pub(super) type Builtins = BTreeMap<String, Arc<BuiltinToolset>>;

/// What loads toolsets that are not Wasm plugins.
#[derive(Clone)]
pub(super) struct Kinds {
    pub(super) builtins: Builtins,
    pub(super) connectors: BTreeMap<String, Arc<dyn ToolsetConnector>>,
}

/// [`prepare`], with its sync events recorded.
pub(super) async fn prepare_logged(
    runtime: &Runtime,
    config: ToolsetConfig,
    secrets: Arc<dyn SecretProvider>,
    kinds: &Kinds,
    log: &SyncLog,
    peers: &[Peer],
) -> Result<(LoadedToolset, Vec<String>), Error> {
    let id = config.id.clone();
    log.record(&id, loading(&config));
    let prepared = prepare(runtime, config, secrets, kinds, peers).await;
    match &prepared {
        Ok((loaded, _)) => log.record(&id, loaded.synced()),
        Err(error) => log.record(&id, SyncEvent::failed(error)),
    }
    prepared
}

/// The `SyncStarted` of loading a toolset from its configuration.
pub(super) fn loading(config: &ToolsetConfig) -> SyncEvent {
    SyncEvent::SyncStarted { message: format!("loading {}", source_of(config)) }
}

/// Load a toolset's plugin (or built-in tools) and work out its tools'
/// effective settings.
pub(super) async fn prepare(
    runtime: &Runtime,
    config: ToolsetConfig,
    secrets: Arc<dyn SecretProvider>,
    kinds: &Kinds,
    peers: &[Peer],
) -> Result<(LoadedToolset, Vec<String>), Error> {
    let unsupported = |message: String| Error::Load { plugin: config.id.clone(), message, source: None };
    let mut changes = None;
    let builder = match config.kind.as_str() {
        "uri" => match &config.source {
            Some(source) => {
                protect(&config, peers)?;
                runtime.plugin_from_source(source, &config.id).await?
            }
            None => return Err(unsupported("it names no plugin (server.url)".to_owned())),
        },
        "builtin" => match kinds.builtins.get(&config.id) {
            Some(toolset) => {
                changes = toolset.changes.clone();
                crate::PluginBuilder::from_builtin(runtime.clone(), Arc::clone(toolset))
            }
            None => {
                let registered: Vec<&str> = kinds.builtins.keys().map(String::as_str).collect();
                return Err(unsupported(format!(
                    "the program registered no built-in toolset `{}` (registered: {})",
                    config.id,
                    if registered.is_empty() { "none".to_owned() } else { registered.join(", ") }
                )));
            }
        },
        other => match kinds.connectors.get(other) {
            Some(connector) => {
                let mut toolset = connector.connect(&config).await.map_err(unsupported)?;
                toolset.id = config.id.clone();
                changes = toolset.changes.clone();
                crate::PluginBuilder::from_builtin(runtime.clone(), Arc::new(toolset))
            }
            None => {
                return Err(unsupported(format!(
                    "kind `{other}` is not supported here: this program runs Wasm plugins (kind `uri`) and its \
                     built-in tools (kind `builtin`){}",
                    if other == "mcp" {
                        "; MCP servers need toolhost-mcp's client (the toolhost CLI has it)"
                    } else {
                        ""
                    }
                )));
            }
        },
    };
    let fingerprint = plugin_mtime(&config);
    let plugin = builder
        .with_name(config.id.clone())
        .with_policy(config.policy.clone())
        .with_validation(config.validation.clone())
        .with_secret_provider(secrets)
        .with_granted_secrets(config.secrets.iter().cloned())
        .with_keyring_entries(config.keyring.iter().cloned())
        .with_sensitive_values(config.sensitive.clone())
        .with_secret_output(config.secret_output)
        .build()
        .await?;
    if plugin.has_dynamic_tools() {
        changes = Some(plugin.tool_list_changes());
    }
    Ok(settle(plugin, config, fingerprint, changes))
}

/// A toolset's tools from its loaded plugin and its configuration: names,
/// filters, approvals; and the warnings of both.
pub(super) fn settle(
    plugin: Plugin,
    config: ToolsetConfig,
    fingerprint: Option<std::time::SystemTime>,
    changes: Option<tokio::sync::watch::Receiver<u64>>,
) -> (LoadedToolset, Vec<String>) {
    let source = source_of(&config);
    let mut warnings: Vec<String> = plugin.warnings().iter().map(|w| format!("{source}: {}", w.as_warning())).collect();
    for listed in config.tools.keys() {
        if plugin.tool(listed).is_none() {
            warnings.push(format!("{source}: the tools list names `{listed}`, which the plugin does not have"));
        }
    }
    let tools = plugin
        .tools()
        .iter()
        .map(|tool| {
            let listed = config.tools.get(&tool.name).cloned().unwrap_or_default();
            let mut enabled = listed.enabled.unwrap_or(config.defaults.enabled);
            let mut disabled_reason = (!enabled).then(|| "disabled by configuration".to_owned());
            if enabled && config.include.as_ref().is_some_and(|f| !f.matches(tool)) {
                enabled = false;
                disabled_reason = Some("not matched by includeTools".to_owned());
            }
            if enabled && config.exclude.as_ref().is_some_and(|f| f.matches(tool)) {
                enabled = false;
                disabled_reason = Some("matched by excludeTools".to_owned());
            }
            let requires_approval = listed.requires_approval.unwrap_or(config.defaults.requires_approval)
                || config.approvals.requires_approval(tool);
            RegisteredTool {
                name: format!("{}{NAMESPACE_SEPARATOR}{}", config.id, tool.name),
                toolset: config.id.clone(),
                source: source.clone(),
                tool: tool.clone(),
                enabled,
                disabled_reason,
                requires_approval,
                required_scopes: listed.required_scopes.unwrap_or_else(|| config.required_scopes.clone()),
            }
        })
        .collect();
    (LoadedToolset { plugin, tools, config, fingerprint, owned_by_program: false, changes }, warnings)
}

/// A toolset whose plugin said its tool list changed, described again on
/// the same instances (a plugin that keeps its list in memory keeps it).
/// Records that a sync started; its outcome is the caller's to record (not
/// if the reload is overtaken).
pub(super) async fn redescribe_started(loaded: &LoadedToolset, log: &SyncLog) -> Result<LoadedToolset, Error> {
    let id = &loaded.config.id;
    log.record(id, SyncEvent::SyncStarted { message: "the plugin said its tool list changed".to_owned() });
    loaded
        .plugin
        .redescribed()
        .await
        .map(|plugin| settle(plugin, loaded.config.clone(), loaded.fingerprint, loaded.changes.clone()).0)
}
