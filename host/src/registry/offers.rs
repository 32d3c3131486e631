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
    fn offering(&self, which: impl Fn(&crate::Offers) -> bool) -> Vec<Arc<LoadedToolset>> {
        self.read().values().filter(|t| which(&t.plugin.offers())).cloned().collect()
    }

    /// Every toolset's prompts, their names namespaced (`<toolset>__<name>`).
    pub async fn list_prompts(&self, context: &CallContext) -> Vec<Prompt> {
        let mut all = Vec::new();
        for toolset in self.offering(|o| o.prompts) {
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
        let toolset = self.read().get(id).cloned().ok_or_else(not_offered)?;
        if !toolset.plugin.offers().prompts {
            return Err(not_offered());
        }
        toolset.plugin.get_prompt(prompt, arguments, context).await
    }

    /// Every toolset's resources.
    pub async fn list_resources(&self, context: &CallContext) -> Vec<Resource> {
        let mut all = Vec::new();
        for toolset in self.offering(|o| o.resources) {
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
        for toolset in self.offering(|o| o.resource_templates) {
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
        for toolset in self.offering(|o| o.resources) {
            if let Ok(listed) = toolset.plugin.list_resources(context).await
                && listed.resources.iter().any(|r| r.uri == uri)
            {
                return toolset.plugin.read_resource(uri, context).await;
            }
        }
        for toolset in self.offering(|o| o.resource_templates) {
            if let Ok(listed) = toolset.plugin.list_resource_templates(context).await
                && listed.resource_templates.iter().any(|t| template_matches(&t.uri_template, uri))
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
                let Some(toolset) = self.read().get(id).cloned() else { return Ok(CompleteResult::default()) };
                let reference = CompletionReference::Prompt { name: prompt.to_owned() };
                toolset.plugin.complete(&reference, argument, arguments, context).await
            }
            CompletionReference::Resource { uri } => {
                for toolset in self.offering(|o| o.resource_templates && o.completions) {
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

/// Whether `uri` is one of the URIs of an RFC 6570 template: literal text
/// matched exactly; `{var}` (and `{var,other}`) one or more characters
/// other than `/`, `?` and `#`; `{+var}`, `{#var}` any; `{/var}`, `{?var}`
/// and `{&var}` an optional path segment or query part.
pub(crate) fn template_matches(template: &str, uri: &str) -> bool {
    enum Part<'a> {
        Literal(&'a str),
        Var { reserved: bool, optional: bool },
    }
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        if open > 0 {
            parts.push(Part::Literal(&rest[..open]));
        }
        let Some(close) = rest[open..].find('}') else { return false };
        let expression = &rest[open + 1..open + close];
        let operator = expression.chars().next();
        parts.push(match operator {
            Some('+' | '#') => Part::Var { reserved: true, optional: false },
            Some('/' | '?' | '&' | ';' | '.') => Part::Var { reserved: true, optional: true },
            _ => Part::Var { reserved: false, optional: false },
        });
        rest = &rest[open + close + 1..];
    }
    if !rest.is_empty() {
        parts.push(Part::Literal(rest));
    }
    fn matches(parts: &[Part<'_>], uri: &str, budget: &mut u32) -> bool {
        *budget = budget.saturating_sub(1);
        if *budget == 0 {
            return false;
        }
        match parts.split_first() {
            None => uri.is_empty(),
            Some((Part::Literal(text), rest)) => uri.strip_prefix(text).is_some_and(|uri| matches(rest, uri, budget)),
            Some((Part::Var { reserved, optional }, rest)) => {
                let min = usize::from(!optional);
                let ends: Vec<usize> = uri
                    .char_indices()
                    .take_while(|&(_, c)| *reserved || !matches!(c, '/' | '?' | '#'))
                    .map(|(i, c)| i + c.len_utf8())
                    .collect();
                let candidates = std::iter::once(0).chain(ends).filter(|&end| end >= min);
                candidates.rev().any(|end| matches(rest, &uri[end..], budget))
            }
        }
    }
    // Backtracking is bounded: a pathological template is no match.
    let mut budget = 10_000;
    matches(&parts, uri, &mut budget)
}

#[cfg(test)]
mod tests {
    use super::template_matches;

    #[test]
    fn templates_match_their_uris_only() {
        assert!(template_matches("memo://{id}", "memo://seven"));
        assert!(!template_matches("memo://{id}", "memo://"));
        assert!(!template_matches("memo://{id}", "memo://a/b"));
        assert!(template_matches("test://template/{id}/data", "test://template/42/data"));
        assert!(!template_matches("test://template/{id}/data", "test://template/42/other"));
        assert!(template_matches("file:///{+path}", "file:///a/b/c.txt"));
        assert!(template_matches("api://items{?page}", "api://items"));
        assert!(template_matches("a://{x}{y}", "a://xy"));
        assert!(!template_matches("a://{x", "a://x"));
        assert!(template_matches("exact://thing", "exact://thing"));
        assert!(!template_matches("exact://thing", "exact://thing2"));
    }
}
