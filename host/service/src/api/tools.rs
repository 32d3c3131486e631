//! `/v1/tool_sets/{id}/tools`: the tools of an http tool set, made through
//! the API, and the synced tools of the others (their status and approval).

use super::*;

/// A tool of an http tool set: it says its request, with headers a tenant
/// may set.
pub(super) fn check_http_tool(body: &Value) -> Result<(), Refusal> {
    if body.pointer("/spec/config/http").is_none() {
        return Err(Refusal::invalid(vec![(
            "/spec/config/http".to_owned(),
            "a tool of an http tool set says its request (config.http)".to_owned(),
        )]));
    }
    let problems = transport_headers("/spec/config/http/headers", body.pointer("/spec/config/http/headers"));
    if problems.is_empty() { Ok(()) } else { Err(Refusal::invalid(problems)) }
}

/// The names of `tool_set`'s tools that this instance serves over MCP now
/// (in its registry, and enabled).
pub(super) fn served(service: &Service, tool_set: &ToolSetRow) -> std::collections::HashSet<String> {
    let registry = service.workspaces.registry(&tool_set.workspace_id);
    registry.tools_of(&tool_set.mcp_name).into_iter().filter(|t| t.enabled).map(|t| t.tool.name).collect()
}

/// A tool as the API shows it. `info.served` says whether MCP clients of
/// its workspace are offered it now: `false` for a filtered or archived
/// tool, and for every tool of a tool set whose sync failed (its
/// `info.lastSyncEvent` says why).
pub(super) fn tool_json(row: &ToolRow, tool_set: &ToolSetRow, served: &std::collections::HashSet<String>) -> Value {
    let metadata = metadata_of!(row);
    let name = tool_mcp_name(row);
    json!({
        "metadata": metadata,
        "spec": row.spec,
        "info": {
            "createdBy": profile_json(&row.created_by),
            "toolSet": tool_set_metadata(tool_set),
            "mcpName": format!("{}__{name}", tool_set.mcp_name),
            "served": served.contains(&name),
        },
    })
}

pub(super) async fn list_tools(
    State(service): State<Service>,
    headers: HeaderMap,
    Path(id): Path<String>,
    list: ListQuery,
) -> Answer {
    let actor = actor(&service, &headers).await?;
    let tool_set = find_tool_set(&service, &actor, &id).await?;
    let (store, workspace, tool_set_id) = (&service.store, actor.workspace_id.as_str(), id.as_str());
    let (rows, next) = list
        .page(
            "tool",
            |after, limit| async move { store.list_tools(workspace, tool_set_id, &after, limit).await },
            |row: &ToolRow| (row.id.as_str(), row.name.as_str(), &row.labels),
        )
        .await?;
    let served = served(&service, &tool_set);
    let items: Vec<Value> = rows.iter().map(|row| tool_json(row, &tool_set, &served)).collect();
    Ok(json_response(StatusCode::OK, &json!({"tools": items, "nextPageToken": next})))
}

pub(super) async fn find_tool(service: &Service, actor: &Actor, tool_set: &str, id: &str) -> Result<ToolRow, Refusal> {
    service.store.get_tool(&actor.workspace_id, tool_set, id).await.map_err(|e| match e {
        StoreError::NotFound => Refusal::not_found("tool"),
        other => other.into(),
    })
}

pub(super) async fn get_tool(
    State(service): State<Service>,
    headers: HeaderMap,
    Path((set, id)): Path<(String, String)>,
) -> Answer {
    let actor = actor(&service, &headers).await?;
    let tool_set = find_tool_set(&service, &actor, &set).await?;
    let row = find_tool(&service, &actor, &set, &id).await?;
    Ok(with_etag(json_response(StatusCode::OK, &tool_json(&row, &tool_set, &served(&service, &tool_set))), row.version))
}

/// Refuse (`409`) an http tool whose MCP name another tool of its set has:
/// both would be offered under one name, and the set could not load.
async fn mcp_name_free(service: &Service, tool_set: &ToolSetRow, tool: &ToolRow) -> Result<(), Refusal> {
    let name = tool_mcp_name(tool);
    let others = service.store.tools_of(&tool_set.id).await?;
    match others.iter().find(|other| other.id != tool.id && other.origin == "api" && tool_mcp_name(other) == name) {
        None => Ok(()),
        Some(other) => Err(Refusal::new(
            StatusCode::CONFLICT,
            format!(
                "the tool would be offered as `{}__{name}`, as tool {} (`{}`) is: give it another name or \
                 config.http.toolName",
                tool_set.mcp_name, other.id, other.name
            ),
        )),
    }
}

/// A managed tool set's tools change only by API-key actors.
pub(super) fn may_change_tools(actor: &Actor, tool_set: &ToolSetRow) -> Result<(), Refusal> {
    let managed = tool_set.spec.get("managed").and_then(Value::as_bool).unwrap_or(false);
    if managed && actor.kind != ProfileType::ApiKey {
        return Err(Refusal::new(
            StatusCode::FORBIDDEN,
            "the tool set is managed: only API-key actors may change its tools",
        ));
    }
    Ok(())
}

pub(super) async fn create_tool(
    State(service): State<Service>,
    headers: HeaderMap,
    Path(set): Path<String>,
    body: Body,
) -> Answer {
    let actor = actor(&service, &headers).await?;
    let key = idempotency_key(&headers)?;
    let body = body_of(body, "Tool").await?;
    let request = format!("POST /v1/tool_sets/{set}/tools {body}");
    idempotent(&service, &actor, key, &request, make_tool(service.clone(), actor.clone(), set, body)).await
}

async fn make_tool(service: Service, actor: Actor, set: String, body: Value) -> Answer {
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
    let id = new_id("tool");
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
        id,
        tool_set_id: tool_set.id.clone(),
        account_id: actor.account_id.clone(),
        workspace_id: actor.workspace_id.clone(),
        profile_id: actor.profile_id.clone(),
        name: text_at(&body, "/metadata/name").unwrap_or_default(),
        external_id: text_at(&body, "/metadata/externalId"),
        labels: labels_of(&body),
        spec,
        created_by: actor.profile().json(),
        origin: "api".to_owned(),
        created_at: now.clone(),
        updated_at: now,
        version: 1,
        enabled_override: None,
        approval_override: None,
    };
    mcp_name_free(&service, &tool_set, &row).await?;
    let held = service.workspaces.hold(&actor.workspace_id).await;
    service.store.create_tool(&row, service.settings.tool_quota()).await?;
    let tool_set = synced(&service, &actor, held, &tool_set).await?;
    let row = find_tool(&service, &actor, &set, &row.id).await?;
    Ok(with_etag(
        json_response(StatusCode::CREATED, &tool_json(&row, &tool_set, &served(&service, &tool_set))),
        row.version,
    ))
}

pub(super) async fn update_tool(
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
    if change.origin == "api" {
        mcp_name_free(&service, &tool_set, &change).await?;
    }
    let held = service.workspaces.hold(&actor.workspace_id).await;
    let row = service.store.update_tool(&actor.workspace_id, &set, &id, expected, &change).await?;
    let tool_set = synced(&service, &actor, held, &tool_set).await?;
    let row = find_tool(&service, &actor, &set, &row.id).await?;
    Ok(with_etag(json_response(StatusCode::OK, &tool_json(&row, &tool_set, &served(&service, &tool_set))), row.version))
}

pub(super) async fn delete_tool(
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
