//! Approval: a person (or a policy engine) decides whether a tool may run.
//!
//! Which tools need approval is configuration ([`ToolApprovals`](crate::ToolApprovals), a
//! toolset's `requiresApproval`); who decides is the embedding program's
//! [`Approver`]. Approval is asked after the arguments are validated, so no
//! one is asked about a call that would be refused anyway, and a denial is
//! a tool result saying so: the plugin does not run.

use serde_json::Value;
use toolhost_protocol::{CallToolResult, JsonObject, ToolAnnotations};

use crate::secrets::BoxFuture;
use crate::tool::RegisteredTool;

/// What an approval hook sees.
#[derive(Debug)]
pub struct ApprovalRequest<'a> {
    /// The tool (namespaced name, annotations, ...).
    pub tool: &'a RegisteredTool,
    /// The arguments, already validated against the tool's schema.
    pub arguments: &'a Value,
}

impl ApprovalRequest<'_> {
    /// The tool's behaviour hints, if it declares any.
    pub fn annotations(&self) -> Option<&ToolAnnotations> {
        self.tool.tool.annotations.as_ref()
    }
}

/// The answer of an approval hook.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Approval {
    /// Run the tool.
    Approved,
    /// Do not run it; the reason is shown to the caller.
    Denied(String),
}

/// Asks someone (a person, a policy engine) whether a tool that requires
/// approval may run. Supplied by the embedding runtime.
pub trait Approver: Send + Sync {
    /// Decide on one call.
    fn approve<'a>(&'a self, request: ApprovalRequest<'a>) -> BoxFuture<'a, Approval>;
}

/// Approves everything (the CLI's `--yes`).
#[derive(Debug, Clone, Copy, Default)]
pub struct ApproveAll;

impl Approver for ApproveAll {
    fn approve<'a>(&'a self, _request: ApprovalRequest<'a>) -> BoxFuture<'a, Approval> {
        Box::pin(async { Approval::Approved })
    }
}

/// Denies everything, with a reason.
#[derive(Debug, Clone)]
pub struct DenyAll(pub String);

impl Approver for DenyAll {
    fn approve<'a>(&'a self, _request: ApprovalRequest<'a>) -> BoxFuture<'a, Approval> {
        let reason = self.0.clone();
        Box::pin(async move { Approval::Denied(reason) })
    }
}

/// Ask `approver` about a call of `tool` with these (validated) arguments:
/// `None` to go on, or the `isError` result that says it was not approved.
pub(crate) async fn ask(
    approver: &dyn Approver,
    tool: &RegisteredTool,
    arguments: &JsonObject,
) -> Option<CallToolResult> {
    let arguments = Value::Object(arguments.clone());
    match approver.approve(ApprovalRequest { tool, arguments: &arguments }).await {
        Approval::Approved => None,
        Approval::Denied(reason) => {
            tracing::info!(tool = %tool.name, "call not approved: {reason}");
            Some(CallToolResult::error(format!("the call to `{}` was not approved: {reason}", tool.name)))
        }
    }
}
