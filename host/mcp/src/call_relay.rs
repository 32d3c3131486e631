//! Plugins that talk back, over MCP: a [`CallClient`] for one `tools/call`
//! that relays what the plugin asks (elicitation, sampling, roots) and
//! tells (progress, list changes, resource updates) to the client that
//! made the call, as the client's capabilities and protocol allow.
//!
//! What reaches the client was checked by the host (fields of the
//! protocol only, strings redacted, the call's own progress token); here it
//! is parsed into rmcp's types, which refuse what the protocol does not
//! allow. A client without the capability, or speaking 2026-07-28 (which
//! forbids server-to-client requests during a call), gets no request: the
//! plugin gets the refusal, saying why.

use rmcp::model::{
    ClientCapabilities, CustomNotification, ElicitRequestParams, Notification, ProgressNotificationParam,
    ProtocolVersion, ResourceUpdatedNotificationParam, ServerNotification,
};
use serde_json::Value;
use toolhost::protocol::JsonObject;
use toolhost::{BoxFuture, CallClient, ClientNotice, ClientRequest, LogLevel};

use crate::caller::Outlet;

/// The client of one `tools/call`.
pub(crate) struct PeerClient {
    pub(crate) outlet: Outlet,
    pub(crate) version: Option<ProtocolVersion>,
    pub(crate) capabilities: Option<ClientCapabilities>,
    /// The resource URIs the session subscribed to.
    pub(crate) subscriptions: std::sync::Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>,
}

impl PeerClient {
    /// Why `request` cannot be made of this client, if it cannot.
    fn cannot(&self, request: ClientRequest) -> Option<String> {
        if self.version.as_ref().is_some_and(|v| *v >= ProtocolVersion::V_2026_07_28) {
            return Some(format!(
                "the client speaks MCP {}, which has no server-to-client requests during a call",
                self.version.as_ref().map_or_else(String::new, |v| v.to_string())
            ));
        }
        let capabilities = self.capabilities.as_ref();
        let declared = match request {
            ClientRequest::Elicitation => capabilities.is_some_and(|c| c.elicitation.is_some()),
            #[allow(deprecated)]
            ClientRequest::Sampling => capabilities.is_some_and(|c| c.sampling.is_some()),
            #[allow(deprecated)]
            ClientRequest::Roots => capabilities.is_some_and(|c| c.roots.is_some()),
            _ => false,
        };
        (!declared).then(|| format!("the client did not declare the capability for {request}"))
    }

    async fn ask(&self, request: ClientRequest, params: JsonObject) -> Result<Value, String> {
        if let Some(why) = self.cannot(request) {
            return Err(why);
        }
        let Some(peer) = self.outlet.peer() else {
            return Err("the client cannot be asked anything during this call".to_owned());
        };
        let params = Value::Object(params);
        let refused = |e: serde_json::Error| format!("the request is not one the protocol allows ({e})");
        let failed = |e: rmcp::service::ServiceError| format!("the client answered with an error ({e})");
        let answer = match request {
            ClientRequest::Elicitation => {
                let params: ElicitRequestParams = serde_json::from_value(params).map_err(refused)?;
                serde_json::to_value(peer.create_elicitation(params).await.map_err(failed)?)
            }
            #[allow(deprecated)]
            ClientRequest::Sampling => {
                let params = serde_json::from_value(params).map_err(refused)?;
                serde_json::to_value(peer.create_message(params).await.map_err(failed)?)
            }
            #[allow(deprecated)]
            ClientRequest::Roots => serde_json::to_value(peer.list_roots().await.map_err(failed)?),
            other => return Err(format!("{other} is not relayed")),
        };
        answer.map_err(|e| format!("the client's answer cannot be encoded ({e})"))
    }

    async fn tell(&self, notice: ClientNotice) {
        let notification = match notice {
            ClientNotice::Progress(params) => {
                match serde_json::from_value::<ProgressNotificationParam>(params.into()) {
                    Ok(params) => ServerNotification::ProgressNotification(Notification::new(params)),
                    Err(e) => {
                        tracing::debug!("a plugin's progress notice was dropped: {e}");
                        return;
                    }
                }
            }
            ClientNotice::PromptListChanged => ServerNotification::PromptListChangedNotification(Default::default()),
            ClientNotice::ResourceListChanged => {
                ServerNotification::ResourceListChangedNotification(Default::default())
            }
            ClientNotice::ResourceUpdated(params) => {
                // Only for a resource the client subscribed to.
                let uri = params.get("uri").and_then(Value::as_str).unwrap_or_default();
                if !self.subscriptions.lock().unwrap_or_else(|e| e.into_inner()).contains(uri) {
                    return;
                }
                match serde_json::from_value::<ResourceUpdatedNotificationParam>(params.into()) {
                    Ok(params) => ServerNotification::ResourceUpdatedNotification(Notification::new(params)),
                    Err(e) => {
                        tracing::debug!("a plugin's resource update was dropped: {e}");
                        return;
                    }
                }
            }
            ClientNotice::ElicitationComplete(params) => ServerNotification::CustomNotification(
                CustomNotification::new("notifications/elicitation/complete", Some(params.into())),
            ),
            other => {
                tracing::debug!(method = other.method(), "a plugin's notice is not relayed");
                return;
            }
        };
        if let Err(e) = self.outlet.notify(notification).await {
            tracing::debug!("a plugin's notice could not be sent: {e}");
        }
    }
}

impl CallClient for PeerClient {
    fn request(&self, request: ClientRequest, params: JsonObject) -> BoxFuture<'_, Result<Value, String>> {
        Box::pin(self.ask(request, params))
    }

    fn notify(&self, notice: ClientNotice) -> BoxFuture<'_, ()> {
        Box::pin(self.tell(notice))
    }
}

/// The MCP logging level of a plugin's log line.
#[allow(deprecated)]
pub(crate) fn mcp_level(level: LogLevel) -> rmcp::model::LoggingLevel {
    use rmcp::model::LoggingLevel as L;
    match level {
        LogLevel::Error => L::Error,
        LogLevel::Warn => L::Warning,
        LogLevel::Info => L::Info,
        _ => L::Debug,
    }
}
