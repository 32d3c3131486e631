//! One registry per workspace, following the store.
//!
//! A workspace's tool sets become toolsets of its registry, named by the
//! tool set's name (so an agent of the workspace sees `<name>__<tool>`).
//! After a change through the API, the instance that made it brings the
//! workspace's registry in line at once (the registry reloads only what
//! changed) and records what the sync did: events and each tool's status.
//! Every instance also polls the store for tool sets whose revision moved
//! (other instances' changes) and reloads those workspaces; MCP clients of
//! a registry that changed get `notifications/tools/list_changed`.
//!
//! Syncs are recorded by one instance per tool set: the one holding its
//! sync claim in the store (taken by the instance that changed it; after
//! it lapses, by the first to see a change), so two instances following
//! the same MCP server do not record each change twice.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};

use serde_json::{Value, json};
use toolhost::{Registry, ToolsetConfig};
use toolhost_mcp::auth::Principal;

use crate::actor::Actor;
use crate::model::ToolSetSpec;
use crate::model::system_profile;
use crate::settings::ServiceSettings;
use crate::store::{EventRow, Store, StoreError, SyncedTool, ToolRow, ToolSetRow};

/// How long the instance that changed a tool set keeps the right to record
/// its syncs (seconds).
const CLAIM_SECONDS: i64 = 30;

/// What this instance last saw of a tool set's sync: its outcome and its
/// tools (to record only what changed).
type Recorded = (Value, Vec<(String, Value)>);

/// A tool set's toolset (or why it has none) and the revision it was made
/// from.
type Applied = (i64, Result<ToolsetConfig, String>);

/// What this instance keeps of one tool set it follows.
#[derive(Debug, Clone, Default)]
struct Tracked {
    /// Its workspace.
    workspace: String,
    /// Its name: the id of its toolset in the workspace's registry.
    name: String,
    /// Its toolset (or why it has none), made from the revision it names:
    /// that revision is what this instance applied.
    applied: Option<Applied>,
    /// What was last recorded of its sync.
    recorded: Option<Recorded>,
    /// When the registry's sync that was last settled (recorded, or found
    /// recorded) happened.
    settled_at: Option<std::time::SystemTime>,
    /// This instance recorded `SyncStarted` for it: the sync's outcome is
    /// recorded whatever the store holds already.
    started: bool,
    /// Who caused the sync under way: the actor whose change started it
    /// (the service's own profile when none did), in the events it records.
    cause: Option<Value>,
}

/// What a sync makes of the tool sets it reads.
#[derive(Default)]
struct Made<'r> {
    /// The toolsets of the usable tool sets.
    configs: Vec<ToolsetConfig>,
    /// The tool sets that cannot be toolsets, with why.
    unusable: Vec<(&'r ToolSetRow, String)>,
    /// Names that go from the registry.
    removed: Vec<String>,
    /// What was made of each tool set, to keep once the registry took it.
    made_now: Vec<(&'r ToolSetRow, Result<ToolsetConfig, String>)>,
}

/// A workspace's syncs on this instance held off (its lock), from before a
/// change is written until it is brought in line: see
/// [`Workspaces::hold`].
#[must_use = "a change's sync needs it"]
pub(crate) struct Held {
    _lock: tokio::sync::OwnedMutexGuard<()>,
}

/// ToolSets of a workspace's tool sets a sync brings in line.
enum ToolSets {
    /// All of them (the registry is made to match the store).
    All,
    /// These (by id; one that is gone from the store is removed), the
    /// others left as they are.
    Named(Vec<String>),
}

/// The registries of every workspace, and what keeps them in line with
/// the store.
pub struct Workspaces {
    store: Store,
    settings: Arc<ServiceSettings>,
    runtime: toolhost::Runtime,
    registries: RwLock<HashMap<String, Arc<Registry>>>,
    /// Served to callers whose workspace has no tool sets.
    empty: Arc<Registry>,
    /// One sync at a time per workspace.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Every tool set this instance follows, by id.
    tracked: Mutex<HashMap<String, Tracked>>,
    /// Tool sets (workspace, id) with a sync not recorded because another
    /// instance held the claim, or whose sync failed: tried again on each
    /// poll until recorded (by this instance once the claim lapses, if
    /// the other did not record it).
    pending: Mutex<BTreeSet<(String, String)>>,
    /// This instance's id, in the events it records.
    instance: String,
    /// Connects http tool sets.
    http: Arc<crate::http_adapter::HttpConnector>,
    /// Itself, for the tasks that follow its registries.
    me: std::sync::Weak<Workspaces>,
}

impl std::fmt::Debug for Workspaces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workspaces").field("instance", &self.instance).finish_non_exhaustive()
    }
}

impl toolhost_mcp::Tenants for Workspaces {
    fn registry_for(&self, principal: Option<&Principal>) -> Arc<Registry> {
        let Some(actor) = principal.and_then(|p| Actor::of(p).ok()) else { return Arc::clone(&self.empty) };
        // Made now if the workspace has no tool sets yet: a client that
        // connects first is told when they come.
        self.registry(&actor.workspace_id)
    }

    fn registries(&self) -> Vec<(String, Arc<Registry>)> {
        let mut all: Vec<_> = self.read().iter().map(|(id, r)| (id.clone(), Arc::clone(r))).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }
}

impl Workspaces {
    pub(crate) fn new(store: Store, settings: Arc<ServiceSettings>, runtime: toolhost::Runtime) -> Arc<Workspaces> {
        let empty = Arc::new(Registry::with_runtime(runtime.clone(), Arc::new(toolhost::NoSecrets)));
        Arc::new_cyclic(|me| Workspaces {
            me: me.clone(),
            store,
            runtime,
            registries: RwLock::default(),
            empty,
            locks: Mutex::default(),
            tracked: Mutex::default(),
            pending: Mutex::default(),
            instance: crate::new_id("instance"),
            http: Arc::new(crate::http_adapter::HttpConnector::new(Arc::clone(&settings))),
            settings,
        })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<Registry>>> {
        self.registries.read().unwrap_or_else(|e| e.into_inner())
    }

    fn tracked(&self) -> std::sync::MutexGuard<'_, HashMap<String, Tracked>> {
        self.tracked.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, BTreeSet<(String, String)>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The registry of a workspace, made when first needed.
    pub fn registry(&self, workspace: &str) -> Arc<Registry> {
        if let Some(registry) = self.read().get(workspace) {
            return Arc::clone(registry);
        }
        let mut registries = self.registries.write().unwrap_or_else(|e| e.into_inner());
        let registry = registries.entry(workspace.to_owned()).or_insert_with(|| {
            let registry = Arc::new(
                Registry::with_runtime(self.runtime.clone(), Arc::new(toolhost::NoSecrets))
                    .with_connector(
                        "mcp",
                        Arc::new(toolhost_mcp::McpConnector::new().reaching(self.settings.allowed_hosts.clone())),
                    )
                    .with_connector("http", Arc::clone(&self.http) as Arc<dyn toolhost::ToolsetConnector>),
            );
            // When the registry changes by itself (an MCP server's tools
            // changed, and the registry loaded them again), what it found
            // is recorded: statuses, ARCHIVED, events.
            let mut changes = registry.subscribe();
            let (me, workspace) = (self.me.clone(), workspace.to_owned());
            tokio::spawn(async move {
                while changes.changed().await.is_ok() {
                    let Some(workspaces) = me.upgrade() else { return };
                    if let Err(error) = workspaces.recheck(&workspace).await {
                        tracing::warn!(workspace, "cannot record the registry's change: {error}");
                    }
                }
            });
            registry
        });
        Arc::clone(registry)
    }

    fn lock(&self, workspace: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(locks.entry(workspace.to_owned()).or_default())
    }

    /// Load every workspace's tool sets (at start).
    pub(crate) async fn load_all(&self) -> Result<(), StoreError> {
        let revisions = self.store.revisions().await?;
        let mut workspaces: Vec<String> = revisions.values().map(|(w, _)| w.clone()).collect();
        workspaces.sort();
        workspaces.dedup();
        for workspace in workspaces {
            self.sync(&workspace, ToolSets::All).await?;
        }
        Ok(())
    }

    /// Poll the store for other instances' changes, for as long as the
    /// workspaces live.
    pub(crate) fn follow(this: &Arc<Workspaces>) {
        let weak = Arc::downgrade(this);
        let interval = this.settings.poll_interval();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(interval).await;
                let Some(workspaces) = weak.upgrade() else { return };
                if let Err(error) = workspaces.poll().await {
                    tracing::warn!("cannot read the store for changes: {error}");
                }
            }
        });
    }

    /// Bring in line the tool sets whose revisions moved since they were
    /// last applied here (and those that are gone), workspace by
    /// workspace.
    async fn poll(&self) -> Result<(), StoreError> {
        let now = self.store.revisions().await?;
        let mut changed: BTreeMap<String, Vec<String>> = BTreeMap::new();
        {
            let tracked = self.tracked();
            for (id, (workspace, revision)) in &now {
                let applied = tracked.get(id).and_then(|t| t.applied.as_ref()).map(|(revision, _)| *revision);
                if applied != Some(*revision) {
                    changed.entry(workspace.clone()).or_default().push(id.clone());
                }
            }
            // (An entry not applied yet is a create in progress here.)
            for (id, t) in tracked.iter().filter(|(id, t)| !now.contains_key(*id) && t.applied.is_some()) {
                changed.entry(t.workspace.clone()).or_default().push(id.clone());
            }
        }
        for (workspace, id) in std::mem::take(&mut *self.pending()) {
            changed.entry(workspace).or_default().push(id);
        }
        // Workspaces sync side by side: one whose MCP server is slow to
        // answer does not hold up the others. One's failure is its own.
        let Some(this) = self.me.upgrade() else { return Ok(()) };
        let mut syncs = tokio::task::JoinSet::new();
        for (workspace, mut ids) in changed {
            ids.sort();
            ids.dedup();
            let this = Arc::clone(&this);
            syncs.spawn(async move {
                if let Err(error) = this.sync(&workspace, ToolSets::Named(ids)).await {
                    tracing::warn!(workspace, "cannot sync the workspace: {error}");
                }
            });
        }
        while let Some(done) = syncs.join_next().await {
            if let Err(error) = done {
                tracing::error!("a workspace's sync failed: {error}");
            }
        }
        Ok(())
    }

    /// The registry of `workspace` changed: record what it did by itself
    /// (the tool sets whose last sync there is not settled yet).
    async fn recheck(&self, workspace: &str) -> Result<(), StoreError> {
        let registry = self.registry(workspace);
        let ids: Vec<String> = self
            .tracked()
            .iter()
            .filter(|(_, t)| t.workspace == workspace)
            .filter(|(_, t)| registry.last_sync(&t.name).is_some_and(|event| t.settled_at != Some(event.at)))
            .map(|(id, _)| id.clone())
            .collect();
        if ids.is_empty() {
            return Ok(());
        }
        self.sync(workspace, ToolSets::Named(ids)).await
    }

    /// Hold off this instance's syncs of `workspace` while a change is
    /// written to the store, until [`changed`](Self::changed) or
    /// [`deleted`](Self::deleted) has brought it in line.
    ///
    /// Without it, a poll that reads the store between the write and the
    /// change's own sync applies the change first and records its outcome
    /// with no `SyncStarted` before it; the change's sync then records a
    /// second outcome.
    pub(crate) async fn hold(&self, workspace: &str) -> Held {
        Held { _lock: self.lock(workspace).lock_owned().await }
    }

    /// This instance changed `tool_set` (of `workspace`), holding off its
    /// syncs since before the write (`held`): claim the right to record its
    /// syncs, record that one starts, and bring it in line.
    /// `cause` is the profile of the actor who changed it, recorded in the
    /// events of the sync.
    pub(crate) async fn changed(
        &self,
        held: Held,
        workspace: &str,
        row: &ToolSetRow,
        cause: &crate::model::Profile,
    ) -> Result<(), StoreError> {
        // Under the workspace's lock: a sync in flight cannot settle the
        // old outcome over the reset below.
        let _one_at_a_time = held;
        {
            let mut tracked = self.tracked();
            let t = tracked.entry(row.id.clone()).or_default();
            t.workspace = workspace.to_owned();
            t.cause = Some(cause.json());
        }
        if let Err(error) = self.start(row).await {
            // Tried again on the next poll.
            self.pending().insert((workspace.to_owned(), row.id.clone()));
            return Err(error);
        }
        self.sync_locked(workspace, ToolSets::Named(vec![row.id.clone()])).await
    }

    /// Claim the right to record `row`'s syncs and record that one starts.
    async fn start(&self, row: &ToolSetRow) -> Result<(), StoreError> {
        if !self.store.claim_sync(&row.id, &self.instance, CLAIM_SECONDS, true).await? {
            return Ok(());
        }
        let message = match kind_of(&row.spec) {
            Some("mcp") => {
                format!("connecting to {}", row.spec.pointer("/adapter/mcp/url").and_then(Value::as_str).unwrap_or("?"))
            }
            Some("uri") => {
                format!("loading {}", row.spec.pointer("/adapter/uri/url").and_then(Value::as_str).unwrap_or("?"))
            }
            _ => "loading its tools".to_owned(),
        };
        self.record(row, json!({"SyncStarted": {"message": message}})).await?;
        // What the sync ends in is recorded, even when it ends as the last
        // one did.
        let mut tracked = self.tracked();
        let t = tracked.entry(row.id.clone()).or_default();
        t.workspace = row.workspace_id.clone();
        (t.recorded, t.settled_at, t.started) = (None, None, true);
        Ok(())
    }

    /// This instance deleted tool set `id` of `workspace`, holding off its
    /// syncs since before the delete (`held`): its toolset goes.
    pub(crate) async fn deleted(&self, held: Held, workspace: &str, id: &str) -> Result<(), StoreError> {
        let _one_at_a_time = held;
        self.sync_locked(workspace, ToolSets::Named(vec![id.to_owned()])).await
    }

    async fn record(&self, row: &ToolSetRow, event: Value) -> Result<Value, StoreError> {
        let cause = (self.tracked().get(&row.id).and_then(|t| t.cause.clone()))
            .unwrap_or_else(|| system_profile(&row.account_id, &row.workspace_id).json());
        let event = EventRow {
            id: crate::new_id("event"),
            tool_set_id: row.id.clone(),
            account_id: row.account_id.clone(),
            workspace_id: row.workspace_id.clone(),
            event,
            info: json!({
                "instance": self.instance,
                "createdBy": cause,
                "toolSet": crate::model::tool_set_metadata(row),
            }),
            created_at: crate::now_rfc3339(),
        };
        self.store.record_event(&event).await?;
        Ok(crate::model::storable_event(&event))
    }

    /// Bring tool sets of a workspace (`which`) in line with the store: the
    /// registry reloads only what changed, and what the syncs did is
    /// recorded.
    async fn sync(&self, workspace: &str, which: ToolSets) -> Result<(), StoreError> {
        let lock = self.lock(workspace);
        let _one_at_a_time = lock.lock().await;
        self.sync_locked(workspace, which).await
    }

    /// [`sync`](Self::sync), the workspace's lock held by the caller. Tool
    /// sets whose sync fails are tried again on the next poll.
    async fn sync_locked(&self, workspace: &str, which: ToolSets) -> Result<(), StoreError> {
        let retry = match &which {
            ToolSets::Named(ids) => ids.clone(),
            ToolSets::All => Vec::new(),
        };
        let done = self.bring_in_line(workspace, which).await;
        if done.is_err() {
            self.pending().extend(retry.into_iter().map(|id| (workspace.to_owned(), id)));
        }
        done
    }

    /// The work of [`sync_locked`](Self::sync_locked).
    async fn bring_in_line(&self, workspace: &str, which: ToolSets) -> Result<(), StoreError> {
        let all = matches!(which, ToolSets::All);
        // Read under the lock: a sync never applies rows older than the
        // last one applied.
        let (rows, gone) = self.rows_to_sync(workspace, which).await?;
        let Made { configs, unusable, mut removed, made_now } = self.make_configs(&rows).await?;
        removed.extend((self.tracked().iter()).filter(|(id, _)| gone.contains(*id)).map(|(_, t)| t.name.clone()));
        // A name removed and used again (a rename onto it) stays.
        removed.retain(|name| !configs.iter().any(|config| &config.id == name));
        // So does a name another tool set of the store holds now (taken over
        // after a delete or rename elsewhere): that tool set's own sync puts
        // its toolset there.
        let unusable_names: HashSet<&str> = unusable.iter().map(|(row, _)| row.mcp_name.as_str()).collect();
        if !all && removed.iter().any(|name| !unusable_names.contains(name.as_str())) {
            let in_use = self.store.workspace_names(workspace).await?;
            removed.retain(|name| unusable_names.contains(name.as_str()) || !in_use.contains(name));
        }
        let registry = self.registry(workspace);
        let report = if all { registry.sync(configs).await } else { registry.sync_some(configs, &removed).await };
        for warning in &report.warnings {
            tracing::info!(workspace, "{warning}");
        }
        {
            let mut tracked = self.tracked();
            for (row, made) in made_now {
                let t = tracked.entry(row.id.clone()).or_default();
                t.workspace = row.workspace_id.clone();
                t.name = row.mcp_name.clone();
                t.applied = Some((row.revision, made));
            }
            for id in &gone {
                tracked.remove(id);
            }
        }
        self.settle_all(&rows, &unusable, &registry).await
    }

    /// The tool sets a sync reads from the store, and the ids of those it
    /// follows that are gone from it.
    async fn rows_to_sync(
        &self,
        workspace: &str,
        which: ToolSets,
    ) -> Result<(Vec<ToolSetRow>, Vec<String>), StoreError> {
        let mut rows = Vec::new();
        let mut gone = Vec::new();
        match which {
            ToolSets::All => {
                rows = self.store.workspace_tool_sets(workspace).await?;
                let present: HashSet<&str> = rows.iter().map(|row| row.id.as_str()).collect();
                gone = (self.tracked().iter())
                    .filter(|(id, t)| t.workspace == workspace && !present.contains(id.as_str()))
                    .map(|(id, _)| id.clone())
                    .collect();
            }
            ToolSets::Named(ids) => {
                for id in ids {
                    match self.store.get_tool_set(workspace, &id).await {
                        Ok(row) => rows.push(row),
                        Err(StoreError::NotFound) => gone.push(id),
                        Err(error) => return Err(error),
                    }
                }
            }
        }
        Ok((rows, gone))
    }

    /// The registry toolset of each tool set (the one made at its revision
    /// if there is one), and the names that go from the registry: those of
    /// tool sets renamed or unusable now. What is kept of each tool set
    /// changes only once the registry has changed (a failure before leaves
    /// it as it was, to be tried again whole).
    async fn make_configs<'r>(&self, rows: &'r [ToolSetRow]) -> Result<Made<'r>, StoreError> {
        let mut made_all = Made::default();
        for row in rows {
            let (cached, old_name) = match self.tracked().get(&row.id) {
                Some(t) => (t.applied.clone(), Some(t.name.clone()).filter(|n| !n.is_empty() && n != &row.mcp_name)),
                None => (None, None),
            };
            let made = match cached {
                Some((revision, made)) if revision == row.revision => made,
                _ => {
                    let tools = self.store.tools_of(&row.id).await?;
                    self.config_of(row, &tools).await
                }
            };
            made_all.removed.extend(old_name);
            made_all.made_now.push((row, made.clone()));
            match made {
                Ok(config) => made_all.configs.push(config),
                Err(problem) => {
                    made_all.removed.push(row.mcp_name.clone());
                    made_all.unusable.push((row, problem));
                }
            }
        }
        Ok(made_all)
    }

    /// Record each synced tool set's outcome: the problem of one that
    /// cannot be a toolset, or its toolset's last sync and tools (unless
    /// that sync was settled already).
    async fn settle_all(
        &self,
        rows: &[ToolSetRow],
        unusable: &[(&ToolSetRow, String)],
        registry: &Registry,
    ) -> Result<(), StoreError> {
        for row in rows {
            let (outcome, found, at) = match unusable.iter().find(|(r, _)| r.id == row.id) {
                Some((_, problem)) => (
                    json!({"SyncFailed": {"error": true, "errorType": "INVALID_CONFIGURATION", "message": problem}}),
                    Vec::new(),
                    None,
                ),
                None => {
                    // A toolset whose last sync was settled already has
                    // nothing new.
                    let Some(event) = registry.last_sync(&row.mcp_name) else { continue };
                    if self.tracked().get(&row.id).is_some_and(|t| t.settled_at == Some(event.at) && !t.started) {
                        continue;
                    }
                    let mut found: Vec<(String, Value)> = registry
                        .tools_of(&row.mcp_name)
                        .iter()
                        .map(|t| (t.tool.name.clone(), synced_spec(t)))
                        .collect();
                    if kind_of(&row.spec) == Some("http") {
                        // An http tool set's tools are its API tools, which
                        // the registry knows by their MCP names: found under
                        // their own names, they are left as they are.
                        let names: HashMap<String, String> = (self.store.tools_of(&row.id).await?.iter())
                            .filter(|t| t.origin == "api")
                            .map(|t| (crate::model::tool_mcp_name(t), t.name.clone()))
                            .collect();
                        for (name, _) in &mut found {
                            if let Some(own) = names.get(name.as_str()) {
                                name.clone_from(own);
                            }
                        }
                    }
                    (serde_json::to_value(&event.event).unwrap_or(Value::Null), found, Some(event.at))
                }
            };
            if self.settle(row, outcome, found).await?
                && let Some(at) = at
                && let Some(t) = self.tracked().get_mut(&row.id)
            {
                t.settled_at = Some(at);
            }
        }
        Ok(())
    }

    /// Record a tool set's sync outcome and tools, if they differ from what
    /// was seen and this instance holds the claim to record them: whether
    /// they are recorded now (by this instance or, as far as it can tell,
    /// by another).
    async fn settle(&self, row: &ToolSetRow, outcome: Value, found: Vec<(String, Value)>) -> Result<bool, StoreError> {
        let seen = (outcome.clone(), found.clone());
        let (known, started) = match self.tracked().get(&row.id) {
            Some(t) => (t.recorded.clone(), t.started),
            None => (None, false),
        };
        if known.as_ref() == Some(&seen) {
            return Ok(true);
        }
        if !self.store.claim_sync(&row.id, &self.instance, CLAIM_SECONDS, false).await? {
            // The instance holding the claim records it (or, if it does
            // not, this one will once the claim lapses).
            if last_outcome(row) != Some(&outcome) {
                self.pending().insert((row.workspace_id.clone(), row.id.clone()));
                return Ok(false);
            }
            return Ok(true);
        }
        // Nothing seen here yet (this instance just started) and no sync
        // started by it: if the store holds this outcome and these tools
        // already (a restart reloading what it had), there is nothing to
        // record.
        if known.is_none() && !started && self.recorded_already(row, &outcome, &found).await? {
            if let Some(t) = self.tracked().get_mut(&row.id) {
                t.recorded = Some(seen);
            }
            return Ok(true);
        }
        let event = self.record(row, outcome.clone()).await?;
        if outcome.get("SyncFailed").is_some() {
            // A failed sync keeps the tools recorded before (they are not
            // archived by a server that is away).
            self.store.apply_sync_outcome(&row.id, &event).await?;
        } else {
            // A synced tool was made by whoever made its tool set.
            let tools: Vec<SyncedTool> = found.into_iter().map(|(name, spec)| SyncedTool { name, spec }).collect();
            let keep_archived = usize::try_from(self.settings.tool_quota()).unwrap_or(usize::MAX);
            let now = crate::now_rfc3339();
            self.store.apply_sync(row, &tools, &row.created_by, &event, &now, keep_archived).await?;
        }
        // Seen once recorded: a write that failed is tried again.
        if let Some(t) = self.tracked().get_mut(&row.id) {
            (t.recorded, t.started, t.cause) = (Some(seen), false, None);
        }
        Ok(true)
    }

    /// Whether the store holds `outcome` as the tool set's last sync and
    /// exactly `found` as its synced tools (none archived that were found).
    async fn recorded_already(
        &self,
        row: &ToolSetRow,
        outcome: &Value,
        found: &[(String, Value)],
    ) -> Result<bool, StoreError> {
        if last_outcome(row) != Some(outcome) {
            return Ok(false);
        }
        // A sync started (by an instance that stopped before its end) is
        // answered, even by what was recorded before it.
        if self.store.latest_event(&row.id).await?.is_some_and(|event| event.get("SyncStarted").is_some()) {
            return Ok(false);
        }
        if outcome.get("SyncFailed").is_some() {
            return Ok(true);
        }
        let mut stored: Vec<(String, Value)> = (self.store.tools_of(&row.id).await?.into_iter())
            .filter(|t| {
                t.origin == "sync" && t.spec.get("status").and_then(Value::as_str) != Some("TOOL_STATUS_ARCHIVED")
            })
            .map(|t| (t.name, t.spec))
            .collect();
        stored.sort_by(|a, b| a.0.cmp(&b.0));
        let mut found = found.to_vec();
        found.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(stored == found)
    }

    /// Whether the operator lets tool sets reach `url`'s host.
    fn reachable(&self, url: &str) -> Result<(), String> {
        let parsed = url::Url::parse(url).map_err(|e| format!("`{url}` is not a URL: {e}"))?;
        self.settings.reaches(&parsed)
    }

    /// Whether a tool set about to be stored would load: why not.
    pub(crate) async fn config_of_new(&self, row: &ToolSetRow) -> Result<ToolsetConfig, String> {
        self.config_of(row, &[]).await
    }

    /// The registry toolset of a tool set, or why it cannot be one.
    async fn config_of(&self, row: &ToolSetRow, tools: &[ToolRow]) -> Result<ToolsetConfig, String> {
        let spec: ToolSetSpec = serde_json::from_value(row.spec.clone()).map_err(|e| e.to_string())?;
        let adapter = spec.adapter.unwrap_or_default();
        // Overrides of synced tools: their status and approval, as set
        // through the API.
        let overrides: Vec<Value> = tools
            .iter()
            .filter(|t| t.origin == "sync")
            .filter_map(|t| {
                let mut entry = serde_json::Map::new();
                if let Some(enabled) = t.enabled_override {
                    entry.insert("enabled".into(), Value::Bool(enabled));
                }
                if let Some(approval) = t.approval_override {
                    entry.insert("requiresApproval".into(), Value::Bool(approval));
                }
                (!entry.is_empty()).then(|| {
                    entry.insert("name".into(), Value::from(t.name.clone()));
                    Value::Object(entry)
                })
            })
            .collect();
        // What the operator allows is checked again at every load: a host
        // or directory taken off the lists is not reached by tool sets
        // stored before. (`https://` and `oci://` plugins are checked by
        // the runtime itself, whose downloads reach only `allowedHosts`.)
        if let Some(url) = adapter.mcp.as_ref().and_then(|m| m.url.as_deref()) {
            self.reachable(url)?;
        }
        if let Some(path) = adapter.uri.as_ref().and_then(|uri| uri.url.strip_prefix("file://"))
            && !self.settings.holds_plugin(path)
        {
            return Err("its plugin file is not inside one of serve.service.pluginDirs".to_owned());
        }
        let mut entry = match (&adapter.mcp, &adapter.uri, &adapter.http) {
            (Some(mcp), None, None) => json!({
                "id": row.mcp_name,
                "kind": "mcp",
                "server": {"url": mcp.url},
                "headers": mcp.headers,
                "extensions": mcp.filters,
            }),
            (None, Some(uri), None) => {
                let mut server = json!({"url": uri.url});
                if let Some(digest) = &uri.digest {
                    server["digest"] = Value::from(digest.clone());
                }
                if let Some(config) = &uri.config {
                    server["config"] = json!(config);
                }
                json!({
                    "id": row.mcp_name,
                    "kind": "uri",
                    "server": server,
                    "extensions": uri.filters,
                })
            }
            (None, None, Some(http)) => return Ok(http_config(row, http, tools)),
            // No adapter yet: a toolset with no tools.
            (None, None, None) => return Ok(http_config(row, &crate::model::HttpAdapter::default(), &[])),
            _ => {
                return Err(
                    "the tool set has more than one adapter (give one of spec.adapter.mcp, .uri, .http)".to_owned()
                );
            }
        };
        if !overrides.is_empty() {
            entry["tools"] = Value::Array(overrides);
        }
        let mut document = json!({
            "schema": "https://schema.cjson.dev/0/toolsets/cjson-toolsets-0.1.0-SNAPSHOT.schema.json",
            "toolsets": [entry],
        });
        // Every downloaded plugin verified with the operator's key.
        if self.settings.require_signatures
            && let Some(key) = &self.settings.signature_key
        {
            document["verify"] = json!({"required": true, "key": key});
        }
        let path = std::path::PathBuf::from(format!("tool_sets/{}", row.id));
        let file = toolhost::parse_toolsets(&path, &document, &toolhost::NoSecrets).await.map_err(|e| {
            e.problems.iter().map(|p| format!("{}: {}", p.pointer, p.message)).collect::<Vec<_>>().join("; ")
        })?;
        file.toolsets.into_iter().next().ok_or_else(|| "the tool set made no toolset".to_owned())
    }
}

/// The toolset of an http tool set: its tools (made through the API) in
/// `remote.server`, for [`crate::http_adapter::HttpConnector`].
fn http_config(row: &ToolSetRow, http: &crate::model::HttpAdapter, tools: &[ToolRow]) -> ToolsetConfig {
    let mut config = ToolsetConfig::builtin(row.mcp_name.clone());
    config.kind = "http".to_owned();
    config.remote.headers = http.headers.clone();
    let listed: Vec<Value> = tools
        .iter()
        .filter(|t| t.origin == "api")
        .map(|t| {
            json!({
                "name": crate::model::tool_mcp_name(t),
                // Required by the API; a row stored without one (before it
                // was) is described as nothing rather than failing its set.
                "description": t.spec.get("description").and_then(Value::as_str).unwrap_or_default(),
                "parameters": t.spec.get("parameters").cloned().unwrap_or_else(|| json!({"type": "object"})),
                "http": t.spec.pointer("/config/http").cloned().unwrap_or_default(),
            })
        })
        .collect();
    config.remote.server.insert("baseUrl".into(), Value::from(http.base_url.clone().unwrap_or_default()));
    config.remote.server.insert("tools".into(), Value::Array(listed));
    for tool in tools.iter().filter(|t| t.origin == "api") {
        let filtered = tool.spec.get("status").and_then(Value::as_str) == Some("TOOL_STATUS_FILTERED");
        let approval = tool.spec.get("requiresApproval").and_then(Value::as_bool);
        if filtered || approval.is_some() {
            config.tools.insert(
                crate::model::tool_mcp_name(tool),
                toolhost::ToolOverride {
                    enabled: filtered.then_some(false),
                    requires_approval: approval,
                    required_scopes: None,
                },
            );
        }
    }
    config
}

/// The outcome of a tool set's last recorded sync (`{"SyncCompleted": ...}`).
fn last_outcome(row: &ToolSetRow) -> Option<&Value> {
    row.last_sync.as_ref().and_then(|last| last.get("event"))
}

/// A tool set spec's adapter kind.
pub(crate) fn kind_of(spec: &Value) -> Option<&'static str> {
    let adapter = spec.get("adapter")?;
    ["mcp", "uri", "http"].into_iter().find(|kind| adapter.get(*kind).is_some_and(|v| !v.is_null()))
}

/// A synced tool's spec, from what the registry made of it.
fn synced_spec(tool: &toolhost::RegisteredTool) -> Value {
    let mut mcp = serde_json::Map::new();
    mcp.insert("toolName".into(), Value::from(tool.tool.name.clone()));
    if let Some(title) = &tool.tool.title {
        mcp.insert("toolTitle".into(), Value::from(title.clone()));
    }
    if let Some(description) = &tool.tool.description {
        mcp.insert("toolDescription".into(), Value::from(description.clone()));
    }
    json!({
        "config": {"mcp": mcp},
        "description": tool.tool.description.clone().unwrap_or_default(),
        "parameters": tool.tool.input_schema,
        "status": if tool.enabled { "TOOL_STATUS_AVAILABLE" } else { "TOOL_STATUS_FILTERED" },
        "requiresApproval": tool.requires_approval,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool_set(name: &str, spec: Value) -> ToolSetRow {
        ToolSetRow {
            id: format!("toolset_{name}"),
            account_id: "acct".into(),
            workspace_id: "ws".into(),
            profile_id: "profile".into(),
            name: name.into(),
            mcp_name: name.into(),
            external_id: None,
            labels: BTreeMap::new(),
            spec,
            created_by: Value::Null,
            created_at: String::new(),
            updated_at: String::new(),
            version: 1,
            revision: 1,
            tool_count: None,
            last_sync: None,
        }
    }

    fn synced(name: &str, enabled: Option<bool>, approval: Option<bool>) -> ToolRow {
        ToolRow {
            id: format!("tool_{name}"),
            tool_set_id: "toolset_calc".into(),
            account_id: "acct".into(),
            workspace_id: "ws".into(),
            profile_id: "profile".into(),
            name: name.into(),
            external_id: None,
            labels: BTreeMap::new(),
            spec: Value::Null,
            created_by: Value::Null,
            origin: "sync".into(),
            enabled_override: enabled,
            approval_override: approval,
            created_at: String::new(),
            updated_at: String::new(),
            version: 1,
        }
    }

    async fn workspaces(
        dir: &tempfile::TempDir,
        allowed: &[&str],
        plugin_dirs: &[&std::path::Path],
    ) -> Arc<Workspaces> {
        let url = format!("sqlite://{}", dir.path().join("store.db").display());
        let store = Store::open(&url).await.expect("a SQLite store");
        let mut settings = ServiceSettings::new(url);
        settings.allowed_hosts = allowed.iter().map(|host| (*host).to_owned()).collect();
        settings.plugin_dirs = plugin_dirs.iter().map(|dir| dir.to_path_buf()).collect();
        Workspaces::new(store, Arc::new(settings), toolhost::Runtime::default())
    }

    #[tokio::test]
    async fn a_tool_set_becomes_a_toolset_of_its_adapters_kind_with_its_overrides() {
        let dir = tempfile::tempdir().unwrap();
        let workspaces = workspaces(&dir, &["mcp.example.com"], &[]).await;
        let row = tool_set("calc", json!({"adapter": {"mcp": {"url": "https://mcp.example.com/mcp"}}}));
        let tools = [synced("divide", Some(false), None), synced("add", None, Some(true)), synced("sub", None, None)];
        let config = workspaces.config_of(&row, &tools).await.expect("a toolset");
        assert_eq!((config.id.as_str(), config.kind.as_str()), ("calc", "mcp"));
        // Only tools with an override are named, each with what it sets.
        let named: Vec<&str> = config.tools.keys().map(String::as_str).collect();
        assert_eq!(named, ["add", "divide"]);
        assert_eq!(config.tools["divide"].enabled, Some(false));
        assert_eq!(config.tools["add"].requires_approval, Some(true));
    }

    #[tokio::test]
    async fn what_the_operator_does_not_allow_is_refused_at_every_load() {
        let dir = tempfile::tempdir().unwrap();
        let plugins = dir.path().join("plugins");
        let workspaces = workspaces(&dir, &["mcp.example.com"], &[&plugins]).await;
        let elsewhere = tool_set("x", json!({"adapter": {"mcp": {"url": "http://169.254.169.254/mcp"}}}));
        assert!(workspaces.config_of(&elsewhere, &[]).await.is_err());
        let outside = tool_set("y", json!({"adapter": {"uri": {"url": "file:///etc/passwd.wasm"}}}));
        let refused = workspaces.config_of(&outside, &[]).await.unwrap_err();
        assert!(refused.contains("pluginDirs"), "{refused}");
        // No adapter yet: a toolset with no tools.
        let nothing = tool_set("z", json!({}));
        let empty = workspaces.config_of(&nothing, &[]).await.unwrap();
        assert_eq!(empty.remote.server.get("tools"), Some(&json!([])));
        let two = tool_set(
            "w",
            json!({"adapter": {"mcp": {"url": "https://mcp.example.com/mcp"}, "uri": {"url": "oci://r/p:1"}}}),
        );
        assert!(workspaces.config_of(&two, &[]).await.unwrap_err().contains("more than one adapter"));
    }

    #[test]
    fn an_adapters_kind_is_the_member_it_sets() {
        assert_eq!(kind_of(&json!({"adapter": {"http": {"baseUrl": "x"}}})), Some("http"));
        assert_eq!(kind_of(&json!({"adapter": {"mcp": null, "uri": {"url": "x"}}})), Some("uri"));
        assert_eq!(kind_of(&json!({"adapter": {}})), None);
        assert_eq!(kind_of(&json!({})), None);
    }
}
