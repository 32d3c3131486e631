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
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};

use crate::actor::Actor;
use crate::model::{
    ProfileType, ToolSetSpec, event_json, mcp_name_of, metadata_of, profile_json, stored_event, tool_mcp_name,
    tool_set_metadata,
};
use crate::store::{KeptAnswer, KeyClaim, StoreError, ToolRow, ToolSetRow};
use crate::workspaces::{Held, kind_of};
use crate::{Service, new_id, now_rfc3339};

/// The largest request body read (bytes).
const MAX_BODY: usize = 1024 * 1024;
/// The default and largest page.
const PAGE: i64 = 100;
const MAX_PAGE: i64 = 1000;

pub(crate) fn routes(service: Service) -> Router {
    use axum::routing::get;
    use openapi::{DOCUMENT, EVENTS, TOOL, TOOL_SET, TOOL_SETS, TOOLS};
    // The paths of `openapi::OPERATIONS`, which the served document lists.
    // Every refusal is the one JSON shape, a path or method the API does
    // not have among them.
    Router::new()
        .route(TOOL_SETS, get(list_tool_sets).post(create_tool_set).fallback(only("GET, POST")))
        .route(
            TOOL_SET,
            get(get_tool_set).put(update_tool_set).delete(delete_tool_set).fallback(only("GET, PUT, DELETE")),
        )
        .route(EVENTS, get(list_events).fallback(only("GET")))
        .route(TOOLS, get(list_tools).post(create_tool).fallback(only("GET, POST")))
        .route(TOOL, get(get_tool).put(update_tool).delete(delete_tool).fallback(only("GET, PUT, DELETE")))
        .route(DOCUMENT, get(|| async { json_response(StatusCode::OK, openapi::document()) }).fallback(only("GET")))
        .route("/v1/{*rest}", axum::routing::any(no_such_path))
        .route("/ui", get(console::page))
        .route("/ui/", get(console::page))
        .route("/ui/console.js", get(console::script))
        .route("/ui/console.css", get(console::style))
        .with_state(service)
}

/// A path under `/v1` that the API does not have: `404`, as JSON.
async fn no_such_path(uri: axum::http::Uri) -> Refusal {
    Refusal::new(
        StatusCode::NOT_FOUND,
        format!("the API has no path `{}` (its paths: /v1/openapi.json)", cut(uri.path().to_owned())),
    )
}

/// A method a path does not take: `405` with `Allow`, as JSON.
fn only(allow: &'static str) -> impl Fn(axum::http::Method) -> std::future::Ready<Response> + Clone + Send + 'static {
    move |method| {
        let refusal =
            Refusal::new(StatusCode::METHOD_NOT_ALLOWED, format!("this path does not take {method}; it takes {allow}"));
        let mut response = axum::response::IntoResponse::into_response(refusal);
        response.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
        std::future::ready(response)
    }
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
        StatusCode::METHOD_NOT_ALLOWED => "UNIMPLEMENTED",
        StatusCode::CONFLICT => "ABORTED",
        StatusCode::PAYLOAD_TOO_LARGE | StatusCode::TOO_MANY_REQUESTS => "RESOURCE_EXHAUSTED",
        StatusCode::SERVICE_UNAVAILABLE => "UNAVAILABLE",
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
            unavailable if unavailable.is_unavailable() => {
                tracing::warn!("the store is unavailable: {unavailable}");
                let mut refusal = Refusal::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the store cannot be reached; try again (a write cut short may or may not have been made: \
                     an update with If-Match, or a create of the same name, is safe to repeat)",
                );
                refusal.retry_after = Some(std::time::Duration::from_secs(1));
                refusal
            }
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

/// A list's query: its page, and the filters of lists that take them.
/// Read by hand, not by axum's `Query`, so that a bad parameter is refused
/// in the one JSON shape of every error.
#[derive(Debug, Default)]
pub(crate) struct ListQuery {
    page_size: Option<i64>,
    page_token: Option<String>,
    /// Only items of exactly this name.
    name: Option<String>,
    /// Only items whose labels match.
    selector: Option<selector::Selector>,
    /// Whether to watch (events: a stream of them as they are recorded).
    watch: bool,
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for ListQuery {
    type Rejection = Refusal;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, _: &S) -> Result<ListQuery, Refusal> {
        ListQuery::parse(parts.uri.query().unwrap_or(""))
    }
}

impl ListQuery {
    fn parse(query: &str) -> Result<ListQuery, Refusal> {
        let bad = |message: String| Refusal::new(StatusCode::BAD_REQUEST, message);
        let mut list = ListQuery::default();
        let mut seen = std::collections::HashSet::new();
        for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
            let known = matches!(key.as_ref(), "pageSize" | "pageToken" | "name" | "labelSelector" | "watch");
            if known && !seen.insert(key.clone()) {
                return Err(bad(format!("the query parameter {key} is given more than once")));
            }
            match key.as_ref() {
                "pageSize" => {
                    let size = value.trim().parse::<i64>().ok().filter(|size| (1..=MAX_PAGE).contains(size));
                    match size {
                        Some(size) => list.page_size = Some(size),
                        None => {
                            return Err(bad(format!(
                                "pageSize must be an integer from 1 to {MAX_PAGE}, not `{}`",
                                cut(value.into_owned())
                            )));
                        }
                    }
                }
                "pageToken" => list.page_token = Some(value.into_owned()),
                "watch" => {
                    list.watch = match value.as_ref() {
                        "true" | "1" => true,
                        "false" | "0" => false,
                        other => {
                            return Err(bad(format!("watch must be true or false, not `{}`", cut(other.to_owned()))));
                        }
                    }
                }
                "name" => list.name = Some(value.into_owned()),
                "labelSelector" => {
                    list.selector =
                        Some(selector::Selector::parse(&value).map_err(|e| bad(format!("labelSelector: {e}")))?)
                }
                // Parameters of no meaning here are not an error (as
                // HTTP caches' and proxies' own parameters are not).
                _ => {}
            }
        }
        Ok(list)
    }

    /// The id a page starts after (a page token is the last id of the
    /// page before: `prefix_` and a ULID), and its size.
    fn limits(&self, prefix: &str) -> Result<(String, i64), Refusal> {
        let token = self.page_token.clone().unwrap_or_default();
        let well_formed = token
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix('_'))
            .is_some_and(|ulid| ulid::Ulid::from_string(ulid).is_ok());
        if !token.is_empty() && !well_formed {
            return Err(Refusal::new(
                StatusCode::BAD_REQUEST,
                format!("pageToken `{}` is not a token this list gave (the last id of a page)", cut(token)),
            ));
        }
        Ok((token, self.page_size.unwrap_or(PAGE)))
    }

    /// Whether an item of `name` and `labels` is listed.
    fn admits(&self, name: &str, labels: &std::collections::BTreeMap<String, String>) -> bool {
        self.name.as_deref().is_none_or(|wanted| wanted == name)
            && self.selector.as_ref().is_none_or(|selector| selector.matches(labels))
    }

    /// A page of the items `fetch(after, limit)` reads in id order, those
    /// this query admits. A filtered list reads at most [`MAX_SCAN`] items
    /// a request: when they fill no page, the page is short (even empty)
    /// and its `nextPageToken` goes on from the last item read.
    async fn page<T, F, Fut>(
        &self,
        prefix: &str,
        mut fetch: F,
        of: impl Fn(&T) -> (&str, &str, &std::collections::BTreeMap<String, String>),
    ) -> Result<(Vec<T>, Value), Refusal>
    where
        F: FnMut(String, i64) -> Fut,
        Fut: std::future::Future<Output = Result<Vec<T>, StoreError>>,
    {
        if self.watch {
            // Only a tool set's events are watched; a page of another list
            // would look like an answer to the watch.
            return Err(Refusal::new(StatusCode::BAD_REQUEST, "watch is for a tool set's events, not this list"));
        }
        let (mut after, size) = self.limits(prefix)?;
        if self.name.is_none() && self.selector.is_none() {
            let rows = fetch(after, size).await?;
            let next = next_token(&rows, size, |row| of(row).0);
            return Ok((rows, next));
        }
        let mut kept = Vec::new();
        let mut read = 0;
        loop {
            let rows = fetch(after.clone(), MAX_PAGE).await?;
            let exhausted = (rows.len() as i64) < MAX_PAGE;
            read += rows.len();
            for row in rows {
                let (id, name, labels) = of(&row);
                after = id.to_owned();
                if self.admits(name, labels) {
                    kept.push(row);
                    if kept.len() as i64 == size {
                        return Ok((kept, Value::from(after)));
                    }
                }
            }
            if exhausted {
                return Ok((kept, Value::Null));
            }
            if read >= MAX_SCAN {
                return Ok((kept, Value::from(after)));
            }
        }
    }
}

/// The most items a filtered list reads for one request.
const MAX_SCAN: usize = 10_000;

fn next_token<T>(items: &[T], size: i64, id: impl Fn(&T) -> &str) -> Value {
    match items.last() {
        Some(last) if items.len() as i64 == size => Value::from(id(last)),
        _ => Value::Null,
    }
}

// ---- idempotent creates ---------------------------------------------------

/// How long a create's `Idempotency-Key` is kept.
const KEY_KEPT: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);
/// How long a key stays claimed by a request that was never answered (the
/// service stopped while making it).
const KEY_ABANDONED: std::time::Duration = std::time::Duration::from_secs(60);
/// The longest key.
const MAX_KEY: usize = 255;

/// A create's `Idempotency-Key` header, if it has one.
fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, Refusal> {
    let Some(value) = headers.get("idempotency-key") else { return Ok(None) };
    let key = value.to_str().ok().map(str::trim).filter(|key| !key.is_empty() && key.len() <= MAX_KEY);
    match key {
        Some(key) => Ok(Some(key.to_owned())),
        None => Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            format!("Idempotency-Key must be 1 to {MAX_KEY} visible ASCII characters"),
        )),
    }
}

fn rfc3339_before(now: std::time::SystemTime, ago: std::time::Duration) -> String {
    humantime::format_rfc3339_millis(now.checked_sub(ago).unwrap_or(std::time::UNIX_EPOCH)).to_string()
}

/// Make `create` (the request `request`, method, path and body) once per
/// `key` of the workspace: a request repeating a key answered within 24
/// hours gets that answer again (with `Idempotent-Replayed: true`) and
/// makes nothing; one repeating a key under way, or used for another
/// request, is refused with `409`. A create refused makes nothing, and
/// gives its key up for a retry.
async fn idempotent(
    service: &Service,
    actor: &Actor,
    key: Option<String>,
    request: &str,
    create: impl std::future::Future<Output = Answer> + Send + 'static,
) -> Answer {
    use sha2::Digest;
    let Some(key) = key else { return create.await };
    let request = format!("{:x}", sha2::Sha256::digest(request.as_bytes()));
    let now = std::time::SystemTime::now();
    let claim = service
        .store
        .claim_key(
            &actor.workspace_id,
            &key,
            &request,
            &humantime::format_rfc3339_millis(now).to_string(),
            &rfc3339_before(now, KEY_KEPT),
            &rfc3339_before(now, KEY_ABANDONED),
        )
        .await?;
    match claim {
        KeyClaim::Claimed => {}
        KeyClaim::Answered(kept) => return Ok(replayed(&kept)),
        KeyClaim::InProgress => {
            let mut refusal = Refusal::new(
                StatusCode::CONFLICT,
                "the first request with this Idempotency-Key is still being answered; send it again shortly",
            );
            refusal.retry_after = Some(std::time::Duration::from_secs(1));
            return Err(refusal);
        }
        KeyClaim::OtherRequest => {
            return Err(Refusal::new(
                StatusCode::CONFLICT,
                "this Idempotency-Key was first used for another request (another path or body); \
                 a new request takes a new key",
            ));
        }
    }
    // On a task of its own: a client that goes away does not leave the
    // create half made and its key claimed.
    let (store, workspace) = (service.store.clone(), actor.workspace_id.clone());
    let made = tokio::spawn(async move {
        let kept = match create.await {
            Ok(response) => response,
            Err(refusal) => {
                if let Err(error) = store.release_key(&workspace, &key).await {
                    tracing::warn!("an idempotency key could not be given up: {error}");
                }
                return Err(refusal);
            }
        };
        let (parts, body) = kept.into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap_or_default();
        let header = |name| parts.headers.get(name).and_then(|v: &HeaderValue| v.to_str().ok()).map(str::to_owned);
        let answer = KeptAnswer {
            status: i64::from(parts.status.as_u16()),
            body: String::from_utf8_lossy(&bytes).into_owned(),
            location: header(header::LOCATION),
            etag: header(header::ETAG),
        };
        if let Err(error) = store.answer_key(&workspace, &key, &answer).await {
            // The create stands; a retry with the key waits out
            // KEY_ABANDONED and then makes it again.
            tracing::warn!("the answer to an idempotent create could not be kept: {error}");
        }
        Ok(Response::from_parts(parts, Body::from(bytes)))
    });
    made.await.map_err(|error| {
        tracing::error!("an idempotent create failed: {error}");
        Refusal::new(StatusCode::INTERNAL_SERVER_ERROR, "the create failed")
    })?
}

/// A kept answer, given again.
fn replayed(kept: &KeptAnswer) -> Response {
    let status = u16::try_from(kept.status).ok().and_then(|s| StatusCode::from_u16(s).ok()).unwrap_or(StatusCode::OK);
    let mut response = Response::new(Body::from(kept.body.clone()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert("idempotent-replayed", HeaderValue::from_static("true"));
    for (name, value) in [(header::LOCATION, &kept.location), (header::ETAG, &kept.etag)] {
        if let Some(value) = value.as_deref().and_then(|v| HeaderValue::from_str(v).ok()) {
            headers.insert(name, value);
        }
    }
    response
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

mod console;
mod events;
pub(crate) mod openapi;
mod selector;
mod tool_sets;
mod tools;
mod watch;

use events::*;
use tool_sets::*;
use tools::*;

#[cfg(test)]
mod tests {
    use super::*;

    fn if_match(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::IF_MATCH, HeaderValue::from_str(value).unwrap());
        headers
    }

    fn with_version(version: &str) -> Value {
        json!({"metadata": {"resourceVersion": version}})
    }

    #[test]
    fn the_expected_version_is_if_match_then_the_bodys_then_none() {
        let none = HeaderMap::new();
        assert_eq!(expected_version(&if_match("\"3\""), &Value::Null).ok(), Some(Some(3)));
        assert_eq!(expected_version(&if_match("W/\"4\""), &Value::Null).ok(), Some(Some(4)));
        assert_eq!(expected_version(&if_match("*"), &with_version("9")).ok(), Some(None));
        // The header wins over the body.
        assert_eq!(expected_version(&if_match("\"2\""), &with_version("9")).ok(), Some(Some(2)));
        assert_eq!(expected_version(&none, &with_version("5")).ok(), Some(Some(5)));
        assert_eq!(expected_version(&none, &json!({"metadata": {}})).ok(), Some(None));
        let refused = expected_version(&if_match("\"seven\""), &Value::Null).err().unwrap();
        assert_eq!(refused.status, StatusCode::BAD_REQUEST);
        assert!(refused.message.contains("If-Match `seven`"), "{}", refused.message);
        let refused = expected_version(&none, &with_version("x")).err().unwrap();
        assert!(refused.message.contains("metadata.resourceVersion `x`"), "{}", refused.message);
    }

    #[test]
    fn a_page_is_1_to_1000_and_the_next_token_is_the_last_id_of_a_full_page() {
        let limits = |query: &str| ListQuery::parse(query).and_then(|list| list.limits("tool"));
        assert_eq!(limits("").ok(), Some((String::new(), PAGE)));
        let token = "tool_01KBQ5A8W3Y8N2ZK6H4X0M7T9C";
        assert_eq!(limits(&format!("pageSize=1000&pageToken={token}")).ok(), Some((token.to_owned(), MAX_PAGE)));
        for token in ["t", "toolset_01KBQ5A8W3Y8N2ZK6H4X0M7T9C", "tool_", "tool_01KBQ5A8W3Y8N2ZK6H4X0M7T9"] {
            let refused = limits(&format!("pageToken={token}")).err().unwrap();
            assert!(refused.message.contains("pageToken"), "{token}: {}", refused.message);
        }
        for query in
            ["pageSize=0", "pageSize=-1", "pageSize=1001", "pageSize=ten", "pageSize=", "pageSize=1&pageSize=2"]
        {
            let refused = limits(query).err().unwrap();
            assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{query}");
            assert!(refused.message.contains("pageSize"), "{query}: {}", refused.message);
        }
        let ids = ["a", "b", "c"];
        assert_eq!(next_token(&ids, 3, |id| id), json!("c"));
        assert_eq!(next_token(&ids, 4, |id| id), Value::Null);
        assert_eq!(next_token::<&str>(&[], 3, |id| id), Value::Null);
    }

    #[test]
    fn a_filtered_page_reads_on_until_it_is_full_and_goes_on_where_it_stopped() {
        let labels = |even: bool| std::collections::BTreeMap::from([("even".to_owned(), even.to_string())]);
        let rows: Vec<Row> =
            (0..2500).map(|i| (format!("tool_{}", ulid::Ulid::from_parts(i, 0)), labels(i % 2 == 0))).collect();
        let id = |i: u64| format!("tool_{}", ulid::Ulid::from_parts(i, 0));
        let fetch = |after: String, limit: i64| {
            let page: Vec<_> = rows.iter().filter(|(id, _)| *id > after).take(limit as usize).cloned().collect();
            std::future::ready(Ok::<_, StoreError>(page))
        };
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        type Row = (String, std::collections::BTreeMap<String, String>);
        fn by((id, labels): &Row) -> (&str, &str, &std::collections::BTreeMap<String, String>) {
            (id, id, labels)
        }
        let query = format!("labelSelector=even%3Dtrue&pageSize=3&pageToken={}", id(1500));
        let list = ListQuery::parse(&query).unwrap();
        let (page, next) = runtime.block_on(list.page("tool", fetch, by)).unwrap();
        let ids: Vec<String> = page.into_iter().map(|(id, _)| id).collect();
        assert_eq!(ids, [id(1502), id(1504), id(1506)]);
        assert_eq!(next, json!(id(1506)));
        // The last page, across a fetch of its own, ends the list.
        let query = format!("labelSelector=even%3Dfalse&pageSize=1000&pageToken={}", id(998));
        let list = ListQuery::parse(&query).unwrap();
        let (page, next) = runtime.block_on(list.page("tool", fetch, by)).unwrap();
        assert_eq!(page.len(), 751);
        assert_eq!(next, Value::Null);
        let list = ListQuery::parse(&format!("name={}", id(7))).unwrap();
        let (page, _) = runtime.block_on(list.page("tool", fetch, by)).unwrap();
        assert_eq!(page.len(), 1);
    }

    #[test]
    fn references_are_found_anywhere_with_escaped_pointers_and_capped() {
        let body = json!({"spec": {"a/b": ["plain", "${env:HOME}"], "c~d": {"e": "x ${secret:K}"}}});
        let mut problems = Vec::new();
        references(&body, &mut String::new(), &mut problems);
        let pointers: Vec<&str> = problems.iter().map(|(pointer, _)| pointer.as_str()).collect();
        assert_eq!(pointers, ["/spec/a~1b/1", "/spec/c~0d/e"]);
        let many = Value::Array(vec![json!("${x}"); 10 * MAX_PROBLEMS]);
        let mut problems = Vec::new();
        references(&many, &mut String::new(), &mut problems);
        assert_eq!(problems.len(), MAX_PROBLEMS);
    }

    #[test]
    fn a_long_problem_is_cut_at_a_character_boundary() {
        assert_eq!(cut("short".to_owned()), "short");
        let cut_message = cut("é".repeat(MAX_PROBLEM_BYTES));
        assert!(cut_message.len() <= MAX_PROBLEM_BYTES + '…'.len_utf8(), "{}", cut_message.len());
        assert!(cut_message.ends_with('…') && !cut_message.contains('\u{FFFD}'));
    }

    #[test]
    fn the_bodys_id_must_be_the_paths() {
        assert!(same_id(&json!({}), "toolset_1").is_ok());
        assert!(same_id(&json!({"metadata": {"id": "toolset_1"}}), "toolset_1").is_ok());
        let refused = same_id(&json!({"metadata": {"id": "toolset_2"}}), "toolset_1").err().unwrap();
        assert_eq!(refused.details[0].0, "/metadata/id");
    }

    fn read(body: impl Into<Body>, definition: &str) -> Result<Value, Refusal> {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(body_of(body.into(), definition))
    }

    #[test]
    fn a_body_is_json_of_its_model_without_references_and_within_its_size() {
        let refused = read("{not json", "ToolSet").err().unwrap();
        assert_eq!(refused.status, StatusCode::BAD_REQUEST);
        assert!(refused.details[0].1.starts_with("the body is not JSON"), "{:?}", refused.details);
        let refused = read(vec![b' '; MAX_BODY + 1], "ToolSet").err().unwrap();
        assert_eq!(refused.status, StatusCode::PAYLOAD_TOO_LARGE);
        // Problems come sorted, each once, with their pointers.
        let refused = read(r#"{"metadata": {"name": 7}, "spec": {"x": "${env:HOME}"}}"#, "ToolSet").err().unwrap();
        let pointers: Vec<&str> = refused.details.iter().map(|(pointer, _)| pointer.as_str()).collect();
        assert!(pointers.contains(&"/metadata/name"), "{pointers:?}");
        assert!(pointers.contains(&"/spec/x"), "{pointers:?}");
        assert!(pointers.windows(2).all(|pair| pair[0] <= pair[1]), "{pointers:?}");
    }

    #[test]
    fn a_refusal_is_one_json_shape_with_its_headers() {
        let mut refusal = Refusal::new(StatusCode::TOO_MANY_REQUESTS, "slow down");
        refusal.retry_after = Some(std::time::Duration::from_millis(1500));
        let response = axum::response::IntoResponse::into_response(refusal);
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[header::RETRY_AFTER], "2");
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let bytes = runtime.block_on(axum::body::to_bytes(response.into_body(), 1 << 16)).unwrap();
        let body: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            body,
            json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "slow down", "details": []}})
        );
    }
}
