//! Plugins that talk back: what a plugin asks of, or tells, the client a
//! call is made for (MCP's client features: elicitation, sampling, roots,
//! progress, list changes), relayed by the embedder.
//!
//! A plugin reaches the client through host functions (hyper-mcp's
//! `extism:host/user` functions for Extism plugins). toolhost checks and
//! bounds what the plugin sends, then hands it to the [`CallClient`] of the
//! call ([`CallContext::with_client`](crate::CallContext::with_client));
//! `toolhost serve` supplies one that speaks to the MCP client of the
//! request. A call without one gets a clear refusal in the shape the plugin
//! expects (a declined elicitation, a sampling result whose `stopReason`
//! is `error`, an empty list of roots), never a hang: every wait is within
//! the call's deadline.

use serde_json::Value;
use toolhost_protocol::JsonObject;

use crate::secrets::BoxFuture;

/// A request a plugin makes of the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ClientRequest {
    /// `elicitation/create`: ask the user (a form, or a URL to visit).
    Elicitation,
    /// `sampling/createMessage`: ask the client's model.
    Sampling,
    /// `roots/list`: the client's roots.
    Roots,
}

impl ClientRequest {
    /// The MCP method (`elicitation/create`, `sampling/createMessage`,
    /// `roots/list`).
    pub fn method(self) -> &'static str {
        match self {
            ClientRequest::Elicitation => "elicitation/create",
            ClientRequest::Sampling => "sampling/createMessage",
            ClientRequest::Roots => "roots/list",
        }
    }
}

impl std::fmt::Display for ClientRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.method())
    }
}

/// A notification a plugin sends the client. Its parameters are the
/// protocol's, checked and rebuilt by toolhost: only the fields the
/// protocol defines, strings redacted, a progress token the call's own.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ClientNotice {
    /// `notifications/progress` (`progressToken`, `progress`, `total`,
    /// `message`).
    Progress(JsonObject),
    /// `notifications/prompts/list_changed`.
    PromptListChanged,
    /// `notifications/resources/list_changed`.
    ResourceListChanged,
    /// `notifications/resources/updated` (`uri`).
    ResourceUpdated(JsonObject),
    /// `notifications/elicitation/complete` (`elicitationId`): a URL
    /// elicitation finished.
    ElicitationComplete(JsonObject),
}

impl ClientNotice {
    /// The MCP method.
    pub fn method(&self) -> &'static str {
        match self {
            ClientNotice::Progress(_) => "notifications/progress",
            ClientNotice::PromptListChanged => "notifications/prompts/list_changed",
            ClientNotice::ResourceListChanged => "notifications/resources/list_changed",
            ClientNotice::ResourceUpdated(_) => "notifications/resources/updated",
            ClientNotice::ElicitationComplete(_) => "notifications/elicitation/complete",
        }
    }

    /// Its parameters (empty for a list change).
    pub fn params(&self) -> JsonObject {
        match self {
            ClientNotice::Progress(p) | ClientNotice::ResourceUpdated(p) | ClientNotice::ElicitationComplete(p) => {
                p.clone()
            }
            ClientNotice::PromptListChanged | ClientNotice::ResourceListChanged => JsonObject::new(),
        }
    }
}

/// The client a call is made for, as a plugin may reach it. Supplied per
/// call by the embedder ([`CallContext::with_client`](crate::CallContext::with_client)).
///
/// What arrives here is the plugin's, checked: a request's parameters are
/// a JSON object whose strings were redacted of every secret the plugin
/// holds; whatever the client answers goes back to the plugin as it is.
/// Both run within the call's deadline: a client that never answers is
/// stopped with the call.
pub trait CallClient: Send + Sync {
    /// Make `request` of the client with `params`: the client's result
    /// (the protocol's result object), or why it could not be had (the
    /// plugin then gets a refusal in the request's shape, saying so).
    fn request(&self, request: ClientRequest, params: JsonObject) -> BoxFuture<'_, Result<Value, String>>;

    /// Send the client `notice`. Fire and forget: a notice that cannot be
    /// delivered is dropped.
    fn notify(&self, notice: ClientNotice) -> BoxFuture<'_, ()>;
}
