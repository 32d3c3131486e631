//! The official MCP clients the tests drive toolhost with: the Python SDK
//! (PyPI, in a virtual environment of the target directory) and the
//! TypeScript SDK and conformance suite (npm).

use std::path::PathBuf;

use super::plugins::toolhost;

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

/// The tests' MCP server on the official Python SDK, `tests/mcp/server.py`
/// (run by [`mcp_python`]; its argument `stdio` or `http PORT` says how it
/// is spoken to).
pub fn mcp_python_server() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp").join("server.py")
}

/// The tests' MCP server on the official Python SDK ([`mcp_python_server`])
/// over streamable HTTP (uvicorn), with `env` set, once it listens: its
/// process and port. The caller kills it.
pub fn spawn_mcp_python_http(env: &[(&str, &str)]) -> (std::process::Child, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let child = std::process::Command::new(mcp_python())
        .arg(mcp_python_server())
        .args(["http".to_owned(), port.to_string()])
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start the HTTP MCP server");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(std::time::Instant::now() < deadline, "the HTTP MCP server did not listen on {port} within a minute");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    (child, port)
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
            for name in ["client.mjs", "approval.mjs", "paced.mjs"] {
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
pub fn npm_install(dir: &str, packages: &[&str]) -> PathBuf {
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
