//! `wasi:http/outgoing-handler` for components, under the same grants,
//! redirect checks, deadline and size caps as the Extism `http_request`.
//!
//! wasmtime-wasi-http provides the interfaces (fields, requests, bodies as
//! streams, futures); toolhost supplies only how a request is sent
//! ([`WasiHttpHooks::send_request`]), and sends it through
//! [`super::http::request`], the one HTTP client plugins have: a host that
//! matches no grant is refused before anything is sent (the guest gets
//! `http-request-denied`), every redirect hop is checked again, the
//! response body is capped, and the call's deadline bounds the wait.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use super::outcome::Stop;

/// Largest request body a plugin may send.
const MAX_REQUEST_BYTES: usize = super::http::MAX_REQUEST_BODY_BYTES;

/// Requests one instance may have in flight at once. Each is a task, holds
/// its body while the guest writes it, and takes a blocking thread while it
/// is sent; a guest that started requests without end (and never finished
/// their bodies) held host memory and tasks without bound, and could fill
/// tokio's blocking pool that every other plugin's HTTP waits on.
const MAX_IN_FLIGHT: usize = 4;

/// Bytes of responses one instance may hold that its guest has not dropped:
/// they stay in its resource table, between calls too. Past it, new
/// requests are refused until the guest lets some go.
const MAX_HELD_BYTES: usize = 64 * 1024 * 1024;

/// Bytes one `fields` (a request's or response's headers a guest builds)
/// may hold (wasmtime-wasi-http's default: 128 KiB). With the resource
/// table's cap, what a guest's fields may hold outside its memory limit is
/// bounded by 4,096 × 16 KiB = 64 MiB; 16 KiB is twice what common servers
/// accept as a request's headers.
pub(crate) const MAX_FIELDS_BYTES: usize = 16 * 1024;

/// The largest write to an outgoing body's stream, and so what each
/// outgoing body buffers before it is sent (one such write; the default
/// is 1 MiB). A guest writes as much as `check-write` allows, so a smaller
/// chunk costs it only more writes.
const BODY_CHUNK_BYTES: usize = 16 * 1024;

/// What an instance's requests hold now.
#[derive(Default)]
struct Usage {
    in_flight: AtomicUsize,
    /// Shared with the reads of responses, which count each chunk here.
    held: Arc<AtomicUsize>,
}

/// One request in flight, until it is answered or dropped.
struct InFlight(Arc<Usage>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// How a component's requests are sent: its grants, the running call's
/// deadline, and what its requests hold.
pub(crate) struct Hooks {
    pub(crate) allowed: Vec<String>,
    pub(crate) deadline: Option<Instant>,
    usage: Arc<Usage>,
}

impl Hooks {
    /// The hooks of a new instance with these host grants.
    pub(crate) fn new(allowed: Vec<String>) -> Hooks {
        Hooks { allowed, deadline: None, usage: Arc::default() }
    }

    /// Why a new request may not start now, if it may not.
    fn refusal(&self) -> Option<String> {
        let usage = &self.usage;
        if usage.in_flight.load(Ordering::SeqCst) >= MAX_IN_FLIGHT {
            return Some(format!(
                "{MAX_IN_FLIGHT} HTTP requests are in flight already, the most one instance may have"
            ));
        }
        let held = usage.held.load(Ordering::SeqCst);
        (held >= MAX_HELD_BYTES).then(|| {
            format!(
                "the plugin holds {held} bytes of HTTP responses it has not dropped, the most one instance may \
                 hold is {MAX_HELD_BYTES}"
            )
        })
    }
}

type Sent = Box<dyn Future<Output = Result<(), Error>> + Send>;

impl WasiHttpHooks for Hooks {
    fn p2_outgoing_body_chunk_size(&mut self) -> usize {
        BODY_CHUNK_BYTES
    }

    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        _options: Option<RequestOptions>,
        _fut: Sent,
    ) -> Box<dyn Future<Output = Result<(http::Response<WasiBody>, Sent), Error>> + Send> {
        if let Some(refused) = self.refusal() {
            tracing::warn!(target: "toolhost::guest", "{refused}");
            return Box::new(async move { Err(Error::InternalError(Some(refused))) });
        }
        self.usage.in_flight.fetch_add(1, Ordering::SeqCst);
        let in_flight = InFlight(Arc::clone(&self.usage));
        let (allowed, deadline) = (self.allowed.clone(), self.deadline);
        let held = Arc::clone(&self.usage.held);
        Box::new(async move {
            let in_flight = in_flight;
            let (parts, body) = request.into_parts();
            let body = Limited::new(body, MAX_REQUEST_BYTES)
                .collect()
                .await
                .map_err(|_| Error::HttpRequestBodySize(Some(MAX_REQUEST_BYTES as u64)))?
                .to_bytes();
            let mut headers: BTreeMap<String, String> = BTreeMap::new();
            for (name, value) in &parts.headers {
                // `wasmtime-wasi-http` sets `Host` from the URL's authority
                // (a guest may not set it); the client sets it again from
                // the URL, which the grants check.
                if name == http::header::HOST {
                    continue;
                }
                let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
                headers
                    .entry(name.as_str().to_owned())
                    .and_modify(|joined| {
                        joined.push_str(", ");
                        joined.push_str(&value);
                    })
                    .or_insert(value);
            }
            let description = serde_json::json!({
                "url": parts.uri.to_string(),
                "method": parts.method.as_str(),
                "headers": headers,
            });
            let description =
                serde_json::to_vec(&description).map_err(|e| Error::InternalError(Some(e.to_string())))?;
            let body = (!body.is_empty()).then(|| body.to_vec());
            // Counted in `held` as it is read: four requests read at once
            // share the room, where each saw all of it before.
            let limit = super::http::BodyLimit::shared(held, MAX_HELD_BYTES, "the instance may hold of responses");
            // The count of requests in flight goes with the request to its
            // blocking thread: a guest that drops the response's future
            // aborts this task, not the thread, which goes on until the
            // deadline (before, each such request freed its place at once,
            // and a guest could start requests without end).
            let response = super::http::request(&description, body, allowed, deadline, limit, in_flight)
                .await
                .map_err(|e| match e.downcast_ref::<Stop>() {
                    Some(Stop::Denied(message)) => {
                        tracing::warn!(target: "toolhost::guest", "{message}");
                        Error::HttpRequestDenied
                    }
                    Some(Stop::Timeout) => Error::ConnectionTimeout,
                    _ => Error::InternalError(Some(e.to_string())),
                })?;
            let mut builder = http::Response::builder().status(response.status);
            for (name, value) in &response.headers {
                builder = builder.header(name.as_str(), value.as_str());
            }
            // Counted as it was read, until the guest drops the body (the
            // closure owns the count, and goes with the body).
            let held = response.counted;
            let body = Full::new(Bytes::from(response.body))
                .map_frame(move |frame| {
                    let _ = &held;
                    frame
                })
                .map_err(|never| match never {})
                .boxed_unsync();
            let response = builder.body(body).map_err(|e| Error::InternalError(Some(e.to_string())))?;
            Ok((response, Box::new(async { Ok(()) }) as Sent))
        })
    }
}
