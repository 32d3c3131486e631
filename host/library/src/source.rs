//! Plugins from elsewhere than a local file: `https://` URLs and OCI
//! registries, each pinned by the SHA-256 digest the user wrote down.
//!
//! Whatever travels over the network is checked against its pin before
//! anything else looks at it: the downloaded module (`https://`), or the
//! manifest named by the reference's digest and then every blob that
//! manifest names by its own digest (`oci://`). A mismatch is refused. What
//! was checked is kept in a [`DownloadCache`] under its digest and read
//! (and checked again) from there afterwards, so a pinned plugin loads
//! offline once it has been fetched.
//!
//! Every download is bounded: [`MAX_PLUGIN_BYTES`] per module or blob,
//! [`MAX_UNPACKED_BYTES`] read out of an artifact's compressed layers, at
//! most 64 layers, and time limits on connecting and on the whole transfer.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// Downloads kept at most (the least recently used go first).
#[cfg(any(feature = "https", feature = "oci"))]
const MAX_KEPT_DOWNLOADS: usize = 1024;
/// Bytes of downloads kept at most.
#[cfg(any(feature = "https", feature = "oci"))]
const MAX_KEPT_DOWNLOAD_BYTES: u64 = 2 << 30;

/// The largest module (or registry blob) toolhost downloads: 256 MiB.
pub const MAX_PLUGIN_BYTES: u64 = 256 << 20;
/// The most bytes read out of an artifact's compressed image layers, all
/// together, while looking for the plugin in them: 1 GiB.
pub const MAX_UNPACKED_BYTES: u64 = 1 << 30;

/// A SHA-256 digest, written `sha256:` and 64 lowercase hex digits (the
/// OCI form).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sha256Digest([u8; 32]);

impl Sha256Digest {
    /// The digest of `bytes`.
    #[cfg(any(feature = "https", feature = "oci"))]
    pub fn of(bytes: &[u8]) -> Self {
        use sha2::Digest as _;
        Sha256Digest(sha2::Sha256::digest(bytes).into())
    }

    /// The 64 hex digits, without `sha256:`.
    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The digest's 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Display for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}

impl fmt::Debug for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Why a text is not a [`Sha256Digest`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a SHA-256 digest: write `sha256:` and 64 lowercase hex digits")]
pub struct DigestParseError {
    /// The text (cut to 100 characters).
    pub text: String,
}

impl FromStr for Sha256Digest {
    type Err = DigestParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let refuse = || DigestParseError { text: text.chars().take(100).collect() };
        let hex = text.strip_prefix("sha256:").ok_or_else(refuse)?;
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Err(refuse());
        }
        let mut bytes = [0u8; 32];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| refuse())?;
        }
        Ok(Sha256Digest(bytes))
    }
}

/// A plugin that is downloaded: where from, its pin, and whom to trust on
/// the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemotePlugin {
    /// The URL as written: `https://...` or `oci://registry/repository[:tag]@sha256:...`.
    pub url: String,
    /// What the downloaded module (`https://`) or the manifest the
    /// reference names (`oci://`) must hash to.
    pub digest: Sha256Digest,
    /// A PEM file of the certificate authorities to trust for this source
    /// instead of the built-in roots (`server.caFile`), if any.
    pub ca_file: Option<PathBuf>,
    /// Whose signature the plugin must carry (`server.verify`), if anyone's.
    pub verify: Option<Verification>,
    /// Where an `https://` plugin's sigstore bundle is (`verify.bundle`):
    /// an `https://` URL or a file; `None` for the plugin's URL with
    /// `.sigstore.json` added. (An `oci://` plugin's signatures are in
    /// its registry.)
    pub bundle: Option<String>,
}

/// How a downloaded plugin's signature is checked before anything reads
/// it (`server.verify` of a toolsets file).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verification {
    /// A cosign signature made with the private half of this public key: a
    /// PEM file (`-----BEGIN PUBLIC KEY-----`, as `cosign
    /// generate-key-pair` writes `cosign.pub`) of an ECDSA P-256 or
    /// Ed25519 key.
    Key(PathBuf),
    /// A keyless cosign signature: made with a short-lived certificate
    /// that a certificate authority of `trusted_root` issued to `identity`
    /// (its subject alternative name: an email address or a URI, such as a
    /// CI workflow's), vouched for by the OIDC `issuer`, and logged in a
    /// transparency log of `trusted_root` while the certificate was valid.
    Keyless {
        /// The signer's identity, exactly as the certificate names it.
        identity: String,
        /// The OIDC issuer, exactly as the certificate names it.
        issuer: String,
        /// sigstore's `trusted_root.json` (Fulcio's chains, Rekor's keys),
        /// as `cosign trusted-root create` writes it or sigstore's TUF
        /// repository publishes it.
        trusted_root: PathBuf,
    },
}

/// Who signed a plugin whose signature was verified.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Signer {
    /// The holder of a key, named by its fingerprint.
    Key {
        /// `sha256:` and the hex SHA-256 of the key's DER
        /// SubjectPublicKeyInfo (what `openssl pkey -pubin -outform DER |
        /// sha256sum` prints for the PEM file).
        fingerprint: String,
    },
    /// An identity whose certificate a trusted authority issued.
    Identity {
        /// The identity (the certificate's subject alternative name).
        identity: String,
        /// The OIDC issuer that vouched for it.
        issuer: String,
    },
}

impl fmt::Display for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Signer::Key { fingerprint } => write!(f, "key {fingerprint}"),
            Signer::Identity { identity, issuer } => write!(f, "{identity} (issuer {issuer})"),
        }
    }
}

/// Why a remote plugin could not be had.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// This build of toolhost cannot fetch from this kind of source.
    #[error(
        "{url}: {feature} plugin sources need toolhost's `{feature}` feature, which this program was built without"
    )]
    NotBuiltIn {
        /// The source.
        url: String,
        /// The missing feature (`https` or `oci`).
        feature: &'static str,
    },
    /// The source asks for a signature, and this build of toolhost cannot
    /// verify one: the plugin is not used unverified.
    #[error(
        "{url}: verifying its signature (`verify`) needs toolhost's `signatures` feature, which this program was \
         built without; refusing to use it unverified"
    )]
    SignaturesNotBuiltIn {
        /// The source.
        url: String,
    },
    /// The download (or a registry request) failed.
    #[error("{url}: {message}")]
    Fetch {
        /// The source.
        url: String,
        /// What failed.
        message: String,
    },
    /// What arrived does not hash to the pin: it is not used.
    #[error("{url}: {what} has digest {actual}, but the pin is {expected}; refusing it")]
    DigestMismatch {
        /// The source.
        url: String,
        /// What was checked (`the module`, `the manifest`, `layer sha256:...`).
        what: String,
        /// The pin.
        expected: Sha256Digest,
        /// What it hashed to.
        actual: Sha256Digest,
    },
    /// It is larger than toolhost downloads.
    #[error("{url}: {what} is larger than {limit} bytes; refusing it")]
    TooLarge {
        /// The source.
        url: String,
        /// What was too large.
        what: String,
        /// The limit.
        limit: u64,
    },
    /// The registry's artifact holds no plugin toolhost can find, or more
    /// than one.
    #[error("{url}: {message}")]
    Artifact {
        /// The source.
        url: String,
        /// What is wrong with it.
        message: String,
    },
    /// The source's host, or a host its download was redirected to, is not
    /// one the runtime's downloads may reach
    /// ([`RuntimeBuilder::with_download_hosts`](crate::RuntimeBuilder::with_download_hosts)).
    #[error("{url}: the download would reach `{host}`, which is not one of the hosts downloads may reach")]
    HostNotAllowed {
        /// The source.
        url: String,
        /// The host (and port, if not the scheme's).
        host: String,
    },
    /// The plugin's signature is missing, or none verifies: the plugin is
    /// not used.
    #[error("{url}: not verified: {message}")]
    Signature {
        /// The source.
        url: String,
        /// What did not match, and where.
        message: String,
    },
    /// `verify.key` or `verify.trustedRoot` could not be read, or is not
    /// what toolhost verifies with.
    #[error("{url}: verify.{member} {}: {message}", path.display())]
    VerifyFile {
        /// The source.
        url: String,
        /// `key` or `trustedRoot`.
        member: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// `caFile` could not be read or holds no certificate.
    #[error("{url}: caFile {}: {message}", path.display())]
    CaFile {
        /// The source.
        url: String,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// Where downloaded plugins (and registry manifests and blobs) are kept,
/// each under its SHA-256 digest and checked again whenever it is read.
/// Without one, a remote plugin is downloaded at every load.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DownloadCache {
    dir: Option<PathBuf>,
}

impl DownloadCache {
    /// The CLI's: `$TOOLHOST_CACHE_DIR/downloads` if that is set (`off` or
    /// empty: no cache), else `$XDG_CACHE_HOME/toolhost/downloads`, else
    /// `$HOME/.cache/toolhost/downloads`; none if none of these is set.
    pub fn from_env() -> Self {
        DownloadCache { dir: crate::cache_folder::cache_dir_from_env("downloads", true) }
    }

    /// Keep downloads in this directory (created when first written).
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        DownloadCache { dir: Some(dir.into()) }
    }

    /// Keep nothing: download at every load.
    pub fn disabled() -> Self {
        DownloadCache { dir: None }
    }

    /// The directory, if downloads are kept.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    #[cfg(any(feature = "https", feature = "oci"))]
    fn path(&self, digest: &Sha256Digest) -> Option<PathBuf> {
        Some(self.dir.as_ref()?.join("sha256").join(digest.hex()))
    }

    /// The kept bytes of `digest`, if they are there and still hash to it
    /// (a damaged entry is removed).
    #[cfg(any(feature = "https", feature = "oci"))]
    fn get(&self, digest: &Sha256Digest) -> Option<Vec<u8>> {
        use std::io::Read as _;
        let path = self.path(digest)?;
        // A regular file, not followed through a link, and no larger than
        // a download may be (a link to `/dev/zero` or a FIFO put there is
        // not read).
        if !std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_file()) {
            return None;
        }
        let mut bytes = Vec::new();
        let file = std::fs::File::open(&path).ok()?;
        (&file).take(MAX_PLUGIN_BYTES + 1).read_to_end(&mut bytes).ok()?;
        if Sha256Digest::of(&bytes) == *digest {
            // Used now: trimming takes the least recently used first.
            crate::cache_folder::touch(&file);
            return Some(bytes);
        }
        tracing::warn!(path = %path.display(), "a kept download no longer matches its digest; removing it");
        let _ = std::fs::remove_file(&path);
        None
    }

    /// Keep `bytes` (already checked to hash to `digest`). Best effort: a
    /// cache that cannot be written only costs a download next time.
    #[cfg(any(feature = "https", feature = "oci"))]
    fn put(&self, digest: &Sha256Digest, bytes: &[u8]) {
        let Some(path) = self.path(digest) else { return };
        // At most 1,024 entries and 2 GiB: a download is up to 256 MiB, and
        // every new pin or artifact is a new entry.
        // (An entry is named by its digest, as `Sha256Digest::hex` writes it.)
        keep(&path, bytes, |name| format!("sha256:{name}").parse::<Sha256Digest>().is_ok());
    }

    /// A note kept beside the downloads (`verified/<name>`): which
    /// signature verified a pinned plugin. Not trusted for anything but
    /// where to look: what it names is read back by digest and verified
    /// again.
    #[cfg(feature = "signatures")]
    fn get_note(&self, name: &str) -> Option<String> {
        use std::io::Read as _;
        let path = self.dir.as_ref()?.join("verified").join(name);
        if !std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_file()) {
            return None;
        }
        let mut text = String::new();
        let file = std::fs::File::open(&path).ok()?;
        (&file).take(MAX_NOTE_BYTES).read_to_string(&mut text).ok()?;
        crate::cache_folder::touch(&file);
        Some(text)
    }

    /// Keep a note (see [`DownloadCache::get_note`]); best effort.
    #[cfg(feature = "signatures")]
    fn put_note(&self, name: &str, text: &str) {
        let Some(dir) = &self.dir else { return };
        keep(&dir.join("verified").join(name), text.as_bytes(), is_note_name);
    }
}

/// Notes are this small.
#[cfg(feature = "signatures")]
const MAX_NOTE_BYTES: u64 = 4096;

/// Whether a file of `verified/` is a note: `cosign-` or `sigstore-`,
/// and two digests' hex.
#[cfg(feature = "signatures")]
fn is_note_name(name: &str) -> bool {
    name.strip_prefix("cosign-")
        .or_else(|| name.strip_prefix("sigstore-"))
        .is_some_and(|rest| rest.len() == 129 && rest.bytes().all(|b| b == b'-' || b.is_ascii_hexdigit()))
}

/// Write `bytes` to `path` of the download cache, then trim its folder to
/// [`MAX_KEPT_DOWNLOADS`] entries and [`MAX_KEPT_DOWNLOAD_BYTES`] (the
/// files `is_entry` names). Best effort: failing is only a warning.
#[cfg(any(feature = "https", feature = "oci"))]
fn keep(path: &Path, bytes: &[u8], is_entry: fn(&str) -> bool) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else { return };
    // Written aside and renamed into place: a reader never sees half an entry.
    let temp = dir.join(format!(".{name}.{}.{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
    // Directories of the user's alone, and a temporary file made anew
    // (never one, or a link, someone put there first).
    let write = || {
        use std::io::Write as _;
        crate::cache_folder::create_private_dir(dir)?;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        options.open(&temp)?.write_all(bytes)?;
        std::fs::rename(&temp, path)
    };
    let written = write();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        tracing::warn!(dir = %dir.display(), "cannot keep a download: {e}");
        return;
    }
    crate::cache_folder::trim(dir, path, MAX_KEPT_DOWNLOADS, MAX_KEPT_DOWNLOAD_BYTES, |entry| {
        entry.file_name().and_then(|name| name.to_str()).is_some_and(is_entry)
    });
}

/// A downloaded plugin, checked against its pin (and its signature, when
/// its source asks for one) but not loaded
/// ([`Runtime::fetch_plugin`](crate::Runtime::fetch_plugin)).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FetchedPlugin {
    /// The module.
    pub wasm: Vec<u8>,
    /// Whether all of it came from the download cache.
    pub from_cache: bool,
    /// Who signed it, when its source asks for a signature.
    pub signer: Option<Signer>,
}

/// Fetch an `https://` plugin: from the cache if it is there, else
/// downloaded, checked against its pin and kept.
pub(crate) async fn fetch_https(
    plugin: &RemotePlugin,
    cache: &DownloadCache,
    hosts: Option<&[String]>,
) -> Result<FetchedPlugin, SourceError> {
    #[cfg(feature = "https")]
    {
        check_host(plugin, &plugin.url, hosts)?;
        #[cfg(feature = "signatures")]
        let verifier = match &plugin.verify {
            Some(verify) => Some(signature::Verifier::of(verify, &plugin.url)?),
            None => None,
        };
        #[cfg(not(feature = "signatures"))]
        if plugin.verify.is_some() {
            return Err(SourceError::SignaturesNotBuiltIn { url: plugin.url.clone() });
        }
        let (wasm, from_cache) = match cache.get(&plugin.digest) {
            Some(wasm) => (wasm, true),
            None => {
                let wasm = https::download_in_background(plugin, plugin.url.clone(), MAX_PLUGIN_BYTES, hosts).await?;
                let actual = Sha256Digest::of(&wasm);
                if actual != plugin.digest {
                    return Err(SourceError::DigestMismatch {
                        url: plugin.url.clone(),
                        what: "the module".to_owned(),
                        expected: plugin.digest,
                        actual,
                    });
                }
                (wasm, false)
            }
        };
        // Verified before it is kept: an unverified module is not cached.
        #[cfg(feature = "signatures")]
        let signer = match &verifier {
            Some(verifier) => Some(https::verify_bundle(plugin, &wasm, verifier, cache, hosts).await?),
            None => None,
        };
        #[cfg(not(feature = "signatures"))]
        let signer = None;
        if !from_cache {
            cache.put(&plugin.digest, &wasm);
        }
        Ok(FetchedPlugin { wasm, from_cache, signer })
    }
    #[cfg(not(feature = "https"))]
    {
        let _ = (cache, hosts);
        Err(SourceError::NotBuiltIn { url: plugin.url.clone(), feature: "https" })
    }
}

/// Fetch an `oci://` plugin: its manifest by the pinned digest, then the
/// layer holding the module, each from the cache if it is there.
///
/// With a host policy, the registry's host must match it; what the
/// registry itself then redirects to (its blob storage, its token service)
/// is the registry's to say.
pub(crate) async fn fetch_oci(
    plugin: &RemotePlugin,
    cache: &DownloadCache,
    hosts: Option<&[String]>,
) -> Result<FetchedPlugin, SourceError> {
    #[cfg(feature = "oci")]
    {
        check_host(plugin, &oci_registry_url(&plugin.url), hosts)?;
        oci::pull(plugin, cache).await
    }
    #[cfg(not(feature = "oci"))]
    {
        let _ = (cache, hosts);
        Err(SourceError::NotBuiltIn { url: plugin.url.clone(), feature: "oci" })
    }
}

/// The manifest digest an OCI reference's tag names now, asked of its
/// registry (`reference` as `oci://registry/repository:tag`): what to pin.
/// What the registry says is not trusted for more than that: the pull by
/// digest checks the manifest against it.
pub(crate) async fn resolve_oci_tag(
    reference: &str,
    ca_file: Option<&Path>,
    hosts: Option<&[String]>,
) -> Result<Sha256Digest, SourceError> {
    let plugin = RemotePlugin {
        url: reference.to_owned(),
        digest: Sha256Digest([0; 32]),
        ca_file: ca_file.map(Path::to_path_buf),
        verify: None,
        bundle: None,
    };
    #[cfg(feature = "oci")]
    {
        check_host(&plugin, &oci_registry_url(reference), hosts)?;
        oci::resolve_tag(&plugin).await
    }
    #[cfg(not(feature = "oci"))]
    {
        let _ = hosts;
        Err(SourceError::NotBuiltIn { url: plugin.url, feature: "oci" })
    }
}

/// The URL of the registry an OCI reference names (a reference without
/// one, or with a first part that is no host name, is Docker Hub's).
#[cfg(feature = "oci")]
fn oci_registry_url(url: &str) -> String {
    let name = url.strip_prefix("oci://").unwrap_or(url);
    let registry = match name.parse::<oci_client::Reference>() {
        Ok(reference) => reference.resolve_registry().to_owned(),
        Err(_) => name.split('/').next().unwrap_or_default().to_owned(),
    };
    format!("https://{registry}/")
}

/// Whether `url` (the source's, or one it was redirected to) is on a host
/// the runtime's downloads may reach.
#[cfg(any(feature = "https", feature = "oci"))]
fn check_host(plugin: &RemotePlugin, url: &str, hosts: Option<&[String]>) -> Result<(), SourceError> {
    let Some(hosts) = hosts else { return Ok(()) };
    let refuse = |host: String| SourceError::HostNotAllowed { url: plugin.url.clone(), host };
    let parsed = url::Url::parse(url).map_err(|_| refuse(url.chars().take(200).collect()))?;
    let host = parsed.host_str().unwrap_or_default();
    if crate::sandbox::host_matches(hosts, host, parsed.port_or_known_default()) {
        return Ok(());
    }
    Err(refuse(match parsed.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    }))
}

/// The certificates of a PEM file, as DER.
#[cfg(any(feature = "https", feature = "oci"))]
fn read_ca_file(plugin: &RemotePlugin, path: &Path) -> Result<Vec<Vec<u8>>, SourceError> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject as _;
    let refuse = |message: String| SourceError::CaFile { url: plugin.url.clone(), path: path.to_owned(), message };
    let pem = std::fs::read(path).map_err(|e| refuse(e.to_string()))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .map(|cert| cert.map(|c| c.to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| refuse(format!("not a PEM file: {e}")))?;
    if certs.is_empty() {
        return Err(refuse("it holds no PEM certificate (-----BEGIN CERTIFICATE-----)".to_owned()));
    }
    Ok(certs)
}

#[cfg(feature = "https")]
mod https {
    use std::io::Read as _;
    use std::time::Duration;

    use super::{RemotePlugin, SourceError, read_ca_file};

    /// Redirects followed (all to `https://`).
    const MAX_REDIRECTS: u32 = 5;
    /// Connecting may take this long.
    const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
    /// The whole download may take this long.
    const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(300);
    /// The answer's head must come within this long of the request.
    const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);
    /// A download must bring at least [`MIN_BYTES_PER_WINDOW`] in every
    /// window this long (about 3 KiB/s): a server that dribbles a byte a
    /// second is given up on after one window, not after the whole
    /// [`DOWNLOAD_TIMEOUT`].
    const RATE_WINDOW: Duration = Duration::from_secs(20);
    /// See [`RATE_WINDOW`].
    const MIN_BYTES_PER_WINDOW: u64 = 64 * 1024;

    /// A body that must keep up a minimum rate ([`MIN_BYTES_PER_WINDOW`]
    /// every [`RATE_WINDOW`]); the end of the body is never too slow.
    struct MinimumRate<R> {
        inner: R,
        window_start: std::time::Instant,
        in_window: u64,
    }

    impl<R: std::io::Read> std::io::Read for MinimumRate<R> {
        fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
            let read = self.inner.read(buffer)?;
            self.in_window += read as u64;
            if read > 0 && self.window_start.elapsed() >= RATE_WINDOW {
                if self.in_window < MIN_BYTES_PER_WINDOW {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!(
                            "slower than {} KiB in {}s ({} bytes came)",
                            MIN_BYTES_PER_WINDOW / 1024,
                            RATE_WINDOW.as_secs(),
                            self.in_window
                        ),
                    ));
                }
                self.window_start = std::time::Instant::now();
                self.in_window = 0;
            }
            Ok(read)
        }
    }

    /// The largest sigstore bundle downloaded (a keyless one is about 5 KiB).
    #[cfg(feature = "signatures")]
    const MAX_BUNDLE_BYTES: u64 = 1 << 20;

    /// [`download`] on a blocking thread.
    pub(super) async fn download_in_background(
        plugin: &RemotePlugin,
        url: String,
        limit: u64,
        hosts: Option<&[String]>,
    ) -> Result<Vec<u8>, SourceError> {
        let (owned, hosts) = (plugin.clone(), hosts.map(<[String]>::to_vec));
        tokio::task::spawn_blocking(move || download(&owned, &url, limit, hosts.as_deref())).await.map_err(|e| {
            SourceError::Fetch { url: plugin.url.clone(), message: format!("the download stopped: {e}") }
        })?
    }

    /// Who signed `wasm`, by the sigstore bundle beside it: the one a note
    /// in the cache names (verified again), else the bundle downloaded
    /// (or read from its file), verified, kept and noted.
    #[cfg(feature = "signatures")]
    pub(super) async fn verify_bundle(
        plugin: &RemotePlugin,
        wasm: &[u8],
        verifier: &super::signature::Verifier,
        cache: &super::DownloadCache,
        hosts: Option<&[String]>,
    ) -> Result<super::Signer, SourceError> {
        let note = format!("sigstore-{}-{}", plugin.digest.hex(), verifier.fingerprint_hex());
        if let Some(kept) = cache.get_note(&note).and_then(|text| text.trim().parse::<super::Sha256Digest>().ok())
            && let Some(bundle) = cache.get(&kept)
            && verifier.check_file(&bundle, wasm).is_ok()
        {
            return Ok(verifier.signer());
        }
        let place = plugin.bundle.clone().unwrap_or_else(|| format!("{}.sigstore.json", plugin.url));
        let refuse = |message: String| SourceError::Signature { url: plugin.url.clone(), message };
        let bundle = if place.starts_with("https://") {
            super::check_host(plugin, &place, hosts)?;
            download_in_background(plugin, place.clone(), MAX_BUNDLE_BYTES, hosts)
                .await
                .map_err(|e| refuse(format!("no sigstore bundle at {place}: {e}")))?
        } else {
            let mut bytes = Vec::new();
            std::fs::File::open(&place)
                .and_then(|file| file.take(MAX_BUNDLE_BYTES + 1).read_to_end(&mut bytes))
                .map_err(|e| refuse(format!("no sigstore bundle at {place}: {e}")))?;
            bytes
        };
        if bundle.len() as u64 > MAX_BUNDLE_BYTES {
            return Err(refuse(format!("the bundle at {place} is larger than {MAX_BUNDLE_BYTES} bytes")));
        }
        verifier.check_file(&bundle, wasm).map_err(|why| refuse(format!("{place}: {why}")))?;
        let digest = super::Sha256Digest::of(&bundle);
        cache.put(&digest, &bundle);
        cache.put_note(&note, &digest.to_string());
        Ok(verifier.signer())
    }

    /// The body at `url` (the plugin's, or its bundle's), at most `limit`
    /// bytes, within the hosts downloads may reach.
    pub(super) fn download(
        plugin: &RemotePlugin,
        url: &str,
        limit: u64,
        hosts: Option<&[String]>,
    ) -> Result<Vec<u8>, SourceError> {
        let fail = |message: String| SourceError::Fetch { url: plugin.url.clone(), message };
        let mut tls = ureq::tls::TlsConfig::builder();
        if let Some(path) = &plugin.ca_file {
            let certs: Vec<ureq::tls::Certificate<'static>> = read_ca_file(plugin, path)?
                .iter()
                .map(|der| ureq::tls::Certificate::from_der(der).to_owned())
                .collect();
            tls = tls.root_certs(ureq::tls::RootCerts::new_with_certs(&certs));
        }
        // Redirects are followed here, not by ureq: each one's host is
        // checked against the runtime's download hosts first.
        let config = ureq::Agent::config_builder()
            .https_only(true)
            .max_redirects(0)
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .timeout_global(Some(DOWNLOAD_TIMEOUT))
            .timeout_recv_response(Some(RESPONSE_TIMEOUT))
            .user_agent(concat!("toolhost/", env!("CARGO_PKG_VERSION")))
            .tls_config(tls.build())
            .build();
        // Limited to some hosts, a download reaches only the addresses
        // they may (`address_allowed`): a listed name whose owner points it
        // at an internal address does not get the download there.
        let agent = match hosts {
            Some(hosts) => ureq::Agent::with_parts(
                config,
                ureq::unversioned::transport::DefaultConnector::new(),
                crate::resolve::GrantedAddresses::new(hosts.to_vec()),
            ),
            None => config.into(),
        };
        let started = std::time::Instant::now();
        let mut url = url::Url::parse(url).map_err(|e| fail(format!("not a URL: {e}")))?;
        let mut redirects = 0;
        let response = loop {
            let Some(left) = DOWNLOAD_TIMEOUT.checked_sub(started.elapsed()) else {
                return Err(fail(format!("download failed: not done in {}s", DOWNLOAD_TIMEOUT.as_secs())));
            };
            let response =
                agent.get(url.as_str()).config().timeout_global(Some(left)).build().call().map_err(|e| match e {
                    ureq::Error::Other(refused) if refused.is::<crate::AddressRefused>() => {
                        fail(format!("download refused: {refused}"))
                    }
                    e => fail(format!("download failed: {e}")),
                })?;
            if !response.status().is_redirection() {
                break response;
            }
            redirects += 1;
            if redirects > MAX_REDIRECTS {
                return Err(fail(format!("download failed: more than {MAX_REDIRECTS} redirects")));
            }
            let location = response
                .headers()
                .get("location")
                .and_then(|l| l.to_str().ok())
                .ok_or_else(|| fail(format!("download failed: a {} without a Location", response.status())))?;
            url = url.join(location).map_err(|e| fail(format!("download failed: a redirect to a bad URL: {e}")))?;
            if url.scheme() != "https" {
                return Err(fail("download failed: redirected to a URL that is not https://".to_owned()));
            }
            super::check_host(plugin, url.as_str(), hosts)?;
        };
        let what = if url.as_str() == plugin.url { "the module" } else { "the bundle" };
        if let Some(length) = response.body().content_length()
            && length > limit
        {
            return Err(SourceError::TooLarge {
                url: plugin.url.clone(),
                what: format!("{what} ({length} bytes)"),
                limit,
            });
        }
        let mut wasm = Vec::new();
        let body = response.into_body().into_with_config().limit(limit + 1).reader();
        MinimumRate { inner: body, window_start: std::time::Instant::now(), in_window: 0 }
            .take(limit + 1)
            .read_to_end(&mut wasm)
            .map_err(|e| fail(format!("download failed: {e}")))?;
        if wasm.len() as u64 > limit {
            return Err(SourceError::TooLarge { url: plugin.url.clone(), what: what.to_owned(), limit });
        }
        Ok(wasm)
    }
}

#[cfg(all(feature = "signatures", feature = "https"))]
mod bundle;
#[cfg(feature = "oci")]
mod cosign;
#[cfg(feature = "signatures")]
mod keyless;
#[cfg(feature = "oci")]
mod oci;
#[cfg(feature = "signatures")]
mod signature;
#[cfg(all(feature = "oci", feature = "https", feature = "fuzzing"))]
pub(crate) use cosign::fuzz as fuzz_signature;
#[cfg(all(feature = "oci", feature = "fuzzing"))]
pub(crate) use oci::{fuzz_layer, fuzz_manifest};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_parse_only_in_their_one_form() {
        let hex = "ab".repeat(32);
        let digest: Sha256Digest = format!("sha256:{hex}").parse().unwrap();
        assert_eq!(digest.to_string(), format!("sha256:{hex}"));
        assert_eq!(digest.as_bytes()[0], 0xab);
        for bad in [
            hex.clone(),
            format!("sha256:{}", hex.to_uppercase()),
            format!("sha256:{}", &hex[1..]),
            format!("sha512:{hex}"),
            format!("sha256:{hex}0"),
        ] {
            let error = bad.parse::<Sha256Digest>().unwrap_err();
            assert!(error.to_string().contains("64 lowercase hex digits"), "{error}");
        }
    }

    #[cfg(any(feature = "https", feature = "oci"))]
    #[test]
    fn the_cache_hands_back_only_what_still_hashes_to_its_digest() {
        let dir = tempfile_dir();
        let cache = DownloadCache::at(&dir);
        let bytes = b"\0asm\x01\0\0\0".to_vec();
        let digest = Sha256Digest::of(&bytes);
        assert_eq!(cache.get(&digest), None);
        cache.put(&digest, &bytes);
        assert_eq!(cache.get(&digest), Some(bytes));
        let path = cache.path(&digest).unwrap();
        std::fs::write(&path, b"tampered").unwrap();
        assert_eq!(cache.get(&digest), None);
        assert!(!path.exists(), "a damaged entry is removed");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[cfg(any(feature = "https", feature = "oci"))]
    #[test]
    fn the_cache_keeps_at_most_its_number_of_downloads() {
        // Its own directory: the other test removes the shared one.
        let dir = std::env::temp_dir().join(format!("toolhost-downloads-trim-{}", std::process::id()));
        let cache = DownloadCache::at(&dir);
        let mut last = None;
        for n in 0..MAX_KEPT_DOWNLOADS + 6 {
            let bytes = format!("download {n}").into_bytes();
            let digest = Sha256Digest::of(&bytes);
            cache.put(&digest, &bytes);
            last = Some((digest, bytes));
        }
        let kept = std::fs::read_dir(dir.join("sha256")).unwrap().count();
        assert_eq!(kept, MAX_KEPT_DOWNLOADS);
        let (digest, bytes) = last.unwrap();
        assert_eq!(cache.get(&digest), Some(bytes), "the newest is kept");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[cfg(any(feature = "https", feature = "oci"))]
    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("toolhost-downloads-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
