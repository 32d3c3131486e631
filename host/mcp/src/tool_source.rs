//! What an MCP server exposes ([`ToolSource`]): one plugin, a registry,
//! or a registry per caller; and which of them serves a request.

use std::sync::Arc;

use serde_json::Value;
use toolhost::protocol::{
    CallToolResult, CompleteResult, CompletionReference, GetPromptResult, JsonObject, Prompt, ReadResourceResult,
    Resource, ResourceTemplate, Tool,
};
use toolhost::{Approver, CallContext, Error, Plugin, Registry};

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

/// What a plugin and a registry serve alike, each handler's one call:
/// the only place that tells them apart.
impl Resolved<'_> {
    /// Whether `name` is one of its tools (to anyone).
    #[cfg(feature = "production")]
    pub(crate) fn has_tool(&self, name: &str) -> bool {
        match self {
            Resolved::Plugin(plugin) => plugin.tool(name).is_some(),
            Resolved::Registry(registry) => registry.has_tool(name),
        }
    }

    /// The toolset a tool's name belongs to: the plugin's name, or the
    /// namespace before the separator.
    #[cfg(feature = "production")]
    pub(crate) fn toolset_of(&self, name: &str) -> String {
        match self {
            Resolved::Plugin(plugin) => plugin.name().to_owned(),
            Resolved::Registry(_) => name.split_once(toolhost::NAMESPACE_SEPARATOR).map_or("", |p| p.0).to_owned(),
        }
    }

    /// The tools a caller holding `scopes` may see (`None`: every tool),
    /// sorted by name.
    pub(crate) fn tools(&self, scopes: Option<&toolhost::Scopes>) -> Vec<Tool> {
        match self {
            Resolved::Plugin(plugin) => {
                let mut tools = plugin.tools().to_vec();
                tools.sort_by(|a, b| a.name.cmp(&b.name));
                tools
            }
            Resolved::Registry(registry) => {
                registry.tools().iter().filter(|t| t.permits(scopes)).map(|t| t.exposed()).collect()
            }
        }
    }

    /// Call a tool (a plugin's tools need no approval of the server's: its
    /// caller approves them).
    pub(crate) async fn call(
        &self,
        name: &str,
        arguments: Value,
        approver: &dyn Approver,
        context: &CallContext,
    ) -> Result<CallToolResult, Error> {
        match self {
            Resolved::Plugin(plugin) => plugin.call_tool_with(name, arguments, context).await,
            Resolved::Registry(registry) => registry.call_with(name, arguments, approver, context).await,
        }
    }

    pub(crate) async fn list_prompts(&self, call: &CallContext) -> Result<Vec<Prompt>, Error> {
        match self {
            Resolved::Plugin(plugin) => Ok(plugin.list_prompts(call).await?.prompts),
            Resolved::Registry(registry) => Ok(registry.list_prompts(call).await),
        }
    }

    pub(crate) async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        call: &CallContext,
    ) -> Result<GetPromptResult, Error> {
        match self {
            Resolved::Plugin(plugin) => plugin.get_prompt(name, arguments, call).await,
            Resolved::Registry(registry) => registry.get_prompt(name, arguments, call).await,
        }
    }

    pub(crate) async fn list_resources(&self, call: &CallContext) -> Result<Vec<Resource>, Error> {
        match self {
            Resolved::Plugin(plugin) => Ok(plugin.list_resources(call).await?.resources),
            Resolved::Registry(registry) => Ok(registry.list_resources(call).await),
        }
    }

    pub(crate) async fn list_resource_templates(&self, call: &CallContext) -> Result<Vec<ResourceTemplate>, Error> {
        match self {
            Resolved::Plugin(plugin) => Ok(plugin.list_resource_templates(call).await?.resource_templates),
            Resolved::Registry(registry) => Ok(registry.list_resource_templates(call).await),
        }
    }

    pub(crate) async fn read_resource(&self, uri: &str, call: &CallContext) -> Result<ReadResourceResult, Error> {
        match self {
            Resolved::Plugin(plugin) => plugin.read_resource(uri, call).await,
            Resolved::Registry(registry) => registry.read_resource(uri, call).await,
        }
    }

    pub(crate) async fn complete(
        &self,
        reference: &CompletionReference,
        argument: (&str, &str),
        arguments: Option<JsonObject>,
        call: &CallContext,
    ) -> Result<CompleteResult, Error> {
        match self {
            Resolved::Plugin(plugin) => plugin.complete(reference, argument, arguments, call).await,
            Resolved::Registry(registry) => registry.complete(reference, argument, arguments, call).await,
        }
    }

    /// Tell it the client's roots changed (a plugin that fails to hear it
    /// is logged: nobody asked).
    pub(crate) async fn roots_list_changed(&self, call: &CallContext) {
        match self {
            Resolved::Plugin(plugin) => {
                if let Err(error) = plugin.roots_list_changed(call).await {
                    tracing::warn!("the plugin could not be told the roots changed: {error}");
                }
            }
            Resolved::Registry(registry) => registry.roots_list_changed(call).await,
        }
    }
}
