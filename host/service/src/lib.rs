//! The tool-set service (`spec/toolset-service.md`): a REST API
//! at `/v1/tool_sets` that creates, changes and removes tool sets and
//! their tools at run time, persisted in SQLite (`sqlite://PATH`, the
//! embedded default) or PostgreSQL (`postgres://...`, shared by many
//! instances), on the same registries that serve MCP: what the API changes
//! is what agents see.
//!
//! Every request carries a bearer token (the `serve.auth` of
//! `toolhost-mcp`); its claims name the account, workspace and profile
//! ([`Actor`]). Reads and writes are scoped to that workspace, and the MCP
//! endpoint serves each workspace's tools to that workspace's tokens (one
//! [`toolhost::Registry`] per workspace, [`toolhost_mcp::Tenants`]).
//!
//! `toolhost serve --http ADDR --config FILE --store URL` runs it; see the
//! book's page on the tool-set service (`docs/src/using/service.md`).

mod actor;
mod api;
mod http_adapter;
pub mod model;
mod settings;
pub mod store;
mod workspaces;

use std::sync::Arc;

pub use actor::Actor;
pub use settings::{ServiceSettings, SettingsError};
pub use store::{Backend, Store, StoreError};
pub use workspaces::Workspaces;

/// A new prefixed ULID: `toolset_01H...`, `tool_01H...`, `event_01H...`.
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", ulid::Ulid::new())
}

/// Now, as RFC 3339 UTC with milliseconds (sorts in time order).
pub(crate) fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// The service: its store, its workspaces' registries, its API.
#[derive(Clone)]
pub struct Service {
    store: Store,
    workspaces: Arc<Workspaces>,
    settings: Arc<ServiceSettings>,
    auth: Arc<toolhost_mcp::auth::Authenticator>,
    /// Each workspace's request rate, if limited.
    limiter: Option<Arc<toolhost_mcp::limits::Limiter>>,
    /// How many event watches each workspace has open.
    watches: Arc<std::sync::Mutex<std::collections::HashMap<String, usize>>>,
    /// Cancelled when the server stops: open watches end.
    closing: tokio_util::sync::CancellationToken,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service").field("store", &self.store.backend()).finish_non_exhaustive()
    }
}

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServiceError {
    /// The store could not be opened. (Its cause is in the message, not
    /// also a `source`, which a printed chain would repeat.)
    #[error("cannot open the store: {0}")]
    Store(StoreError),
    /// The settings are unusable.
    #[error(transparent)]
    Settings(#[from] SettingsError),
}

impl From<StoreError> for ServiceError {
    fn from(error: StoreError) -> ServiceError {
        ServiceError::Store(error)
    }
}

impl Service {
    /// Open the store, load every workspace's tool sets into its registry,
    /// and start following the store (other instances' changes). Requests
    /// are authenticated by `auth`. Plugins run on a runtime made from
    /// `runtime`, whose downloads reach only the allowed hosts (a tenant's
    /// `https://` plugin redirected elsewhere is refused).
    pub async fn start(
        settings: ServiceSettings,
        auth: Arc<toolhost_mcp::auth::Authenticator>,
        runtime: toolhost::RuntimeBuilder,
    ) -> Result<Service, ServiceError> {
        settings.check()?;
        let runtime = runtime.with_download_hosts(settings.allowed_hosts.clone()).build();
        let store = Store::open(&settings.store).await?;
        let settings = Arc::new(settings);
        let workspaces = Workspaces::new(store.clone(), Arc::clone(&settings), runtime);
        workspaces.load_all().await?;
        Workspaces::follow(&workspaces);
        let limiter = settings.per_workspace.map(|rate| {
            let mut limits = toolhost_mcp::RateLimits::default();
            limits.per_client = Some(rate);
            Arc::new(toolhost_mcp::limits::Limiter::new(limits))
        });
        Ok(Service {
            store,
            workspaces,
            settings,
            auth,
            limiter,
            watches: Arc::default(),
            closing: tokio_util::sync::CancellationToken::new(),
        })
    }

    /// End the service's long-lived answers (event watches) when `stopping`
    /// is cancelled: give it the HTTP server's ([`toolhost_mcp::HttpOptions::stopping`]),
    /// so that a shutdown does not wait on them.
    pub fn ending_with(mut self, stopping: tokio_util::sync::CancellationToken) -> Service {
        self.closing = stopping;
        self
    }

    /// The registries, one per workspace, for the MCP server
    /// ([`toolhost_mcp::ToolSource::Tenants`]).
    pub fn tenants(&self) -> Arc<Workspaces> {
        Arc::clone(&self.workspaces)
    }

    /// The `/v1` routes.
    pub fn routes(&self) -> axum::Router {
        api::routes(self.clone())
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_prefixed_ulids() {
        let id = super::new_id("toolset");
        assert!(id.starts_with("toolset_01") || id.starts_with("toolset_0"), "{id}");
        assert_eq!(id.len(), "toolset_".len() + 26);
    }
}
