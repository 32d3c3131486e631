//! What a registry's plugins offer besides tools, under one set of names:
//! prompts namespaced like tools (`<toolset>__<prompt>`); resources and
//! templates under their own URIs (a URI names a thing, and clients and
//! prompts quote it: it is not renamed), a read routed to the toolset that
//! lists the URI or has a template matching it.
//!
//! Lists are asked of the plugins when asked of the registry (they may
//! change at any time); a toolset whose list fails is left out of that
//! listing with a warning, never failing the others.

use toolhost_protocol::{
    CompleteResult, CompletionReference, GetPromptResult, JsonObject, Prompt, ReadResourceResult, Resource,
    ResourceTemplate,
};

use super::{LoadedToolset, Registry};
use crate::config::NAMESPACE_SEPARATOR;
use crate::context::CallContext;
use crate::error::Error;
use std::sync::Arc;

impl Registry {
    /// The toolsets that offer `which` to this caller (one that holds the
    /// toolset's required scopes).
    fn offering(&self, context: &CallContext, which: impl Fn(&crate::Offers) -> bool) -> Vec<Arc<LoadedToolset>> {
        self.read().values().filter(|t| which(&t.plugin.offers()) && t.permits(context)).cloned().collect()
    }

    /// The toolset `id`, if this caller may use it.
    fn toolset_for(&self, id: &str, context: &CallContext) -> Option<Arc<LoadedToolset>> {
        self.read().get(id).filter(|t| t.permits(context)).cloned()
    }

    /// Every toolset's prompts, their names namespaced (`<toolset>__<name>`).
    pub async fn list_prompts(&self, context: &CallContext) -> Vec<Prompt> {
        let mut all = Vec::new();
        for toolset in self.offering(context, |o| o.prompts) {
            match toolset.plugin.list_prompts(context).await {
                Ok(listed) => all.extend(listed.prompts.into_iter().map(|mut prompt| {
                    prompt.name = format!("{}{NAMESPACE_SEPARATOR}{}", toolset.config.id, prompt.name);
                    prompt
                })),
                Err(error) => tracing::warn!(toolset = %toolset.config.id, "its prompts are left out: {error}"),
            }
        }
        all
    }

    /// The prompt of that namespaced name, its arguments filled in.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        context: &CallContext,
    ) -> Result<GetPromptResult, Error> {
        let not_offered = || Error::NotOffered { what: format!("prompt `{name}`") };
        let (id, prompt) = name.split_once(NAMESPACE_SEPARATOR).ok_or_else(not_offered)?;
        let toolset = self.toolset_for(id, context).ok_or_else(not_offered)?;
        if !toolset.plugin.offers().prompts {
            return Err(not_offered());
        }
        toolset.plugin.get_prompt(prompt, arguments, context).await
    }

    /// Every toolset's resources.
    pub async fn list_resources(&self, context: &CallContext) -> Vec<Resource> {
        let mut all = Vec::new();
        for toolset in self.offering(context, |o| o.resources) {
            match toolset.plugin.list_resources(context).await {
                Ok(listed) => all.extend(listed.resources),
                Err(error) => tracing::warn!(toolset = %toolset.config.id, "its resources are left out: {error}"),
            }
        }
        all
    }

    /// Every toolset's resource templates.
    pub async fn list_resource_templates(&self, context: &CallContext) -> Vec<ResourceTemplate> {
        let mut all = Vec::new();
        for toolset in self.offering(context, |o| o.resource_templates) {
            match toolset.plugin.list_resource_templates(context).await {
                Ok(listed) => all.extend(listed.resource_templates),
                Err(error) => {
                    tracing::warn!(toolset = %toolset.config.id, "its resource templates are left out: {error}")
                }
            }
        }
        all
    }

    /// Read the resource `uri` from the toolset that lists it, or else the
    /// first (by id) with a template it matches.
    pub async fn read_resource(&self, uri: &str, context: &CallContext) -> Result<ReadResourceResult, Error> {
        for toolset in self.offering(context, |o| o.resources) {
            if let Ok(listed) = toolset.plugin.list_resources(context).await
                && listed.resources.iter().any(|r| r.uri == uri)
            {
                return toolset.plugin.read_resource(uri, context).await;
            }
        }
        for toolset in self.offering(context, |o| o.resource_templates) {
            if let Ok(listed) = toolset.plugin.list_resource_templates(context).await
                && listed
                    .resource_templates
                    .iter()
                    .any(|t| toolhost_protocol::match_uri_template(&t.uri_template, uri).is_some())
            {
                return toolset.plugin.read_resource(uri, context).await;
            }
        }
        Err(Error::NotOffered { what: format!("resource `{uri}`") })
    }

    /// Completions for an argument of a prompt (namespaced name) or a
    /// variable of a resource template.
    pub async fn complete(
        &self,
        reference: &CompletionReference,
        argument: (&str, &str),
        arguments: Option<JsonObject>,
        context: &CallContext,
    ) -> Result<CompleteResult, Error> {
        match reference {
            CompletionReference::Prompt { name } => {
                let Some((id, prompt)) = name.split_once(NAMESPACE_SEPARATOR) else {
                    return Ok(CompleteResult::default());
                };
                let Some(toolset) = self.toolset_for(id, context) else { return Ok(CompleteResult::default()) };
                let reference = CompletionReference::Prompt { name: prompt.to_owned() };
                toolset.plugin.complete(&reference, argument, arguments, context).await
            }
            CompletionReference::Resource { uri } => {
                for toolset in self.offering(context, |o| o.resource_templates && o.completions) {
                    if let Ok(listed) = toolset.plugin.list_resource_templates(context).await
                        && listed.resource_templates.iter().any(|t| &t.uri_template == uri)
                    {
                        return toolset.plugin.complete(reference, argument, arguments, context).await;
                    }
                }
                Ok(CompleteResult::default())
            }
        }
    }

    /// Tell every plugin that listens that the client's roots changed.
    pub async fn roots_list_changed(&self, context: &CallContext) {
        let toolsets: Vec<Arc<LoadedToolset>> = self.read().values().cloned().collect();
        for toolset in toolsets {
            if let Err(error) = toolset.plugin.roots_list_changed(context).await {
                tracing::warn!(toolset = %toolset.config.id, "could not be told the roots changed: {error}");
            }
        }
    }
}
