//! Paths of the Wasm plugins the build script built for the integration
//! tests (`tests/all`).

use std::path::PathBuf;

/// An example plugin: `target/plugins/<name>.wasm`.
pub fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("TOOLHOST_PLUGIN_DIR")).join(format!("{name}.wasm"))
}

/// A test fixture plugin: `target/fixtures/<name>.wasm`.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("TOOLHOST_FIXTURE_DIR")).join(format!("{name}.wasm"))
}

/// The two builds of a plugin: an Extism module (`<name>.wasm`) and a
/// component (`<name>.component.wasm`), for tests that run against both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// `wasm32-wasip1`, the Extism interface.
    Extism,
    /// `wasm32-wasip2`, the `toolhost:plugin` world.
    Component,
}

impl Flavour {
    fn file(self, name: &str) -> String {
        match self {
            Flavour::Extism => format!("{name}.wasm"),
            Flavour::Component => format!("{name}.component.wasm"),
        }
    }

    /// An example plugin of this flavour.
    pub fn example(self, name: &str) -> PathBuf {
        PathBuf::from(env!("TOOLHOST_PLUGIN_DIR")).join(self.file(name))
    }

    /// A test fixture of this flavour (`faults`, `scripted`).
    pub fn fixture(self, name: &str) -> PathBuf {
        PathBuf::from(env!("TOOLHOST_FIXTURE_DIR")).join(self.file(name))
    }
}

/// Where the `toolhost` binary of this build profile is.
fn toolhost_bin() -> PathBuf {
    // Integration tests of another package cannot use CARGO_BIN_EXE_*, so find
    // the binary next to the test executable: target/<profile>/deps/.. .
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe.parent().and_then(|deps| deps.parent()).expect("target/<profile>");
    dir.join(format!("toolhost{}", std::env::consts::EXE_SUFFIX))
}

/// Make sure the `toolhost` binary is built and current, then return its path.
///
/// `cargo test` at the workspace root builds it already; `cargo test -p
/// toolhost-tests` does not, so it is built here (once per test process).
pub fn toolhost() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let bin = toolhost_bin();
            let profile_dir = bin.parent().and_then(|d| d.file_name()).and_then(|d| d.to_str());
            let profile = match profile_dir {
                Some("debug") | None => "dev",
                Some(other) => other,
            };
            let status = std::process::Command::new(env!("CARGO"))
                .args(["build", "--quiet", "--package", "toolhost-cli", "--bin", "toolhost", "--profile", profile])
                .status()
                .expect("run cargo to build the toolhost binary");
            assert!(status.success(), "building the toolhost binary failed");
            bin
        })
        .clone()
}

/// The shipped example configuration (`example-plugins/toolsets.yaml`),
/// written into `dir` with its plugin paths pointed at the plugins these
/// tests built. Returns the new file.
pub fn example_config(dir: &std::path::Path) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(root.join("example-plugins/toolsets.yaml")).expect("example config");
    let plugins = PathBuf::from(env!("TOOLHOST_PLUGIN_DIR"));
    let path = dir.join("toolsets.yaml");
    std::fs::write(&path, text.replace("../target/plugins", &plugins.display().to_string())).expect("write config");
    path
}

/// The version of the official MCP Python SDK the serve tests drive the
/// server with.
pub const MCP_PYTHON_SDK: &str = "mcp==2.3.0";

/// A Python interpreter with the official MCP Python SDK installed: a
/// virtual environment in the target directory, created (from PyPI) the first
/// time it is needed.
pub fn mcp_python() -> PathBuf {
    static PYTHON: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PYTHON.get_or_init(|| python_venv("mcp-venv", &[MCP_PYTHON_SDK]).join("python")).clone()
}

/// The `bin` directory of a Python virtual environment `name` in the
/// target directory with `packages` installed (from PyPI, the first time
/// they are asked for: a marker file records what is installed).
pub fn python_venv(name: &str, packages: &[&str]) -> PathBuf {
    let target = PathBuf::from(env!("TOOLHOST_PLUGIN_DIR")).join("..");
    let venv = target.join(name);
    let bin = venv.join("bin");
    let marker = venv.join("installed.txt");
    let wanted = packages.join(" ");
    if std::fs::read_to_string(&marker).is_ok_and(|m| m == wanted) {
        return bin;
    }
    let run = |program: &std::path::Path, args: &[&str]| {
        let status = std::process::Command::new(program)
            .args(args)
            .status()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()));
        assert!(status.success(), "{} {args:?} failed", program.display());
    };
    let venv_text = venv.to_string_lossy().into_owned();
    run(std::path::Path::new("python3"), &["-m", "venv", "--clear", &venv_text]);
    let mut install = vec!["-m", "pip", "install", "--quiet", "--disable-pip-version-check"];
    install.extend(packages);
    run(&bin.join("python"), &install);
    std::fs::write(&marker, wanted).expect("write the venv marker");
    bin
}

/// Run the official MCP Python SDK's client script `tests/mcp/<script>`
/// with the `toolhost` binary and the configuration `config` as its
/// arguments, and the one JSON object it prints (the test fails, with its
/// output, when it fails).
pub fn mcp_python_report(script: &str, config: &std::path::Path) -> serde_json::Value {
    let toolhost = toolhost();
    mcp_python_run(script, &[toolhost.as_os_str(), config.as_os_str()])
}

/// Run the MCP Python SDK's client script `tests/mcp/<script>` with these
/// arguments, and the one JSON object it prints (the test fails, with its
/// output, when it fails).
pub fn mcp_python_run(script: &str, args: &[&std::ffi::OsStr]) -> serde_json::Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp").join(script);
    let output =
        std::process::Command::new(mcp_python()).arg(script).args(args).output().expect("run the MCP Python client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// The version of the official MCP TypeScript SDK (npm) the serve tests
/// drive the server with.
pub const MCP_TYPESCRIPT_SDK: &str = "@modelcontextprotocol/sdk@1.32.2";

/// The TypeScript SDK's client script (`tests/mcp/client.mjs`), copied into
/// a directory of the target directory where the SDK is installed (from the
/// npm registry, with `npm`, the first time it is needed), so that its
/// imports resolve. Returns the script's path there; run it with `node`.
pub fn mcp_node_client() -> PathBuf {
    static SCRIPT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    SCRIPT
        .get_or_init(|| {
            let dir = npm_install("mcp-node", &[MCP_TYPESCRIPT_SDK]);
            // The scripts run from beside the SDK, to find it.
            for name in ["client.mjs", "approval.mjs"] {
                let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp").join(name);
                std::fs::copy(&source, dir.join(name)).expect("copy a TypeScript SDK client");
            }
            dir.join("client.mjs")
        })
        .clone()
}

/// The official MCP conformance suite (`@modelcontextprotocol/conformance`)
/// and the Node.js it needs (22 or later, from npm's `node` package),
/// installed by name from npm into `target/mcp-conformance` once. Returns
/// the directory of their executables (`conformance`, `node`), to put first
/// on `PATH`.
pub fn mcp_conformance() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| npm_install("mcp-conformance", &[MCP_CONFORMANCE, CONFORMANCE_NODE]).join("node_modules/.bin"))
        .clone()
}

/// Install npm `packages` (pinned names) by name from the npm registry into
/// `target/<dir>`, unless a marker says that exact set is there already.
/// Returns the directory.
fn npm_install(dir: &str, packages: &[&str]) -> PathBuf {
    let dir = PathBuf::from(env!("TOOLHOST_PLUGIN_DIR")).join("..").join(dir);
    let wanted = packages.join(" ");
    let marker = dir.join("installed.txt");
    if !std::fs::read_to_string(&marker).is_ok_and(|m| m == wanted) {
        std::fs::create_dir_all(&dir).expect("create the npm directory");
        let status = std::process::Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix"])
            .arg(&dir)
            .args(packages)
            .status()
            .expect("cannot run npm");
        assert!(status.success(), "npm install {wanted} failed");
        std::fs::write(&marker, wanted).expect("write the npm marker");
    }
    dir
}

/// The conformance suite's version, pinned.
const MCP_CONFORMANCE: &str = "@modelcontextprotocol/conformance@0.1.16";
/// The suite needs Node.js 22 (`fs.globSync`); Debian's is 20.
const CONFORMANCE_NODE: &str = "node@22";

/// Another TypeScript SDK script of `tests/mcp/` (e.g. `approval.mjs`),
/// set up beside the SDK as [`mcp_node_client`] does.
pub fn mcp_node_script(name: &str) -> PathBuf {
    mcp_node_client().with_file_name(name)
}

/// The MCP client script of the serve tests (`tests/mcp/client.py`).
pub fn mcp_client_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp").join("client.py")
}

/// Run `toolhost` with `args`, feeding it `stdin` (or nothing), and wait for
/// it.
pub fn run_toolhost(args: &[&str], stdin: Option<&str>) -> std::process::Output {
    run_toolhost_with_env(args, stdin, &[])
}

/// [`run_toolhost`] with these environment variables set for the process.
pub fn run_toolhost_with_env(args: &[&str], stdin: Option<&str>, env: &[(&str, &str)]) -> std::process::Output {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let mut child = Command::new(toolhost())
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn toolhost");
    let mut pipe = child.stdin.take().expect("stdin");
    if let Some(input) = stdin {
        pipe.write_all(input.as_bytes()).expect("write stdin");
    }
    drop(pipe);
    child.wait_with_output().expect("toolhost output")
}

/// A command's standard output, parsed as JSON (a panic that shows it when
/// it is not).
pub fn json_stdout(output: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", String::from_utf8_lossy(&output.stdout)))
}

/// An HTTP server on 127.0.0.1 that answers each request with the next of
/// `responses` (`{port}` replaced by its port) and counts them.
pub fn serve_http(responses: Vec<String>) -> (u16, std::thread::JoinHandle<usize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        listener.set_nonblocking(true).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut served = 0;
        while served < responses.len() && std::time::Instant::now() < deadline {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    stream.set_nonblocking(false).ok();
                    stream.set_read_timeout(Some(std::time::Duration::from_secs(5))).ok();
                    let mut buffer = [0u8; 4096];
                    let _ = std::io::Read::read(&mut stream, &mut buffer);
                    let response = responses[served].replace("{port}", &port.to_string());
                    let _ = std::io::Write::write_all(&mut stream, response.as_bytes());
                    served += 1;
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
            }
        }
        served
    });
    (port, handle)
}

/// Like [`serve_http`], and the server's thread returns the requests it
/// received (their head: request line and headers, as text).
pub fn serve_http_recording(responses: Vec<String>) -> (u16, std::thread::JoinHandle<Vec<String>>) {
    serve_http_recording_for(responses, std::time::Duration::from_secs(20))
}

/// Like [`serve_http_recording`], serving for at most `time`.
pub fn serve_http_recording_for(
    responses: Vec<String>,
    time: std::time::Duration,
) -> (u16, std::thread::JoinHandle<Vec<String>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        listener.set_nonblocking(true).unwrap();
        let deadline = std::time::Instant::now() + time;
        let mut requests = Vec::new();
        while requests.len() < responses.len() && std::time::Instant::now() < deadline {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    stream.set_nonblocking(false).ok();
                    stream.set_read_timeout(Some(std::time::Duration::from_secs(5))).ok();
                    let mut head = Vec::new();
                    let mut buffer = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match std::io::Read::read(&mut stream, &mut buffer) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => head.extend_from_slice(&buffer[..n]),
                        }
                    }
                    let response = responses[requests.len()].replace("{port}", &port.to_string());
                    let _ = std::io::Write::write_all(&mut stream, response.as_bytes());
                    requests.push(String::from_utf8_lossy(&head).into_owned());
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
            }
        }
        requests
    });
    (port, handle)
}

/// A pathological tool schema: property `a` refers to `anyOf` of two
/// `$ref`s to the next definition, `levels` deep, ending in `string`. A few
/// hundred bytes that cost 2^levels evaluations, unbounded, against a value
/// no branch accepts.
pub fn doubling_schema(levels: usize) -> serde_json::Value {
    use serde_json::json;
    let mut defs = serde_json::Map::new();
    for i in 0..levels {
        let next = format!("#/$defs/d{}", i + 1);
        defs.insert(format!("d{i}"), json!({"anyOf": [{"$ref": next}, {"$ref": next, "type": "integer"}]}));
    }
    defs.insert(format!("d{levels}"), json!({"type": "string"}));
    json!({"type": "object", "$defs": defs, "properties": {"a": {"$ref": "#/$defs/d0"}}})
}

/// A loopback HTTP server that answers every request `200 {}` (kept-alive
/// connections too) and sends each request's body on the channel: a
/// receiver of OTLP exports, say. Returns its port.
pub fn http_sink() -> (u16, std::sync::mpsc::Receiver<Vec<u8>>) {
    use std::io::{BufRead as _, BufReader, Read as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().expect("addr").port();
    let (sender, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            let sender = sender.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut stream = stream;
                loop {
                    let mut length = 0usize;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        if let Some((name, value)) = line.split_once(':')
                            && name.eq_ignore_ascii_case("content-length")
                        {
                            length = value.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let _ = sender.send(body);
                    let ok = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
                    if stream.write_all(ok.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, received)
}

/// The JSON-RPC answer in an MCP-over-HTTP response body: the body itself
/// when it is JSON, else the event stream's `data:` message that has a
/// result or an error (`null` when there is none).
pub fn mcp_answer(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|_| {
        text.lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str::<serde_json::Value>(data.trim()).ok())
            .find(|m| m.get("result").is_some() || m.get("error").is_some())
            .unwrap_or(serde_json::Value::Null)
    })
}

/// `toolhost serve --http 127.0.0.1:0 ARGS...` with `env`, and the URL it
/// printed (its stderr is read, and dropped, from then on). For benches;
/// the tests' own helper keeps the log lines.
pub fn spawn_serve_http(args: &[&str], env: &[(&str, &str)]) -> (std::process::Child, String) {
    use std::io::BufRead as _;
    let mut child = std::process::Command::new(toolhost())
        .args(["serve", "--http", "127.0.0.1:0"])
        .args(args)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start toolhost serve --http");
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    let url = loop {
        line.clear();
        assert!(stderr.read_line(&mut line).expect("stderr") > 0, "the server ended before it listened");
        if let Some(url) = line.trim().strip_prefix("toolhost: serving MCP over streamable HTTP at ") {
            break url.to_owned();
        }
    };
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    (child, url)
}

/// A PostgreSQL server of Debian's `postgresql` package, started for a test
/// on loopback in a directory of its own (`initdb`, `pg_ctl`), stopped and
/// removed when dropped.
pub struct Postgres {
    dir: PathBuf,
    bin: PathBuf,
    /// Running as root: PostgreSQL's programs run as `postgres`.
    root: bool,
    /// `postgres://postgres@127.0.0.1:PORT/toolhost`.
    pub url: String,
}

impl Postgres {
    /// Start one. PostgreSQL is required: without it the test fails,
    /// naming the package to install (`.ci/run` installs it).
    pub fn start(name: &str) -> Postgres {
        Postgres::start_if_installed(name).unwrap_or_else(|| {
            panic!("{}", missing_service("PostgreSQL (/usr/lib/postgresql/*/bin/initdb)", "postgresql"))
        })
    }

    /// Start one, or `None` where PostgreSQL is not installed: for a
    /// benchmark, which then prints that it skipped its PostgreSQL part.
    pub fn start_if_installed(name: &str) -> Option<Postgres> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()
            .and_then(|versions| versions.filter_map(Result::ok).map(|v| v.path().join("bin")).max())
            .filter(|bin| bin.join("initdb").exists())?;
        let dir = std::env::temp_dir().join(format!("toolhost-pg-{name}-{}", std::process::id()));
        std::fs::remove_dir_all(&dir).ok();
        std::fs::create_dir_all(&dir).expect("a directory for PostgreSQL");
        // PostgreSQL will not run as root: as root, run it as `postgres`.
        let root = std::process::Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"));
        if root {
            let status = std::process::Command::new("chown").args(["-R", "postgres:"]).arg(&dir).status();
            assert!(status.is_ok_and(|s| s.success()), "chown the PostgreSQL directory");
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("addr").port();
        let postgres = Postgres { url: format!("postgres://postgres@127.0.0.1:{port}/toolhost"), dir, bin, root };
        let run = |program: &str, args: &[&str]| {
            let output = postgres.command(program).args(args).output().expect("run a PostgreSQL program");
            assert!(
                output.status.success(),
                "{program} failed: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        };
        let data_arg = postgres.dir.join("data").display().to_string();
        run("initdb", &["-D", &data_arg, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"]);
        let options = format!("-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=on", postgres.dir.display());
        let log = postgres.dir.join("log").display().to_string();
        run("pg_ctl", &["-D", &data_arg, "-o", &options, "-l", &log, "-w", "-t", "60", "start"]);
        let port_arg = port.to_string();
        run("createdb", &["-h", "127.0.0.1", "-p", &port_arg, "-U", "postgres", "toolhost"]);
        Some(postgres)
    }

    /// One of PostgreSQL's programs, to run as `postgres` when root.
    fn command(&self, program: &str) -> std::process::Command {
        if self.root {
            let mut command = std::process::Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(self.bin.join(program));
            command
        } else {
            std::process::Command::new(self.bin.join(program))
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        let _ = self.command("pg_ctl").arg("-D").arg(&data).args(["-m", "immediate", "-w", "stop"]).output();
        std::fs::remove_dir_all(&self.dir).ok();
    }
}

/// Why a test that needs an external service fails without it: what is
/// missing and the Debian package that brings it. The suite never skips
/// such a test, so a green run has run them all.
pub fn missing_service(what: &str, package: &str) -> String {
    format!("{what} is not installed: this test needs it (Debian: apt-get install {package}; .ci/run installs it)")
}

/// The first of `paths` that is a file: the program an external service
/// runs as; the test fails, naming the package, when none is.
pub fn required_program(paths: &[&str], what: &str, package: &str) -> std::path::PathBuf {
    paths
        .iter()
        .map(std::path::PathBuf::from)
        .find(|path| path.is_file())
        .unwrap_or_else(|| panic!("{}", missing_service(what, package)))
}
