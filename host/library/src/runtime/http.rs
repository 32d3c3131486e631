//! `extism:host/env::http_request`: HTTP for plugins, only to granted hosts.
//!
//! The request is Extism's (`{"url", "method", "headers"}` as JSON, and an
//! optional body block); the response body comes back as a block, its
//! status through `http_status_code` and its headers through
//! `http_headers`. A host that matches no allowed-host pattern is refused
//! before anything is sent, and so is every redirect to one: redirects are
//! followed here, one hop at a time, each checked against the grants
//! (Extism lets its HTTP client follow them unchecked).
//!
//! The request runs on a blocking thread (the client is synchronous); the
//! guest's fiber waits without holding its executor thread, and the call's
//! deadline bounds it.
//!
//! Without the `http` feature the function is still there (so a plugin
//! that imports it loads) but every request is refused, saying why.

use std::collections::BTreeMap;
#[cfg(feature = "http")]
use std::io::Read;
#[cfg(feature = "http")]
use std::time::Duration;
use std::time::Instant;

use super::outcome::Stop;
#[cfg(feature = "http")]
use serde::Deserialize;

/// Largest response body a plugin gets (Extism's default).
const MAX_RESPONSE_BYTES: usize = 50 * 1024 * 1024;

/// The most of a response's body the host reads for a plugin, and why no
/// more: what its memory limit leaves room for, or what its instance may
/// still hold. Read past it, the body would only be refused later, after
/// the host had held it outside every limit.
#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "http"), allow(dead_code))]
pub(crate) struct BodyLimit {
    pub(crate) bytes: usize,
    /// Says what bounds it, after "more than N bytes".
    pub(crate) reason: &'static str,
    /// A count shared with the instance's other requests, and its most:
    /// each chunk is counted in it as it is read (requests read at once
    /// share the room, instead of each seeing all of it). The body
    /// returned stays counted; a body refused is taken off again.
    pub(crate) shared: Option<Shared>,
}

/// A count of response bytes shared by an instance's requests.
#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "http"), allow(dead_code))]
pub(crate) struct Shared {
    pub(crate) held: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    pub(crate) most: usize,
    /// Says what the count is, after "the N bytes".
    pub(crate) reason: &'static str,
}

impl BodyLimit {
    /// [`MAX_RESPONSE_BYTES`], or `room` if that is less (`reason` says
    /// what room it is).
    pub(crate) fn within(room: usize, reason: &'static str) -> BodyLimit {
        if room < MAX_RESPONSE_BYTES {
            BodyLimit { bytes: room, reason, shared: None }
        } else {
            BodyLimit { bytes: MAX_RESPONSE_BYTES, reason: "the most a plugin gets", shared: None }
        }
    }

    /// [`MAX_RESPONSE_BYTES`], counted as it is read in `held`, which may
    /// reach `most` (`reason` says what it is).
    #[cfg(feature = "wasi-http")]
    pub(crate) fn shared(
        held: std::sync::Arc<std::sync::atomic::AtomicUsize>,
        most: usize,
        reason: &'static str,
    ) -> BodyLimit {
        BodyLimit {
            bytes: MAX_RESPONSE_BYTES,
            reason: "the most a plugin gets",
            shared: Some(Shared { held, most, reason }),
        }
    }
}

/// Bytes counted in a [`BodyLimit`]'s shared count, taken off again when
/// this is dropped: with the response's body, or with the response itself
/// if no one takes it (a guest that dropped its request's future leaves
/// the response to be dropped on its thread).
#[derive(Debug)]
#[cfg_attr(not(feature = "wasi-http"), allow(dead_code))]
pub(crate) struct Counted {
    held: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    bytes: usize,
}

impl Counted {
    /// Count `n` more bytes, if they fit under `most`.
    #[cfg(feature = "http")]
    fn take(&mut self, n: usize, most: usize) -> bool {
        use std::sync::atomic::Ordering;
        let fits = self
            .held
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |now| now.checked_add(n).filter(|after| *after <= most));
        if fits.is_ok() {
            self.bytes += n;
        }
        fits.is_ok()
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.held.fetch_sub(self.bytes, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Redirects followed, each one checked.
#[cfg(feature = "http")]
const MAX_REDIRECTS: usize = 10;

/// The largest request description (its URL, method and headers as JSON)
/// a plugin may pass: it is parsed, and its host matched against every
/// grant, before any deadline can interrupt the host call.
pub(crate) const MAX_DESCRIPTION_BYTES: usize = 64 * 1024;

/// The largest request body an Extism plugin may pass, a component's too
/// (`wasi_http`): it is copied out of the plugin's memory into the host's.
pub(crate) const MAX_REQUEST_BODY_BYTES: usize = 16 * 1024 * 1024;

/// Extism's HTTP request description.
#[cfg(feature = "http")]
#[derive(Debug, Deserialize)]
struct HttpRequest {
    url: String,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    method: Option<String>,
}

/// What came back.
pub(crate) struct HttpResponse {
    pub(crate) status: u16,
    pub(crate) headers: BTreeMap<String, String>,
    pub(crate) body: Vec<u8>,
    /// The body's bytes in the limit's shared count, if it has one: they
    /// stay counted while this is held.
    #[cfg_attr(not(feature = "wasi-http"), allow(dead_code))]
    pub(crate) counted: Option<Counted>,
}

/// Headers that carry credentials: not sent on to another origin when a
/// request is redirected there (as ureq's own redirect follower does).
#[cfg(feature = "http")]
const CREDENTIAL_HEADERS: &[&str] = &["authorization", "cookie", "proxy-authorization"];

#[cfg(feature = "http")]
fn denied(url: &str) -> wasmtime::Error {
    wasmtime::Error::new(Stop::Denied(format!(
        "HTTP request to {url} is not allowed: its host (and port) matches no allowed-host grant"
    )))
}

#[cfg(feature = "http")]
fn host_error(message: String) -> wasmtime::Error {
    wasmtime::Error::new(Stop::Host(message))
}

/// Refuse a request that sets a header of [`TRANSPORT_HEADERS`](crate::TRANSPORT_HEADERS).
#[cfg(feature = "http")]
fn check_headers(url: &str, headers: &BTreeMap<String, String>) -> wasmtime::Result<()> {
    match headers.keys().find_map(|name| crate::sandbox::transport_header(name)) {
        None => Ok(()),
        // (Named as in the list, not as the plugin spelled it.)
        Some(name) => Err(wasmtime::Error::new(Stop::Denied(format!(
            "HTTP request to {url} is not allowed: a plugin may not set the `{name}` header (the host sets it; \
             the request goes to the URL's host, which the grants check)"
        )))),
    }
}

/// Check a URL against the grants: its scheme and its host.
#[cfg(feature = "http")]
fn check_url(url: &str, allowed: &[String]) -> wasmtime::Result<url::Url> {
    let parsed = url::Url::parse(url).map_err(|e| host_error(format!("invalid URL {url}: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(host_error(format!("HTTP request to {url}: only http and https URLs are supported")));
    }
    match parsed.host_str() {
        Some(host) if crate::sandbox::host_matches(allowed, host, parsed.port_or_known_default()) => Ok(parsed),
        _ => Err(denied(url)),
    }
}

/// Run a request a guest described (Extism's JSON description, and a
/// body): refused unless its host matches a grant in `allowed`, bounded by
/// `deadline`. `on_thread` is kept until the request is done on its
/// blocking thread (which dropping this future does not stop): a count of
/// requests in flight stays right however the guest lets go of them.
#[cfg(feature = "http")]
pub(crate) async fn request(
    description: &[u8],
    body: Option<Vec<u8>>,
    allowed: Vec<String>,
    deadline: Option<Instant>,
    limit: BodyLimit,
    on_thread: impl Send + 'static,
) -> wasmtime::Result<HttpResponse> {
    if description.len() > MAX_DESCRIPTION_BYTES {
        return Err(host_error(format!(
            "the HTTP request description is {} bytes, more than the {MAX_DESCRIPTION_BYTES} a plugin may pass \
             (a URL and headers that large are not a request)",
            description.len()
        )));
    }
    let description: HttpRequest = serde_json::from_slice(description)
        .map_err(|e| host_error(format!("the HTTP request description is not valid: {e}")))?;
    check_url(&description.url, &allowed)?;
    check_headers(&description.url, &description.headers)?;
    tokio::task::spawn_blocking(move || {
        let _kept = on_thread;
        send(description, body, &allowed, deadline, limit)
    })
    .await
    .map_err(|e| host_error(format!("the HTTP thread failed: {e}")))?
}

/// Refuse a request: this toolhost was built without HTTP.
#[cfg(not(feature = "http"))]
pub(crate) async fn request(
    _description: &[u8],
    _body: Option<Vec<u8>>,
    _allowed: Vec<String>,
    _deadline: Option<Instant>,
    _limit: BodyLimit,
    _on_thread: impl Send + 'static,
) -> wasmtime::Result<HttpResponse> {
    Err(wasmtime::Error::new(Stop::Denied(
        "HTTP requests are not available: this toolhost was built without its `http` feature".to_owned(),
    )))
}

/// Send the request and follow redirects to granted hosts.
#[cfg(feature = "http")]
fn send(
    request: HttpRequest,
    body: Option<Vec<u8>>,
    allowed: &[String],
    deadline: Option<Instant>,
    limit: BodyLimit,
) -> wasmtime::Result<HttpResponse> {
    let remaining = || deadline.map(|d| d.saturating_duration_since(Instant::now()));
    let mut url = request.url.clone();
    let mut headers = request.headers.clone();
    let mut method = request.method.as_deref().unwrap_or("GET").to_ascii_uppercase();
    let mut body = body;
    for _ in 0..=MAX_REDIRECTS {
        let origin = check_url(&url, allowed)?.origin();
        if remaining().is_some_and(|r| r.is_zero()) {
            return Err(wasmtime::Error::new(Stop::Timeout));
        }
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .max_redirects_will_error(false)
            .timeout_global(remaining().map(|r| r.max(Duration::from_millis(1))))
            .build();
        let resolver = crate::resolve::GrantedAddresses::new(allowed.to_vec());
        let agent = ureq::Agent::with_parts(config, ureq::unversioned::transport::DefaultConnector::new(), resolver);
        let mut builder = ureq::http::Request::builder().method(method.as_str()).uri(url.as_str());
        for (name, value) in &headers {
            builder = builder.header(name, value);
        }
        let sent = match &body {
            Some(bytes) => builder.body(bytes.clone()).map(|r| agent.run(r)),
            None => builder.body(()).map(|r| agent.run(r)),
        }
        .map_err(|e| host_error(format!("invalid HTTP request to {url}: {e}")))?;
        let response = match sent {
            Ok(response) => response,
            Err(ureq::Error::Timeout(_)) if remaining().is_some_and(|r| r.is_zero()) => {
                return Err(wasmtime::Error::new(Stop::Timeout));
            }
            Err(ureq::Error::Other(refused)) if refused.is::<crate::AddressRefused>() => {
                return Err(wasmtime::Error::new(Stop::Denied(format!(
                    "HTTP request to {url} is not allowed: {refused}"
                ))));
            }
            Err(e) => return Err(host_error(format!("HTTP request to {url} failed: {e}"))),
        };
        let status = response.status().as_u16();
        if (300..400).contains(&status)
            && let Some(location) = response.headers().get("location").and_then(|l| l.to_str().ok())
        {
            let next = url::Url::parse(&url)
                .and_then(|base| base.join(location))
                .map_err(|e| host_error(format!("HTTP redirect from {url} to an invalid location: {e}")))?;
            // Credentials the guest set are for the origin it named: not
            // sent on to another one (and not back after that).
            if next.origin() != origin {
                headers.retain(|name, _| !CREDENTIAL_HEADERS.iter().any(|c| name.eq_ignore_ascii_case(c)));
            }
            url = next.to_string();
            // 303 (and, by custom, 301/302 for POST) turn into GET.
            if status == 303 || ((status == 301 || status == 302) && method == "POST") {
                method = "GET".to_owned();
                body = None;
            }
            continue;
        }
        let headers = response
            .headers()
            .iter()
            .filter_map(|(name, value)| Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned())))
            .collect();
        let (bytes, counted) = read_body(response.into_body().into_reader(), &url, &limit)?;
        return Ok(HttpResponse { status, headers, body: bytes, counted });
    }
    Err(host_error(format!("HTTP request to {} was redirected more than {MAX_REDIRECTS} times", request.url)))
}

/// A response's body, read within the call's body limit and the plugin's
/// shared memory room: what was read, and its share of that room.
#[cfg(feature = "http")]
fn read_body(mut reader: impl Read, url: &str, limit: &BodyLimit) -> wasmtime::Result<(Vec<u8>, Option<Counted>)> {
    let mut bytes = Vec::new();
    let mut counted =
        limit.shared.as_ref().map(|shared| (shared, Counted { held: std::sync::Arc::clone(&shared.held), bytes: 0 }));
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n =
            reader.read(&mut chunk).map_err(|e| host_error(format!("reading the response of {url} failed: {e}")))?;
        if n == 0 {
            break;
        }
        if bytes.len() + n > limit.bytes {
            return Err(host_error(format!(
                "the response of {url} is larger than {} bytes, {}",
                limit.bytes, limit.reason
            )));
        }
        if let Some((shared, counted)) = &mut counted
            && !counted.take(n, shared.most)
        {
            return Err(host_error(format!(
                "the response of {url} does not fit in what is left of the {} bytes {} (its other \
                 responses hold the rest)",
                shared.most, shared.reason
            )));
        }
        bytes.extend_from_slice(&chunk[..n]);
    }
    Ok((bytes, counted.map(|(_, counted)| counted)))
}

#[cfg(all(test, feature = "http"))]
mod tests {
    use super::*;
    use crate::sandbox::host_matches;

    #[test]
    fn host_patterns_match_whole_names_with_wildcards() {
        let patterns = vec!["api.example.com".to_owned(), "*.example.org".to_owned(), "127.0.0.1".to_owned()];
        assert!(host_matches(&patterns, "api.example.com", None));
        assert!(host_matches(&patterns, "API.Example.com", None));
        assert!(!host_matches(&patterns, "evil-api.example.com", None));
        assert!(!host_matches(&patterns, "api.example.com.evil.net", None));
        assert!(host_matches(&patterns, "a.b.example.org", None));
        assert!(!host_matches(&patterns, "example.org", None));
        assert!(host_matches(&patterns, "127.0.0.1", None));
        assert!(!host_matches(&patterns, "127.0.0.2", None));
        assert!(!host_matches(&[], "anything", None));
        assert!(host_matches(&["a*b*c".to_owned()], "axxbyyc", None));
        assert!(!host_matches(&["a*b*c".to_owned()], "axxbyy", None));
        assert!(host_matches(&["*".to_owned()], "", None));
    }

    #[test]
    fn host_patterns_may_name_a_port() {
        let patterns = vec![
            "127.0.0.1:8080".to_owned(),
            "*.example.com:443".to_owned(),
            "[::1]:9000".to_owned(),
            "[::2]".to_owned(),
        ];
        assert!(host_matches(&patterns, "127.0.0.1", Some(8080)));
        assert!(!host_matches(&patterns, "127.0.0.1", Some(8081)));
        assert!(!host_matches(&patterns, "127.0.0.1", None));
        assert!(host_matches(&patterns, "api.example.com", Some(443)));
        assert!(!host_matches(&patterns, "api.example.com", Some(80)));
        assert!(host_matches(&patterns, "[::1]", Some(9000)));
        assert!(!host_matches(&patterns, "[::1]", Some(9001)));
        // Without a port, any port.
        assert!(host_matches(&patterns, "[::2]", Some(1)));
        assert!(host_matches(&["localhost".to_owned()], "localhost", Some(5432)));
        let allowed = vec!["127.0.0.1:8080".to_owned()];
        assert!(check_url("http://127.0.0.1:8080/x", &allowed).is_ok());
        assert!(check_url("http://127.0.0.1/x", &allowed).is_err(), "port 80 is not 8080");
        assert!(check_url("http://127.0.0.1:5432/", &allowed).is_err());
        assert!(check_url("https://api.example.com/", &["api.example.com:443".to_owned()]).is_ok());
    }

    #[test]
    fn many_wildcards_against_a_long_host_take_linear_time() {
        let pattern = vec![format!("{}b", "*a".repeat(20))];
        let host = "a".repeat(253);
        let started = std::time::Instant::now();
        assert!(!host_matches(&pattern, &host, None));
        // Exponential backtracking would take hours; this is microseconds.
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn urls_need_a_granted_host_and_an_http_scheme() {
        let allowed = vec!["example.com".to_owned()];
        assert!(check_url("https://example.com/x", &allowed).is_ok());
        let denied = check_url("https://other.com/", &allowed).unwrap_err();
        assert!(matches!(denied.downcast_ref::<Stop>(), Some(Stop::Denied(_))));
        let scheme = check_url("file:///etc/passwd", &allowed).unwrap_err();
        assert!(scheme.to_string().contains("only http and https"), "{scheme}");
    }
}
