//! `/v1/tool_sets`: a workspace's tool sets, listed, read, created,
//! updated and deleted, each checked against what the operator allows.

use super::*;

/// The headers of `headers` (an object, at `pointer`) that a tenant may not
/// set: the transport's own and `Host`, which would reach a virtual host
/// behind an allowed address that `allowedHosts` does not name.
pub(super) fn transport_headers(pointer: &str, headers: Option<&Value>) -> Vec<(String, String)> {
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

/// A tool set as the API shows it. `info.lastSync` is the time of its last
/// sync's outcome; `info.lastSyncEvent` is that event (a `sync_failed`
/// one says why its tools are not served); `agentCount` is not given
/// (toolhost does not know which agents use a tool set).
pub(super) fn tool_set_json(row: &ToolSetRow) -> Value {
    let mut info = json!({"createdBy": profile_json(&row.created_by), "mcpName": row.mcp_name});
    if let Some(count) = row.tool_count {
        info["toolCount"] = Value::from(count);
    }
    if let Some(last) = &row.last_sync {
        let event = stored_event(last);
        info["lastSync"] = Value::from(event.created_at.clone());
        info["lastSyncEvent"] = event_json(&event, None);
    }
    json!({"metadata": tool_set_metadata(row), "spec": row.spec, "info": info})
}

pub(super) async fn list_tool_sets(State(service): State<Service>, headers: HeaderMap, list: ListQuery) -> Answer {
    let actor = actor(&service, &headers).await?;
    let (store, workspace) = (&service.store, actor.workspace_id.as_str());
    let (rows, next) = list
        .page(
            "toolset",
            |after, limit| async move { store.list_tool_sets(workspace, &after, limit).await },
            |row: &ToolSetRow| (row.id.as_str(), row.name.as_str(), &row.labels),
        )
        .await?;
    let items: Vec<Value> = rows.iter().map(tool_set_json).collect();
    Ok(json_response(StatusCode::OK, &json!({"toolSets": items, "nextPageToken": next})))
}

pub(super) async fn get_tool_set(State(service): State<Service>, headers: HeaderMap, Path(id): Path<String>) -> Answer {
    let actor = actor(&service, &headers).await?;
    let row = find_tool_set(&service, &actor, &id).await?;
    Ok(with_etag(json_response(StatusCode::OK, &tool_set_json(&row)), row.version))
}

pub(super) async fn find_tool_set(service: &Service, actor: &Actor, id: &str) -> Result<ToolSetRow, Refusal> {
    service.store.get_tool_set(&actor.workspace_id, id).await.map_err(|e| match e {
        StoreError::NotFound => Refusal::not_found("tool set"),
        other => other.into(),
    })
}

/// After a write: sync the workspace (a failure to record is logged; the
/// write stands), then read the tool set again.
pub(super) async fn synced(
    service: &Service,
    actor: &Actor,
    held: Held,
    row: &ToolSetRow,
) -> Result<ToolSetRow, Refusal> {
    // On a task of its own: a client that goes away does not leave a sync
    // started and never recorded.
    let (workspaces, workspace, changed) =
        (std::sync::Arc::clone(&service.workspaces), actor.workspace_id.clone(), row.clone());
    let cause = actor.profile();
    let sync = tokio::spawn(async move { workspaces.changed(held, &workspace, &changed, &cause).await });
    match sync.await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => {
            tracing::warn!(tool_set = %row.id, "the change is stored, but its sync could not be recorded: {error}")
        }
        Err(error) => tracing::error!(tool_set = %row.id, "the sync of a change failed: {error}"),
    }
    find_tool_set(service, actor, &row.id).await
}

pub(super) async fn create_tool_set(State(service): State<Service>, headers: HeaderMap, body: Body) -> Answer {
    let actor = actor(&service, &headers).await?;
    let key = idempotency_key(&headers)?;
    let body = body_of(body, "ToolSet").await?;
    let request = format!("POST {} {body}", openapi::TOOL_SETS);
    idempotent(&service, &actor, key, &request, make_tool_set(service.clone(), actor.clone(), body)).await
}

async fn make_tool_set(service: Service, actor: Actor, body: Value) -> Answer {
    service.check_spec(&body["spec"])?;
    let spec: ToolSetSpec = serde_json::from_value(body["spec"].clone())
        .map_err(|e| Refusal::invalid(vec![("/spec".to_owned(), e.to_string())]))?;
    if spec.managed && !actor.may_manage() {
        return Err(Refusal::new(StatusCode::FORBIDDEN, "only API-key actors may create a managed tool set"));
    }
    let now = now_rfc3339();
    let id = new_id("toolset");
    let name = text_at(&body, "/metadata/name").unwrap_or_default();
    let mcp_name = mcp_name_of(&name, &id);
    service.name_free(&actor.workspace_id, &name, &mcp_name, &id).await?;
    let row = ToolSetRow {
        id,
        account_id: actor.account_id.clone(),
        workspace_id: actor.workspace_id.clone(),
        profile_id: actor.profile_id.clone(),
        name,
        mcp_name,
        external_id: text_at(&body, "/metadata/externalId"),
        labels: labels_of(&body),
        spec: serde_json::to_value(&spec).unwrap_or_default(),
        created_by: actor.profile().json(),
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
    /// Refuse (`409`) a tool set `id` named `name` if another tool set of
    /// the workspace has that name, or a name that gives the same MCP name:
    /// their tools would be offered under the same names. (The store's
    /// unique indexes refuse it too, should two such writes race.)
    async fn name_free(&self, workspace: &str, name: &str, mcp_name: &str, id: &str) -> Result<(), Refusal> {
        match self.store.name_holder(workspace, name, mcp_name, id).await? {
            None => Ok(()),
            Some((other, other_name)) if other_name == name => {
                Err(Refusal::new(StatusCode::CONFLICT, format!("the name `{name}` is taken (tool set {other})")))
            }
            Some((other, other_name)) => Err(Refusal::new(
                StatusCode::CONFLICT,
                format!(
                    "the name `{name}` gives the MCP name `{mcp_name}`, which tool set {other} (`{other_name}`) has: \
                     their tools would both be `{mcp_name}__...`; name this one differently"
                ),
            )),
        }
    }

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

pub(super) async fn update_tool_set(
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
    // A tool set without an adapter may be given one; one with an adapter
    // keeps its kind.
    let (was, now) = (kind_of(&current.spec), kind_of(&body["spec"]));
    if was.is_some() && was != now {
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
    let name = text_at(&body, "/metadata/name").unwrap_or_default();
    // A name kept keeps its MCP name (one stored before names were for
    // people stays as it was).
    let mcp_name = if name == current.name { current.mcp_name.clone() } else { mcp_name_of(&name, &current.id) };
    service.name_free(&actor.workspace_id, &name, &mcp_name, &current.id).await?;
    let change = ToolSetRow {
        name,
        mcp_name,
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

pub(super) async fn delete_tool_set(
    State(service): State<Service>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Answer {
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
