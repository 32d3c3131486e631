//! Plugins from OCI registries (the distribution API), by digest.
//!
//! The layouts the ecosystem publishes are all taken:
//! - a Wasm OCI artifact (wassette, `oras push`): a layer that *is* the
//!   module (`application/vnd.wasm.content.layer.v1+wasm`,
//!   `application/wasm`, or any media type whose bytes start with the Wasm
//!   magic);
//! - an image built `FROM scratch` with the module copied in (hyper-mcp's
//!   plugins): a tar layer, gzipped or not, holding `/plugin.wasm`, or
//!   else exactly one `.wasm` file;
//! - either behind an image index, of which the entry for `wasi/wasm`, else
//!   `linux/amd64`, else the only one, is taken.
//!
//! The chain is checked link by link: the manifest the reference's digest
//! names must hash to it, a child manifest of an index to the digest the
//! index gives, each blob to the digest its manifest gives. Registries are
//! reached over HTTPS only, anonymously.
//!
//! With `verify`, a cosign signature of the pinned digest is checked
//! first ([`super::signature`]); nothing of the artifact is pulled unless
//! one verifies.

use std::io::Read as _;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde::Deserialize;

use super::cosign;
use super::signature::Verifier;
use super::{
    DownloadCache, FetchedPlugin, MAX_PLUGIN_BYTES, MAX_UNPACKED_BYTES, RemotePlugin, Sha256Digest, Signer,
    SourceError, read_ca_file,
};

/// Manifests are small; a larger one is not a plugin's.
const MAX_MANIFEST_BYTES: u64 = 4 << 20;
/// Index levels followed (an index may name an index).
const MAX_DEPTH: usize = 2;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest wait for the next bytes of a response.
const READ_TIMEOUT: Duration = Duration::from_secs(60);
/// The whole pull: reqwest's read timeout starts again at every read, so a
/// registry that sent a byte a minute would never be done without it (the
/// same as an `https://` download's).
const PULL_TIMEOUT: Duration = Duration::from_secs(300);
/// Most layers an image manifest may have (each may be a blob of up to
/// [`MAX_PLUGIN_BYTES`] to fetch, keep and unpack).
const MAX_LAYERS: usize = 64;
/// A signature's payload is this small (cosign's are about 250 bytes).
const MAX_PAYLOAD_BYTES: u64 = 64 << 10;

const MANIFEST_TYPES: &[&str] = &[
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];
/// What cosign stores a signature as: an image manifest.
const SIGNATURE_MANIFEST_TYPES: &[&str] =
    &["application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json"];
/// Layers that are the module itself.
const WASM_LAYER_TYPES: &[&str] = &["application/vnd.wasm.content.layer.v1+wasm", "application/wasm"];
const WASM_MAGIC: &[u8] = b"\0asm";
const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b];

/// A manifest or index: the fields toolhost reads.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    manifests: Option<Vec<Descriptor>>,
    #[serde(default)]
    layers: Option<Vec<Descriptor>>,
}

#[derive(Deserialize, Clone, Debug)]
#[serde(rename_all = "camelCase")]
struct Descriptor {
    #[serde(default)]
    media_type: String,
    digest: String,
    #[serde(default)]
    size: Option<i64>,
    #[serde(default)]
    platform: Option<Platform>,
    #[serde(default)]
    annotations: Option<std::collections::BTreeMap<String, String>>,
}

#[derive(Deserialize, Clone, Debug)]
struct Platform {
    #[serde(default)]
    os: String,
    #[serde(default)]
    architecture: String,
}

struct Puller<'a> {
    plugin: &'a RemotePlugin,
    cache: &'a DownloadCache,
    client: Option<Client>,
    reference: Reference,
    /// Whether anything was downloaded (else all came from the cache).
    downloaded: bool,
}

pub(super) async fn pull(plugin: &RemotePlugin, cache: &DownloadCache) -> Result<FetchedPlugin, SourceError> {
    tokio::time::timeout(PULL_TIMEOUT, pull_within(plugin, cache)).await.unwrap_or_else(|_| {
        Err(SourceError::Fetch {
            url: plugin.url.clone(),
            message: format!("the pull was not done in {}s", PULL_TIMEOUT.as_secs()),
        })
    })
}

async fn pull_within(plugin: &RemotePlugin, cache: &DownloadCache) -> Result<FetchedPlugin, SourceError> {
    let name = plugin.url.strip_prefix("oci://").unwrap_or(&plugin.url);
    let reference: Reference = name
        .parse()
        .map_err(|e| SourceError::Fetch { url: plugin.url.clone(), message: format!("not an OCI reference: {e}") })?;
    let mut puller = Puller { plugin, cache, client: None, reference, downloaded: false };
    let signer = match &plugin.verify {
        Some(verify) => Some(puller.verify(&Verifier::of(verify, &plugin.url)?).await?),
        None => None,
    };
    let mut manifest_digest = plugin.digest;
    let mut what = "the manifest".to_owned();
    for _ in 0..=MAX_DEPTH {
        let bytes = puller.manifest(&manifest_digest, &what).await?;
        match read_manifest(&bytes, &what).map_err(|m| puller.artifact(m))? {
            Next::Follow(digest) => {
                manifest_digest = puller.digest(&digest)?;
                what = format!("manifest {manifest_digest}");
            }
            Next::Layers(layers) => {
                let wasm = puller.find_module(&layers).await?;
                return Ok(FetchedPlugin { wasm, from_cache: !puller.downloaded, signer });
            }
        }
    }
    Err(puller.artifact(format!("image indexes nest deeper than {MAX_DEPTH} levels")))
}

/// The digest `plugin.url`'s tag names now (its `digest` is not read).
pub(super) async fn resolve_tag(plugin: &RemotePlugin) -> Result<Sha256Digest, SourceError> {
    let cache = DownloadCache::disabled();
    let name = plugin.url.strip_prefix("oci://").unwrap_or(&plugin.url);
    let reference: Reference = name
        .parse()
        .map_err(|e| SourceError::Fetch { url: plugin.url.clone(), message: format!("not an OCI reference: {e}") })?;
    let mut puller = Puller { plugin, cache: &cache, client: None, reference: reference.clone(), downloaded: false };
    let asked = puller.client()?.fetch_manifest_digest(&reference, &RegistryAuth::Anonymous);
    let digest = tokio::time::timeout(CONNECT_TIMEOUT + READ_TIMEOUT, asked)
        .await
        .map_err(|_| {
            puller
                .fetch_error(format!("the registry did not answer in {}s", (CONNECT_TIMEOUT + READ_TIMEOUT).as_secs()))
        })?
        .map_err(|e| puller.fetch_error(format!("cannot resolve the tag: {e}")))?;
    digest.parse().map_err(|e| puller.artifact(format!("the registry names {e}")))
}

/// What a manifest (`what`, in messages) says to read next.
enum Next {
    /// An image index: the digest of the entry to follow.
    Follow(String),
    /// An image or artifact manifest: its layers.
    Layers(Vec<Descriptor>),
}

/// A manifest's bytes as the pull reads them: the index entry to follow,
/// or the layers to look in; else what is wrong with it.
fn read_manifest(bytes: &[u8], what: &str) -> Result<Next, String> {
    let manifest: Manifest =
        serde_json::from_slice(bytes).map_err(|e| format!("{what} is not an OCI manifest: {e}"))?;
    if let Some(entries) = &manifest.manifests {
        return choose_platform(entries).map(|entry| Next::Follow(entry.digest.clone()));
    }
    manifest.layers.map(Next::Layers).ok_or_else(|| {
        format!(
            "{what} ({}) has neither layers nor manifests",
            manifest.media_type.as_deref().unwrap_or("no media type")
        )
    })
}

/// The index entry to follow: `wasi/wasm`, else `linux/amd64`, else the
/// only one (attestations aside).
fn choose_platform(entries: &[Descriptor]) -> Result<&Descriptor, String> {
    let candidates: Vec<&Descriptor> = entries
        .iter()
        .filter(|e| {
            let attestation = e.annotations.as_ref().is_some_and(|a| a.contains_key("vnd.docker.reference.type"));
            !attestation
        })
        .collect();
    fn platform<'a>(e: &&'a Descriptor) -> Option<(&'a str, &'a str)> {
        e.platform.as_ref().map(|p| (p.os.as_str(), p.architecture.as_str()))
    }
    if let Some(wasm) =
        candidates.iter().find(|e| matches!(platform(e), Some(("wasi" | "wasip1" | "wasip2", "wasm" | "wasm32"))))
    {
        return Ok(wasm);
    }
    if let Some(linux) = candidates.iter().find(|e| platform(e) == Some(("linux", "amd64"))) {
        return Ok(linux);
    }
    match candidates.as_slice() {
        [only] => Ok(only),
        [] => Err("the image index lists no manifest".to_owned()),
        several => Err(format!(
            "the image index lists {} platforms and none is wasi/wasm or linux/amd64: {}",
            several.len(),
            several
                .iter()
                .map(|e| platform(e).map_or("(no platform)".to_owned(), |(os, arch)| format!("{os}/{arch}")))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

impl Puller<'_> {
    fn artifact(&self, message: String) -> SourceError {
        SourceError::Artifact { url: self.plugin.url.clone(), message }
    }

    fn fetch_error(&self, message: String) -> SourceError {
        SourceError::Fetch { url: self.plugin.url.clone(), message }
    }

    fn digest(&self, text: &str) -> Result<Sha256Digest, SourceError> {
        text.parse().map_err(|e| self.artifact(format!("the manifest names {e}")))
    }

    fn client(&mut self) -> Result<&Client, SourceError> {
        if self.client.is_none() {
            // reqwest's rustls needs a process-wide crypto provider: ring,
            // unless the program installed one.
            let _ = rustls::crypto::ring::default_provider().install_default();
            let tls_certs_only = match &self.plugin.ca_file {
                Some(path) => read_ca_file(self.plugin, path)?
                    .into_iter()
                    .map(|data| Certificate { encoding: CertificateEncoding::Der, data })
                    .collect(),
                None => Vec::new(),
            };
            let config = ClientConfig {
                protocol: ClientProtocol::Https,
                tls_certs_only,
                platform_resolver: None,
                connect_timeout: Some(CONNECT_TIMEOUT),
                read_timeout: Some(READ_TIMEOUT),
                user_agent: concat!("toolhost/", env!("CARGO_PKG_VERSION")),
                ..ClientConfig::default()
            };
            // `Client::new` would fall back to the default roots on a bad
            // configuration; a bad one is an error here.
            let client = Client::try_from(config)
                .map_err(|e| self.fetch_error(format!("cannot make a registry client: {e}")))?;
            self.client = Some(client);
        }
        Ok(self.client.as_ref().expect("made above"))
    }

    /// The manifest with this digest: kept, or pulled and checked.
    async fn manifest(&mut self, digest: &Sha256Digest, what: &str) -> Result<Vec<u8>, SourceError> {
        if let Some(bytes) = self.cache.get(digest) {
            return Ok(bytes);
        }
        let reference = Reference::with_digest(
            self.reference.registry().to_owned(),
            self.reference.repository().to_owned(),
            digest.to_string(),
        );
        let pulled = self.client()?.pull_manifest_raw(&reference, &RegistryAuth::Anonymous, MANIFEST_TYPES).await;
        let (bytes, _) = pulled.map_err(|e| self.fetch_error(format!("cannot pull {what}: {e}")))?;
        if bytes.len() as u64 > MAX_MANIFEST_BYTES {
            return Err(SourceError::TooLarge {
                url: self.plugin.url.clone(),
                what: what.to_owned(),
                limit: MAX_MANIFEST_BYTES,
            });
        }
        self.check(&bytes, digest, what)?;
        self.downloaded = true;
        self.cache.put(digest, &bytes);
        Ok(bytes.to_vec())
    }

    fn check(&self, bytes: &[u8], digest: &Sha256Digest, what: &str) -> Result<(), SourceError> {
        let actual = Sha256Digest::of(bytes);
        if actual != *digest {
            return Err(SourceError::DigestMismatch {
                url: self.plugin.url.clone(),
                what: what.to_owned(),
                expected: *digest,
                actual,
            });
        }
        Ok(())
    }

    /// The blob a layer descriptor names: kept, or pulled (at most
    /// `limit` bytes) and checked.
    async fn blob(&mut self, layer: &Descriptor, limit: u64) -> Result<Vec<u8>, SourceError> {
        let digest = self.digest(&layer.digest)?;
        if let Some(bytes) = self.cache.get(&digest) {
            return Ok(bytes);
        }
        let what = format!("layer {digest}");
        let too_large = |url: &str| SourceError::TooLarge { url: url.to_owned(), what: what.clone(), limit };
        if layer.size.is_some_and(|s| s < 0 || s as u64 > limit) {
            return Err(too_large(&self.plugin.url));
        }
        let reference = self.reference.clone();
        let mut out = Capped { bytes: Vec::new(), limit: limit as usize, over: false };
        let pulled = self.client()?.pull_blob(&reference, layer.digest.as_str(), &mut out).await;
        if out.over {
            return Err(too_large(&self.plugin.url));
        }
        pulled.map_err(|e| self.fetch_error(format!("cannot pull {what}: {e}")))?;
        self.check(&out.bytes, &digest, &what)?;
        self.downloaded = true;
        self.cache.put(&digest, &out.bytes);
        Ok(out.bytes)
    }

    /// Who signed the pinned digest with `key`: a note in the cache says
    /// which signature did before, and it is verified again from the cache
    /// (offline); else the signatures at the digest's `.sig` tag are
    /// pulled, and the first that verifies is kept and noted.
    async fn verify(&mut self, key: &Verifier) -> Result<Signer, SourceError> {
        let note = format!("cosign-{}-{}", self.plugin.digest.hex(), key.fingerprint_hex());
        if let Some(kept) = self.cache.get_note(&note).and_then(|text| text.trim().parse::<Sha256Digest>().ok())
            && let Some(bytes) = self.cache.get(&kept)
            && self.check_signatures(&bytes, key).await.is_ok()
        {
            return Ok(key.signer());
        }
        let tag = cosign::signature_tag(&self.plugin.digest);
        let reference = Reference::with_tag(
            self.reference.registry().to_owned(),
            self.reference.repository().to_owned(),
            tag.clone(),
        );
        let pulled =
            self.client()?.pull_manifest_raw(&reference, &RegistryAuth::Anonymous, SIGNATURE_MANIFEST_TYPES).await;
        let (bytes, _) = pulled.map_err(|e| {
            self.signature_error(format!("no cosign signature of {}: cannot pull tag {tag}: {e}", self.plugin.digest))
        })?;
        if bytes.len() as u64 > MAX_MANIFEST_BYTES {
            return Err(
                self.signature_error(format!("the manifest at tag {tag} is larger than {MAX_MANIFEST_BYTES} bytes"))
            );
        }
        self.downloaded = true;
        self.check_signatures(&bytes, key).await.map_err(|e| match e {
            SourceError::Signature { url, message } => {
                SourceError::Signature { url, message: format!("tag {tag}: {message}") }
            }
            other => other,
        })?;
        let digest = Sha256Digest::of(&bytes);
        self.cache.put(&digest, &bytes);
        self.cache.put_note(&note, &digest.to_string());
        Ok(key.signer())
    }

    fn signature_error(&self, message: String) -> SourceError {
        SourceError::Signature { url: self.plugin.url.clone(), message }
    }

    /// Whether one layer of a signature manifest is a payload that `key`
    /// signed and that names the pinned digest; else why none is, layer by
    /// layer.
    async fn check_signatures(&mut self, manifest: &[u8], key: &Verifier) -> Result<(), SourceError> {
        let manifest: Manifest = serde_json::from_slice(manifest)
            .map_err(|e| self.signature_error(format!("the signature manifest is not an OCI manifest: {e}")))?;
        let layers = manifest.layers.unwrap_or_default();
        if layers.len() > MAX_LAYERS {
            return Err(self.signature_error(format!(
                "the signature manifest has {} layers, more than the {MAX_LAYERS} toolhost reads",
                layers.len()
            )));
        }
        let mut refused = Vec::new();
        for (n, layer) in layers.iter().enumerate() {
            let place = format!("layer {}", n + 1);
            let Some(annotations) = layer.annotations.as_ref().filter(|a| a.contains_key(cosign::SIGNATURE_ANNOTATION))
            else {
                refused.push(format!("{place} has no {} annotation", cosign::SIGNATURE_ANNOTATION));
                continue;
            };
            if layer.media_type != cosign::SIMPLE_SIGNING {
                refused.push(format!("{place} is not a simple-signing payload ({})", cosign::SIMPLE_SIGNING));
                continue;
            }
            let payload = self.blob(layer, MAX_PAYLOAD_BYTES).await?;
            match cosign::check_layer(key, annotations, &payload, &self.plugin.digest) {
                Ok(()) => return Ok(()),
                Err(why) => refused.push(format!("{place}: {why}")),
            }
        }
        if refused.is_empty() {
            return Err(self.signature_error("the signature manifest has no layers".to_owned()));
        }
        Err(self.signature_error(refused.join("; ")))
    }

    /// The module among an image manifest's layers.
    async fn find_module(&mut self, layers: &[Descriptor]) -> Result<Vec<u8>, SourceError> {
        if layers.is_empty() {
            return Err(self.artifact("the manifest has no layers".to_owned()));
        }
        if layers.len() > MAX_LAYERS {
            return Err(self.artifact(format!(
                "the manifest has {} layers, more than the {MAX_LAYERS} toolhost reads",
                layers.len()
            )));
        }
        // A layer declared to be the module wins; there must be one.
        let declared: Vec<&Descriptor> =
            layers.iter().filter(|l| WASM_LAYER_TYPES.contains(&l.media_type.as_str())).collect();
        match declared.as_slice() {
            [layer] => {
                let bytes = self.blob(layer, MAX_PLUGIN_BYTES).await?;
                if !bytes.starts_with(WASM_MAGIC) {
                    return Err(self.artifact(format!(
                        "layer {} is declared {} but is not a Wasm module",
                        layer.digest, layer.media_type
                    )));
                }
                return Ok(bytes);
            }
            [] => {}
            several => {
                return Err(self.artifact(format!(
                    "the manifest has {} Wasm layers; toolhost loads an artifact with one",
                    several.len()
                )));
            }
        }
        // Otherwise look inside: a layer that is a module, or tar layers
        // (the last layer that has the file wins, as in an image). Only the
        // first module found is kept (the others are named, should there
        // be several and no /plugin.wasm), a layer named twice is read
        // once, and all the layers together unpack to at most
        // MAX_UNPACKED_BYTES.
        let mut first: Option<Vec<u8>> = None;
        let mut found: Vec<String> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut budget = MAX_UNPACKED_BYTES;
        for layer in layers.iter().rev() {
            if !seen.insert(layer.digest.as_str()) {
                continue;
            }
            let bytes = self.blob(layer, MAX_PLUGIN_BYTES).await?;
            let mut take = |place: String, content: Vec<u8>| {
                found.push(place);
                first.get_or_insert(content);
            };
            if bytes.starts_with(WASM_MAGIC) {
                take(format!("layer {}", layer.digest), bytes);
                continue;
            }
            let Some(unpacked) = unpack(&bytes, &layer.media_type, budget) else {
                continue;
            };
            let (files, read) = unpacked.map_err(|m| self.artifact(format!("layer {}: {m}", layer.digest)))?;
            budget -= read;
            for (path, content) in files {
                if path == "plugin.wasm" {
                    return Ok(content);
                }
                take(format!("/{path} in layer {}", layer.digest), content);
            }
        }
        match (found.len(), first) {
            (1, Some(module)) => Ok(module),
            (0, _) | (_, None) => Err(self.artifact(
                "no Wasm module in the artifact: expected a Wasm layer, or an image layer holding /plugin.wasm"
                    .to_owned(),
            )),
            _ => Err(self.artifact(format!("several Wasm modules and no /plugin.wasm: {}", found.join(", ")))),
        }
    }
}

/// The Wasm files of a layer that is a tar archive (gzip'd or not), with
/// the bytes read ([`scan_tar`]); `None` for a layer of another kind.
fn unpack(bytes: &[u8], media_type: &str, budget: u64) -> Option<Result<(Vec<TarModule>, u64), String>> {
    if bytes.starts_with(GZIP_MAGIC) {
        Some(scan_tar(flate2::read::GzDecoder::new(bytes), budget))
    } else if media_type.contains("tar") {
        Some(scan_tar(bytes, budget))
    } else {
        None
    }
}

/// A manifest's bytes as the pull reads them ([`read_manifest`]): the
/// index entry it would follow, or its layers' digests; for the fuzz
/// targets.
#[cfg(feature = "fuzzing")]
pub(crate) fn fuzz_manifest(bytes: &[u8]) -> Result<Vec<String>, String> {
    Ok(match read_manifest(bytes, "the manifest")? {
        Next::Follow(digest) => vec![digest],
        Next::Layers(layers) => layers.into_iter().map(|layer| layer.digest).collect(),
    })
}

/// A layer's bytes as the pull unpacks them; for the fuzz targets. The
/// bytes read never pass the budget; no module is over the plugin bound.
#[cfg(feature = "fuzzing")]
pub(crate) fn fuzz_layer(bytes: &[u8], budget: u64) {
    if let Some(Ok((modules, read))) = unpack(bytes, "application/vnd.oci.image.layer.v1.tar", budget) {
        assert!(read <= budget, "a layer is read no further than the budget");
        for (_, module) in modules {
            assert!(module.len() as u64 <= MAX_PLUGIN_BYTES && module.starts_with(WASM_MAGIC));
        }
    }
}

/// A module found in a tar layer: its path and its bytes.
type TarModule = (String, Vec<u8>);

/// The `.wasm` files of a tar stream that start with the Wasm magic, with
/// their paths (no leading `/` or `./`), and how many bytes of the stream
/// were read: at most `budget` (what is left of the artifact's
/// [`MAX_UNPACKED_BYTES`]); a module over [`MAX_PLUGIN_BYTES`] is an error.
fn scan_tar(reader: impl std::io::Read, budget: u64) -> Result<(Vec<TarModule>, u64), String> {
    let mut archive = tar::Archive::new(reader.take(budget));
    let mut files = Vec::new();
    for entry in archive.entries().map_err(|e| format!("not a tar archive: {e}"))? {
        let entry = entry.map_err(|e| {
            format!(
                "unreadable tar archive (or the artifact's layers unpack to more than {MAX_UNPACKED_BYTES} bytes): {e}"
            )
        })?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let path = entry.path().map_err(|e| format!("a tar entry has an unreadable path: {e}"))?;
        let path = path.to_string_lossy();
        let path = path.trim_start_matches("./").trim_start_matches('/').to_owned();
        if !path.ends_with(".wasm") {
            continue;
        }
        if entry.size() > MAX_PLUGIN_BYTES {
            return Err(format!("/{path} is larger than {MAX_PLUGIN_BYTES} bytes"));
        }
        let mut content = Vec::new();
        entry.take(MAX_PLUGIN_BYTES).read_to_end(&mut content).map_err(|e| format!("/{path}: {e}"))?;
        if content.starts_with(WASM_MAGIC) {
            files.push((path, content));
        }
    }
    let left = archive.into_inner().limit();
    Ok((files, budget - left))
}

/// A `Vec` that stops taking bytes past `limit` (the write fails, and
/// `over` says why).
struct Capped {
    bytes: Vec<u8>,
    limit: usize,
    over: bool,
}

impl tokio::io::AsyncWrite for Capped {
    fn poll_write(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        if self.bytes.len() + buf.len() > self.limit {
            self.over = true;
            return Poll::Ready(Err(std::io::Error::other("the blob is larger than toolhost downloads")));
        }
        self.bytes.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(os: &str, arch: &str) -> Descriptor {
        Descriptor {
            media_type: String::new(),
            digest: format!("sha256:{os}{arch}"),
            size: None,
            platform: Some(Platform { os: os.to_owned(), architecture: arch.to_owned() }),
            annotations: None,
        }
    }

    #[test]
    fn an_index_entry_is_chosen_wasm_first_then_linux_amd64_then_the_only_one() {
        let entries = [entry("linux", "arm64"), entry("linux", "amd64"), entry("wasip1", "wasm")];
        assert_eq!(choose_platform(&entries).unwrap().digest, "sha256:wasip1wasm");
        assert_eq!(choose_platform(&entries[..2]).unwrap().digest, "sha256:linuxamd64");
        assert_eq!(choose_platform(&entries[..1]).unwrap().digest, "sha256:linuxarm64");
        let mut attestation = entry("unknown", "unknown");
        attestation.annotations =
            Some([("vnd.docker.reference.type".to_owned(), "attestation-manifest".to_owned())].into());
        assert_eq!(choose_platform(&[entries[0].clone(), attestation]).unwrap().digest, "sha256:linuxarm64");
        let error = choose_platform(&[entry("linux", "arm64"), entry("darwin", "arm64")]).unwrap_err();
        assert!(error.contains("linux/arm64, darwin/arm64"), "{error}");
    }

    fn tar_of(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (path, content) in files {
            let mut header = tar::Header::new_gnu();
            header.set_size(content.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            builder.append_data(&mut header, path, *content).unwrap();
        }
        builder.into_inner().unwrap()
    }

    #[test]
    fn tar_layers_give_their_wasm_files_and_nothing_else() {
        let tar = tar_of(&[("./plugin.wasm", b"\0asm\x01\0\0\0"), ("etc/notes.wasm", b"not wasm"), ("README", b"hi")]);
        let (files, read) = scan_tar(tar.as_slice(), MAX_UNPACKED_BYTES).unwrap();
        assert_eq!(files, vec![("plugin.wasm".to_owned(), b"\0asm\x01\0\0\0".to_vec())]);
        assert!(read > 0 && read <= tar.len() as u64, "{read} of {}", tar.len());
        // What the artifact's other layers left is all it may read.
        assert!(scan_tar(tar.as_slice(), 100).is_err());
    }
}
