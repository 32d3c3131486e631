//! `/ui`: the service's web console, three static files built into the
//! binary (no build step, nothing fetched from elsewhere). The page holds
//! no data: it signs in with a token the person gives, kept in the tab's
//! `sessionStorage`, and calls the `/v1` API with it like any client.
//! Everything a tenant or a plugin chose is put into the page as text; the
//! content security policy lets the page run only its own script and reach
//! only this origin, so a name that is markup stays text.

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;

const PAGE: &str = include_str!("../../ui/index.html");
const SCRIPT: &str = include_str!("../../ui/console.js");
const STYLE: &str = include_str!("../../ui/console.css");

/// What every file of the console is sent with.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; \
                      form-action 'none'; base-uri 'none'; frame-ancestors 'none'";

fn file(body: &'static str, media_type: &'static str) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(media_type));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

pub(super) async fn page() -> Response {
    file(PAGE, "text/html; charset=utf-8")
}

pub(super) async fn script() -> Response {
    file(SCRIPT, "text/javascript; charset=utf-8")
}

pub(super) async fn style() -> Response {
    file(STYLE, "text/css; charset=utf-8")
}
