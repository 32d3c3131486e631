//! `GET /v1/tool_sets/{toolSetId}/events?watch=true`: a tool set's events
//! as server-sent events, those recorded already and then each as it is
//! recorded (by this instance or another: the store is read every
//! `pollMillis`). Each is `id:` its event id, `event:` its type and
//! `data:` the ToolSetEvent; a client that reconnects with `Last-Event-ID`
//! (or `pageToken`) goes on after it. A watch ends after `MAX_WATCH`, when
//! the service shuts down, or when the client goes away.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::response::IntoResponse;
use axum::response::sse::{Event, KeepAlive, Sse};

use super::*;

/// How long one watch lasts; the client then reconnects with the last id.
const MAX_WATCH: std::time::Duration = std::time::Duration::from_secs(30 * 60);
/// The most watches a workspace keeps open at once.
pub(crate) const MAX_WATCHES: usize = 16;
/// A comment sent when nothing else is, so proxies keep the stream open.
const KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(15);

/// The events a watch's task sends, as the stream the response reads.
struct Events(tokio::sync::mpsc::Receiver<Event>);

impl futures_core::Stream for Events {
    type Item = Result<Event, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx).map(|event| event.map(Ok))
    }
}

/// A place among a workspace's watches, given back when dropped.
pub(crate) struct Place {
    watches: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, usize>>>,
    workspace: String,
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut watches = self.watches.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(count) = watches.get_mut(&self.workspace) {
            *count -= 1;
            if *count == 0 {
                watches.remove(&self.workspace);
            }
        }
    }
}

impl Service {
    fn watch_place(&self, workspace: &str) -> Option<Place> {
        let mut watches = self.watches.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = watches.entry(workspace.to_owned()).or_default();
        if *count >= MAX_WATCHES {
            return None;
        }
        *count += 1;
        Some(Place { watches: std::sync::Arc::clone(&self.watches), workspace: workspace.to_owned() })
    }
}

/// The stream of `tool_set`'s events after `after` (the page token, else
/// `Last-Event-ID`, else from the first).
pub(super) async fn events(
    service: &Service,
    actor: &Actor,
    headers: &HeaderMap,
    tool_set: String,
    after: String,
) -> Answer {
    let after = match (after.is_empty(), headers.get("last-event-id")) {
        (true, Some(last)) => {
            let last = last.to_str().unwrap_or("").trim().to_owned();
            let list = ListQuery { page_token: Some(last), ..ListQuery::default() };
            list.limits("event").map_err(|_| {
                Refusal::new(StatusCode::BAD_REQUEST, "Last-Event-ID is not the id of an event of this tool set")
            })?;
            list.page_token.unwrap_or_default()
        }
        _ => after,
    };
    let workspace = actor.workspace_id.clone();
    if !after.is_empty() && !service.store.event_exists(&workspace, &tool_set, &after).await? {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            format!("`{after}` is not an event of this tool set (pageToken or Last-Event-ID)"),
        ));
    }
    if after.is_empty() && service.store.list_events(&workspace, &tool_set, "", 1).await?.is_empty() {
        find_tool_set(service, actor, &tool_set).await?;
    }
    let Some(place) = service.watch_place(&workspace) else {
        let mut refusal = Refusal::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!("this workspace already has {MAX_WATCHES} watches open; close one, or poll"),
        );
        refusal.retry_after = Some(std::time::Duration::from_secs(5));
        return Err(refusal);
    };
    let (sender, receiver) = tokio::sync::mpsc::channel(64);
    let (store, closing, poll) = (service.store.clone(), service.closing.clone(), service.settings.poll_interval());
    tokio::spawn(async move {
        let _place = place;
        let until = tokio::time::Instant::now() + MAX_WATCH;
        let mut after = after;
        loop {
            let events = match store.list_events(&workspace, &tool_set, &after, MAX_PAGE).await {
                Ok(events) => events,
                Err(error) => {
                    // The stream ends; the client reconnects from its last id.
                    tracing::warn!(tool_set = %tool_set, "a watch could not read the store: {error}");
                    return;
                }
            };
            let full = events.len() as i64 == MAX_PAGE;
            for event in &events {
                let json = event_json(event, None);
                let kind = json.pointer("/event/type").and_then(Value::as_str).unwrap_or("event").to_owned();
                let message = Event::default().id(event.id.clone()).event(kind).data(json.to_string());
                if sender.send(message).await.is_err() {
                    return; // The client went away.
                }
                after = event.id.clone();
            }
            if full {
                continue;
            }
            tokio::select! {
                () = tokio::time::sleep(poll) => {}
                () = tokio::time::sleep_until(until) => return,
                () = closing.cancelled() => return,
                () = sender.closed() => return,
            }
        }
    });
    let mut response =
        Sse::new(Events(receiver)).keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("")).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Proxies that buffer answers (nginx) pass this one on as it comes.
    response.headers_mut().insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}
