//! Who a request answers to, however it arrived: through rmcp's service
//! (stdio, sessions, every method) or answered on the HTTP connection's
//! own task (a well-formed 2026-07-28 `tools/call`, see `stateless_call.rs`).

use rmcp::model::{
    CallToolResponse, ClientCapabilities, ErrorCode, Extensions, ProtocolVersion, RequestId, RequestMetaObject,
    ServerJsonRpcMessage, ServerNotification, ServerResult,
};
use rmcp::service::{Peer, RequestContext, RoleServer};
use tokio_util::sync::CancellationToken;

/// Where what a call tells its client goes before the answer.
#[derive(Clone)]
pub(crate) enum Outlet {
    /// rmcp's peer of the session or request.
    Peer(Peer<RoleServer>),
    /// The stream of one HTTP request answered outside rmcp: its messages
    /// are sent as events before the answer.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    Stream(tokio::sync::mpsc::UnboundedSender<ServerJsonRpcMessage>),
    /// A session's call answered outside rmcp: its progress goes on its
    /// own stream, as rmcp routes a progress token to its request's
    /// stream; the rest (log lines, resource updates), and requests, go
    /// through the session's peer, as rmcp sends them.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    Session { stream: tokio::sync::mpsc::UnboundedSender<ServerJsonRpcMessage>, peer: Peer<RoleServer> },
}

impl Outlet {
    /// Send `notification` to the client.
    pub(crate) async fn notify(&self, notification: ServerNotification) -> Result<(), String> {
        match self {
            Outlet::Peer(peer) => peer.send_notification(notification).await.map_err(|e| e.to_string()),
            Outlet::Stream(stream) => stream
                .send(ServerJsonRpcMessage::notification(notification))
                .map_err(|_| "the client's stream has closed".to_owned()),
            Outlet::Session { stream, .. } if matches!(notification, ServerNotification::ProgressNotification(_)) => {
                stream
                    .send(ServerJsonRpcMessage::notification(notification))
                    .map_err(|_| "the client's stream has closed".to_owned())
            }
            Outlet::Session { peer, .. } => peer.send_notification(notification).await.map_err(|e| e.to_string()),
        }
    }

    /// The peer that requests to the client go through (none on a
    /// request's own stream: 2026-07-28 has no server-to-client requests).
    pub(crate) fn peer(&self) -> Option<&Peer<RoleServer>> {
        match self {
            Outlet::Peer(peer) | Outlet::Session { peer, .. } => Some(peer),
            Outlet::Stream(_) => None,
        }
    }
}

/// One request's caller: its id and `_meta`, the HTTP request's head (in
/// `extensions`), the protocol version and capabilities it speaks with,
/// its cancellation, and where what the call tells it goes.
pub(crate) struct Caller {
    pub(crate) id: RequestId,
    pub(crate) meta: RequestMetaObject,
    pub(crate) extensions: Extensions,
    pub(crate) version: Option<ProtocolVersion>,
    /// (Moved into the call's context as it is made: read them before.)
    pub(crate) capabilities: Option<ClientCapabilities>,
    pub(crate) ct: CancellationToken,
    pub(crate) outlet: Outlet,
}

impl From<RequestContext<RoleServer>> for Caller {
    fn from(context: RequestContext<RoleServer>) -> Caller {
        Caller {
            version: context.protocol_version(),
            capabilities: context.client_capabilities(),
            id: context.id,
            meta: context.meta,
            extensions: context.extensions,
            ct: context.ct,
            outlet: Outlet::Peer(context.peer),
        }
    }
}

/// Which revision's shape an answer takes: rmcp shapes a 2026-07-28 answer
/// one way and an answer in a session of an earlier version another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// 2026-07-28: cache hints filled in, a missing resource is invalid
    /// params.
    Current,
    /// A session's (2025-03-26 to 2025-11-25): no result type, structured
    /// output only as an object, no `input_required` result.
    Legacy,
}

/// The JSON-RPC answer, shaped as rmcp's service shapes one for a client
/// of this `shape`.
pub(crate) fn answer_message(
    answer: Result<CallToolResponse, rmcp::ErrorData>,
    id: RequestId,
    shape: Shape,
) -> ServerJsonRpcMessage {
    let answer = answer.and_then(|response| {
        let mut result = ServerResult::from(response);
        match shape {
            Shape::Current => result.fill_missing_cache_hints(),
            Shape::Legacy if matches!(result, ServerResult::InputRequiredResult(_)) => {
                return Err(rmcp::ErrorData::invalid_request(
                    "InputRequiredResult requires negotiated protocol version 2026-07-28 or newer",
                    None,
                ));
            }
            Shape::Legacy => {
                result.strip_result_type_for_legacy_peer();
                result.strip_non_object_output_for_legacy_peer();
            }
        }
        Ok(result)
    });
    match answer {
        Ok(result) => ServerJsonRpcMessage::response(result, id),
        Err(mut error) => {
            if shape == Shape::Current && error.code == ErrorCode::RESOURCE_NOT_FOUND {
                error.code = ErrorCode::INVALID_PARAMS;
            }
            ServerJsonRpcMessage::error(error, Some(id))
        }
    }
}
