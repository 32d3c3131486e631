//! `server.verify` of `oci://` plugins: cosign signatures, made here with
//! keys the test generates (ECDSA P-256 and Ed25519, rcgen on ring) and
//! stored the way `cosign sign --key` stores them (a simple-signing payload
//! per layer of an image manifest at the `sha256-<digest>.sig` tag), in
//! the reference registry the sources tests start.

use std::path::Path;

use base64::Engine as _;
use rcgen::{KeyPair, PublicKeyData as _, SigningKey as _};
use serde_json::json;
use sha2::Digest as _;
use toolhost::SyncEvent;
use toolhost_tests::{example, run_toolhost_with_env};

use crate::sources::{OciScene, add, load, oci_scene, push, sha256, write_config};

const SIMPLE_SIGNING: &str = "application/vnd.dev.cosign.simplesigning.v1+json";

/// A key pair, its public half written to `dir/name` (PEM), and its
/// fingerprint as toolhost names it (`sha256:` of the DER
/// SubjectPublicKeyInfo).
fn key(dir: &Path, name: &str, algorithm: &'static rcgen::SignatureAlgorithm) -> (KeyPair, String) {
    let pair = KeyPair::generate_for(algorithm).expect("a key pair");
    std::fs::write(dir.join(name), pair.public_key_pem()).expect("write the public key");
    let fingerprint = sha256(&pair.subject_public_key_info());
    (pair, fingerprint)
}

/// Store, at the `.sig` tag of `digest` in `repository`, one layer per key:
/// the simple-signing payload naming `signed` (the digest itself, unless a
/// test replays another's signature), signed by that key. The signature
/// manifest's digest.
async fn sign(scene: &OciScene, repository: &str, digest: &str, signed: &str, keys: &[&KeyPair]) -> String {
    let payload = cosign_payload(scene, repository, signed);
    let layers = keys
        .iter()
        .map(|key| {
            let signature = key.sign(payload.as_bytes()).expect("sign");
            let annotation = base64::engine::general_purpose::STANDARD.encode(signature);
            [("dev.cosignproject.cosign/signature".to_owned(), annotation)].into()
        })
        .collect();
    push_signature(scene, repository, digest, &payload, layers).await
}

/// A simple-signing payload of `signed`, as cosign writes it.
fn cosign_payload(scene: &OciScene, repository: &str, signed: &str) -> String {
    json!({
        "critical": {
            "identity": {"docker-reference": format!("{}/{repository}", scene.host)},
            "image": {"docker-manifest-digest": signed},
            "type": "cosign container image signature"
        },
        "optional": null
    })
    .to_string()
}

/// Push a signature manifest to the `.sig` tag of `digest`: one layer of
/// `payload` per set of annotations, with a config as cosign writes it.
/// Its digest.
///
/// Pushed by hand: oci-client's `push` writes the manifest as OLPC
/// canonical JSON, which leaves a certificate's line breaks raw in its
/// strings, and the registry refuses that as invalid JSON.
async fn push_signature(
    scene: &OciScene,
    repository: &str,
    digest: &str,
    payload: &str,
    layers: Vec<std::collections::BTreeMap<String, String>>,
) -> String {
    use oci_client::client::{Config, ImageLayer};
    let layers: Vec<ImageLayer> = layers
        .into_iter()
        .map(|annotations| ImageLayer::new(payload.as_bytes().to_vec(), SIMPLE_SIGNING.to_owned(), Some(annotations)))
        .collect();
    let config = json!({"architecture": "", "config": {}, "created": "0001-01-01T00:00:00Z", "os": "",
                        "rootfs": {"type": "layers", "diff_ids": [sha256(payload.as_bytes())]}});
    let config =
        Config::new(config.to_string().into_bytes(), "application/vnd.oci.image.config.v1+json".to_owned(), None);
    let tag = format!("{}/{repository}:sha256-{}.sig", scene.host, digest.trim_start_matches("sha256:"));
    let reference: oci_client::Reference = tag.parse().expect("reference");
    let auth = oci_client::secrets::RegistryAuth::Anonymous;
    let manifest = oci_client::manifest::OciImageManifest::build(&layers, &config, None);
    scene.client.store_auth_if_needed(reference.resolve_registry(), &auth).await;
    let blobs = manifest.layers.iter().zip(&layers).map(|(descriptor, layer)| (&descriptor.digest, &layer.data));
    for (digest, data) in blobs.chain([(&manifest.config.digest, &config.data)]) {
        scene.client.push_blob(&reference, data.clone(), digest).await.expect("push a blob");
    }
    let content_type = http::HeaderValue::from_static("application/vnd.oci.image.manifest.v1+json");
    let bytes = serde_json::to_vec(&manifest).expect("the manifest");
    scene.client.push_manifest_raw(&reference, bytes, content_type).await.expect("push the signature");
    scene.client.fetch_manifest_digest(&reference, &auth).await.expect("the signature manifest's digest")
}

/// The message of a toolset's last sync.
fn sync_message(registry: &toolhost::Registry, toolset: &str) -> String {
    match registry.last_sync(toolset).map(|sync| sync.event) {
        Some(SyncEvent::SyncCompleted { message, .. } | SyncEvent::SyncFailed { message, .. }) => message,
        other => panic!("{toolset}: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oci_plugin_loads_only_with_a_signature_its_key_verifies_and_offline_after() {
    let mut scene = oci_scene("signed");
    let host = scene.host.clone();
    let dir = scene.dir.clone();
    let calculator = std::fs::read(example("calculator")).expect("calculator");
    let text = std::fs::read(example("text")).expect("text");
    let wasm = |bytes: &[u8]| vec![(bytes.to_vec(), "application/wasm")];
    let wasm_config = "application/vnd.wasm.config.v0+json";
    let calc = push(&scene.client, &format!("{host}/tools/calc:1"), wasm_config, b"{}", wasm(&calculator)).await;
    let replayed = push(&scene.client, &format!("{host}/tools/text:1"), wasm_config, b"{}", wasm(&text)).await;
    let unsigned =
        push(&scene.client, &format!("{host}/tools/plain:1"), wasm_config, br#"{"plain":1}"#, wasm(&calculator)).await;

    let (p256, p256_fingerprint) = key(&dir, "cosign.pub", &rcgen::PKCS_ECDSA_P256_SHA256);
    let (ed25519, ed25519_fingerprint) = key(&dir, "ed25519.pub", &rcgen::PKCS_ED25519);
    let (_, other_fingerprint) = key(&dir, "other.pub", &rcgen::PKCS_ECDSA_P256_SHA256);
    sign(&scene, "tools/calc", &calc, &calc, &[&p256, &ed25519]).await;
    // The calculator's signature, stored as if it were the text plugin's.
    sign(&scene, "tools/text", &replayed, &calc, &[&p256]).await;

    let toolset = |id: &str, repository: &str, digest: &str, key: &str| {
        json!({"id": id, "kind": "uri", "server": {"url": format!("oci://{host}/{repository}:1@{digest}"),
               "caFile": "oci-ca.pem", "verify": {"key": key}}})
    };
    let config = write_config(
        &dir,
        json!([
            toolset("p256", "tools/calc", &calc, "cosign.pub"),
            toolset("ed", "tools/calc", &calc, "ed25519.pub"),
            toolset("wrong", "tools/calc", &calc, "other.pub"),
            toolset("replayed", "tools/text", &replayed, "cosign.pub"),
            toolset("unsigned", "tools/plain", &unsigned, "cosign.pub"),
            toolset("nokey", "tools/calc", &calc, "missing.pub"),
        ]),
    );
    let downloads = dir.join("downloads");
    let refusals = |registry: &toolhost::Registry| {
        let hex = |digest: &str| digest.trim_start_matches("sha256:").to_owned();
        for (toolset, expected) in [
            ("wrong", format!("does not verify with key {other_fingerprint}")),
            ("replayed", format!("it signs manifest {calc}, not {replayed}")),
            ("unsigned", format!("no cosign signature of {unsigned}: cannot pull tag sha256-{}.sig", hex(&unsigned))),
            ("nokey", "verify.key".to_owned()),
        ] {
            let message = sync_message(registry, toolset);
            assert!(message.contains(&expected), "{toolset}: expected `{expected}` in: {message}");
            assert!(!registry.tools().iter().any(|t| t.toolset == toolset), "{toolset} has no tools");
        }
    };

    let (registry, report) = load(&config, &downloads).await;
    assert_eq!(report.failures.len(), 4, "{:?}", report.failures);
    assert_eq!(add(&registry, "p256__add").await, "5");
    assert_eq!(add(&registry, "ed__add").await, "5");
    for (toolset, fingerprint) in [("p256", &p256_fingerprint), ("ed", &ed25519_fingerprint)] {
        let message = sync_message(&registry, toolset);
        assert!(message.ends_with(&format!(", signed by key {fingerprint}")), "{toolset}: {message}");
    }
    refusals(&registry);
    // Nothing of an artifact whose signature did not verify was pulled.
    for digest in [&replayed, &unsigned] {
        let kept = downloads.join("sha256").join(digest.trim_start_matches("sha256:"));
        assert!(!kept.exists(), "{digest} was pulled before its signature verified");
    }

    // The file's `verify`: its key verifies every downloaded plugin whose
    // toolset names none; a toolset's own key wins; a local file is used as
    // it is.
    let policy = dir.join("policy.json");
    let plugin = |id: &str, key: Option<&str>| {
        let mut entry = toolset(id, "tools/calc", &calc, key.unwrap_or_default());
        if key.is_none() {
            entry["server"].as_object_mut().expect("server").remove("verify");
        }
        entry
    };
    let document = json!({"schema": "s", "verify": {"key": "other.pub"}, "toolsets": [
        plugin("default", None),
        plugin("own", Some("ed25519.pub")),
        {"id": "local", "kind": "uri", "server": {"url": example("calculator").display().to_string()}},
    ]});
    std::fs::write(&policy, document.to_string()).expect("write the file");
    let (registry, report) = load(&policy, &downloads).await;
    assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
    let message = sync_message(&registry, "default");
    assert!(message.contains(&format!("does not verify with key {other_fingerprint}")), "{message}");
    let message = sync_message(&registry, "own");
    assert!(message.ends_with(&format!(", signed by key {ed25519_fingerprint}")), "{message}");
    assert_eq!(add(&registry, "local__add").await, "5");

    // The CLI says who signed what it lists.
    let cache = dir.join("cli-cache");
    let output = run_toolhost_with_env(
        &["tools", "--config", config.to_str().expect("utf-8")],
        None,
        &[("TOOLHOST_CACHE_DIR", cache.to_str().expect("utf-8"))],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains(&format!("signed by key {p256_fingerprint})")), "{stdout}");
    assert!(stdout.contains(&format!("signed by key {ed25519_fingerprint})")), "{stdout}");

    // `toolhost verify`: a tag resolved to the digest it names, pulled and
    // verified, without running anything; a wrong key exits 3 saying so; a
    // local file is not a source to verify (2).
    let verify = |args: &[&str]| {
        let ca = dir.join("oci-ca.pem");
        let mut all = vec!["verify", "--ca-file", ca.to_str().expect("utf-8")];
        all.extend_from_slice(args);
        let output = run_toolhost_with_env(&all, None, &[("TOOLHOST_CACHE_DIR", cache.to_str().expect("utf-8"))]);
        let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        (output.status.code(), text)
    };
    let path = |name: &str| dir.join(name).display().to_string();
    let (code, text) = verify(&[&format!("oci://{host}/tools/calc:1"), "--key", &path("cosign.pub")]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains(&format!("digest     {calc} (the tag names it now: pin it)")), "{text}");
    assert!(text.contains(&format!("signed by  key {p256_fingerprint}")), "{text}");
    assert!(text.contains(&format!("module     {} (", sha256(&calculator))), "{text}");
    let (code, text) = verify(&[&format!("oci://{host}/tools/calc:1@{calc}"), "--key", &path("ed25519.pub"), "--json"]);
    assert_eq!(code, Some(0), "{text}");
    let report: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(report["signedBy"], format!("key {ed25519_fingerprint}"), "{report}");
    assert_eq!(report["tagResolved"], false, "{report}");
    assert_eq!(report["digest"], calc.as_str(), "{report}");
    let (code, text) = verify(&[&format!("oci://{host}/tools/calc:1"), "--key", &path("other.pub")]);
    assert_eq!(code, Some(3), "{text}");
    assert!(text.contains(&format!("does not verify with key {other_fingerprint}")), "{text}");
    let (code, text) = verify(&[&format!("oci://{host}/tools/calc:1"), "--key", &path("missing.pub")]);
    assert_eq!(code, Some(3), "{text}");
    assert!(text.contains("verify.key"), "{text}");
    let (code, text) = verify(&["calculator.wasm"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("local file"), "{text}");

    // Offline: the registry stopped, the verified plugins load from the
    // cache, verified again from the signatures kept there.
    scene.server.stop();
    let (registry, _) = load(&config, &downloads).await;
    assert_eq!(add(&registry, "p256__add").await, "5");
    let message = sync_message(&registry, "ed");
    assert!(message.ends_with(&format!(", signed by key {ed25519_fingerprint}")), "{message}");
    let message = sync_message(&registry, "wrong");
    assert!(message.contains("cannot pull tag"), "no note is kept for another key: {message}");

    // A note is not believed: pointed at a manifest that is in the cache
    // but holds no signature (the plugin's own), it is read and fails, and
    // the registry is not there to give the signature.
    let note = downloads.join("verified").join(format!(
        "cosign-{}-{}",
        calc.trim_start_matches("sha256:"),
        p256_fingerprint.trim_start_matches("sha256:")
    ));
    assert!(note.is_file(), "{} is kept", note.display());
    std::fs::write(&note, &calc).expect("rewrite the note");
    let (registry, _) = load(&config, &downloads).await;
    assert!(!registry.tools().iter().any(|t| t.toolset == "p256"));
    assert!(sync_message(&registry, "p256").contains("cannot pull tag"), "{}", sync_message(&registry, "p256"));
    assert_eq!(add(&registry, "ed__add").await, "5");
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_requires_its_keys_signature_on_every_plugin_a_tenant_downloads() {
    use crate::service::{ACME, ACME_BOT, GLOBEX, mcp_tools, rest, service_config_reaching};
    let scene = oci_scene("service-signed");
    let (host, dir) = (scene.host.clone(), scene.dir.clone());
    let calculator = std::fs::read(example("calculator")).expect("calculator");
    let wasm = vec![(calculator.clone(), "application/wasm")];
    let wasm_config = "application/vnd.wasm.config.v0+json";
    let signed = push(&scene.client, &format!("{host}/tools/calc:1"), wasm_config, b"{}", wasm.clone()).await;
    let unsigned = push(&scene.client, &format!("{host}/tools/plain:1"), wasm_config, br#"{"plain":1}"#, wasm).await;
    let (p256, _) = key(&dir, "cosign.pub", &rcgen::PKCS_ECDSA_P256_SHA256);
    sign(&scene, "tools/calc", &signed, &signed, &[&p256]).await;

    let config = service_config_reaching(&dir, &format!("sqlite://{}", dir.join("tools.db").display()), &[&host]);
    let mut document: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&config).expect("config")).expect("json");
    document["serve"]["service"]["requireSignatures"] = json!(true);
    std::fs::write(&config, document.to_string()).expect("write config");
    let env = [("ACME_KEY", ACME), ("ACME_BOT_KEY", ACME_BOT), ("GLOBEX_KEY", GLOBEX)];
    // Without the file's key to verify with, the service does not start.
    let refused = std::process::Command::new(toolhost_tests::toolhost())
        .args(["serve", "--http", "127.0.0.1:0", "--config"])
        .arg(&config)
        .envs(env)
        .output()
        .expect("run toolhost serve");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("requireSignatures needs the key"), "{stderr}");

    document["verify"] = json!({"key": "cosign.pub"});
    std::fs::write(&config, document.to_string()).expect("write config");
    // The service trusts the registry's test CA as the system's.
    let ca = dir.join("oci-ca.pem").display().to_string();
    let mut env = env.to_vec();
    env.push(("SSL_CERT_FILE", &ca));
    let (child, url) = toolhost_tests::spawn_serve_http(&["--config", &config.display().to_string()], &env);
    let _service = crate::serve::Server(child);
    let base = url.trim_end_matches("/mcp").to_owned();
    let sets = format!("{base}/v1/tool_sets");
    let tool_set = |name: &str, repository: &str, digest: &str| {
        json!({"metadata": {"name": name}, "spec": {"adapter": {"uri": {
            "url": format!("oci://{host}/{repository}:1@{digest}")}}}})
    };
    let reply = rest("POST", &sets, Some(ACME), Some(&tool_set("signed", "tools/calc", &signed)), &[]);
    assert_eq!(reply.status, 201, "{}", reply.body);
    let last = &reply.body["info"]["lastSyncEvent"]["event"];
    assert_eq!(last["type"], "sync_completed", "{}", reply.body);
    let message = last["syncCompleted"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("signed by key sha256:"), "{}", reply.body);
    let reply = rest("POST", &sets, Some(ACME), Some(&tool_set("unsigned", "tools/plain", &unsigned)), &[]);
    assert_eq!(reply.status, 201, "{}", reply.body);
    let last = &reply.body["info"]["lastSyncEvent"]["event"];
    assert_eq!(last["type"], "sync_failed", "{}", reply.body);
    let message = last["syncFailed"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(&format!("no cosign signature of {unsigned}")), "{}", reply.body);
    let listed = mcp_tools(&format!("{base}/mcp"), ACME);
    assert!(listed.contains(&"signed__add".to_owned()), "{listed:?}");
    assert!(!listed.iter().any(|name| name.starts_with("unsigned__")), "{listed:?}");
    std::fs::remove_dir_all(&dir).ok();
}

/// A certificate authority and a transparency log of the test's own,
/// shaped as Fulcio's and Rekor's: a P-384 root and intermediate, leaf
/// certificates for code signing with the signer's identity and OIDC
/// issuer, and a P-256 log key signing entry timestamps. Its trusted root
/// is written as sigstore's `trusted_root.json`.
struct Sigstore {
    intermediate: rcgen::Issuer<'static, KeyPair>,
    chain_pem: String,
    log: KeyPair,
}

const FULCIO_ISSUER_V2: &[u64] = &[1, 3, 6, 1, 4, 1, 57264, 1, 8];

impl Sigstore {
    /// A CA and a log; `trusted_root`, if given, is where to write the
    /// root file naming them.
    fn new(name: &str, trusted_root: Option<&Path>) -> Sigstore {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyUsagePurpose};
        let ca = |common_name: String| {
            let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params.distinguished_name.push(DnType::OrganizationName, "sigstore.test");
            params.distinguished_name.push(DnType::CommonName, common_name);
            params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2099, 1, 1);
            params
        };
        let root_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).expect("root key");
        let root_params = ca(format!("{name} root"));
        let root = root_params.self_signed(&root_key).expect("root");
        let intermediate_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).expect("intermediate key");
        let intermediate_params = ca(format!("{name} intermediate"));
        let intermediate = intermediate_params
            .signed_by(&intermediate_key, &Issuer::new(root_params, root_key))
            .expect("intermediate");
        let log = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("log key");
        if let Some(path) = trusted_root {
            let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
            let log_key = log.subject_public_key_info();
            let root_file = json!({
                "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
                "tlogs": [{"baseUrl": "https://rekor.sigstore.test", "hashAlgorithm": "SHA2_256",
                           "publicKey": {"rawBytes": b64(&log_key), "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                                         "validFor": {"start": "2020-01-01T00:00:00Z"}},
                           "logId": {"keyId": b64(&sha2::Sha256::digest(&log_key))}}],
                "certificateAuthorities": [{"subject": {"organization": "sigstore.test", "commonName": name},
                    "uri": "https://fulcio.sigstore.test",
                    "certChain": {"certificates": [{"rawBytes": b64(intermediate.der())}, {"rawBytes": b64(root.der())}]},
                    "validFor": {"start": "2020-01-01T00:00:00Z"}}],
                "ctlogs": [],
                "timestampAuthorities": []
            });
            std::fs::write(path, root_file.to_string()).expect("write the trusted root");
        }
        Sigstore {
            chain_pem: format!("{}{}", intermediate.pem(), root.pem()),
            intermediate: Issuer::new(intermediate_params, intermediate_key),
            log,
        }
    }

    /// A leaf certificate (PEM) for `identity` (a URI) vouched for by
    /// `issuer`, valid from and until the given years, and its key.
    fn leaf(&self, identity: &str, issuer: &str, years: (i32, i32)) -> (String, KeyPair) {
        let (pem, _, key) = self.leaf_der(identity, issuer, years);
        (pem, key)
    }

    /// [`Sigstore::leaf`], and its DER.
    fn leaf_der(&self, identity: &str, issuer: &str, years: (i32, i32)) -> (String, Vec<u8>, KeyPair) {
        use rcgen::{CertificateParams, CustomExtension, ExtendedKeyUsagePurpose, SanType};
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("leaf key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.subject_alt_names = vec![SanType::URI(identity.try_into().expect("an IA5 identity"))];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::CodeSigning];
        // Fulcio's issuer extension: a DER UTF8String.
        let mut issuer_der = vec![0x0c, u8::try_from(issuer.len()).expect("a short issuer")];
        issuer_der.extend_from_slice(issuer.as_bytes());
        params.custom_extensions = vec![CustomExtension::from_oid_content(FULCIO_ISSUER_V2, issuer_der)];
        params.not_before = rcgen::date_time_ymd(years.0, 1, 1);
        params.not_after = rcgen::date_time_ymd(years.1, 1, 1);
        let leaf = params.signed_by(&key, &self.intermediate).expect("leaf");
        (leaf.pem(), leaf.der().to_vec(), key)
    }
}

/// What a keyless signature layer carries, and how a test spoils it.
struct KeylessLayer<'a> {
    certificate: &'a str,
    key: &'a KeyPair,
    chain: &'a str,
    /// The log that signs the entry timestamp.
    log: &'a KeyPair,
    /// The log the bundle names (its id), if not `log`.
    named_log: Option<&'a KeyPair>,
    /// The payload the log entry records, if not the signed one.
    entry_of: Option<&'a [u8]>,
}

/// A transparency log entry of a signature, as Rekor makes one: a
/// hashedrekord (base64), when it was logged, the log's id (hex) and its
/// signed entry timestamp.
struct Entry {
    body: String,
    time: u64,
    log_id: String,
    timestamp: Vec<u8>,
}

impl Entry {
    /// The entry of `signature` of `signed`, logged as `layer` says.
    fn logged(layer: &KeylessLayer<'_>, signed: &[u8], signature: &[u8]) -> Entry {
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
        let entry_of = layer.entry_of.unwrap_or(signed);
        let body = json!({"apiVersion": "0.0.1", "kind": "hashedrekord", "spec": {
            "data": {"hash": {"algorithm": "sha256", "value": sha256(entry_of).trim_start_matches("sha256:")}},
            "signature": {"content": b64(signature), "publicKey": {"content": b64(layer.certificate.as_bytes())}}}});
        let log_id = sha256(&layer.named_log.unwrap_or(layer.log).subject_public_key_info());
        let (body, log_id) = (b64(body.to_string().as_bytes()), log_id.trim_start_matches("sha256:").to_owned());
        let time = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("now").as_secs();
        let canonical = format!(r#"{{"body":"{body}","integratedTime":{time},"logID":"{log_id}","logIndex":7}}"#);
        let timestamp = layer.log.sign(canonical.as_bytes()).expect("sign the entry");
        Entry { body, time, log_id, timestamp }
    }
}

/// Store a keyless cosign signature of `digest` at its `.sig` tag, as
/// `cosign sign` does: the signature, the certificate, its chain and
/// Rekor's bundle (a hashedrekord entry and its signed entry timestamp)
/// in the layer's annotations.
async fn sign_keyless(scene: &OciScene, repository: &str, digest: &str, layer: KeylessLayer<'_>) {
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let payload = cosign_payload(scene, repository, digest);
    let signature = layer.key.sign(payload.as_bytes()).expect("sign");
    let entry = Entry::logged(&layer, payload.as_bytes(), &signature);
    let bundle = json!({"SignedEntryTimestamp": b64(&entry.timestamp),
        "Payload": {"body": entry.body, "integratedTime": entry.time, "logIndex": 7, "logID": entry.log_id}});
    let annotations = [
        ("dev.cosignproject.cosign/signature".to_owned(), b64(&signature)),
        ("dev.sigstore.cosign/certificate".to_owned(), layer.certificate.to_owned()),
        ("dev.sigstore.cosign/chain".to_owned(), layer.chain.to_owned()),
        ("dev.sigstore.cosign/bundle".to_owned(), bundle.to_string()),
    ];
    push_signature(scene, repository, digest, &payload, vec![annotations.into()]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyless_signature_verifies_offline_against_a_trusted_root_and_names_its_signer() {
    let scene = oci_scene("keyless");
    let (host, dir) = (scene.host.clone(), scene.dir.clone());
    let calculator = std::fs::read(example("calculator")).expect("calculator");
    let sigstore = Sigstore::new("trusted", Some(&dir.join("trusted_root.json")));
    let stranger = Sigstore::new("stranger", None);
    let identity = "https://github.com/example/tools/.github/workflows/release.yml@refs/tags/v1";
    let issuer = "https://token.actions.githubusercontent.com";
    let (certificate, key) = sigstore.leaf(identity, issuer, (2020, 2099));
    let (expired, expired_key) = sigstore.leaf(identity, issuer, (2020, 2021));
    let (untrusted, untrusted_key) = stranger.leaf(identity, issuer, (2020, 2099));
    let good = KeylessLayer {
        certificate: &certificate,
        key: &key,
        chain: &sigstore.chain_pem,
        log: &sigstore.log,
        named_log: None,
        entry_of: None,
    };

    // One artifact per case (each a digest of its own), each signed as
    // its case says.
    let mut digests = std::collections::BTreeMap::new();
    let cases: Vec<(&str, KeylessLayer<'_>)> = vec![
        ("good", KeylessLayer { ..good }),
        ("expired", KeylessLayer { certificate: &expired, key: &expired_key, ..good }),
        (
            "untrusted",
            KeylessLayer { certificate: &untrusted, key: &untrusted_key, chain: &stranger.chain_pem, ..good },
        ),
        ("forged-timestamp", KeylessLayer { log: &stranger.log, named_log: Some(&sigstore.log), ..good }),
        ("other-entry", KeylessLayer { entry_of: Some(b"another payload"), ..good }),
    ];
    for (n, (case, layer)) in cases.into_iter().enumerate() {
        let config = format!(r#"{{"case":{n}}}"#);
        let wasm = vec![(calculator.clone(), "application/wasm")];
        let reference = format!("{host}/tools/{case}:1");
        let digest =
            push(&scene.client, &reference, "application/vnd.wasm.config.v0+json", config.as_bytes(), wasm).await;
        sign_keyless(&scene, &format!("tools/{case}"), &digest, layer).await;
        digests.insert(case, digest);
    }
    let toolset = |id: &str, case: &str, identity: &str, issuer: &str| {
        json!({"id": id, "kind": "uri", "server": {"url": format!("oci://{host}/tools/{case}:1@{}", digests[case]),
               "caFile": "oci-ca.pem",
               "verify": {"identity": identity, "issuer": issuer, "trustedRoot": "trusted_root.json"}}})
    };
    let config = write_config(
        &dir,
        json!([
            toolset("good", "good", identity, issuer),
            toolset(
                "someone",
                "good",
                "https://github.com/someone/else/.github/workflows/x.yml@refs/heads/main",
                issuer
            ),
            toolset("issuer", "good", identity, "https://accounts.example.org"),
            toolset("expired", "expired", identity, issuer),
            toolset("untrusted", "untrusted", identity, issuer),
            toolset("forged", "forged-timestamp", identity, issuer),
            toolset("entry", "other-entry", identity, issuer),
        ]),
    );
    let downloads = dir.join("downloads");
    let (registry, report) = load(&config, &downloads).await;
    assert_eq!(add(&registry, "good__add").await, "5");
    let message = sync_message(&registry, "good");
    assert!(message.ends_with(&format!(", signed by {identity} (issuer {issuer})")), "{message}");
    for (toolset, expected) in [
        ("someone", format!("its certificate is for `{identity}`, not `https://github.com/someone")),
        ("issuer", format!("vouched for by `{issuer}`, not `https://accounts.example.org`")),
        ("expired", "was valid from 2020-01-01".to_owned()),
        ("untrusted", "no certificate authority of the trusted root issued its certificate".to_owned()),
        ("forged", "its signed entry timestamp does not verify with the log's key".to_owned()),
        ("entry", "its log entry is of another payload".to_owned()),
    ] {
        let message = sync_message(&registry, toolset);
        assert!(message.contains(&expected), "{toolset}: expected `{expected}` in: {message}");
        assert!(!registry.tools().iter().any(|t| t.toolset == toolset), "{toolset} has no tools");
    }
    assert_eq!(report.failures.len(), 6, "{:?}", report.failures);

    // `toolhost verify` says the same.
    let root = dir.join("trusted_root.json").display().to_string();
    let ca = dir.join("oci-ca.pem").display().to_string();
    let source = format!("oci://{host}/tools/good:1@{}", digests["good"]);
    let cache = dir.join("cli-cache").display().to_string();
    let args =
        ["verify", &source, "--identity", identity, "--issuer", issuer, "--trusted-root", &root, "--ca-file", &ca];
    let output = run_toolhost_with_env(&args, None, &[("TOOLHOST_CACHE_DIR", &cache)]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains(&format!("signed by  {identity} (issuer {issuer})")), "{stdout}");
    let args = ["verify", &source, "--identity", identity, "--trusted-root", &root, "--ca-file", &ca];
    let output = run_toolhost_with_env(&args, None, &[("TOOLHOST_CACHE_DIR", &cache)]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("`issuer` is missing"), "{stderr}");

    // Offline, verified again from the cache.
    let mut scene = scene;
    scene.server.stop();
    let (registry, _) = load(&config, &downloads).await;
    assert_eq!(add(&registry, "good__add").await, "5");
    assert!(sync_message(&registry, "good").contains(identity));
    std::fs::remove_dir_all(&dir).ok();
}

/// A sigstore bundle of `file` (v0.3, as `cosign sign-blob --bundle`
/// writes it): signed with `key` alone, or keyless with `keyless`'s
/// certificate (its DER) and a log entry; `digest_of`, if given, is the
/// file the bundle says it signs.
fn sigstore_bundle(
    file: &[u8],
    key: &KeyPair,
    keyless: Option<(&KeylessLayer<'_>, &[u8])>,
    digest_of: Option<&[u8]>,
) -> String {
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let signature = key.sign(file).expect("sign the file");
    let material = match keyless {
        None => json!({"publicKey": {"hint": "test key"}}),
        Some((layer, der)) => {
            let entry = Entry::logged(layer, file, &signature);
            let log_id: Vec<u8> = (0..entry.log_id.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&entry.log_id[i..i + 2], 16).unwrap())
                .collect();
            json!({"certificate": {"rawBytes": b64(der)}, "tlogEntries": [{
                "logIndex": "7", "logId": {"keyId": b64(&log_id)},
                "kindVersion": {"kind": "hashedrekord", "version": "0.0.1"},
                "integratedTime": entry.time.to_string(),
                "inclusionPromise": {"signedEntryTimestamp": b64(&entry.timestamp)},
                "canonicalizedBody": entry.body}]})
        }
    };
    json!({"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json", "verificationMaterial": material,
           "messageSignature": {"messageDigest": {"algorithm": "SHA2_256",
                                                  "digest": b64(&sha2::Sha256::digest(digest_of.unwrap_or(file)))},
                                "signature": b64(&signature)}})
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_plugin_is_verified_by_the_sigstore_bundle_beside_it_with_a_key_or_keyless() {
    use crate::sources::{https_server, scratch, test_ca};
    let dir = scratch("bundles");
    let ca = test_ca(&dir, "https");
    let served = dir.join("www");
    std::fs::create_dir_all(&served).expect("www");
    let wasm = std::fs::read(example("calculator")).expect("calculator");
    let sigstore = Sigstore::new("trusted", Some(&dir.join("trusted_root.json")));
    let identity = "https://github.com/example/tools/.github/workflows/release.yml@refs/tags/v1";
    let issuer = "https://token.actions.githubusercontent.com";
    let (certificate, der, leaf_key) = sigstore.leaf_der(identity, issuer, (2020, 2099));
    let layer = KeylessLayer {
        certificate: &certificate,
        key: &leaf_key,
        chain: &sigstore.chain_pem,
        log: &sigstore.log,
        named_log: None,
        entry_of: None,
    };
    let (p256, p256_fingerprint) = key(&dir, "cosign.pub", &rcgen::PKCS_ECDSA_P256_SHA256);
    let (_, other_fingerprint) = key(&dir, "other.pub", &rcgen::PKCS_ECDSA_P256_SHA256);
    // A module under several names, each with the bundle its case needs.
    // A signature is of the bytes, wherever they are served: the cases
    // meant to fail serve other modules, or the calculator's signature,
    // once kept, would verify them.
    let (text, clock) =
        (std::fs::read(example("text")).expect("text"), std::fs::read(example("clock")).expect("clock"));
    for (name, module) in [("signed", &wasm), ("keyless", &wasm), ("unsigned", &text), ("another", &clock)] {
        std::fs::write(served.join(format!("{name}.wasm")), module).expect("serve the plugin");
    }
    std::fs::write(served.join("signed.wasm.sigstore.json"), sigstore_bundle(&wasm, &p256, None, None))
        .expect("bundle");
    let keyless = sigstore_bundle(&wasm, &leaf_key, Some((&layer, &der)), None);
    std::fs::write(served.join("keyless.bundle.json"), keyless).expect("bundle");
    let another = sigstore_bundle(&clock, &p256, None, Some(b"another file"));
    std::fs::write(served.join("another.wasm.sigstore.json"), another).expect("bundle");
    let mut server = https_server(&served, &ca);
    let url = |name: &str| format!("https://127.0.0.1:{}/{name}.wasm", server.port);
    let digest = |name: &str| match name {
        "unsigned" => sha256(&text),
        "another" => sha256(&clock),
        _ => sha256(&wasm),
    };
    let toolset = |id: &str, name: &str, verify: serde_json::Value| {
        json!({"id": id, "kind": "uri",
               "server": {"url": url(name), "digest": digest(name), "caFile": "https-ca.pem", "verify": verify}})
    };
    let keyless_verify = |identity: &str| {
        json!({"identity": identity, "issuer": issuer, "trustedRoot": "trusted_root.json",
               "bundle": format!("https://127.0.0.1:{}/keyless.bundle.json", server.port)})
    };
    let config = write_config(
        &dir,
        json!([
            toolset("key", "signed", json!({"key": "cosign.pub"})),
            toolset("wrong", "signed", json!({"key": "other.pub"})),
            toolset("keyless", "keyless", keyless_verify(identity)),
            toolset("someone", "keyless", keyless_verify("https://github.com/someone/else")),
            toolset("unsigned", "unsigned", json!({"key": "cosign.pub"})),
            toolset("another", "another", json!({"key": "cosign.pub"})),
        ]),
    );
    let downloads = dir.join("downloads");
    let (registry, report) = load(&config, &downloads).await;
    assert_eq!(add(&registry, "key__add").await, "5");
    assert_eq!(add(&registry, "keyless__add").await, "5");
    let message = sync_message(&registry, "key");
    assert!(message.ends_with(&format!(", signed by key {p256_fingerprint}")), "{message}");
    let message = sync_message(&registry, "keyless");
    assert!(message.ends_with(&format!(", signed by {identity} (issuer {issuer})")), "{message}");
    for (toolset, expected) in [
        ("wrong", format!("the bundle's signature does not verify with key {other_fingerprint}")),
        ("someone", format!("its certificate is for `{identity}`, not `https://github.com/someone/else`")),
        ("unsigned", format!("no sigstore bundle at {}.sigstore.json", url("unsigned"))),
        ("another", format!("the bundle signs another file, not the one of {}", digest("another"))),
    ] {
        let message = sync_message(&registry, toolset);
        assert!(message.contains(&expected), "{toolset}: expected `{expected}` in: {message}");
    }
    assert_eq!(report.failures.len(), 4, "{:?}", report.failures);

    // Offline: both verified again from the bundles kept in the cache.
    server.stop();
    let (registry, _) = load(&config, &downloads).await;
    assert_eq!(add(&registry, "key__add").await, "5");
    assert!(sync_message(&registry, "keyless").contains(identity), "{}", sync_message(&registry, "keyless"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_bundle_sigstores_own_services_made_verifies_and_a_wrong_signer_or_file_does_not() {
    use crate::sources::{https_server, scratch, test_ca};
    let dir = scratch("sigstore-made");
    let ca = test_ca(&dir, "https");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures").join("sigstore");
    let served = dir.join("www");
    std::fs::create_dir_all(&served).expect("www");
    let file = std::fs::read(fixtures.join("bundle_v3.txt")).expect("the signed file");
    let bundle = std::fs::read(fixtures.join("bundle_v3.txt.sigstore.json")).expect("its bundle");
    std::fs::write(served.join("bundle_v3.txt"), &file).expect("serve the file");
    std::fs::write(served.join("bundle_v3.txt.sigstore.json"), &bundle).expect("serve the bundle");
    // The same bundle beside another file.
    std::fs::write(served.join("changed.txt"), b"changed").expect("serve another file");
    std::fs::write(served.join("changed.txt.sigstore.json"), &bundle).expect("serve the bundle");
    let server = https_server(&served, &ca);
    let (root, ca_file) = (fixtures.join("trusted_root.json"), dir.join("https-ca.pem"));
    let (root, ca_file) = (root.display().to_string(), ca_file.display().to_string());
    let cache = dir.join("cache").display().to_string();
    let verify = |name: &str, digest: &str, identity: &str| {
        let url = format!("https://127.0.0.1:{}/{name}", server.port);
        let args = [
            "verify",
            &url,
            "--digest",
            digest,
            "--identity",
            identity,
            "--issuer",
            "https://github.com/login/oauth",
            "--trusted-root",
            &root,
            "--ca-file",
            &ca_file,
        ];
        let output = run_toolhost_with_env(&args, None, &[("TOOLHOST_CACHE_DIR", &cache)]);
        let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        (output.status.code(), text)
    };
    let digest = sha256(&file);
    let (code, text) = verify("bundle_v3.txt", &digest, "william@yossarian.net");
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("signed by  william@yossarian.net (issuer https://github.com/login/oauth)"), "{text}");
    let (code, text) = verify("bundle_v3.txt", &digest, "someone@example.org");
    assert_eq!(code, Some(3), "{text}");
    assert!(text.contains("its certificate is for `william@yossarian.net`, not `someone@example.org`"), "{text}");
    let (code, text) = verify("changed.txt", &sha256(b"changed"), "william@yossarian.net");
    assert_eq!(code, Some(3), "{text}");
    assert!(text.contains("the bundle signs another file"), "{text}");
    drop(server);
    std::fs::remove_dir_all(&dir).ok();
}
