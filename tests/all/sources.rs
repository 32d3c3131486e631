//! Plugins from elsewhere than a local file, pinned by digest: `https://`
//! from a TLS file server (Python's `http.server`, a certificate from a test
//! CA made here), and `oci://` from the reference distribution registry
//! (Debian's `docker-registry`) on loopback, with artifacts pushed by an OCI
//! client of the tests' own in the two layouts the ecosystem publishes.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::Digest as _;
use toolhost::{DownloadCache, Error, NoSecrets, Registry, Runtime, SourceError, load_toolsets};
use toolhost_tests::{example, run_toolhost_with_env};

pub(crate) fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("toolhost-sources-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

pub(crate) fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{:x}", sha2::Sha256::digest(bytes))
}

/// A test certificate authority and a certificate it signed for
/// `localhost` and `127.0.0.1`, as PEM files.
pub(crate) struct TestCa {
    pub(crate) ca: PathBuf,
    pub(crate) cert: PathBuf,
    pub(crate) key: PathBuf,
}

pub(crate) fn test_ca(dir: &Path, name: &str) -> TestCa {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, format!("toolhost test CA {name}"));
    ca_params.key_usages =
        vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let ca_cert = ca_params.self_signed(&ca_key).expect("CA certificate");
    let key = KeyPair::generate().expect("server key");
    let params = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).expect("params");
    let cert = params.signed_by(&key, &Issuer::new(ca_params, ca_key)).expect("server certificate");
    let paths = TestCa {
        ca: dir.join(format!("{name}-ca.pem")),
        cert: dir.join(format!("{name}-server.pem")),
        key: dir.join(format!("{name}-server.key")),
    };
    std::fs::write(&paths.ca, ca_cert.pem()).expect("write CA");
    std::fs::write(&paths.cert, cert.pem()).expect("write certificate");
    std::fs::write(&paths.key, key.serialize_pem()).expect("write key");
    paths
}

/// A child process killed when dropped.
pub(crate) struct Server {
    child: Child,
    pub(crate) port: u16,
    /// What it logged on stderr, line by line (the file server: `GET /path`).
    log: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Server {
    pub(crate) fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub(crate) fn requests(&self) -> Vec<String> {
        self.log.lock().expect("log").clone()
    }

    /// The requests logged, once at least `count` of them name `path`
    /// (within 20 s): the server logs each request on stderr as it answers
    /// it, and a thread of the test reads the lines, so the client can have
    /// its answer before the line is read.
    fn requests_once(&self, count: usize, path: &str) -> Vec<String> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let requests = self.requests();
            if requests.iter().filter(|r| r.contains(path)).count() >= count || std::time::Instant::now() > deadline {
                return requests;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `tests/https/serve.py` serving `dir` over TLS with `ca`'s certificate.
pub(crate) fn https_server(dir: &Path, ca: &TestCa) -> Server {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("https").join("serve.py");
    let mut child = Command::new("python3")
        .arg(script)
        .arg(dir)
        .arg(&ca.cert)
        .arg(&ca.key)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start python3 for the HTTPS server");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("the server's port");
    let port = line.trim().parse().unwrap_or_else(|_| panic!("the HTTPS server printed `{line}`, not a port"));
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let stderr = child.stderr.take().expect("stderr");
    let sink = Arc::clone(&log);
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            sink.lock().expect("log").push(line);
        }
    });
    Server { child, port, log }
}

pub(crate) fn write_config(dir: &Path, toolsets: Value) -> PathBuf {
    let path = dir.join("toolsets.json");
    std::fs::write(&path, json!({"schema": "s", "toolsets": toolsets}).to_string()).expect("write the toolsets file");
    path
}

/// Load `config` on a registry whose runtime keeps downloads in `downloads`.
pub(crate) async fn load(config: &Path, downloads: &Path) -> (Registry, toolhost::LoadReport) {
    let file = load_toolsets(config, &NoSecrets).await.unwrap_or_else(|e| panic!("{e}"));
    let runtime = Runtime::builder().with_download_cache(DownloadCache::at(downloads)).build();
    let registry = Registry::with_runtime(runtime, Arc::new(NoSecrets));
    let report = registry.load_all(file.toolsets).await;
    (registry, report)
}

pub(crate) async fn add(registry: &Registry, name: &str) -> String {
    let result = registry
        .call_tool(name, json!({"a": 2, "b": 3}), &toolhost::ApproveAll)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    result.texts().next().unwrap_or_default().to_owned()
}

/// The CLI, with its cache directory, as the library: downloaded once (into
/// directories of the user's alone, whatever the umask), then run offline.
fn the_cli_downloads_once_into_a_private_cache(dir: &Path, ca: &TestCa, served: &Path, wasm: &[u8]) {
    let cache = dir.join("cli-cache");
    let mut server = https_server(served, ca);
    let config = write_config(
        dir,
        json!([{"id": "calc", "kind": "uri",
                "server": {"url": format!("https://127.0.0.1:{}/calculator.wasm", server.port),
                           "digest": sha256(wasm), "caFile": "https-ca.pem"}}]),
    );
    let env = [("TOOLHOST_CACHE_DIR", cache.to_str().expect("utf-8"))];
    let args = ["call", "--config", config.to_str().expect("utf-8"), "calc__add", r#"{"a":2,"b":3}"#];
    // The first run under a umask that lets the group write (Ubuntu's for
    // its users): the directories the download makes are still the user's
    // alone, so the compiled-module cache, which refuses a directory others
    // may write, keeps the module beside them.
    let first = Command::new("sh")
        .args(["-c", "umask 002 && exec \"$0\" \"$@\""])
        .arg(toolhost_tests::toolhost())
        .args(args)
        .envs(env)
        .output()
        .expect("run toolhost");
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    #[cfg(unix)]
    for made in [cache.clone(), cache.join("downloads"), cache.join("downloads").join("sha256")] {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&made).expect("made").permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{} is {mode:o}", made.display());
    }
    let compiled = std::fs::read_dir(&cache).expect("the cache").filter_map(Result::ok);
    assert!(
        compiled.into_iter().any(|e| e.path().extension().is_some_and(|x| x == "cwasm")),
        "no compiled module kept"
    );
    server.stop();
    let second = run_toolhost_with_env(&args, None, &env);
    assert!(second.status.success(), "offline: {}", String::from_utf8_lossy(&second.stderr));
    assert!(
        String::from_utf8_lossy(&second.stdout).contains("\"text\": \"5\""),
        "{}",
        String::from_utf8_lossy(&second.stdout)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_plugin_is_refused_on_a_wrong_digest_and_with_the_right_one_loads_offline_the_second_time() {
    let dir = scratch("https");
    let ca = test_ca(&dir, "https");
    let served = dir.join("www");
    std::fs::create_dir_all(&served).expect("www");
    let wasm = std::fs::read(example("calculator")).expect("the calculator plugin");
    std::fs::write(served.join("calculator.wasm"), &wasm).expect("serve the plugin");
    let mut server = https_server(&served, &ca);
    let url = format!("https://127.0.0.1:{}/calculator.wasm", server.port);
    let downloads = dir.join("downloads");

    // A pin that is not the module's: downloaded, refused, not kept.
    let wrong = sha256(b"some other module");
    let config = write_config(
        &dir,
        json!([{"id": "calc", "kind": "uri", "server": {"url": url, "digest": wrong, "caFile": "https-ca.pem"}}]),
    );
    let (registry, report) = load(&config, &downloads).await;
    assert!(registry.tools().is_empty());
    let failure = &report.failures[0].error;
    let message = failure.to_string();
    assert!(message.contains(&format!("has digest {}, but the pin is {wrong}", sha256(&wasm))), "{message}");
    let source = std::error::Error::source(failure).and_then(|s| s.downcast_ref::<SourceError>());
    assert!(matches!(source, Some(SourceError::DigestMismatch { .. })), "{failure:?}");
    assert!(
        !downloads.join("sha256").exists() || std::fs::read_dir(downloads.join("sha256")).unwrap().next().is_none()
    );

    // Without the test CA, the server is not trusted: nothing is downloaded.
    let config =
        write_config(&dir, json!([{"id": "calc", "kind": "uri", "server": {"url": url, "digest": sha256(&wasm)}}]));
    let (_, report) = load(&config, &downloads).await;
    let message = report.failures[0].error.to_string();
    assert!(message.contains("download failed") && message.to_lowercase().contains("certificate"), "{message}");

    // The right pin: downloaded once, then loaded with the server gone.
    let config = write_config(
        &dir,
        json!([{"id": "calc", "kind": "uri", "server": {"url": url, "digest": sha256(&wasm), "caFile": "https-ca.pem"}}]),
    );
    let (registry, report) = load(&config, &downloads).await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert_eq!(add(&registry, "calc__add").await, "5");
    let requests = server.requests_once(2, "/calculator.wasm");
    let fetched = requests.iter().filter(|r| r.contains("/calculator.wasm")).count();
    // The wrong pin's download and this one (the untrusted attempt never
    // got past the handshake).
    assert_eq!(fetched, 2, "{requests:?}");
    server.stop();
    let (registry, report) = load(&config, &downloads).await;
    assert!(report.failures.is_empty(), "offline: {:?}", report.failures);
    assert_eq!(add(&registry, "calc__add").await, "5");

    the_cli_downloads_once_into_a_private_cache(&dir, &ca, &served, &wasm);
    std::fs::remove_dir_all(&dir).ok();
}

/// A runtime whose downloads may reach only some hosts (the tool-set
/// service's: `allowedHosts`) does not follow a redirect anywhere else: the
/// server a tenant names cannot send the download to a host the operator
/// did not allow (an internal one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_is_not_redirected_to_a_host_the_runtime_may_not_reach() {
    let dir = scratch("redirect");
    let ca = test_ca(&dir, "https");
    let served = dir.join("www");
    std::fs::create_dir_all(&served).expect("www");
    let wasm = std::fs::read(example("calculator")).expect("the calculator plugin");
    std::fs::write(served.join("calculator.wasm"), &wasm).expect("serve the plugin");
    let server = https_server(&served, &ca);
    // The same server under another name: `localhost` is not `127.0.0.1`.
    let elsewhere = format!("https://localhost:{}/calculator.wasm", server.port);
    std::fs::write(served.join("moved.wasm.redirect"), &elsewhere).expect("the redirect");
    let config = write_config(
        &dir,
        json!([{"id": "calc", "kind": "uri",
                "server": {"url": format!("https://127.0.0.1:{}/moved.wasm", server.port),
                           "digest": sha256(&wasm), "caFile": "https-ca.pem"}}]),
    );
    let load_with = |hosts: Option<Vec<String>>| {
        let config = config.clone();
        async move {
            let file = load_toolsets(&config, &NoSecrets).await.unwrap_or_else(|e| panic!("{e}"));
            let mut runtime = Runtime::builder().with_download_cache(DownloadCache::disabled());
            if let Some(hosts) = hosts {
                runtime = runtime.with_download_hosts(hosts);
            }
            let registry = Registry::with_runtime(runtime.build(), Arc::new(NoSecrets));
            let report = registry.load_all(file.toolsets).await;
            (registry, report)
        }
    };

    let (registry, report) = load_with(Some(vec!["127.0.0.1".to_owned()])).await;
    assert!(registry.tools().is_empty());
    let failure = &report.failures[0].error;
    let source = std::error::Error::source(failure).and_then(|s| s.downcast_ref::<SourceError>());
    match source {
        Some(SourceError::HostNotAllowed { host, .. }) => assert_eq!(host, &format!("localhost:{}", server.port)),
        other => panic!("not refused for its host: {other:?} ({failure})"),
    }
    let asked: Vec<String> = server.requests_once(1, "/moved.wasm");
    assert!(asked.iter().any(|r| r.contains("/moved.wasm")), "{asked:?}");
    assert!(!asked.iter().any(|r| r.contains("/calculator.wasm")), "the redirect was followed: {asked:?}");

    // The source's own host must be allowed too.
    let (_, report) = load_with(Some(vec!["localhost".to_owned()])).await;
    let message = report.failures[0].error.to_string();
    assert!(message.contains("`127.0.0.1:") && message.contains("not one of the hosts"), "{message}");

    // Both allowed, or no limit (the user's own toolsets file): followed.
    for hosts in [Some(vec!["127.0.0.1".to_owned(), format!("localhost:{}", server.port)]), None] {
        let (registry, report) = load_with(hosts).await;
        assert!(report.failures.is_empty(), "{:?}", report.failures);
        assert_eq!(add(&registry, "calc__add").await, "5");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn a_remote_plugin_without_a_pin_or_asking_for_signatures_is_a_configuration_error() {
    let dir = scratch("pins");
    let hex = "0".repeat(64);
    for (server, pointer, expected) in [
        (json!({"url": "https://example.org/p.wasm"}), "/toolsets/0/server/digest", "must be pinned"),
        (json!({"url": "https://example.org/p.wasm", "digest": "sha256:ABC"}), "/toolsets/0/server/digest", "sha256"),
        (json!({"url": "oci://ghcr.io/o/p:1"}), "/toolsets/0/server/url", "pinned by its manifest digest"),
        (
            json!({"url": format!("oci://ghcr.io/o/p:1@sha256:{hex}"), "digest": format!("sha256:{}", "1".repeat(64))}),
            "/toolsets/0/server/digest",
            "is not the digest the URL names",
        ),
        (
            json!({"url": "http://example.org/p.wasm", "digest": format!("sha256:{hex}")}),
            "/toolsets/0/server/url",
            "plain http://",
        ),
        (json!({"url": "s3://bucket/p.wasm"}), "/toolsets/0/server/url", "not a plugin source"),
        (
            json!({"url": "p.wasm", "digest": format!("sha256:{hex}")}),
            "/toolsets/0/server/digest",
            "a local file is used as it is",
        ),
        (
            json!({"url": "https://example.org/p.wasm", "digest": format!("sha256:{hex}"), "verify": {"bundle": "p.json"}}),
            "/toolsets/0/server/verify",
            "`bundle` says where the signature is",
        ),
        (
            json!({"url": format!("oci://ghcr.io/o/p:1@sha256:{hex}"), "verify": {"key": "k.pub", "bundle": "p.json"}}),
            "/toolsets/0/server/verify",
            "`bundle` is for https:// plugins",
        ),
        (
            json!({"url": format!("oci://ghcr.io/o/p:1@sha256:{hex}"), "verify": {"identity": "me@example.org", "issuer": "https://accounts.example.org"}}),
            "/toolsets/0/server/verify",
            "`trustedRoot` is missing",
        ),
        (
            json!({"url": format!("oci://ghcr.io/o/p:1@sha256:{hex}"), "verify": {"key": "cosign.pub", "issuer": "https://accounts.example.org"}}),
            "/toolsets/0/server/verify",
            "give one or the other",
        ),
        (
            json!({"url": "p.wasm", "verify": {"key": "cosign.pub"}}),
            "/toolsets/0/server/verify",
            "a local file is used as it is",
        ),
    ] {
        let config = write_config(&dir, json!([{"id": "p", "kind": "uri", "server": server}]));
        let error = load_toolsets(&config, &NoSecrets).await.expect_err("refused");
        let problem = error.problems.iter().find(|p| p.pointer == pointer);
        assert!(
            problem.is_some_and(|p| p.message.contains(expected)),
            "{server}: expected `{expected}` at {pointer}: {error}"
        );
    }
    // A file that requires signatures refuses a downloaded plugin without
    // one, not a local file; its keyless `verify` is refused as well.
    let oci = json!({"id": "p", "kind": "uri", "server": {"url": format!("oci://ghcr.io/o/p:1@sha256:{hex}")}});
    let local = json!({"id": "l", "kind": "uri", "server": {"url": "p.wasm"}});
    for (verify, pointer, expected) in [
        (json!({"required": true}), "/toolsets/0/server/verify", "requires every downloaded plugin to be verified"),
        (json!({"identity": "me@example.org", "trustedRoot": "root.json"}), "/verify", "`issuer` is missing"),
        (json!({}), "/verify", "has less than 1 property"),
    ] {
        let config = dir.join("required.json");
        let document = json!({"schema": "s", "verify": verify, "toolsets": [oci, local]});
        std::fs::write(&config, document.to_string()).expect("write the toolsets file");
        let error = load_toolsets(&config, &NoSecrets).await.expect_err("refused");
        let problem = error.problems.iter().find(|p| p.pointer == pointer);
        assert!(
            problem.is_some_and(|p| p.message.contains(expected)),
            "{verify}: expected `{expected}` at {pointer}: {error}"
        );
        assert!(!error.problems.iter().any(|p| p.pointer.starts_with("/toolsets/1")), "{error}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A test's reference registry, over TLS with a CA of its own (its
/// certificate in `oci-ca.pem` of the test's scratch directory), and a
/// client that pushes to it.
pub(crate) struct OciScene {
    pub(crate) dir: PathBuf,
    pub(crate) server: Server,
    /// `127.0.0.1:<port>`.
    pub(crate) host: String,
    pub(crate) client: oci_client::Client,
}

/// The registry of a test named `name`, with a CA and a client of its own.
pub(crate) fn oci_scene(name: &str) -> OciScene {
    let binary = registry_binary();
    let dir = scratch(name);
    let ca = test_ca(&dir, "oci");
    let server = oci_registry(&binary, &dir, &ca);
    let host = format!("127.0.0.1:{}", server.port);
    OciScene { dir, server, host, client: pusher(&ca) }
}

/// The reference registry's program, on the `PATH`: the test fails,
/// naming the package, without it.
fn registry_binary() -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join("docker-registry"))
        .find(|path| path.is_file())
        .unwrap_or_else(|| panic!("{}", toolhost_tests::missing_service("docker-registry", "docker-registry")))
}

/// The reference registry on a free loopback port, over TLS with `ca`'s
/// certificate, storing in `dir`.
fn oci_registry(binary: &Path, dir: &Path, ca: &TestCa) -> Server {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        listener.local_addr().expect("address").port()
    };
    let config = dir.join("registry.yml");
    std::fs::write(
        &config,
        format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n  tls:\n    certificate: {}\n    key: {}\n",
            dir.join("storage").display(),
            ca.cert.display(),
            ca.key.display()
        ),
    )
    .expect("write the registry's configuration");
    let child = Command::new(binary)
        .arg("serve")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start docker-registry");
    let mut server = Server { child, port, log: Arc::default() };
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = server.child.try_wait() {
            panic!("docker-registry exited ({status}) before listening");
        }
        assert!(Instant::now() < deadline, "docker-registry did not listen on {port} within a minute");
        std::thread::sleep(Duration::from_millis(50));
    }
    server
}

/// An OCI client of the tests' own (oci-client from crates.io), trusting
/// the test CA.
fn pusher(ca: &TestCa) -> oci_client::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certificate = oci_client::client::Certificate {
        encoding: oci_client::client::CertificateEncoding::Pem,
        data: std::fs::read(&ca.ca).expect("CA"),
    };
    oci_client::Client::try_from(oci_client::client::ClientConfig {
        protocol: oci_client::client::ClientProtocol::Https,
        tls_certs_only: vec![certificate],
        ..Default::default()
    })
    .expect("an OCI client")
}

/// Push one image manifest with these layers; its digest.
pub(crate) async fn push(
    client: &oci_client::Client,
    reference: &str,
    config_type: &str,
    config: &[u8],
    layers: Vec<(Vec<u8>, &str)>,
) -> String {
    use oci_client::client::{Config, ImageLayer};
    let reference: oci_client::Reference = reference.parse().expect("reference");
    let auth = oci_client::secrets::RegistryAuth::Anonymous;
    let layers: Vec<ImageLayer> =
        layers.into_iter().map(|(data, media_type)| ImageLayer::new(data, media_type.to_owned(), None)).collect();
    let config = Config::new(config.to_vec(), config_type.to_owned(), None);
    client.push(&reference, &layers, config, &auth, None).await.expect("push");
    client.fetch_manifest_digest(&reference, &auth).await.expect("the pushed manifest's digest")
}

/// `files` as a gzipped tar archive (an image layer).
fn tar_gz(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
    for (path, content) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder.append_data(&mut header, path, *content).expect("tar entry");
    }
    builder.into_inner().expect("tar").finish().expect("gzip")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oci_plugins_are_pulled_from_a_registry_by_digest_in_both_published_layouts() {
    let OciScene { dir, server: mut registry_server, host, client } = oci_scene("oci");
    let calculator = std::fs::read(example("calculator")).expect("calculator");
    let text = std::fs::read(example("text")).expect("text");

    // A Wasm OCI artifact (wassette's layout): the layer is the module.
    let artifact = push(
        &client,
        &format!("{host}/tools/calculator:1.0"),
        "application/vnd.wasm.config.v0+json",
        br#"{"architecture":"wasm","os":"wasip1"}"#,
        vec![(calculator.clone(), "application/vnd.wasm.content.layer.v1+wasm")],
    )
    .await;
    // An image built FROM scratch (hyper-mcp's layout): /plugin.wasm in a
    // gzipped layer, beside other files.
    let image = push(
        &client,
        &format!("{host}/tools/text:1.0"),
        "application/vnd.oci.image.config.v1+json",
        br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#,
        vec![(
            tar_gz(&[("README.md", b"the text plugin"), ("plugin.wasm", &text)]),
            "application/vnd.oci.image.layer.v1.tar+gzip",
        )],
    )
    .await;
    let downloads = dir.join("downloads");
    let config = write_config(
        &dir,
        json!([
            {"id": "calc", "kind": "uri", "server": {"url": format!("oci://{host}/tools/calculator:1.0@{artifact}"), "caFile": "oci-ca.pem"}},
            {"id": "text", "kind": "uri", "server": {"url": format!("oci://{host}/tools/text:1.0@{image}"), "caFile": "oci-ca.pem"}},
            {"id": "gone", "kind": "uri", "server": {"url": format!("oci://{host}/tools/calculator:1.0@{}", sha256(b"no such manifest")), "caFile": "oci-ca.pem"}}
        ]),
    );
    let (registry, report) = load(&config, &downloads).await;
    assert_eq!(add(&registry, "calc__add").await, "5");
    let upper = registry
        .call_tool("text__change_case", json!({"text": "pulled", "case": "upper"}), &toolhost::ApproveAll)
        .await
        .expect("call");
    assert_eq!(upper.texts().next(), Some("PULLED"));
    // A digest the registry does not have: that toolset fails, alone.
    assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
    assert_eq!(report.failures[0].toolset, "gone");
    let message = report.failures[0].error.to_string();
    assert!(message.contains("cannot pull the manifest"), "{message}");

    // Offline afterwards: the registry stopped, both load from the cache.
    registry_server.stop();
    let (registry, report) = load(&config, &downloads).await;
    assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
    assert_eq!(add(&registry, "calc__add").await, "5");
    assert!(registry.tools().iter().any(|t| t.name == "text__change_case"));
    std::fs::remove_dir_all(&dir).ok();
}

/// What an artifact's publisher chooses is bounded too: a manifest of more
/// layers than toolhost reads is refused before any is pulled, and a layer
/// the manifest names many times is read (and unpacked) once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oci_artifacts_layers_are_bounded() {
    let OciScene { dir, server: _server, host, client } = oci_scene("oci-layers");
    let image_config = br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#;
    let tar_type = "application/vnd.oci.image.layer.v1.tar+gzip";
    let two_modules = tar_gz(&[("a.wasm", b"\0asm\x01\0\0\0"), ("b.wasm", b"\0asm\x01\0\0\0")]);
    let repeated = push(
        &client,
        &format!("{host}/tools/repeated:1"),
        "application/vnd.oci.image.config.v1+json",
        image_config,
        vec![(two_modules, tar_type); 30],
    )
    .await;
    let many = push(
        &client,
        &format!("{host}/tools/many:1"),
        "application/vnd.oci.image.config.v1+json",
        image_config,
        (0..65).map(|n| (tar_gz(&[(&format!("file{n}"), b"not a module")]), tar_type)).collect(),
    )
    .await;
    let config = write_config(
        &dir,
        json!([
            {"id": "repeated", "kind": "uri", "server": {"url": format!("oci://{host}/tools/repeated:1@{repeated}"), "caFile": "oci-ca.pem"}},
            {"id": "many", "kind": "uri", "server": {"url": format!("oci://{host}/tools/many:1@{many}"), "caFile": "oci-ca.pem"}}
        ]),
    );
    let (_, report) = load(&config, &dir.join("downloads")).await;
    let failure = |id: &str| {
        let failure = report.failures.iter().find(|f| f.toolset == id).unwrap_or_else(|| panic!("{id} loaded"));
        failure.error.to_string()
    };
    let repeated = failure("repeated");
    assert!(repeated.contains("several Wasm modules and no /plugin.wasm"), "{repeated}");
    assert_eq!(repeated.matches("/a.wasm").count(), 1, "{repeated}");
    let many = failure("many");
    assert!(many.contains("65 layers, more than the 64"), "{many}");
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oci_image_index_resolves_to_the_wasm_platform_and_the_cli_lists_it() {
    let OciScene { dir, server: registry_server, host, client } = oci_scene("oci-index");
    let calculator = std::fs::read(example("calculator")).expect("calculator");
    let text = std::fs::read(example("text")).expect("text");
    // linux/amd64 holds the text plugin, wasi/wasm the calculator: the
    // index's wasi/wasm entry is the one taken.
    let linux = push(
        &client,
        &format!("{host}/tools/multi:linux"),
        "application/vnd.oci.image.config.v1+json",
        br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#,
        vec![(tar_gz(&[("plugin.wasm", &text)]), "application/vnd.oci.image.layer.v1.tar+gzip")],
    )
    .await;
    let wasi = push(
        &client,
        &format!("{host}/tools/multi:wasi"),
        "application/vnd.wasm.config.v0+json",
        b"{}",
        vec![(calculator.clone(), "application/wasm")],
    )
    .await;
    let entry = |digest: &str, os: &str, arch: &str| {
        json!({"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest, "size": 0,
               "platform": {"os": os, "architecture": arch}})
    };
    let mut index = json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                           "manifests": [entry(&linux, "linux", "amd64"), entry(&wasi, "wasip1", "wasm")]});
    // The sizes the registry checks are the manifests' own.
    let auth = oci_client::secrets::RegistryAuth::Anonymous;
    for (i, digest) in [&linux, &wasi].into_iter().enumerate() {
        let reference: oci_client::Reference = format!("{host}/tools/multi@{digest}").parse().expect("reference");
        let (bytes, _) = client
            .pull_manifest_raw(&reference, &auth, &["application/vnd.oci.image.manifest.v1+json"])
            .await
            .expect("pull the manifest back");
        index["manifests"][i]["size"] = json!(bytes.len());
    }
    let index_bytes = serde_json::to_vec(&index).expect("index");
    let index_digest = sha256(&index_bytes);
    let reference: oci_client::Reference = format!("{host}/tools/multi:1.0").parse().expect("reference");
    let content_type = http::HeaderValue::from_static("application/vnd.oci.image.index.v1+json");
    client.push_manifest_raw(&reference, index_bytes, content_type).await.expect("push the index");

    let config = write_config(
        &dir,
        json!([{"id": "multi", "kind": "uri",
                "server": {"url": format!("oci://{host}/tools/multi:1.0@{index_digest}"), "caFile": "oci-ca.pem"}}]),
    );
    let cache = dir.join("cli-cache");
    let output = run_toolhost_with_env(
        &["tools", "--config", config.to_str().expect("utf-8")],
        None,
        &[("TOOLHOST_CACHE_DIR", cache.to_str().expect("utf-8"))],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("multi__add") && !stdout.contains("multi__change_case"), "{stdout}");
    assert!(stdout.contains("SyncCompleted"), "{stdout}");
    drop(registry_server);
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn a_remote_source_error_is_typed() {
    // Not a digest the network could satisfy: a port nothing listens on.
    let dir = scratch("unreachable");
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("port").local_addr().expect("addr").port();
    let config = write_config(
        &dir,
        json!([{"id": "p", "kind": "uri",
                "server": {"url": format!("https://127.0.0.1:{port}/p.wasm"), "digest": sha256(b"p")}}]),
    );
    let (registry, report) = load(&config, &dir.join("downloads")).await;
    assert!(registry.tools().is_empty());
    let error = &report.failures[0].error;
    assert!(matches!(error, Error::Load { .. }), "{error:?}");
    assert!(error.to_string().contains("download failed"), "{error}");
    std::fs::remove_dir_all(&dir).ok();
}

/// A directory served over HTTPS with the calculator plugin paced at
/// `rate` bytes a second: the server, the plugin's URL and its digest.
fn paced_plugin(dir: &Path, ca: &TestCa, rate: usize) -> (Server, String, String) {
    let served = dir.join("www");
    std::fs::create_dir_all(&served).expect("www");
    let wasm = std::fs::read(example("calculator")).expect("the calculator plugin");
    std::fs::write(served.join("calculator.wasm"), &wasm).expect("serve the plugin");
    std::fs::write(served.join("calculator.wasm.pace"), rate.to_string()).expect("its pace");
    let server = https_server(&served, ca);
    let url = format!("https://127.0.0.1:{}/calculator.wasm", server.port);
    (server, url, sha256(&wasm))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_under_the_minimum_rate_is_given_up_on_saying_so() {
    // A byte a second: given up on after the first window, not after the
    // whole download's 300 s.
    let dir = scratch("dribble");
    let ca = test_ca(&dir, "https");
    let (server, url, digest) = paced_plugin(&dir, &ca, 1);
    let config = write_config(
        &dir,
        json!([{"id": "calc", "kind": "uri", "server": {"url": url, "digest": digest, "caFile": "https-ca.pem"}}]),
    );
    let (registry, report) = load(&config, &dir.join("downloads")).await;
    assert!(registry.tools().is_empty());
    let message = report.failures.first().map(|f| f.error.to_string()).unwrap_or_default();
    assert!(message.contains("download failed") && message.contains("slower than 64 KiB in 20s"), "{message}");
    assert!(!server.requests().iter().any(|r| r.starts_with("DONE")), "{:?}", server.requests());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn serve_answers_with_what_is_loaded_while_a_slow_download_goes_on_and_announces_it_later() {
    use std::io::Write as _;
    let dir = scratch("serve-slow");
    let ca = test_ca(&dir, "https");
    // Fast enough for the minimum rate, slow enough (about a minute) to
    // outlast the 5 s wait by far, however long the local load takes.
    let size = std::fs::metadata(example("calculator")).expect("the calculator plugin").len() as usize;
    let (server, url, digest) = paced_plugin(&dir, &ca, (size / 60).max(64 * 1024 / 20 + 1024));
    let config = write_config(
        &dir,
        json!([
            {"id": "local", "kind": "uri", "server": {"url": example("calculator").display().to_string()}},
            {"id": "slow", "kind": "uri", "server": {"url": url, "digest": digest, "caFile": "https-ca.pem"}}
        ]),
    );
    let mut child = Command::new(toolhost_tests::toolhost())
        .args(["serve", "--config"])
        .arg(&config)
        .env("TOOLHOST_CACHE_DIR", dir.join("cache"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start toolhost serve");
    let mut input = child.stdin.take().expect("stdin");
    let mut output = BufReader::new(child.stdout.take().expect("stdout"));
    let mut send = |message: Value| writeln!(input, "{message}").expect("write to serve");
    let mut receive = |what: &str| -> Value {
        let mut line = String::new();
        assert!(output.read_line(&mut line).expect("read from serve") > 0, "serve closed its output before {what}");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    };
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
        "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}));
    assert!(receive("the initialize answer")["result"]["capabilities"]["tools"]["listChanged"] == true);
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let names = |answer: &Value| -> Vec<String> {
        answer["result"]["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let first = receive("the first tools/list");
    // Answered with the local toolset while the download still goes on.
    assert!(names(&first).contains(&"local__add".to_owned()), "{first}");
    assert!(!names(&first).contains(&"slow__add".to_owned()), "{first}");
    assert!(!server.requests().iter().any(|r| r.starts_with("DONE")), "{:?}", server.requests());
    // The downloaded toolset joins, announced.
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        assert!(Instant::now() < deadline, "no list_changed");
        let message = receive("notifications/tools/list_changed");
        if message["method"] == "notifications/tools/list_changed" {
            break;
        }
    }
    send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}));
    let second = receive("the second tools/list");
    assert!(names(&second).contains(&"slow__add".to_owned()), "{second}");
    let _ = child.kill();
    let _ = child.wait();
    std::fs::remove_dir_all(&dir).ok();
}
