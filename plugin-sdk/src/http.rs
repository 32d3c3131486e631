//! HTTP from a tool, the same code on both targets: Extism's
//! `http_request` in a module (`wasm32-wasip1`), `wasi:http`'s
//! outgoing handler in a component (`wasm32-wasip2`). The host sends only
//! to the hosts the person running it granted (`--allow-host`), checks
//! every redirect, caps the response and bounds the wait by the call's
//! deadline.
//!
//! ```no_run
//! use toolhost_plugin_sdk::http;
//!
//! # fn demo() -> Result<(), http::HttpError> {
//! let response = http::Request::get("https://api.example.com/status").header("accept", "text/plain").send()?;
//! assert_eq!(response.status, 200);
//! println!("{}", response.text());
//! # Ok(()) }
//! ```

use std::fmt;

/// An HTTP request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `POST`...
    pub method: String,
    /// An absolute `http://` or `https://` URL.
    pub url: String,
    /// Header names and values, in order.
    pub headers: Vec<(String, String)>,
    /// The body, if any.
    pub body: Option<Vec<u8>>,
}

/// An HTTP response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Header names (lower case) and values.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

/// Why a request got no response: the host refused it (a host not
/// granted), the network failed, or the request was malformed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpError(pub String);

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HttpError {}

impl Request {
    /// A request with this method and URL.
    pub fn new(method: impl Into<String>, url: impl Into<String>) -> Self {
        Request { method: method.into(), url: url.into(), headers: Vec::new(), body: None }
    }

    /// A `GET` request.
    pub fn get(url: impl Into<String>) -> Self {
        Self::new("GET", url)
    }

    /// A `POST` request.
    pub fn post(url: impl Into<String>) -> Self {
        Self::new("POST", url)
    }

    /// The same request with a header added.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The same request with a body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = Some(body.into());
        self
    }

    /// The same request with a JSON body (and its content type).
    pub fn json<T: serde::Serialize>(self, value: &T) -> Result<Self, HttpError> {
        let body = serde_json::to_vec(value).map_err(|e| HttpError(format!("cannot encode the body: {e}")))?;
        Ok(self.header("content-type", "application/json").body(body))
    }

    /// Send it and wait for the whole response.
    pub fn send(self) -> Result<Response, HttpError> {
        imp::send(self)
    }
}

impl Response {
    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body parsed as JSON.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, HttpError> {
        serde_json::from_slice(&self.body).map_err(|e| HttpError(format!("the body is not the JSON expected: {e}")))
    }

    /// The first value of a header (names compare case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

#[cfg(not(all(target_os = "wasi", target_env = "p2")))]
mod imp {
    use super::{HttpError, Request, Response};

    pub(super) fn send(request: Request) -> Result<Response, HttpError> {
        let mut http = extism_pdk::HttpRequest::new(&request.url).with_method(&request.method);
        for (name, value) in &request.headers {
            http = http.with_header(name, value);
        }
        let response = extism_pdk::http::request::<Vec<u8>>(&http, request.body)
            .map_err(|e| HttpError(format!("the request to {} failed: {e}", request.url)))?;
        let mut headers: Vec<(String, String)> =
            response.headers().iter().map(|(n, v)| (n.to_ascii_lowercase(), v.clone())).collect();
        headers.sort();
        Ok(Response { status: response.status_code(), headers, body: response.body() })
    }
}

#[cfg(all(target_os = "wasi", target_env = "p2"))]
mod imp {
    use wasip2::http::outgoing_handler;
    use wasip2::http::types::{Fields, Method, OutgoingBody, OutgoingRequest, Scheme};
    use wasip2::io::streams::StreamError;

    use super::{HttpError, Request, Response};

    /// Bytes written to a stream at a time (what `blocking-write-and-flush`
    /// accepts at most).
    const CHUNK: usize = 4096;

    pub(super) fn send(request: Request) -> Result<Response, HttpError> {
        let failed = |what: &str| HttpError(format!("the request to {} failed: {what}", request.url));
        let (scheme, rest) = match request.url.split_once("://") {
            Some(("https", rest)) => (Scheme::Https, rest),
            Some(("http", rest)) => (Scheme::Http, rest),
            _ => return Err(HttpError(format!("`{}` is not an http:// or https:// URL", request.url))),
        };
        let (authority, path) = match rest.find(['/', '?']) {
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, "/"),
        };
        let path = if path.starts_with('?') { format!("/{path}") } else { path.to_owned() };
        let headers = Fields::new();
        for (name, value) in &request.headers {
            headers.append(name, value.as_bytes()).map_err(|e| failed(&format!("header `{name}`: {e:?}")))?;
        }
        let outgoing = OutgoingRequest::new(headers);
        let method = match request.method.to_ascii_uppercase().as_str() {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "CONNECT" => Method::Connect,
            "OPTIONS" => Method::Options,
            "TRACE" => Method::Trace,
            "PATCH" => Method::Patch,
            other => Method::Other(other.to_owned()),
        };
        outgoing.set_method(&method).map_err(|()| failed("the method is not valid"))?;
        outgoing.set_scheme(Some(&scheme)).map_err(|()| failed("the scheme is not valid"))?;
        outgoing.set_authority(Some(authority)).map_err(|()| failed("the host is not valid"))?;
        outgoing.set_path_with_query(Some(&path)).map_err(|()| failed("the path is not valid"))?;
        let body = outgoing.body().map_err(|()| failed("no request body"))?;
        let future = outgoing_handler::handle(outgoing, None).map_err(|e| failed(&format!("{e:?}")))?;
        if let Some(bytes) = &request.body {
            let stream = body.write().map_err(|()| failed("no request body stream"))?;
            for chunk in bytes.chunks(CHUNK) {
                stream.blocking_write_and_flush(chunk).map_err(|e| failed(&format!("writing the body: {e:?}")))?;
            }
        }
        OutgoingBody::finish(body, None).map_err(|e| failed(&format!("{e:?}")))?;
        future.subscribe().block();
        let response = match future.get() {
            Some(Ok(Ok(response))) => response,
            Some(Ok(Err(code))) => return Err(failed(&format!("{code:?}"))),
            Some(Err(())) | None => return Err(failed("no response")),
        };
        let status = response.status();
        let headers = response
            .headers()
            .entries()
            .into_iter()
            .map(|(name, value)| (name.to_ascii_lowercase(), String::from_utf8_lossy(&value).into_owned()))
            .collect();
        let incoming = response.consume().map_err(|()| failed("no response body"))?;
        let stream = incoming.stream().map_err(|()| failed("no response body stream"))?;
        let mut body = Vec::new();
        loop {
            match stream.blocking_read(64 * 1024) {
                Ok(chunk) => body.extend_from_slice(&chunk),
                Err(StreamError::Closed) => break,
                Err(e) => return Err(failed(&format!("reading the body: {e:?}"))),
            }
        }
        Ok(Response { status, headers, body })
    }
}
