//! `/v1/tool_sets/{id}/events`: a tool set's sync events.

use super::*;

pub(super) async fn list_events(
    State(service): State<Service>,
    headers: HeaderMap,
    Path(id): Path<String>,
    list: ListQuery,
) -> Answer {
    let actor = actor(&service, &headers).await?;
    if list.name.is_some() || list.selector.is_some() {
        return Err(Refusal::new(StatusCode::BAD_REQUEST, "events are not filtered by name or labelSelector"));
    }
    let (after, size) = list.limits("event")?;
    if list.watch {
        return watch::events(&service, &actor, &headers, id, after).await;
    }
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
    // Events recorded before events kept their tool set's metadata show
    // its current one.
    let tool_set = match events.iter().any(|event| event.info.get("toolSet").is_none()) {
        true => service.store.get_tool_set(&actor.workspace_id, &id).await.ok().map(|row| tool_set_metadata(&row)),
        false => None,
    };
    let items: Vec<Value> = events.iter().map(|event| event_json(event, tool_set.as_ref())).collect();
    Ok(json_response(StatusCode::OK, &json!({"events": items, "nextPageToken": next})))
}
