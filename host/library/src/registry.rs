//! Many plugins behind one set of namespaced tool names.
//!
//! A [`Registry`] loads the toolsets of a configuration (or toolsets added at
//! run time), names each tool `<toolset id>__<tool>` ([`NAMESPACE_SEPARATOR`]),
//! applies each toolset's `enabled` / `requiresApproval` settings, include and
//! exclude filters and approval rules, and routes calls. A toolset that fails
//! to load is reported and the others load; toolsets can be added and removed
//! while calls are in flight (a call holds its toolset until it returns).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use serde_json::Value;
use toolhost_protocol::CallToolResult;

use crate::approval::Approver;
use crate::builtin::{BuiltinToolset, ToolsetConnector};
use crate::config::{NAMESPACE_SEPARATOR, PluginSource, ToolsetConfig};
use crate::context::CallContext;
use crate::error::{Error, RegistryError};
use crate::plugin::protected::{self, Reach};
use crate::plugin::{Arguments, Asking, Plugin};
use crate::runtime::Runtime;
use crate::secrets::SecretProvider;
use crate::sync_events::{SyncEvent, SyncLog, ToolsetEvent};
use crate::tool::RegisteredTool;

mod loading;
mod offers;
mod protection;

use loading::*;
use protection::*;

/// The toolsets of a [`Registry`] at one moment ([`Registry::snapshot`]):
/// its tools can be listed, borrowed, as often as needed while the registry
/// goes on changing. Cheap to take: the toolsets are shared, not copied.
#[derive(Clone)]
pub struct ToolsSnapshot {
    toolsets: Vec<Arc<LoadedToolset>>,
}

impl std::fmt::Debug for ToolsSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolsSnapshot").field("tools", &self.tools().len()).finish()
    }
}

impl ToolsSnapshot {
    /// The tools callers may see and call (enabled, not filtered out),
    /// sorted by namespaced name, borrowed.
    pub fn tools(&self) -> Vec<&RegisteredTool> {
        let mut tools: Vec<&RegisteredTool> =
            self.toolsets.iter().flat_map(|t| &t.tools).filter(|t| t.enabled).collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        tools
    }

    /// The same tools as a model sees them ([`ModelTool::openai`],
    /// [`ModelTool::anthropic`] give the APIs' formats).
    ///
    /// [`ModelTool::openai`]: crate::ModelTool::openai
    /// [`ModelTool::anthropic`]: crate::ModelTool::anthropic
    pub fn model_tools(&self) -> Vec<crate::model::ModelTool<'_>> {
        self.tools().into_iter().map(RegisteredTool::for_model).collect()
    }
}

/// A toolset that could not be loaded.
#[derive(Debug)]
#[non_exhaustive]
pub struct ToolsetFailure {
    /// The toolset's id.
    pub toolset: String,
    /// Where it came from.
    pub source: String,
    /// Why it failed.
    pub error: Error,
}

/// What loading a set of toolsets produced, besides the tools.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct LoadReport {
    /// Toolsets that did not load.
    pub failures: Vec<ToolsetFailure>,
    /// Things worth a look: listed tools the plugin does not have, tools a
    /// lenient plugin left out.
    pub warnings: Vec<String>,
}

struct LoadedToolset {
    plugin: Plugin,
    tools: Vec<RegisteredTool>,
    /// What it was loaded from, to tell whether a new configuration changes it.
    config: ToolsetConfig,
    fingerprint: Option<std::time::SystemTime>,
    /// A built-in toolset the program registered that no configuration
    /// names: `sync` keeps it.
    owned_by_program: bool,
    /// Sees a new value when the toolset's tools change upstream (an MCP
    /// server's `list_changed`): it is loaded again.
    changes: Option<tokio::sync::watch::Receiver<u64>>,
}

impl LoadedToolset {
    /// Whether the caller of `context` holds the toolset's required scopes
    /// (for its prompts and resources; each tool has its own).
    fn permits(&self, context: &CallContext) -> bool {
        crate::context::permits(&self.config.required_scopes, context.scopes())
    }

    /// Its `SyncCompleted` event: how many tools it has, and how many are
    /// available.
    fn synced(&self) -> SyncEvent {
        let signed = self.plugin.signer().map(|signer| format!(", signed by {signer}")).unwrap_or_default();
        SyncEvent::SyncCompleted {
            message: format!(
                "{} tools, {} available{signed}",
                self.tools.len(),
                self.tools.iter().filter(|t| t.enabled).count()
            ),
            tools_synced: u32::try_from(self.tools.len()).unwrap_or(u32::MAX),
        }
    }
}

/// When the plugin file was last modified, if it is a file.
fn plugin_mtime(config: &ToolsetConfig) -> Option<std::time::SystemTime> {
    match &config.source {
        Some(PluginSource::File(path)) => std::fs::metadata(path).and_then(|m| m.modified()).ok(),
        _ => None,
    }
}

/// Toolsets and their tools, under namespaced names.
pub struct Registry {
    /// Shared with the tasks that follow toolsets whose tools change
    /// upstream (they hold it weakly).
    toolsets: Arc<RwLock<BTreeMap<String, Arc<LoadedToolset>>>>,
    /// The built-in toolsets the program registered, by id.
    builtins: RwLock<Builtins>,
    /// What connects toolsets of other kinds (`mcp`), by kind.
    connectors: BTreeMap<String, Arc<dyn ToolsetConnector>>,
    /// What loading each toolset did.
    log: Arc<SyncLog>,
    secrets: Arc<dyn SecretProvider>,
    /// Where its plugins run.
    runtime: Runtime,
    /// Bumped whenever the set of tools changes.
    changes: Arc<tokio::sync::watch::Sender<u64>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<String> = self.read().keys().cloned().collect();
        f.debug_struct("Registry").field("toolsets", &ids).finish_non_exhaustive()
    }
}

impl Registry {
    /// An empty registry whose plugins get their declared secrets from
    /// `secrets`.
    pub fn new(secrets: Arc<dyn SecretProvider>) -> Self {
        Self::with_runtime(Runtime::shared().clone(), secrets)
    }

    /// An empty registry whose plugins run on `runtime` and get their
    /// declared secrets from `secrets`.
    pub fn with_runtime(runtime: Runtime, secrets: Arc<dyn SecretProvider>) -> Self {
        Registry {
            toolsets: Arc::default(),
            builtins: RwLock::new(BTreeMap::new()),
            connectors: BTreeMap::new(),
            log: Arc::default(),
            secrets,
            runtime,
            changes: Arc::new(tokio::sync::watch::Sender::new(0)),
        }
    }

    /// Connect toolsets of `kind` (`mcp`) with `connector`: a toolsets
    /// file's entries of that kind then load through it (without one, they
    /// fail to load, saying the kind is not supported).
    pub fn with_connector(mut self, kind: impl Into<String>, connector: Arc<dyn ToolsetConnector>) -> Self {
        self.connectors.insert(kind.into(), connector);
        self
    }

    /// The runtime its plugins run on.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Notified whenever toolsets are added or removed (the value counts
    /// changes).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// How many receivers from [`subscribe`](Self::subscribe) are alive:
    /// under `serve`, one for each MCP session told of changes.
    pub fn followers(&self) -> usize {
        self.changes.receiver_count()
    }

    /// A number that moves with every change of the registry's toolsets
    /// (what [`subscribe`](Self::subscribe)'s receivers are told of): a
    /// listing made when it was `n` is current while it is still `n`.
    pub fn generation(&self) -> u64 {
        *self.changes.borrow()
    }

    fn changed(&self) {
        self.changes.send_modify(|count| *count += 1);
    }

    /// Bring the registry in line with a new configuration: toolsets that
    /// are gone are removed, new ones are loaded, and ones whose
    /// configuration or plugin file changed are reloaded (concurrently).
    ///
    /// The new set of toolsets is built aside while the old one keeps
    /// serving, then swapped in at once: a caller sees either the old set
    /// or the new one, never a mix, and subscribers are notified once (not
    /// at all when nothing changed). A toolset that fails to load is left
    /// out of the new set and reported. `sync` is meant to be the one
    /// writer of a registry that follows a configuration: toolsets added or
    /// removed by others while it loads are overwritten by the swap.
    pub async fn sync(&self, toolsets: Vec<ToolsetConfig>) -> LoadReport {
        // Built-in toolsets the program added, which the configuration does
        // not name, stay.
        self.reconcile(toolsets, |_, loaded| loaded.owned_by_program).await
    }

    /// Bring only some toolsets in line, leaving every other one as it is:
    /// those of `toolsets` are loaded, or reloaded if their configuration
    /// or plugin file changed (as [`sync`](Self::sync) does), and those
    /// named in `removed` are removed. For a registry that follows many
    /// toolsets changing one at a time: the cost is that of the toolsets
    /// named, not of the whole registry. Subscribers are notified once if
    /// anything changed.
    pub async fn sync_some(&self, toolsets: Vec<ToolsetConfig>, removed: &[String]) -> LoadReport {
        self.reconcile(toolsets, |id, _| !removed.iter().any(|gone| gone == id)).await
    }

    /// The tools of one toolset, available or not, sorted by namespaced
    /// name (none if it is not loaded).
    pub fn tools_of(&self, toolset: &str) -> Vec<RegisteredTool> {
        let mut tools = self.read().get(toolset).map(|t| t.tools.clone()).unwrap_or_default();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        tools
    }

    /// The last sync outcome (`SyncCompleted` or `SyncFailed`) of one
    /// toolset, if it was ever loaded.
    pub fn last_sync(&self, toolset: &str) -> Option<ToolsetEvent> {
        self.log.last_of(toolset)
    }

    /// The toolsets of `toolsets` loaded or kept, with the current toolsets
    /// they do not name for which `keep` holds; swapped in at once.
    async fn reconcile(&self, toolsets: Vec<ToolsetConfig>, keep: impl Fn(&str, &LoadedToolset) -> bool) -> LoadReport {
        let current = self.read().clone();
        let builtins = self.builtins();
        let mut next: BTreeMap<String, Arc<LoadedToolset>> = BTreeMap::new();
        let named: std::collections::BTreeSet<String> = toolsets.iter().map(|t| t.id.clone()).collect();
        // The toolsets of `map` that `toolsets` does not name and that stay.
        let kept = |map: &BTreeMap<String, Arc<LoadedToolset>>| -> Vec<(String, Arc<LoadedToolset>)> {
            (map.iter())
                .filter(|(id, loaded)| !named.contains(*id) && keep(id, loaded))
                .map(|(id, loaded)| (id.clone(), Arc::clone(loaded)))
                .collect()
        };
        next.extend(kept(&current));
        let mut report = LoadReport::default();
        let mut loading = Vec::new();
        let staying = |config: &ToolsetConfig| current.get(&config.id).is_some_and(|loaded| loaded.config == *config);
        let peers = peers(
            (toolsets.iter().map(|config| (config, staying(config))))
                .chain(next.values().map(|loaded| (&loaded.config, true))),
        );
        for config in toolsets {
            match current.get(&config.id) {
                Some(loaded)
                    if loaded.config == config
                        && loaded.fingerprint == plugin_mtime(&config)
                        && !next.contains_key(&config.id) =>
                {
                    next.insert(config.id.clone(), Arc::clone(loaded));
                }
                _ => loading.push(self.spawn_prepare(config, &builtins, &peers)),
            }
        }
        for task in loading {
            let Some((toolset, source, outcome)) = finished(task, &mut report).await else { continue };
            let prepared = outcome.is_ok();
            let added = outcome.and_then(|(loaded, warnings)| {
                admit(&next, &loaded)?;
                next.insert(toolset.clone(), Arc::new(loaded));
                Ok(warnings)
            });
            match added {
                Ok(warnings) => report.warnings.extend(warnings),
                Err(error) => {
                    if prepared {
                        self.admission_failed(&toolset, &error);
                    }
                    report.failures.push(ToolsetFailure { toolset, source, error })
                }
            }
        }
        let mut toolsets = self.toolsets.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        // The toolsets kept are taken as they are now, not as they were
        // when the loads began: one reloaded meanwhile (its server's tools
        // changed) stays reloaded, one removed meanwhile stays removed.
        next.retain(|id, _| named.contains(id));
        next.extend(kept(&toolsets));
        let unchanged = toolsets.len() == next.len()
            && toolsets.iter().zip(&next).all(|((a, old), (b, new))| a == b && Arc::ptr_eq(old, new));
        if !unchanged {
            let added: Vec<Arc<LoadedToolset>> = next
                .iter()
                .filter(|(id, new)| toolsets.get(*id).is_none_or(|old| !Arc::ptr_eq(old, new)))
                .map(|(_, new)| Arc::clone(new))
                .collect();
            *toolsets = next;
            drop(toolsets);
            for loaded in &added {
                self.follow(loaded);
            }
            self.changed();
        }
        report
    }

    /// The toolsets as they are now, to list their tools without cloning
    /// them (for a model, for a listing per request).
    pub fn snapshot(&self) -> ToolsSnapshot {
        ToolsSnapshot { toolsets: self.read().values().cloned().collect() }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<LoadedToolset>>> {
        self.toolsets.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Load toolsets concurrently. Each one is added as soon as it is
    /// loaded (subscribers are told each time), so a slow one (a download,
    /// a remote server) holds up no other. Each one that fails is reported
    /// and the rest are loaded; the report is in the order of `toolsets`.
    pub async fn load_all(&self, toolsets: Vec<ToolsetConfig>) -> LoadReport {
        let builtins = self.builtins();
        let peers = peers(
            (toolsets.iter().map(|config| (config, false)))
                .chain(self.read().values().map(|loaded| (&loaded.config, true))),
        );
        let mut tasks = tokio::task::JoinSet::new();
        for (at, config) in toolsets.into_iter().enumerate() {
            let task = self.spawn_prepare(config, &builtins, &peers);
            tasks.spawn(async move { (at, task.await) });
        }
        // Each toolset's part of the report, by its place in `toolsets`.
        let mut parts: Vec<(usize, LoadReport)> = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            let mut part = LoadReport::default();
            let at = match joined {
                Ok((at, Ok(done))) => {
                    self.admit_loaded(done, &mut part);
                    at
                }
                Ok((at, Err(error))) => {
                    part.failures.push(ToolsetFailure {
                        toolset: "?".to_owned(),
                        source: "?".to_owned(),
                        error: Error::Host(format!("a loading task failed: {error}")),
                    });
                    at
                }
                // (The wrapper only awaits: it fails only if the runtime ends.)
                Err(_) => usize::MAX,
            };
            parts.push((at, part));
        }
        parts.sort_by_key(|(at, _)| *at);
        let mut report = LoadReport::default();
        for (_, part) in parts {
            report.failures.extend(part.failures);
            report.warnings.extend(part.warnings);
        }
        report
    }

    /// Add a toolset loaded by [`load_all`](Self::load_all), or report why
    /// it was not.
    fn admit_loaded(&self, (toolset, source, outcome): Loading, report: &mut LoadReport) {
        let prepared = outcome.is_ok();
        match outcome.and_then(|(loaded, warnings)| self.insert(loaded).map(|()| warnings).map_err(Error::from)) {
            Ok(warnings) => report.warnings.extend(warnings),
            Err(error) => {
                if prepared {
                    self.admission_failed(&toolset, &error);
                }
                report.failures.push(ToolsetFailure { toolset, source, error })
            }
        }
    }

    /// [`prepare_logged`] of `config` on a task of its own: its id, where it
    /// is from, and the outcome.
    fn spawn_prepare(
        &self,
        config: ToolsetConfig,
        builtins: &Kinds,
        peers: &Arc<[Peer]>,
    ) -> tokio::task::JoinHandle<Loading> {
        let (secrets, runtime, builtins, log, peers) = (
            Arc::clone(&self.secrets),
            self.runtime.clone(),
            builtins.clone(),
            Arc::clone(&self.log),
            Arc::clone(peers),
        );
        tokio::spawn(async move {
            let source = source_of(&config);
            let id = config.id.clone();
            (id, source, prepare_logged(&runtime, config, secrets, &builtins, &log, &peers).await)
        })
    }

    /// Load one toolset and add it. Fails on a load error, a duplicate id or
    /// a name collision; the registry is unchanged then. Returns warnings.
    pub async fn add(&self, config: ToolsetConfig) -> Result<Vec<String>, Error> {
        let id = config.id.clone();
        let peers =
            peers((self.read().values().map(|loaded| (&loaded.config, true))).chain(std::iter::once((&config, false))));
        let (loaded, warnings) =
            prepare_logged(&self.runtime, config, Arc::clone(&self.secrets), &self.builtins(), &self.log, &peers)
                .await?;
        if let Err(error) = self.insert(loaded) {
            let error = Error::from(error);
            self.admission_failed(&id, &error);
            return Err(error);
        }
        Ok(warnings)
    }

    /// A toolset that loaded was not let in (a duplicate id, a tool name
    /// another toolset has): its sync failed after all.
    fn admission_failed(&self, toolset: &str, error: &Error) {
        self.log.record(toolset, SyncEvent::failed(error));
    }

    /// The recent sync events of every toolset (the last 1024), oldest
    /// first: `SyncStarted` when a toolset begins to load, then
    /// `SyncCompleted` or `SyncFailed`.
    pub fn sync_events(&self) -> Vec<ToolsetEvent> {
        self.log.recent()
    }

    /// The last outcome (`SyncCompleted` or `SyncFailed`) of every toolset
    /// that was ever loaded, by id.
    pub fn last_syncs(&self) -> Vec<ToolsetEvent> {
        self.log.last()
    }

    /// Every sync event from now on (a subscriber that falls more than 256
    /// events behind misses the oldest).
    pub fn subscribe_sync(&self) -> tokio::sync::broadcast::Receiver<ToolsetEvent> {
        self.log.subscribe()
    }

    /// What loads toolsets besides Wasm plugins, now: the registered
    /// built-in toolsets and the connectors.
    fn builtins(&self) -> Kinds {
        Kinds {
            builtins: self.builtins.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone(),
            connectors: self.connectors.clone(),
        }
    }

    /// Register tools of the program ([`BuiltinToolset`]) under the
    /// toolset's id, before or after loading a toolsets file. A toolsets
    /// file entry `{"id": ID, "kind": "builtin"}` applies its settings
    /// (tool overrides, filters, approvals, limits) to the toolset of that
    /// id; one the program has not registered is a configuration error of
    /// that entry. A toolset no file names is available as it is (every
    /// tool, no approval) and stays through [`sync`](Self::sync).
    ///
    /// Registering an id again replaces the toolset (under the settings
    /// that applied to it). Its tool definitions are checked as a plugin's
    /// `describe` output is: a bad schema is an error here, and nothing
    /// changes. Returns warnings.
    pub async fn register_builtin(&self, toolset: BuiltinToolset) -> Result<Vec<String>, Error> {
        let id = toolset.id.clone();
        let toolset = Arc::new(toolset);
        let current = self.read().get(&id).cloned();
        let (config, owned_by_program) = match &current {
            Some(loaded) if loaded.config.kind == "builtin" => (loaded.config.clone(), loaded.owned_by_program),
            Some(_) => return Err(RegistryError::Duplicate(id).into()),
            None => (ToolsetConfig::builtin(&id), true),
        };
        let mut builtins = self.builtins();
        builtins.builtins.insert(id.clone(), Arc::clone(&toolset));
        let (mut loaded, warnings) =
            prepare_logged(&self.runtime, config, Arc::clone(&self.secrets), &builtins, &self.log, &[]).await?;
        loaded.owned_by_program = owned_by_program;
        let mut toolsets = self.toolsets.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        let old = toolsets.remove(&id);
        if let Err(error) = admit(&toolsets, &loaded) {
            if let Some(old) = old {
                toolsets.insert(id.clone(), old);
            }
            drop(toolsets);
            let error = Error::from(error);
            self.admission_failed(&id, &error);
            return Err(error);
        }
        let loaded = Arc::new(loaded);
        toolsets.insert(id.clone(), Arc::clone(&loaded));
        drop(toolsets);
        self.builtins.write().unwrap_or_else(|poisoned| poisoned.into_inner()).insert(id, toolset);
        self.follow(&loaded);
        self.changed();
        Ok(warnings)
    }

    fn insert(&self, loaded: LoadedToolset) -> Result<(), RegistryError> {
        let mut toolsets = self.toolsets.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        // A file's entry for a built-in toolset the program registered
        // earlier takes its place, with the entry's settings.
        let id = loaded.plugin.name().to_owned();
        let replaced = match toolsets.get(&id) {
            Some(old) if old.owned_by_program && loaded.config.kind == "builtin" => toolsets.remove(&id),
            _ => None,
        };
        if let Err(error) = admit(&toolsets, &loaded) {
            if let Some(old) = replaced {
                toolsets.insert(id, old);
            }
            return Err(error);
        }
        let loaded = Arc::new(loaded);
        toolsets.insert(loaded.plugin.name().to_owned(), Arc::clone(&loaded));
        drop(toolsets);
        self.follow(&loaded);
        self.changed();
        Ok(())
    }

    /// For a toolset whose tools change upstream: a task that loads it
    /// again on every change and swaps the new tools in, for as long as
    /// this load of it is the registry's (a toolset replaced or removed, or
    /// a registry dropped, ends it). A reload that fails keeps the tools
    /// there were (its `SyncFailed` is recorded).
    fn follow(&self, loaded: &Arc<LoadedToolset>) {
        let Some(mut signal) = loaded.changes.clone() else { return };
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(toolset = loaded.config.id, "no tokio runtime: changes to its tools are not followed");
            return;
        };
        let toolsets = Arc::downgrade(&self.toolsets);
        let mut current = Arc::downgrade(loaded);
        let (runtime, secrets, kinds, log, changes) = (
            self.runtime.clone(),
            Arc::clone(&self.secrets),
            self.builtins(),
            Arc::clone(&self.log),
            Arc::downgrade(&self.changes),
        );
        let id = loaded.config.id.clone();
        // The receiver has seen what there was when the toolset was loaded:
        // a change since (before this task first runs) is one to follow.
        handle.spawn(async move {
            while signal.changed().await.is_ok() {
                let Some(set) = toolsets.upgrade() else { return };
                let is_current = |map: &BTreeMap<String, Arc<LoadedToolset>>| {
                    map.get(&id).zip(current.upgrade()).is_some_and(|(there, ours)| Arc::ptr_eq(there, &ours))
                };
                let (there, peers) = {
                    let map = set.read().unwrap_or_else(|poisoned| poisoned.into_inner());
                    if !is_current(&map) {
                        return;
                    }
                    (Arc::clone(&map[&id]), peers(map.values().map(|loaded| (&loaded.config, true))))
                };
                let owned_by_program = there.owned_by_program;
                // A plugin that changes its own list is asked again; a
                // toolset whose list changes upstream is loaded again.
                let reloaded = if there.plugin.has_dynamic_tools() {
                    redescribe_started(&there, &log).await
                } else {
                    log.record(&id, loading(&there.config));
                    prepare(&runtime, there.config.clone(), Arc::clone(&secrets), &kinds, &peers)
                        .await
                        .map(|(reloaded, _)| reloaded)
                };
                // The same tools again (a server that says its list changed
                // when it did not): nothing to tell the registry's clients,
                // who would list them again.
                let unchanged = reloaded.as_ref().is_ok_and(|reloaded| reloaded.tools == there.tools);
                drop(there);
                let mut map = set.write().unwrap_or_else(|poisoned| poisoned.into_inner());
                // Overtaken: the toolset was replaced or removed while this
                // reload ran. The reload and its outcome are dropped, so the
                // toolset's last outcome stays that of what is there.
                if !is_current(&map) {
                    return;
                }
                let mut reloaded = match reloaded {
                    Ok(reloaded) => reloaded,
                    Err(error) => {
                        drop(map);
                        log.record(&id, SyncEvent::failed(&error));
                        continue;
                    }
                };
                reloaded.owned_by_program = owned_by_program;
                let mut others = map.clone();
                others.remove(&id);
                if let Err(error) = admit(&others, &reloaded) {
                    drop(map);
                    log.record(&id, SyncEvent::failed(&Error::from(error)));
                    continue;
                }
                log.record(&id, reloaded.synced());
                let reloaded = Arc::new(reloaded);
                current = Arc::downgrade(&reloaded);
                map.insert(id.clone(), reloaded);
                drop(map);
                if unchanged {
                    continue;
                }
                match changes.upgrade() {
                    Some(changes) => changes.send_modify(|count| *count += 1),
                    None => return,
                }
            }
        });
    }

    /// Remove a toolset; calls already running on it finish normally.
    pub fn remove(&self, id: &str) -> bool {
        let removed = self.toolsets.write().unwrap_or_else(|poisoned| poisoned.into_inner()).remove(id).is_some();
        if removed {
            self.changed();
        }
        removed
    }

    /// The ids of the loaded toolsets, sorted.
    pub fn toolset_ids(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    /// Who signed a loaded toolset's plugin, if its source was verified.
    pub fn signer(&self, toolset: &str) -> Option<crate::Signer> {
        self.read().get(toolset).and_then(|loaded| loaded.plugin.signer().cloned())
    }

    /// Each loaded toolset's instance pool now, by id (for metrics).
    pub fn pool_stats(&self) -> Vec<(String, crate::PoolStats)> {
        self.read().iter().map(|(id, loaded)| (id.clone(), loaded.plugin.pool_stats())).collect()
    }

    /// Every tool, available or not, sorted by namespaced name.
    pub fn all_tools(&self) -> Vec<RegisteredTool> {
        // (Clones every tool: for listings that only read, see `snapshot`.)
        let mut tools: Vec<RegisteredTool> = self.read().values().flat_map(|t| t.tools.clone()).collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        tools
    }

    /// The tools callers may see and call (enabled, not filtered out),
    /// sorted by namespaced name.
    pub fn tools(&self) -> Vec<RegisteredTool> {
        self.all_tools().into_iter().filter(|t| t.enabled).collect()
    }

    /// Look a tool up by namespaced name.
    pub fn tool(&self, name: &str) -> Option<RegisteredTool> {
        self.find(name).map(|(loaded, index)| loaded.tools[index].clone())
    }

    /// Whether a tool of this namespaced name is available to callers
    /// (enabled, not filtered out). Clones nothing, unlike
    /// [`tool`](Self::tool).
    pub fn has_tool(&self, name: &str) -> bool {
        self.with_tool(name, |tool| tool.enabled) == Some(true)
    }

    /// Look at a tool by namespaced name without cloning it: `look` gets
    /// it borrowed from its toolset (no lock is held meanwhile).
    pub fn with_tool<R>(&self, name: &str, look: impl FnOnce(&RegisteredTool) -> R) -> Option<R> {
        self.find(name).map(|(loaded, index)| look(&loaded.tools[index]))
    }

    /// The toolset holding a tool, and the tool's place in it: a map lookup
    /// by toolset id, then a scan of that toolset's few tools.
    fn find(&self, name: &str) -> Option<(Arc<LoadedToolset>, usize)> {
        let (toolset, _) = name.split_once(NAMESPACE_SEPARATOR)?;
        let loaded = Arc::clone(self.read().get(toolset)?);
        let index = loaded.tools.iter().position(|t| t.name == name)?;
        Some((loaded, index))
    }

    /// Call a tool by namespaced name. A tool that is disabled or filtered
    /// out does not exist for callers. Arguments are validated first; a tool
    /// that requires approval then goes to `approver`, and a denial is an
    /// `isError` result saying the call was not approved (the plugin does
    /// not run).
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        approver: &dyn Approver,
    ) -> Result<CallToolResult, Error> {
        self.call_with(name, arguments, approver, &CallContext::default()).await
    }

    /// [`call_tool`](Self::call_tool) in a context: the caller's deadline,
    /// cancellation token, call id, user id, `_meta` and log sink.
    pub async fn call_with(
        &self,
        name: &str,
        arguments: Value,
        approver: &dyn Approver,
        context: &CallContext,
    ) -> Result<CallToolResult, Error> {
        let scopes = context.scopes();
        // The tool is borrowed from its toolset, which the call holds: no
        // copy of its description (schemas and all) per call.
        let found = self.find(name).filter(|(loaded, index)| {
            let tool = &loaded.tools[*index];
            tool.enabled && tool.permits(scopes)
        });
        let Some((loaded, index)) = found else {
            return Err(Error::NoSuchTool {
                tool: name.to_owned(),
                available: self.tools().into_iter().filter(|t| t.permits(scopes)).map(|t| t.name).collect(),
            });
        };
        let tool = &loaded.tools[index];
        let asking = if tool.requires_approval { Asking::Registered(tool, approver) } else { Asking::Nobody };
        let label = (tool.toolset.as_str(), tool.name.as_str());
        loaded.plugin.call_labelled(label, &tool.tool.name, Arguments::Check(arguments), asking, context).await
    }
}
