//! A tool as a registry lists it: its namespaced name, where it comes
//! from, whether callers may use it and whether each call needs approval.

use toolhost_protocol::Tool;

/// The separator between a toolset id and a tool name in namespaced names:
/// `calc__add`. Double underscore, because it is accepted everywhere tool
/// names go: MCP (`[A-Za-z0-9_.-]`), OpenAI function calling
/// (`^[a-zA-Z0-9_-]{1,64}$`, no `.`) and Anthropic tool use; `.`, `/` and `:`
/// are refused by some of them. Toolset ids may not contain it.
pub const NAMESPACE_SEPARATOR: &str = "__";

/// A tool as the registry presents it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RegisteredTool {
    /// `<toolset>__<tool>`: the name callers use.
    pub name: String,
    /// The toolset's id.
    pub toolset: String,
    /// Where the toolset came from (`file.yaml#/toolsets/0`, or the plugin path).
    pub source: String,
    /// The tool as its plugin describes it (its own name).
    pub tool: Tool,
    /// Available to callers (enabled and not filtered out).
    pub enabled: bool,
    /// Why it is not available, when it is not.
    pub disabled_reason: Option<String>,
    /// A person must approve each call.
    pub requires_approval: bool,
    /// The scopes a caller must hold, all of them, to see and call it
    /// (`extensions.requiredScopes`); empty: any caller.
    pub required_scopes: Vec<String>,
}

impl RegisteredTool {
    /// A tool of the toolset `toolset`, available and needing no approval:
    /// named `<toolset>__<tool>`, from source `toolset`. (For approvers and
    /// tests outside a registry; a registry makes its own.)
    pub fn new(toolset: &str, tool: Tool) -> Self {
        RegisteredTool {
            name: format!("{toolset}{NAMESPACE_SEPARATOR}{}", tool.name),
            toolset: toolset.to_owned(),
            source: toolset.to_owned(),
            tool,
            enabled: true,
            disabled_reason: None,
            requires_approval: false,
            required_scopes: Vec::new(),
        }
    }

    /// Whether a caller holding `scopes` may see and call it: every
    /// required scope is held, or the caller's scopes are not known
    /// (`None`: a caller the embedding program did not authenticate).
    pub fn permits(&self, scopes: Option<&crate::Scopes>) -> bool {
        crate::context::permits(&self.required_scopes, scopes)
    }

    /// The required scopes a caller holding `scopes` lacks (what to ask
    /// for in a step-up authorization).
    pub fn missing_scopes<'a>(&'a self, scopes: &crate::Scopes) -> Vec<&'a str> {
        self.required_scopes.iter().filter(|s| !scopes.contains(s.as_str())).map(String::as_str).collect()
    }

    /// `AVAILABLE` when callers see it, `FILTERED` when configuration or a
    /// filter left it out (the tool-set service model's status).
    pub fn status(&self) -> crate::sync_events::ToolStatus {
        if self.enabled { crate::sync_events::ToolStatus::Available } else { crate::sync_events::ToolStatus::Filtered }
    }

    /// The tool as callers see it: its namespaced name, everything else as
    /// the plugin describes it.
    pub fn exposed(&self) -> Tool {
        Tool { name: self.name.clone(), ..self.tool.clone() }
    }

    /// The tool as a model sees it, under its namespaced name (borrowed:
    /// nothing is cloned).
    pub fn for_model(&self) -> crate::model::ModelTool<'_> {
        crate::model::ModelTool::named(&self.name, &self.tool)
    }
}
