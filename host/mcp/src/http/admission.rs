//! What the HTTP front admits, and how it sheds what it cannot serve: a
//! connection past the cap, a `tools/call` past the calls running at once,
//! a body past the bytes of bodies held at once. Each is refused at once
//! with `503` and `Retry-After`, never queued (DESIGN.md, "Overload: shed,
//! not queued").

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Response, StatusCode, header};
use serde_json::Value;

use super::{Front, MAX_LINE, error_response, json_response, too_slow};

/// Connections past the cap being answered at once; past them, a further
/// one is closed unanswered (each holds a descriptor for a moment).
pub(super) const MAX_REFUSING: usize = 64;
/// How long a refused connection is kept: to read its request's head,
/// answer, and see the client close.
const REFUSING_TIME: std::time::Duration = std::time::Duration::from_secs(2);

/// The whole answer to a connection past the cap of `places`.
pub(super) fn connections_refusal(places: usize) -> Arc<[u8]> {
    let text = format!("the server is serving its most connections ({places}); try again shortly");
    let body = error_response(Value::Null, -32000, text).to_string();
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: {}\r\n\
         Connection: close\r\nContent-Length: {}\r\n\r\n",
        crate::jsonrpc::SHED_RETRY_SECONDS,
        body.len()
    );
    format!("{head}{body}").into_bytes().into()
}

/// Answer a connection past the cap with `503` and `Retry-After`, after
/// its request's head (so that the client is reading when the answer
/// comes, and closing does not reset the connection under it), within
/// [`REFUSING_TIME`].
pub(super) async fn refuse_connection(
    mut stream: tokio::net::TcpStream,
    answer: Arc<[u8]>,
    _refusing: tokio::sync::OwnedSemaphorePermit,
) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let _ = tokio::time::timeout(REFUSING_TIME, async {
        let mut buffer = [0u8; 4096];
        let mut head = Vec::new();
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => head.extend_from_slice(&buffer[..n]),
            }
        }
        if stream.write_all(&answer).await.is_err() || stream.shutdown().await.is_err() {
            return;
        }
        // Whatever else it sent (a body) is read and dropped until it closes.
        while matches!(stream.read(&mut buffer).await, Ok(n) if n > 0) {}
    })
    .await;
}

/// Whether a message is a `tools/call`.
pub(super) fn is_call(message: &Value) -> bool {
    message.get("method").and_then(Value::as_str) == Some("tools/call")
}

/// A `503` with `Retry-After` if the server runs its most calls already
/// ([`HttpLimits::calls`]): a call past them is refused before it is
/// queued anywhere. (The server admits each call again as it starts, so
/// that calls arriving together cannot pass the bound between them.)
pub(super) fn calls_refusal(front: &Front, id: impl FnOnce() -> Value) -> Option<Response<Body>> {
    let running = front.direct.server.calls_running();
    (running >= front.limits.calls).then(|| {
        let text = crate::jsonrpc::calls_refusal_text(front.limits.calls);
        overloaded(error_response(id(), i64::from(crate::jsonrpc::LIMITED), text))
    })
}

/// `503 Service Unavailable` with `answer`, telling when to try again.
fn overloaded(answer: Value) -> Response<Body> {
    let mut response = json_response(StatusCode::SERVICE_UNAVAILABLE, &answer);
    let retry = header::HeaderValue::from(crate::jsonrpc::SHED_RETRY_SECONDS);
    response.headers_mut().insert(header::RETRY_AFTER, retry);
    response
}

/// Bytes of request bodies held against the server's budget
/// ([`HttpLimits::body_bytes`]), given back when dropped.
pub(crate) struct HeldBytes {
    budget: Arc<tokio::sync::Semaphore>,
    bytes: usize,
}

impl HeldBytes {
    /// Take `bytes` more from the budget, or a `503` (a `413` if the
    /// budget could never hold them).
    fn take(&mut self, bytes: usize, limit: usize) -> Result<(), Box<Response<Body>>> {
        if self.bytes + bytes > limit {
            let text = format!("the request body is larger than the {limit} bytes of bodies this server holds at once");
            let answer = error_response(Value::Null, -32600, text);
            return Err(Box::new(json_response(StatusCode::PAYLOAD_TOO_LARGE, &answer)));
        }
        let permits = u32::try_from(bytes).unwrap_or(u32::MAX);
        let Ok(permit) = Arc::clone(&self.budget).try_acquire_many_owned(permits) else {
            let text = format!("the server holds its most bytes of request bodies ({limit}); try again shortly");
            return Err(Box::new(overloaded(error_response(Value::Null, -32600, text))));
        };
        permit.forget();
        self.bytes += permits as usize;
        Ok(())
    }
}

impl Drop for HeldBytes {
    fn drop(&mut self) {
        self.budget.add_permits(self.bytes);
    }
}

/// A request's body, at most [`MAX_LINE`] bytes, arriving no slower than
/// the server's minimum rate, its bytes held against the server's budget
/// of body bytes: all it declares (`Content-Length`) before any is read,
/// else each piece as it comes. Or the refusal: `503` with `Retry-After`
/// at once when the budget is spent.
pub(super) async fn read_body(
    front: &Front,
    parts: &axum::http::request::Parts,
    body: Body,
) -> Result<(axum::body::Bytes, HeldBytes), Response<Body>> {
    let too_large = || {
        let error = error_response(Value::Null, -32600, format!("the request body is larger than {MAX_LINE} bytes"));
        json_response(StatusCode::PAYLOAD_TOO_LARGE, &error)
    };
    let limit = front.limits.body_bytes;
    let mut held = HeldBytes { budget: Arc::clone(&front.bodies), bytes: 0 };
    let declared =
        (parts.headers.get(header::CONTENT_LENGTH)).and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
    if let Some(length) = declared {
        if length > MAX_LINE as u64 {
            return Err(too_large());
        }
        held.take(length as usize, limit).map_err(|refusal| *refusal)?;
    }
    let mut bytes = Vec::with_capacity(held.bytes);
    let mut body = std::pin::pin!(body);
    while let Some(frame) = std::future::poll_fn(|cx| http_body::Body::poll_frame(body.as_mut(), cx)).await {
        let frame = frame.map_err(|error| {
            let status = if too_slow(&error) { StatusCode::REQUEST_TIMEOUT } else { StatusCode::BAD_REQUEST };
            json_response(status, &error_response(Value::Null, -32600, error.to_string()))
        })?;
        let Ok(data) = frame.into_data() else { continue };
        if bytes.len() + data.len() > MAX_LINE {
            return Err(too_large());
        }
        if bytes.len() + data.len() > held.bytes {
            held.take(bytes.len() + data.len() - held.bytes, limit).map_err(|refusal| *refusal)?;
        }
        bytes.extend_from_slice(&data);
    }
    Ok((axum::body::Bytes::from(bytes), held))
}
