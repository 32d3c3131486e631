//! What an MCP server exposes ([`ToolSource`]): one plugin, a registry,
//! or a registry per caller; and which of them serves a request.

use std::sync::Arc;

use toolhost::{Plugin, Registry};

/// What the server exposes.
#[derive(Clone)]
pub enum ToolSource {
    /// One plugin, its tools under their own names.
    Plugin(Plugin),
    /// A registry, its tools under namespaced names.
    Registry(Arc<Registry>),
    /// A registry chosen per caller by its token (the tool-set service
    /// serves each workspace its own), its tools under namespaced names.
    #[cfg(feature = "production")]
    Tenants(Arc<dyn Tenants>),
}

/// Registries chosen per caller ([`ToolSource::Tenants`]).
#[cfg(feature = "production")]
pub trait Tenants: Send + Sync + 'static {
    /// The registry whose tools this caller sees and calls (`None`: a
    /// request with no principal, over stdio or without authorization).
    fn registry_for(&self, principal: Option<&crate::auth::Principal>) -> Arc<Registry>;
    /// Every registry, labelled, for metrics and readiness.
    fn registries(&self) -> Vec<(String, Arc<Registry>)>;
}

/// The source a request is served from: the plugin, or the registry (the
/// caller's, for [`ToolSource::Tenants`]).
pub(crate) enum Resolved<'a> {
    Plugin(&'a Plugin),
    Registry(Arc<Registry>),
}

impl ToolSource {
    /// What serves a request whose extensions are these.
    pub(crate) fn resolve(&self, extensions: &rmcp::model::Extensions) -> Resolved<'_> {
        let _ = extensions;
        match self {
            ToolSource::Plugin(plugin) => Resolved::Plugin(plugin),
            ToolSource::Registry(registry) => Resolved::Registry(Arc::clone(registry)),
            #[cfg(feature = "production")]
            ToolSource::Tenants(tenants) => Resolved::Registry(tenants.registry_for(principal_in(extensions))),
        }
    }

    /// What serves an HTTP request (its principal set by authorization).
    #[cfg(feature = "production")]
    pub(crate) fn resolve_parts(&self, parts: &axum::http::request::Parts) -> Resolved<'_> {
        let _ = parts;
        match self {
            ToolSource::Plugin(plugin) => Resolved::Plugin(plugin),
            ToolSource::Registry(registry) => Resolved::Registry(Arc::clone(registry)),
            #[cfg(feature = "production")]
            ToolSource::Tenants(tenants) => {
                Resolved::Registry(tenants.registry_for(parts.extensions.get::<crate::auth::Principal>()))
            }
        }
    }

    /// Every registry behind it, labelled (none for a plugin).
    #[cfg(feature = "http")]
    pub(crate) fn registries(&self) -> Vec<(String, Arc<Registry>)> {
        match self {
            ToolSource::Plugin(_) => Vec::new(),
            ToolSource::Registry(registry) => vec![(String::new(), Arc::clone(registry))],
            #[cfg(feature = "production")]
            ToolSource::Tenants(tenants) => tenants.registries(),
        }
    }
}

/// The principal in a message's extensions (the HTTP request's).
#[cfg(feature = "production")]
pub(crate) fn principal_in(extensions: &rmcp::model::Extensions) -> Option<&crate::auth::Principal> {
    extensions.get::<axum::http::request::Parts>()?.extensions.get::<crate::auth::Principal>()
}
