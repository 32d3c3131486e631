//! The HTTP side of `production`: bearer tokens checked in front of
//! `/mcp`, a tool's scopes checked before its call reaches rmcp (so a
//! missing one is `403` naming it, for step-up), sessions bound to the
//! subject that opened them, and the metadata and metrics endpoints.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderValue, Request, Response, StatusCode, header};
use serde_json::{Value, json};

use super::{Front, json_response};
use crate::auth::{AuthFailure, Principal};

/// A refusal by authorization: `401` (no token, or not a valid one) or
/// `403` (a scope missing), with the `WWW-Authenticate` challenge.
fn refusal(front: &Front, failure: &AuthFailure) -> Response<Body> {
    let auth = front.auth.as_ref().expect("refusals come from an authenticator");
    if let Some(metrics) = &front.metrics {
        metrics.auth_refused(failure.label());
    }
    let (status, error) = match failure {
        AuthFailure::InsufficientScope(_) => (StatusCode::FORBIDDEN, "insufficient_scope"),
        AuthFailure::Missing => (StatusCode::UNAUTHORIZED, "invalid_request"),
        AuthFailure::Invalid(_) => (StatusCode::UNAUTHORIZED, "invalid_token"),
    };
    let mut response = json_response(status, &json!({"error": error, "error_description": failure.to_string()}));
    let challenge = auth.challenge(failure);
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// Let a request to `/mcp` in, with its [`Principal`] in its extensions
/// (where the MCP handler finds it), or refuse it. A request naming a
/// session another subject opened is told the session does not exist.
pub(crate) async fn authorize(front: &Front, mut request: Request<Body>) -> Result<Request<Body>, Box<Response<Body>>> {
    let Some(auth) = &front.auth else { return Ok(request) };
    let header = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let principal = auth.authenticate(header).await.map_err(|failure| Box::new(refusal(front, &failure)))?;
    if let Some(session) = request.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()) {
        let owners = front.owners.lock().unwrap_or_else(|e| e.into_inner());
        if owners.get(session).is_some_and(|owner| owner != &principal.key()) {
            let mut response = Response::new(Body::from("Not Found: no such session"));
            *response.status_mut() = StatusCode::NOT_FOUND;
            return Err(Box::new(response));
        }
    }
    // The token stays here: nothing after this reads the header, and the
    // plugins and remote servers behind never see it.
    request.headers_mut().remove(header::AUTHORIZATION);
    request.extensions_mut().insert(principal);
    Ok(request)
}

/// Record who opened `session`.
pub(crate) fn opened(front: &Front, session: String, subject: String) {
    front.owners.lock().unwrap_or_else(|e| e.into_inner()).insert(session, subject);
}

/// How many sessions `subject` has open, once those that ended are
/// forgotten (the sessions open are at most [`HttpLimits::sessions`], so
/// this is bounded).
///
/// [`HttpLimits::sessions`]: crate::HttpLimits::sessions
pub(crate) async fn sessions_of(front: &Front, subject: &str) -> usize {
    let live = front.sessions.ids().await;
    let mut owners = front.owners.lock().unwrap_or_else(|e| e.into_inner());
    owners.retain(|session, _| live.contains(session.as_str()));
    owners.values().filter(|owner| owner.as_str() == subject).count()
}

/// A `tools/call` of a tool whose scopes the caller does not all hold:
/// `403` with `insufficient_scope` naming them (the client may step up).
pub(crate) fn scope_refusal(
    front: &Front,
    parts: &axum::http::request::Parts,
    message: &Value,
) -> Option<Response<Body>> {
    if message.get("method").and_then(Value::as_str) != Some("tools/call") {
        return None;
    }
    scope_refusal_of(front, parts, message.pointer("/params/name").and_then(Value::as_str)?)
}

/// [`scope_refusal`] of a `tools/call` of the tool `name`.
pub(crate) fn scope_refusal_of(
    front: &Front,
    parts: &axum::http::request::Parts,
    name: &str,
) -> Option<Response<Body>> {
    let principal = parts.extensions.get::<Principal>()?;
    let crate::tool_source::Resolved::Registry(registry) = front.source.resolve_parts(parts) else { return None };
    let missing: Vec<String> = registry
        .with_tool(name, |tool| {
            tool.enabled.then(|| tool.missing_scopes(&principal.scopes).into_iter().map(str::to_owned).collect())
        })
        .flatten()?;
    (!missing.is_empty()).then(|| refusal(front, &AuthFailure::InsufficientScope(missing)))
}

/// `GET /.well-known/oauth-protected-resource[/path]`: RFC 9728's metadata.
pub(crate) async fn metadata(axum::extract::State(front): axum::extract::State<Arc<Front>>) -> Response<Body> {
    let auth = front.auth.as_ref().expect("the route exists with an authenticator");
    let mut response = json_response(StatusCode::OK, &auth.metadata());
    response.headers_mut().insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    response
}

/// `GET /metrics`: Prometheus' text format.
pub(crate) async fn metrics(axum::extract::State(front): axum::extract::State<Arc<Front>>) -> Response<Body> {
    let metrics = front.metrics.as_ref().expect("the route exists with metrics");
    let mut response = Response::new(Body::from(metrics.render(&front.source)));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    response
}
