//! The `/v1` REST API: tool sets, their tools and their events, each
//! request authenticated and scoped to its token's workspace.
//!
//! Errors are JSON, `{"error": {"code", "status", "message", "details"}}`,
//! with a JSON pointer into the request body for each problem of a body
//! (`400`); an id not in the caller's workspace is `404` (whether it exists
//! elsewhere is not told); an update naming a version that is no longer
//! current, or a name already taken, is `409`.

use std::sync::OnceLock;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::actor::Actor;
use crate::model::{ProfileType, ToolSetSpec, event_json};
use crate::store::{StoreError, ToolRow, ToolSetRow};
use crate::workspaces::{Held, kind_of};
use crate::{Service, new_id, now_rfc3339};

/// The largest request body read (bytes).
const MAX_BODY: usize = 1024 * 1024;
/// The default and largest page.
const PAGE: i64 = 100;
const MAX_PAGE: i64 = 1000;

pub(crate) fn routes(service: Service) -> Router {
    use axum::routing::get;
    Router::new()
        .route("/v1/tool_sets", get(list_tool_sets).post(create_tool_set))
        .route("/v1/tool_sets/{id}", get(get_tool_set).put(update_tool_set).delete(delete_tool_set))
        .route("/v1/tool_sets/{id}/events", get(list_events))
        .route("/v1/tool_sets/{id}/tools", get(list_tools).post(create_tool))
        .route("/v1/tool_sets/{id}/tools/{tool}", get(get_tool).put(update_tool).delete(delete_tool))
        .with_state(service)
}

/// A refusal: status, message, and the problems of a body by pointer.
#[derive(Debug)]
pub(crate) struct Refusal {
    status: StatusCode,
    message: String,
    details: Vec<(String, String)>,
    challenge: Option<String>,
    /// When a request over a rate could pass.
    retry_after: Option<std::time::Duration>,
}

impl Refusal {
    fn new(status: StatusCode, message: impl Into<String>) -> Refusal {
        Refusal { status, message: message.into(), details: Vec::new(), challenge: None, retry_after: None }
    }

    fn invalid(details: Vec<(String, String)>) -> Refusal {
        let message = match details.as_slice() {
            [(pointer, message)] => format!("{}: {message}", if pointer.is_empty() { "/" } else { pointer }),
            _ if details.len() >= MAX_PROBLEMS => format!("the body has {MAX_PROBLEMS} problems or more"),
            _ => format!("the body has {} problems", details.len()),
        };
        Refusal { status: StatusCode::BAD_REQUEST, message, details, challenge: None, retry_after: None }
    }

    fn not_found(what: &str) -> Refusal {
        Refusal::new(StatusCode::NOT_FOUND, format!("no {what} of that id in this workspace"))
    }
}

fn status_name(status: StatusCode) -> &'static str {
    match status {
        StatusCode::BAD_REQUEST => "INVALID_ARGUMENT",
        StatusCode::UNAUTHORIZED => "UNAUTHENTICATED",
        StatusCode::FORBIDDEN => "PERMISSION_DENIED",
        StatusCode::NOT_FOUND => "NOT_FOUND",
        StatusCode::CONFLICT => "ABORTED",
        StatusCode::PAYLOAD_TOO_LARGE | StatusCode::TOO_MANY_REQUESTS => "RESOURCE_EXHAUSTED",
        _ => "INTERNAL",
    }
}

impl axum::response::IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let details: Vec<Value> =
            self.details.iter().map(|(pointer, message)| json!({"pointer": pointer, "message": message})).collect();
        let body = json!({"error": {
            "code": self.status.as_u16(),
            "status": status_name(self.status),
            "message": self.message,
            "details": details,
        }});
        let mut response = json_response(self.status, &body);
        if let Some(challenge) = self.challenge.and_then(|c| HeaderValue::from_str(&c).ok()) {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, challenge);
        }
        if let Some(wait) = self.retry_after {
            // Whole seconds, rounded up (RFC 9110).
            let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
        }
        response
    }
}

impl From<StoreError> for Refusal {
    fn from(error: StoreError) -> Refusal {
        match error {
            StoreError::NotFound => Refusal::not_found("resource"),
            StoreError::Conflict(message) => Refusal::new(StatusCode::CONFLICT, message),
            StoreError::Quota(message) => Refusal::new(StatusCode::TOO_MANY_REQUESTS, message),
            other => {
                tracing::error!("the store failed: {other}");
                Refusal::new(StatusCode::INTERNAL_SERVER_ERROR, "the store failed; the change was not made")
            }
        }
    }
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn with_etag(mut response: Response, version: i64) -> Response {
    if let Ok(value) = HeaderValue::from_str(&format!("\"{version}\"")) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response
}

type Answer = Result<Response, Refusal>;

/// The caller, or `401`/`403`.
async fn actor(service: &Service, headers: &HeaderMap) -> Result<Actor, Refusal> {
    let authorization = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let principal = service.auth.authenticate(authorization).await.map_err(|failure| {
        let status = match failure {
            toolhost_mcp::auth::AuthFailure::InsufficientScope(_) => StatusCode::FORBIDDEN,
            _ => StatusCode::UNAUTHORIZED,
        };
        Refusal {
            status,
            message: failure.to_string(),
            details: Vec::new(),
            challenge: Some(service.auth.challenge(&failure)),
            retry_after: None,
        }
    })?;
    let actor = Actor::of(&principal).map_err(|message| Refusal::new(StatusCode::FORBIDDEN, message))?;
    if let Some(limiter) = &service.limiter
        && let Err(limited) = limiter.admit(&actor.workspace_id, None)
    {
        let wait = limited.retry_after.unwrap_or_default();
        let per_second = service.settings.per_workspace.map(|rate| rate.per_second).unwrap_or_default();
        let mut refusal = Refusal::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "rate limit: this workspace is limited to {per_second} requests/s (serve.service.perWorkspace); retry in {} ms",
                wait.as_millis().max(1)
            ),
        );
        refusal.retry_after = limited.retry_after;
        return Err(refusal);
    }
    Ok(actor)
}

/// The version an update expects: `If-Match`, else the body's
/// `metadata.resourceVersion`, else none (the last writer wins).
fn expected_version(headers: &HeaderMap, body: &Value) -> Result<Option<i64>, Refusal> {
    let given = match headers.get(header::IF_MATCH) {
        Some(value) => {
            let text = value.to_str().unwrap_or("").trim();
            if text == "*" {
                return Ok(None);
            }
            Some(("If-Match", text.trim_start_matches("W/").trim_matches('"').to_owned()))
        }
        None => body
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .map(|v| ("metadata.resourceVersion", v.to_owned())),
    };
    match given {
        None => Ok(None),
        Some((from, text)) => text
            .parse::<i64>()
            .map(Some)
            .map_err(|_| Refusal::new(StatusCode::BAD_REQUEST, format!("{from} `{text}` is not a resource version"))),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PageQuery {
    page_size: Option<i64>,
    page_token: Option<String>,
}

impl PageQuery {
    fn limits(&self) -> Result<(String, i64), Refusal> {
        let size = self.page_size.unwrap_or(PAGE);
        if !(1..=MAX_PAGE).contains(&size) {
            return Err(Refusal::new(StatusCode::BAD_REQUEST, format!("pageSize must be 1 to {MAX_PAGE}")));
        }
        Ok((self.page_token.clone().unwrap_or_default(), size))
    }
}

fn next_token<T>(items: &[T], size: i64, id: impl Fn(&T) -> &str) -> Value {
    match items.last() {
        Some(last) if items.len() as i64 == size => Value::from(id(last)),
        _ => Value::Null,
    }
}

// ---- bodies -------------------------------------------------------------

fn validator(definition: &str) -> jsonschema::Validator {
    let mut schema: Value = serde_json::from_str(include_str!("../schema/toolset-service.schema.json"))
        .expect("the shipped schema is JSON");
    schema["$ref"] = Value::from(format!("#/$defs/{definition}"));
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(&schema)
        .expect("the shipped schema compiles")
}

/// The body as JSON, checked against the model `definition`. Read only
/// here, after the caller is known: a request without a valid token is
/// refused before any of its body is read.
async fn body_of(body: Body, definition: &str) -> Result<Value, Refusal> {
    let too_large = || Refusal::new(StatusCode::PAYLOAD_TOO_LARGE, format!("the body is larger than {MAX_BODY} bytes"));
    // A body announced too long is refused before it is asked for.
    if axum::body::HttpBody::size_hint(&body).lower() > MAX_BODY as u64 {
        return Err(too_large());
    }
    let bytes = axum::body::to_bytes(body, MAX_BODY).await.map_err(|error| {
        let too_long = std::iter::successors(Some(&error as &(dyn std::error::Error + 'static)), |e| e.source())
            .any(|e| e.is::<http_body_util::LengthLimitError>());
        if too_long {
            too_large()
        } else {
            Refusal::new(StatusCode::BAD_REQUEST, format!("the body could not be read: {error}"))
        }
    })?;
    static TOOL_SET: OnceLock<jsonschema::Validator> = OnceLock::new();
    static TOOL: OnceLock<jsonschema::Validator> = OnceLock::new();
    let body: Value = serde_json::from_slice(&bytes)
        .map_err(|e| Refusal::invalid(vec![(String::new(), format!("the body is not JSON: {e}"))]))?;
    let validator = match definition {
        "ToolSet" => TOOL_SET.get_or_init(|| validator("ToolSet")),
        _ => TOOL.get_or_init(|| validator("Tool")),
    };
    let mut problems: Vec<(String, String)> = validator
        .iter_errors(&body)
        .take(MAX_PROBLEMS)
        .map(|e| (e.instance_path().to_string(), cut(e.to_string())))
        .collect();
    // No string of a body may reach into the host's environment or
    // secrets: a tenant's `${env:...}` would put the host's variables in
    // requests to the tenant's server.
    references(&body, &mut String::new(), &mut problems);
    problems.sort();
    problems.dedup();
    if problems.is_empty() { Ok(body) } else { Err(Refusal::invalid(problems)) }
}

/// The most problems a refusal lists: a body of a million bad strings was
/// as many problems, tens of MB of answer.
const MAX_PROBLEMS: usize = 50;
/// The longest problem message (jsonschema's quote the offending value).
const MAX_PROBLEM_BYTES: usize = 512;

/// A problem's message, at most [`MAX_PROBLEM_BYTES`].
fn cut(mut message: String) -> String {
    if message.len() > MAX_PROBLEM_BYTES {
        message.truncate(message.floor_char_boundary(MAX_PROBLEM_BYTES));
        message.push('…');
    }
    message
}

fn references(value: &Value, pointer: &mut String, problems: &mut Vec<(String, String)>) {
    if problems.len() >= MAX_PROBLEMS {
        return;
    }
    match value {
        Value::String(text) if text.contains("${") => problems.push((
            pointer.clone(),
            "`${...}` references are not resolved here: the host's environment and secrets are not the API's to use"
                .to_owned(),
        )),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = pointer.len();
                pointer.push_str(&format!("/{i}"));
                references(item, pointer, problems);
                pointer.truncate(len);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
                references(item, pointer, problems);
                pointer.truncate(len);
            }
        }
        _ => {}
    }
}

fn labels_of(body: &Value) -> std::collections::BTreeMap<String, String> {
    body.pointer("/metadata/labels").and_then(|v| serde_json::from_value(v.clone()).ok()).unwrap_or_default()
}

fn text_at(body: &Value, pointer: &str) -> Option<String> {
    body.pointer(pointer).and_then(Value::as_str).map(str::to_owned)
}

/// What the body's ids say, against the path's.
fn same_id(body: &Value, id: &str) -> Result<(), Refusal> {
    match body.pointer("/metadata/id").and_then(Value::as_str) {
        Some(given) if given != id => Err(Refusal::invalid(vec![(
            "/metadata/id".to_owned(),
            format!("`{given}` is not the id of the resource addressed, `{id}`"),
        )])),
        _ => Ok(()),
    }
}

/// The headers of `headers` (an object, at `pointer`) that a tenant may not
/// set: the transport's own and `Host`, which would reach a virtual host
/// behind an allowed address that `allowedHosts` does not name.
fn transport_headers(pointer: &str, headers: Option<&Value>) -> Vec<(String, String)> {
    let Some(Value::Object(headers)) = headers else { return Vec::new() };
    headers
        .keys()
        .filter_map(|name| {
            toolhost::transport_header(name).map(|header| {
                (
                    format!("{pointer}/{}", name.replace('~', "~0").replace('/', "~1")),
                    format!("the `{header}` header is the transport's own: the host sets it from the URL, which allowedHosts checks"),
                )
            })
        })
        .collect()
}

/// A tool of an http tool set: it says its request, with headers a tenant
/// may set.
fn check_http_tool(body: &Value) -> Result<(), Refusal> {
    if body.pointer("/spec/config/http").is_none() {
        return Err(Refusal::invalid(vec![(
            "/spec/config/http".to_owned(),
            "a tool of an http tool set says its request (config.http)".to_owned(),
        )]));
    }
    let problems = transport_headers("/spec/config/http/headers", body.pointer("/spec/config/http/headers"));
    if problems.is_empty() { Ok(()) } else { Err(Refusal::invalid(problems)) }
}

impl Service {
    /// Check what the schema cannot: hosts the operator allows, plugin
    /// files inside the allowed directories, filters the registry accepts.
    fn check_spec(&self, spec: &Value) -> Result<(), Refusal> {
        let mut problems = Vec::new();
        let url_allowed = |pointer: &str, text: &str, schemes: &[&str]| -> Option<(String, String)> {
            match url::Url::parse(text) {
                Ok(url) if schemes.contains(&url.scheme()) => {
                    self.settings.reaches(&url).err().map(|message| (pointer.to_owned(), message))
                }
                Ok(url) => Some((pointer.to_owned(), format!("the scheme `{}` is not allowed here", url.scheme()))),
                Err(e) => Some((pointer.to_owned(), format!("not a URL: {e}"))),
            }
        };
        for adapter in ["mcp", "http"] {
            problems.extend(transport_headers(
                &format!("/spec/adapter/{adapter}/headers"),
                spec.pointer(&format!("/adapter/{adapter}/headers")),
            ));
        }
        if let Some(url) = spec.pointer("/adapter/mcp/url").and_then(Value::as_str) {
            problems.extend(url_allowed("/spec/adapter/mcp/url", url, &["http", "https"]));
        }
        if let Some(url) = spec.pointer("/adapter/http/baseUrl").and_then(Value::as_str) {
            problems.extend(url_allowed("/spec/adapter/http/baseUrl", url, &["http", "https"]));
        }
        if let Some(url) = spec.pointer("/adapter/uri/url").and_then(Value::as_str) {
            let pointer = "/spec/adapter/uri/url";
            if let Some(path) = url.strip_prefix("file://") {
                if !self.settings.holds_plugin(path) {
                    problems.push((
                        pointer.to_owned(),
                        "a file:// plugin must be a file inside one of serve.service.pluginDirs".to_owned(),
                    ));
                }
            } else if url.starts_with("https://") {
                if spec.pointer("/adapter/uri/digest").is_none() {
                    problems.push((
                        "/spec/adapter/uri/digest".to_owned(),
                        "an https:// plugin is pinned by its digest (sha256:...)".to_owned(),
                    ));
                }
                problems.extend(url_allowed(pointer, url, &["https"]));
            } else if let Some(rest) = url.strip_prefix("oci://") {
                let host = rest.split('/').next().unwrap_or("");
                let (name, port) = match host.rsplit_once(':') {
                    Some((name, port)) => (name, port.parse().ok()),
                    None => (host, Some(443)),
                };
                if !self.settings.allows_host(name, port) {
                    problems.push((
                        pointer.to_owned(),
                        format!("the registry `{host}` is not one this service may reach (serve.service.allowedHosts)"),
                    ));
                }
            }
        }
        if problems.is_empty() { Ok(()) } else { Err(Refusal::invalid(problems)) }
    }
}

// ---- tool sets ------------------------------------------------------------

/// The metadata every stored resource has, borrowed.
struct Metadata<'a> {
    id: &'a str,
    account_id: &'a str,
    workspace_id: &'a str,
    profile_id: &'a str,
    name: &'a str,
    created_at: &'a str,
    updated_at: &'a str,
    external_id: &'a Option<String>,
    labels: &'a std::collections::BTreeMap<String, String>,
    version: i64,
}

impl Metadata<'_> {
    fn json(&self) -> Value {
        let mut metadata = json!({
            "id": self.id,
            "accountId": self.account_id,
            "workspaceId": self.workspace_id,
            "profileId": self.profile_id,
            "name": self.name,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "resourceVersion": self.version.to_string(),
        });
        if let Some(external) = self.external_id {
            metadata["externalId"] = Value::from(external.clone());
        }
        if !self.labels.is_empty() {
            metadata["labels"] = json!(self.labels);
        }
        metadata
    }
}

/// The metadata of a stored row (a tool set's or a tool's: the same
/// columns).
macro_rules! metadata_of {
    ($row:expr) => {
        Metadata {
            id: &$row.id,
            account_id: &$row.account_id,
            workspace_id: &$row.workspace_id,
            profile_id: &$row.profile_id,
            name: &$row.name,
            created_at: &$row.created_at,
            updated_at: &$row.updated_at,
            external_id: &$row.external_id,
            labels: &$row.labels,
            version: $row.version,
        }
        .json()
    };
}

fn tool_set_metadata(row: &ToolSetRow) -> Value {
    metadata_of!(row)
}

fn tool_set_json(row: &ToolSetRow) -> Value {
    let mut info = json!({"createdBy": row.created_by});
    if let Some(count) = row.tool_count {
        info["toolCount"] = Value::from(count);
    }
    if let Some(last) = &row.last_sync {
        info["lastSync"] = last.clone();
    }
    json!({"metadata": tool_set_metadata(row), "spec": row.spec, "info": info})
}

async fn list_tool_sets(State(service): State<Service>, headers: HeaderMap, Query(page): Query<PageQuery>) -> Answer {
    let actor = actor(&service, &headers).await?;
    let (after, size) = page.limits()?;
    let rows = service.store.list_tool_sets(&actor.workspace_id, &after, size).await?;
    let next = next_token(&rows, size, |r| &r.id);
    let items: Vec<Value> = rows.iter().map(tool_set_json).collect();
    Ok(json_response(StatusCode::OK, &json!({"toolSets": items, "nextPageToken": next})))
}

async fn get_tool_set(State(service): State<Service>, headers: HeaderMap, Path(id): Path<String>) -> Answer {
    let actor = actor(&service, &headers).await?;
    let row = find_tool_set(&service, &actor, &id).await?;
    Ok(with_etag(json_response(StatusCode::OK, &tool_set_json(&row)), row.version))
}

async fn find_tool_set(service: &Service, actor: &Actor, id: &str) -> Result<ToolSetRow, Refusal> {
    service.store.get_tool_set(&actor.workspace_id, id).await.map_err(|e| match e {
        StoreError::NotFound => Refusal::not_found("tool set"),
        other => other.into(),
    })
}

/// After a write: sync the workspace (a failure to record is logged; the
/// write stands), then read the tool set again.
async fn synced(service: &Service, actor: &Actor, held: Held, row: &ToolSetRow) -> Result<ToolSetRow, Refusal> {
    // On a task of its own: a client that goes away does not leave a sync
    // started and never recorded.
    let (workspaces, workspace, changed) =
        (std::sync::Arc::clone(&service.workspaces), actor.workspace_id.clone(), row.clone());
    let sync = tokio::spawn(async move { workspaces.changed(held, &workspace, &changed).await });
    match sync.await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => {
            tracing::warn!(tool_set = %row.id, "the change is stored, but its sync could not be recorded: {error}")
        }
        Err(error) => tracing::error!(tool_set = %row.id, "the sync of a change failed: {error}"),
    }
    find_tool_set(service, actor, &row.id).await
}

async fn create_tool_set(State(service): State<Service>, headers: HeaderMap, body: Body) -> Answer {
    let actor = actor(&service, &headers).await?;
    let body = body_of(body, "ToolSet").await?;
    service.check_spec(&body["spec"])?;
    let spec: ToolSetSpec = serde_json::from_value(body["spec"].clone())
        .map_err(|e| Refusal::invalid(vec![("/spec".to_owned(), e.to_string())]))?;
    if spec.managed && !actor.may_manage() {
        return Err(Refusal::new(StatusCode::FORBIDDEN, "only API-key actors may create a managed tool set"));
    }
    let now = now_rfc3339();
    let row = ToolSetRow {
        id: new_id("toolset"),
        account_id: actor.account_id.clone(),
        workspace_id: actor.workspace_id.clone(),
        profile_id: actor.profile_id.clone(),
        name: text_at(&body, "/metadata/name").unwrap_or_default(),
        external_id: text_at(&body, "/metadata/externalId"),
        labels: labels_of(&body),
        spec: serde_json::to_value(&spec).unwrap_or_default(),
        created_by: serde_json::to_value(actor.profile()).unwrap_or_default(),
        created_at: now.clone(),
        updated_at: now,
        version: 1,
        revision: 1,
        tool_count: None,
        last_sync: None,
    };
    service.check_config(&row).await?;
    let held = service.workspaces.hold(&actor.workspace_id).await;
    service.store.create_tool_set(&row, service.settings.tool_set_quota()).await?;
    let row = synced(&service, &actor, held, &row).await?;
    let mut response = with_etag(json_response(StatusCode::CREATED, &tool_set_json(&row)), row.version);
    if let Ok(location) = HeaderValue::from_str(&format!("/v1/tool_sets/{}", row.id)) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

impl Service {
    /// Whether the registry would take the tool set (its filters, its
    /// source): problems by pointer into the body.
    async fn check_config(&self, row: &ToolSetRow) -> Result<(), Refusal> {
        if kind_of(&row.spec) == Some("http") {
            return Ok(());
        }
        self.workspaces.config_of_new(row).await.map(|_| ()).map_err(|message| {
            let kind = kind_of(&row.spec).unwrap_or("mcp");
            let details = message
                .split("; ")
                .map(|problem| match problem.split_once(": ") {
                    Some((pointer, text)) if pointer.starts_with("/toolsets/0") => {
                        let inner = pointer.trim_start_matches("/toolsets/0");
                        let inner = inner
                            .strip_prefix("/extensions")
                            .or_else(|| inner.strip_prefix("/server"))
                            .unwrap_or(inner);
                        (format!("/spec/adapter/{kind}{inner}"), text.to_owned())
                    }
                    _ => (format!("/spec/adapter/{kind}"), problem.to_owned()),
                })
                .collect();
            Refusal::invalid(details)
        })
    }
}

async fn update_tool_set(
    State(service): State<Service>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Body,
) -> Answer {
    let actor = actor(&service, &headers).await?;
    let body = body_of(body, "ToolSet").await?;
    same_id(&body, &id)?;
    let expected = expected_version(&headers, &body)?;
    let current = find_tool_set(&service, &actor, &id).await?;
    // Without a version, the one just read: what was checked (managed, the
    // adapter's kind) is what is changed.
    let expected = expected.or(Some(current.version));
    service.check_spec(&body["spec"])?;
    let (was, now) = (kind_of(&current.spec), kind_of(&body["spec"]));
    if was != now {
        return Err(Refusal::invalid(vec![(
            "/spec/adapter".to_owned(),
            format!(
                "the adapter's kind cannot change ({} to {}): make a new tool set",
                was.unwrap_or("none"),
                now.unwrap_or("none")
            ),
        )]));
    }
    let spec: ToolSetSpec = serde_json::from_value(body["spec"].clone())
        .map_err(|e| Refusal::invalid(vec![("/spec".to_owned(), e.to_string())]))?;
    let was_managed = current.spec.get("managed").and_then(Value::as_bool).unwrap_or(false);
    if (was_managed || spec.managed) && !actor.may_manage() {
        return Err(Refusal::new(StatusCode::FORBIDDEN, "only API-key actors may change a managed tool set"));
    }
    let change = ToolSetRow {
        name: text_at(&body, "/metadata/name").unwrap_or_default(),
        external_id: text_at(&body, "/metadata/externalId"),
        labels: labels_of(&body),
        spec: serde_json::to_value(&spec).unwrap_or_default(),
        updated_at: now_rfc3339(),
        ..current
    };
    service.check_config(&change).await?;
    let held = service.workspaces.hold(&actor.workspace_id).await;
    let row = service.store.update_tool_set(&actor.workspace_id, &id, expected, &change).await?;
    let row = synced(&service, &actor, held, &row).await?;
    Ok(with_etag(json_response(StatusCode::OK, &tool_set_json(&row)), row.version))
}

async fn delete_tool_set(State(service): State<Service>, headers: HeaderMap, Path(id): Path<String>) -> Answer {
    let actor = actor(&service, &headers).await?;
    let expected = expected_version(&headers, &Value::Null)?;
    let current = find_tool_set(&service, &actor, &id).await?;
    if current.spec.get("managed").and_then(Value::as_bool).unwrap_or(false) && !actor.may_manage() {
        return Err(Refusal::new(StatusCode::FORBIDDEN, "only API-key actors may delete a managed tool set"));
    }
    let expected = expected.or(Some(current.version));
    let held = service.workspaces.hold(&actor.workspace_id).await;
    service.store.delete_tool_set(&actor.workspace_id, &id, expected).await?;
    if let Err(error) = service.workspaces.deleted(held, &actor.workspace_id, &id).await {
        tracing::warn!(tool_set = %id, "deleted, but the registry could not be brought in line: {error}");
    }
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::NO_CONTENT;
    Ok(response)
}

async fn list_events(
    State(service): State<Service>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(page): Query<PageQuery>,
) -> Answer {
    let actor = actor(&service, &headers).await?;
    let (after, size) = page.limits()?;
    // Events outlive their tool set: a deleted one's events are still
    // listed (only ever to its own workspace).
    if !after.is_empty() && !service.store.event_exists(&actor.workspace_id, &id, &after).await? {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            format!("pageToken `{after}` is not an event of this tool set"),
        ));
    }
    let events = service.store.list_events(&actor.workspace_id, &id, &after, size).await?;
    if events.is_empty() && after.is_empty() {
        find_tool_set(&service, &actor, &id).await?;
    }
    let next = next_token(&events, size, |e| &e.id);
    let items: Vec<Value> = events.iter().map(event_json).collect();
    Ok(json_response(StatusCode::OK, &json!({"events": items, "nextPageToken": next})))
}

// ---- tools ----------------------------------------------------------------

fn tool_json(row: &ToolRow, tool_set: &ToolSetRow) -> Value {
    let metadata = metadata_of!(row);
    json!({
        "metadata": metadata,
        "spec": row.spec,
        "info": {"createdBy": row.created_by, "toolSet": tool_set_metadata(tool_set)},
    })
}

async fn list_tools(
    State(service): State<Service>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(page): Query<PageQuery>,
) -> Answer {
    let actor = actor(&service, &headers).await?;
    let (after, size) = page.limits()?;
    let tool_set = find_tool_set(&service, &actor, &id).await?;
    let rows = service.store.list_tools(&actor.workspace_id, &id, &after, size).await?;
    let next = next_token(&rows, size, |r| &r.id);
    let items: Vec<Value> = rows.iter().map(|row| tool_json(row, &tool_set)).collect();
    Ok(json_response(StatusCode::OK, &json!({"tools": items, "nextPageToken": next})))
}

async fn find_tool(service: &Service, actor: &Actor, tool_set: &str, id: &str) -> Result<ToolRow, Refusal> {
    service.store.get_tool(&actor.workspace_id, tool_set, id).await.map_err(|e| match e {
        StoreError::NotFound => Refusal::not_found("tool"),
        other => other.into(),
    })
}

async fn get_tool(
    State(service): State<Service>,
    headers: HeaderMap,
    Path((set, id)): Path<(String, String)>,
) -> Answer {
    let actor = actor(&service, &headers).await?;
    let tool_set = find_tool_set(&service, &actor, &set).await?;
    let row = find_tool(&service, &actor, &set, &id).await?;
    Ok(with_etag(json_response(StatusCode::OK, &tool_json(&row, &tool_set)), row.version))
}

/// A managed tool set's tools change only by API-key actors.
fn may_change_tools(actor: &Actor, tool_set: &ToolSetRow) -> Result<(), Refusal> {
    let managed = tool_set.spec.get("managed").and_then(Value::as_bool).unwrap_or(false);
    if managed && actor.kind != ProfileType::ApiKey {
        return Err(Refusal::new(
            StatusCode::FORBIDDEN,
            "the tool set is managed: only API-key actors may change its tools",
        ));
    }
    Ok(())
}

async fn create_tool(
    State(service): State<Service>,
    headers: HeaderMap,
    Path(set): Path<String>,
    body: Body,
) -> Answer {
    let actor = actor(&service, &headers).await?;
    let body = body_of(body, "Tool").await?;
    let tool_set = find_tool_set(&service, &actor, &set).await?;
    may_change_tools(&actor, &tool_set)?;
    if kind_of(&tool_set.spec) != Some("http") {
        return Err(Refusal::new(
            StatusCode::CONFLICT,
            "the tools of an mcp or uri tool set come from its source: they are synced, not created",
        ));
    }
    check_http_tool(&body)?;
    let now = now_rfc3339();
    let mut spec = body["spec"].clone();
    if spec.get("status").is_none_or(|s| s == "TOOL_STATUS_UNSPECIFIED") {
        spec["status"] = Value::from("TOOL_STATUS_AVAILABLE");
    }
    if spec["status"] == "TOOL_STATUS_ARCHIVED" {
        return Err(Refusal::invalid(vec![(
            "/spec/status".to_owned(),
            "TOOL_STATUS_ARCHIVED is the sync's to give".to_owned(),
        )]));
    }
    let row = ToolRow {
        id: new_id("tool"),
        tool_set_id: tool_set.id.clone(),
        account_id: actor.account_id.clone(),
        workspace_id: actor.workspace_id.clone(),
        profile_id: actor.profile_id.clone(),
        name: text_at(&body, "/metadata/name").unwrap_or_default(),
        external_id: text_at(&body, "/metadata/externalId"),
        labels: labels_of(&body),
        spec,
        created_by: serde_json::to_value(actor.profile()).unwrap_or_default(),
        origin: "api".to_owned(),
        created_at: now.clone(),
        updated_at: now,
        version: 1,
        enabled_override: None,
        approval_override: None,
    };
    let held = service.workspaces.hold(&actor.workspace_id).await;
    service.store.create_tool(&row, service.settings.tool_quota()).await?;
    let tool_set = synced(&service, &actor, held, &tool_set).await?;
    let row = find_tool(&service, &actor, &set, &row.id).await?;
    Ok(with_etag(json_response(StatusCode::CREATED, &tool_json(&row, &tool_set)), row.version))
}

async fn update_tool(
    State(service): State<Service>,
    headers: HeaderMap,
    Path((set, id)): Path<(String, String)>,
    body: Body,
) -> Answer {
    let actor = actor(&service, &headers).await?;
    let body = body_of(body, "Tool").await?;
    same_id(&body, &id)?;
    let expected = expected_version(&headers, &body)?;
    let tool_set = find_tool_set(&service, &actor, &set).await?;
    may_change_tools(&actor, &tool_set)?;
    let current = find_tool(&service, &actor, &set, &id).await?;
    let status = body.pointer("/spec/status").and_then(Value::as_str);
    if status == Some("TOOL_STATUS_ARCHIVED") && current.spec["status"] != "TOOL_STATUS_ARCHIVED" {
        return Err(Refusal::invalid(vec![(
            "/spec/status".to_owned(),
            "TOOL_STATUS_ARCHIVED is the sync's to give".to_owned(),
        )]));
    }
    let mut change = ToolRow {
        external_id: text_at(&body, "/metadata/externalId"),
        labels: labels_of(&body),
        updated_at: now_rfc3339(),
        ..current.clone()
    };
    if current.origin == "sync" {
        // A synced tool keeps its name, config and parameters (its
        // source's); its status and approval may be set.
        if text_at(&body, "/metadata/name").is_some_and(|name| name != current.name) {
            return Err(Refusal::invalid(vec![(
                "/metadata/name".to_owned(),
                "a synced tool is named by its source".to_owned(),
            )]));
        }
        change.enabled_override = match status {
            Some("TOOL_STATUS_FILTERED") => Some(false),
            Some("TOOL_STATUS_AVAILABLE") => Some(true),
            _ => current.enabled_override,
        };
        if let Some(approval) = body.pointer("/spec/requiresApproval").and_then(Value::as_bool) {
            change.approval_override = Some(approval);
        }
    } else {
        check_http_tool(&body)?;
        change.name = text_at(&body, "/metadata/name").unwrap_or_default();
        let mut spec = body["spec"].clone();
        if spec.get("status").is_none_or(|s| s == "TOOL_STATUS_UNSPECIFIED") {
            spec["status"] = Value::from("TOOL_STATUS_AVAILABLE");
        }
        change.spec = spec;
    }
    let held = service.workspaces.hold(&actor.workspace_id).await;
    let row = service.store.update_tool(&actor.workspace_id, &set, &id, expected, &change).await?;
    let tool_set = synced(&service, &actor, held, &tool_set).await?;
    let row = find_tool(&service, &actor, &set, &row.id).await?;
    Ok(with_etag(json_response(StatusCode::OK, &tool_json(&row, &tool_set)), row.version))
}

async fn delete_tool(
    State(service): State<Service>,
    headers: HeaderMap,
    Path((set, id)): Path<(String, String)>,
) -> Answer {
    let actor = actor(&service, &headers).await?;
    let expected = expected_version(&headers, &Value::Null)?;
    let tool_set = find_tool_set(&service, &actor, &set).await?;
    may_change_tools(&actor, &tool_set)?;
    let current = find_tool(&service, &actor, &set, &id).await?;
    if current.origin == "sync" {
        return Err(Refusal::new(
            StatusCode::CONFLICT,
            "a synced tool comes from its source: filter it (status TOOL_STATUS_FILTERED) instead",
        ));
    }
    let held = service.workspaces.hold(&actor.workspace_id).await;
    service.store.delete_tool(&actor.workspace_id, &set, &id, expected).await?;
    synced(&service, &actor, held, &tool_set).await?;
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::NO_CONTENT;
    Ok(response)
}
