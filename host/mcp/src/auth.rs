//! Authorization as an MCP resource server (the specification's
//! authorization section, OAuth 2.1): every request to `/mcp` carries a
//! bearer token, a JWT access token checked against the issuer's JWKS
//! (signature, `iss`, `aud` = this server's resource URI, `exp`/`nbf`), or
//! one of the configured API keys. A request without a valid token gets
//! `401` with `WWW-Authenticate` pointing at the protected-resource
//! metadata (RFC 9728); a token without a required scope gets `403` naming
//! it (step-up). Tokens stay here: plugins and remote servers never see
//! them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::Digest as _;
use toolhost::Scopes;

/// The `auth` part of the `serve` section.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct AuthSettings {
    /// The OAuth authorization servers clients get tokens from.
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    /// Scopes every request's token must hold.
    #[serde(default)]
    pub required_scopes: Vec<String>,
    /// Scopes the metadata lists (default: every scope required).
    #[serde(default)]
    pub scopes_supported: Vec<String>,
    /// JWT access tokens.
    pub jwt: Option<JwtSettings>,
    /// Static API keys.
    #[serde(default)]
    pub api_keys: Vec<ApiKey>,
}

/// JWT access tokens and where their signing keys are.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct JwtSettings {
    /// The `iss` every token must carry.
    pub issuer: String,
    /// The `aud` every token must carry (default: the resource URI).
    pub audience: Option<String>,
    /// Where the issuer's JWKS is served.
    pub jwks_url: Option<String>,
    /// A JWKS file (relative to the toolsets file).
    pub jwks_file: Option<PathBuf>,
    /// Accepted algorithms (default RS256 and ES256).
    #[serde(default)]
    pub algorithms: Vec<String>,
    /// Clock skew allowed for `exp` and `nbf`, in seconds (default 30).
    pub leeway_seconds: Option<u64>,
}

impl JwtSettings {
    /// Tokens from `issuer`, signed by the keys at `jwks_url`.
    pub fn from_url(issuer: impl Into<String>, jwks_url: impl Into<String>) -> Self {
        JwtSettings {
            issuer: issuer.into(),
            audience: None,
            jwks_url: Some(jwks_url.into()),
            jwks_file: None,
            algorithms: Vec::new(),
            leeway_seconds: None,
        }
    }
}

/// A static API key: who it is and what it may do.
#[derive(Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApiKey {
    /// The key itself (a client sends it as its bearer token).
    pub key: String,
    /// Who the key is.
    pub subject: String,
    /// The scopes it holds.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Claims the key carries as a JWT would (`workspace_id`,
    /// `profile_type`...: the tool-set service reads them).
    #[serde(default)]
    pub claims: serde_json::Map<String, Value>,
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKey").field("subject", &self.subject).field("scopes", &self.scopes).finish_non_exhaustive()
    }
}

/// Who made a request, as its token says.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Principal {
    /// The token's `sub` (or the API key's subject).
    pub subject: String,
    /// The scopes it holds.
    pub scopes: Scopes,
    /// How it was authenticated.
    pub credential: Credential,
    /// The token's claims (a JWT's payload, an API key's `claims`), for
    /// what reads more of them than the subject and scopes (the tool-set
    /// service's workspace and profile).
    pub claims: std::sync::Arc<serde_json::Map<String, Value>>,
}

impl Principal {
    /// Who it is, as sessions and rate limits know it: the subject, kept
    /// apart by credential (an API key's subject is not a JWT's `sub`).
    pub fn key(&self) -> String {
        match self.credential {
            Credential::Jwt => format!("jwt:{}", self.subject),
            Credential::ApiKey => format!("key:{}", self.subject),
        }
    }
}

/// How a [`Principal`] was authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential {
    /// A JWT access token.
    Jwt,
    /// A configured API key.
    ApiKey,
}

/// Why a request was not let in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthFailure {
    /// No `Authorization: Bearer` header.
    #[error("the request has no bearer token")]
    Missing,
    /// A token that is not valid here (its reason, safe to show).
    #[error("the token is not valid: {0}")]
    Invalid(String),
    /// A valid token without these required scopes.
    #[error("the token lacks the scope {}", .0.join(" "))]
    InsufficientScope(Vec<String>),
}

impl AuthFailure {
    /// A short label for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            AuthFailure::Missing => "missing",
            AuthFailure::Invalid(_) => "invalid",
            AuthFailure::InsufficientScope(_) => "insufficient_scope",
        }
    }
}

/// Why authorization could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthSetupError {
    /// The JWKS could not be read.
    #[error("cannot read the JWKS {where_}: {message}")]
    Jwks {
        /// The file or URL.
        where_: String,
        /// What went wrong.
        message: String,
    },
    /// A setting is unusable.
    #[error("{0}")]
    Settings(String),
}

/// The longest token looked at (bytes): a longer one is refused unread.
const MAX_TOKEN: usize = 16 * 1024;
/// How long fetched signing keys are used before they are fetched again.
const JWKS_TTL: Duration = Duration::from_secs(300);
/// The least time between fetches for a key id not seen (a token naming
/// made-up keys cannot make the server hammer the issuer).
const UNKNOWN_KEY_REFETCH: Duration = Duration::from_secs(60);
/// The longest a JWKS fetch may take, and the largest JWKS read.
const JWKS_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_JWKS: usize = 1024 * 1024;

/// Where the signing keys come from, and the ones known.
struct KeySource {
    url: Option<String>,
    http: Option<reqwest::Client>,
    cache: tokio::sync::Mutex<KeyCache>,
}

#[derive(Default)]
struct KeyCache {
    set: Option<JwkSet>,
    /// When the set was last fetched.
    fetched: Option<Instant>,
    /// When a fetch was last tried, whether it worked or not: fetches are
    /// at least [`UNKNOWN_KEY_REFETCH`] apart, so neither tokens naming
    /// made-up keys nor an issuer that is down make a fetch per request.
    attempted: Option<Instant>,
}

/// How long a verified JWT is taken on trust (by its digest) before its
/// signature is checked again (never past its `exp`).
const VERIFIED_TTL: Duration = Duration::from_secs(300);
/// The most verified tokens remembered.
const MAX_VERIFIED: usize = 10_000;

/// Checks bearer tokens and answers for the protected resource.
pub struct Authenticator {
    resource: String,
    resource_url: url::Url,
    settings: AuthSettings,
    validation: Option<Validation>,
    keys: Option<KeySource>,
    api_keys: Vec<([u8; 32], Principal)>,
    /// JWTs whose signature and claims checked out, by SHA-256: a client
    /// sends the same token with every request, and a signature check
    /// costs tens of microseconds.
    verified: std::sync::Mutex<std::collections::HashMap<[u8; 32], (Principal, Instant)>>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator").field("resource", &self.resource).finish_non_exhaustive()
    }
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    sha2::Sha256::digest(bytes).into()
}

/// Equal in time independent of where they differ.
fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn algorithm(name: &str) -> Result<Algorithm, AuthSetupError> {
    name.parse::<Algorithm>().map_err(|_| AuthSetupError::Settings(format!("unknown JWT algorithm `{name}`")))
}

impl Authenticator {
    /// Set up checks for `resource` (this server's resource URI) as
    /// `settings` say; a `jwksFile` is read now (relative to `base`), a
    /// `jwksUrl` fetched now (a failure is logged and retried on the first
    /// token: the server starts while the issuer is away).
    pub async fn new(resource: &str, settings: AuthSettings, base: &Path) -> Result<Authenticator, AuthSetupError> {
        let resource_url = url::Url::parse(resource)
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https") && url.host().is_some())
            .ok_or_else(|| {
                AuthSetupError::Settings(format!("the resource `{resource}` is not an absolute http(s) URL"))
            })?;
        let mut validation = None;
        let mut keys = None;
        if let Some(jwt) = &settings.jwt {
            let algorithms = if jwt.algorithms.is_empty() {
                vec![Algorithm::RS256, Algorithm::ES256]
            } else {
                jwt.algorithms.iter().map(|a| algorithm(a)).collect::<Result<_, _>>()?
            };
            if algorithms.iter().any(|a| matches!(a, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512)) {
                return Err(AuthSetupError::Settings(
                    "shared-secret JWT algorithms (HS*) are not accepted: the issuer signs with a private key"
                        .to_owned(),
                ));
            }
            let mut check = Validation::new(algorithms[0]);
            check.algorithms = algorithms;
            check.set_issuer(&[&jwt.issuer]);
            check.set_audience(&[jwt.audience.as_deref().unwrap_or(resource)]);
            check.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
            check.validate_nbf = true;
            check.leeway = jwt.leeway_seconds.unwrap_or(30);
            validation = Some(check);
            let mut cache = KeyCache::default();
            let mut http = None;
            match (&jwt.jwks_file, &jwt.jwks_url) {
                (Some(file), _) => {
                    let path = base.join(file);
                    let fail = |message: String| AuthSetupError::Jwks { where_: path.display().to_string(), message };
                    let text = std::fs::read_to_string(&path).map_err(|e| fail(e.to_string()))?;
                    cache.set = Some(serde_json::from_str(&text).map_err(|e| fail(e.to_string()))?);
                    cache.fetched = Some(Instant::now());
                }
                (None, Some(url)) => {
                    let _ = rustls::crypto::ring::default_provider().install_default();
                    let client = reqwest::Client::builder()
                        .timeout(JWKS_TIMEOUT)
                        .redirect(reqwest::redirect::Policy::limited(3))
                        .build()
                        .map_err(|e| AuthSetupError::Jwks { where_: url.clone(), message: e.to_string() })?;
                    cache.attempted = Some(Instant::now());
                    match fetch_jwks(&client, url).await {
                        Ok(set) => {
                            cache.set = Some(set);
                            cache.fetched = Some(Instant::now());
                        }
                        Err(message) => tracing::warn!("cannot fetch the JWKS {url} yet: {message}"),
                    }
                    http = Some(client);
                }
                (None, None) => {
                    return Err(AuthSetupError::Settings("serve.auth.jwt needs jwksUrl or jwksFile".to_owned()));
                }
            }
            keys = Some(KeySource { url: jwt.jwks_url.clone(), http, cache: tokio::sync::Mutex::new(cache) });
        }
        let api_keys = settings
            .api_keys
            .iter()
            .map(|key| {
                let principal = Principal {
                    subject: key.subject.clone(),
                    scopes: key.scopes.iter().cloned().collect(),
                    credential: Credential::ApiKey,
                    claims: std::sync::Arc::new(key.claims.clone()),
                };
                (sha256(key.key.as_bytes()), principal)
            })
            .collect();
        Ok(Authenticator {
            resource: resource.to_owned(),
            resource_url,
            settings,
            validation,
            keys,
            api_keys,
            verified: Default::default(),
        })
    }

    /// This server's resource URI.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The path the protected-resource metadata is served at: RFC 9728's
    /// well-known prefix before the resource's path
    /// (`/.well-known/oauth-protected-resource/mcp`).
    pub fn metadata_path(&self) -> String {
        let path = self.resource_url.path();
        format!("/.well-known/oauth-protected-resource{}", if path == "/" { "" } else { path.trim_end_matches('/') })
    }

    /// Where clients find the metadata (an absolute URL).
    pub fn metadata_url(&self) -> String {
        format!("{}{}", self.resource_url.origin().ascii_serialization(), self.metadata_path())
    }

    /// The protected-resource metadata document (RFC 9728).
    pub fn metadata(&self) -> Value {
        let mut scopes: BTreeSet<&str> = self.settings.scopes_supported.iter().map(String::as_str).collect();
        if scopes.is_empty() {
            scopes.extend(self.settings.required_scopes.iter().map(String::as_str));
        }
        json!({
            "resource": self.resource,
            "authorization_servers": self.settings.authorization_servers,
            "scopes_supported": scopes,
            "bearer_methods_supported": ["header"],
            "resource_name": "toolhost",
        })
    }

    /// The `WWW-Authenticate` value for a refusal.
    pub fn challenge(&self, failure: &AuthFailure) -> String {
        let quoted = |text: &str| text.replace(['\\', '"'], "'").replace(|c: char| c.is_control(), " ");
        let metadata = self.metadata_url();
        let required = self.settings.required_scopes.join(" ");
        let scope = |scopes: &str| if scopes.is_empty() { String::new() } else { format!(", scope=\"{scopes}\"") };
        match failure {
            AuthFailure::Missing => format!("Bearer resource_metadata=\"{metadata}\"{}", scope(&required)),
            AuthFailure::Invalid(reason) => format!(
                "Bearer error=\"invalid_token\", error_description=\"{}\", resource_metadata=\"{metadata}\"{}",
                quoted(reason),
                scope(&required)
            ),
            AuthFailure::InsufficientScope(missing) => format!(
                "Bearer error=\"insufficient_scope\", scope=\"{}\", resource_metadata=\"{metadata}\"",
                missing.join(" ")
            ),
        }
    }

    /// Who sent a request with this `Authorization` header, holding the
    /// scopes every request needs.
    pub async fn authenticate(&self, authorization: Option<&str>) -> Result<Principal, AuthFailure> {
        let header = authorization.ok_or(AuthFailure::Missing)?;
        let (scheme, token) = header.trim().split_once(' ').ok_or(AuthFailure::Missing)?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(AuthFailure::Missing);
        }
        let token = token.trim();
        if token.is_empty() {
            return Err(AuthFailure::Missing);
        }
        if token.len() > MAX_TOKEN {
            return Err(AuthFailure::Invalid(format!("it is longer than {MAX_TOKEN} bytes")));
        }
        let principal = match self.api_key(token) {
            Some(principal) => principal,
            None => self.jwt(token).await?,
        };
        let missing: Vec<String> =
            self.settings.required_scopes.iter().filter(|s| !principal.scopes.contains(*s)).cloned().collect();
        if !missing.is_empty() {
            return Err(AuthFailure::InsufficientScope(missing));
        }
        Ok(principal)
    }

    fn api_key(&self, token: &str) -> Option<Principal> {
        let presented = sha256(token.as_bytes());
        // Every key is compared, so the time taken does not tell which matched.
        let mut found = None;
        for (digest, principal) in &self.api_keys {
            if same(digest, &presented) {
                found = Some(principal.clone());
            }
        }
        found
    }

    async fn jwt(&self, token: &str) -> Result<Principal, AuthFailure> {
        let (Some(validation), Some(keys)) = (&self.validation, &self.keys) else {
            return Err(AuthFailure::Invalid("it is not a known API key".to_owned()));
        };
        let digest = sha256(token.as_bytes());
        let now = Instant::now();
        if let Some((principal, until)) = self.verified.lock().unwrap_or_else(|e| e.into_inner()).get(&digest)
            && *until > now
        {
            return Ok(principal.clone());
        }
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| AuthFailure::Invalid(format!("it is neither a known API key nor a JWT ({e})")))?;
        if !validation.algorithms.contains(&header.alg) {
            return Err(AuthFailure::Invalid(format!("its algorithm {:?} is not accepted", header.alg)));
        }
        let key = keys.key_for(header.kid.as_deref(), header.alg).await?;
        // (jsonwebtoken wants every algorithm it is given to fit the key:
        // the token's own, already checked to be accepted.)
        let mut validation = validation.clone();
        validation.algorithms = vec![header.alg];
        let data = jsonwebtoken::decode::<Claims>(token, &key, &validation)
            .map_err(|e| AuthFailure::Invalid(describe_jwt_error(&e)))?;
        let mut claims = data.claims;
        let mut all = std::mem::take(&mut claims.all);
        all.insert("sub".to_owned(), Value::from(claims.sub.clone()));
        all.insert("exp".to_owned(), Value::from(claims.exp));
        let mut scopes: Scopes = claims.scope.unwrap_or_default().split_whitespace().map(str::to_owned).collect();
        match claims.scp {
            Some(Value::Array(items)) => scopes.extend(items.into_iter().filter_map(|v| v.as_str().map(str::to_owned))),
            Some(Value::String(text)) => scopes.extend(text.split_whitespace().map(str::to_owned)),
            _ => {}
        }
        let principal =
            Principal { subject: claims.sub, scopes, credential: Credential::Jwt, claims: std::sync::Arc::new(all) };
        let unix_now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let left = Duration::from_secs(claims.exp.saturating_sub(unix_now));
        let mut verified = self.verified.lock().unwrap_or_else(|e| e.into_inner());
        if verified.len() >= MAX_VERIFIED {
            verified.retain(|_, (_, until)| *until > now);
            if verified.len() >= MAX_VERIFIED {
                verified.clear();
            }
        }
        verified.insert(digest, (principal.clone(), now + left.min(VERIFIED_TTL)));
        Ok(principal)
    }
}

/// The claims read from an access token (the rest are checked by
/// `Validation` or ignored).
#[derive(Deserialize)]
struct Claims {
    sub: String,
    exp: u64,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    scp: Option<Value>,
    /// Every claim, these included.
    #[serde(flatten)]
    all: serde_json::Map<String, Value>,
}

fn describe_jwt_error(error: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind as K;
    match error.kind() {
        K::ExpiredSignature => "it has expired".to_owned(),
        K::ImmatureSignature => "it is not valid yet (nbf)".to_owned(),
        K::InvalidIssuer => "it was issued by another issuer".to_owned(),
        K::InvalidAudience => "it was issued for another resource (aud)".to_owned(),
        K::InvalidSignature => "its signature does not verify".to_owned(),
        K::MissingRequiredClaim(claim) => format!("it has no `{claim}` claim"),
        K::InvalidAlgorithm => "its algorithm does not fit its key".to_owned(),
        other => format!("{other:?}"),
    }
}

async fn fetch_jwks(client: &reqwest::Client, url: &str) -> Result<JwkSet, String> {
    let mut response = client.get(url).send().await.map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        return Err(format!("it answered {}", response.status()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > MAX_JWKS {
            return Err(format!("it is larger than {MAX_JWKS} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|e| format!("it is not a JWKS: {e}"))
}

impl KeySource {
    /// The key a token names (or the only key, for a token naming none),
    /// fetching the set again when it is old or the key is not in it (at
    /// most once a minute for unknown keys).
    async fn key_for(&self, kid: Option<&str>, alg: Algorithm) -> Result<DecodingKey, AuthFailure> {
        let mut cache = self.cache.lock().await;
        let stale = cache.fetched.is_none_or(|at| at.elapsed() > JWKS_TTL);
        let found = cache.set.as_ref().and_then(|set| pick(set, kid, alg)).cloned();
        let may_fetch = cache.attempted.is_none_or(|at| at.elapsed() > UNKNOWN_KEY_REFETCH);
        if (found.is_none() || stale)
            && may_fetch
            && let (Some(client), Some(url)) = (&self.http, &self.url)
        {
            cache.attempted = Some(Instant::now());
            match fetch_jwks(client, url).await {
                Ok(set) => {
                    cache.set = Some(set);
                    cache.fetched = Some(Instant::now());
                }
                // The keys known go on being used.
                Err(message) => tracing::warn!("cannot fetch the JWKS {url}: {message}"),
            }
        }
        let jwk = cache.set.as_ref().and_then(|set| pick(set, kid, alg)).cloned().or(found).ok_or_else(|| {
            AuthFailure::Invalid(match kid {
                Some(kid) => format!("its key `{kid}` is not among the issuer's keys"),
                None => "it names no key (kid) and the issuer has more than one".to_owned(),
            })
        })?;
        drop(cache);
        DecodingKey::from_jwk(&jwk).map_err(|e| AuthFailure::Invalid(format!("its key cannot be used: {e}")))
    }
}

/// The signing key of `kid` (or, without one, the only key usable with
/// `alg`).
fn pick<'a>(set: &'a JwkSet, kid: Option<&str>, alg: Algorithm) -> Option<&'a Jwk> {
    let signing = |jwk: &&Jwk| {
        !matches!(jwk.common.public_key_use, Some(jsonwebtoken::jwk::PublicKeyUse::Encryption))
            && jwk.common.key_algorithm.is_none_or(|a| a.to_string() == format!("{alg:?}"))
    };
    match kid {
        Some(kid) => set.keys.iter().filter(signing).find(|jwk| jwk.common.key_id.as_deref() == Some(kid)),
        None => {
            let mut usable = set.keys.iter().filter(signing);
            let first = usable.next()?;
            usable.next().is_none().then_some(first)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn keys_only(required: &[&str]) -> Authenticator {
        let settings = AuthSettings {
            required_scopes: required.iter().map(|s| (*s).to_owned()).collect(),
            api_keys: vec![ApiKey {
                key: "k-0123456789abcdef".into(),
                subject: "ci".into(),
                scopes: vec!["tools:read".into()],
                claims: Default::default(),
            }],
            ..Default::default()
        };
        Authenticator::new("https://tools.example.com/mcp", settings, Path::new(".")).await.expect("set up")
    }

    #[tokio::test]
    async fn api_keys_are_found_and_anything_else_is_refused_saying_why() {
        let auth = keys_only(&[]).await;
        let principal = auth.authenticate(Some("Bearer k-0123456789abcdef")).await.expect("known key");
        assert_eq!(principal.subject, "ci");
        assert_eq!(auth.authenticate(None).await, Err(AuthFailure::Missing));
        assert_eq!(auth.authenticate(Some("Basic abc")).await, Err(AuthFailure::Missing));
        let Err(AuthFailure::Invalid(reason)) = auth.authenticate(Some("Bearer nope")).await else { panic!() };
        assert!(reason.contains("API key"), "{reason}");
    }

    #[tokio::test]
    async fn a_huge_or_garbled_token_is_refused_unread() {
        let auth = keys_only(&[]).await;
        let huge = format!("Bearer {}", "a".repeat(MAX_TOKEN + 1));
        let Err(AuthFailure::Invalid(reason)) = auth.authenticate(Some(&huge)).await else { panic!("refused") };
        assert!(reason.contains("longer than"), "{reason}");
        for header in ["Bearer", "Bearer   ", "bearer\u{0}x", ""] {
            assert!(auth.authenticate(Some(header)).await.is_err(), "{header:?}");
        }
        // A challenge never carries a quote or a control character of the reason.
        let challenge = auth.challenge(&AuthFailure::Invalid("a \"quoted\"\r\nreason".to_owned()));
        assert!(!challenge.contains("\"quoted\"") && !challenge.contains('\n'), "{challenge}");
    }

    #[tokio::test]
    async fn a_key_without_a_required_scope_is_refused_naming_it() {
        let auth = keys_only(&["tools:read", "mcp"]).await;
        let refused = auth.authenticate(Some("Bearer k-0123456789abcdef")).await;
        assert_eq!(refused, Err(AuthFailure::InsufficientScope(vec!["mcp".to_owned()])));
        let challenge = auth.challenge(&refused.unwrap_err());
        assert!(challenge.contains("error=\"insufficient_scope\", scope=\"mcp\""), "{challenge}");
    }

    #[tokio::test]
    async fn the_metadata_lives_under_the_resources_path() {
        let auth = keys_only(&["mcp"]).await;
        assert_eq!(auth.metadata_path(), "/.well-known/oauth-protected-resource/mcp");
        assert_eq!(auth.metadata_url(), "https://tools.example.com/.well-known/oauth-protected-resource/mcp");
        assert_eq!(auth.metadata()["scopes_supported"], json!(["mcp"]));
        let bare = Authenticator::new("https://tools.example.com", AuthSettings::default(), Path::new("."))
            .await
            .expect("a resource without a path");
        assert_eq!(bare.metadata_path(), "/.well-known/oauth-protected-resource");
        assert_eq!(bare.metadata_url(), "https://tools.example.com/.well-known/oauth-protected-resource");
        let challenge = auth.challenge(&AuthFailure::Missing);
        assert_eq!(
            challenge,
            "Bearer resource_metadata=\"https://tools.example.com/.well-known/oauth-protected-resource/mcp\", scope=\"mcp\""
        );
    }
}
