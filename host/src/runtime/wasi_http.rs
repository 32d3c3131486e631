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
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use super::outcome::Stop;

/// Largest request body a plugin may send.
const MAX_REQUEST_BYTES: usize = 16 * 1024 * 1024;

/// How a component's requests are sent: its grants and the running call's
/// deadline.
pub(crate) struct Hooks {
    pub(crate) allowed: Vec<String>,
    pub(crate) deadline: Option<Instant>,
}

type Sent = Box<dyn Future<Output = Result<(), Error>> + Send>;

impl WasiHttpHooks for Hooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        _options: Option<RequestOptions>,
        _fut: Sent,
    ) -> Box<dyn Future<Output = Result<(http::Response<WasiBody>, Sent), Error>> + Send> {
        let (allowed, deadline) = (self.allowed.clone(), self.deadline);
        Box::new(async move {
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
            let response = super::http::request(&description, body, allowed, deadline).await.map_err(|e| match e
                .downcast_ref::<Stop>()
            {
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
            let body = Full::new(Bytes::from(response.body)).map_err(|never| match never {}).boxed_unsync();
            let response = builder.body(body).map_err(|e| Error::InternalError(Some(e.to_string())))?;
            Ok((response, Box::new(async { Ok(()) }) as Sent))
        })
    }
}
