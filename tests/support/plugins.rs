//! The plugins and the `toolhost` binary the tests run: where they are
//! built, and running the CLI.

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

/// The target directory of this build (`target/<dir>`, above the test
/// executable's `deps/`) and the cargo profile that writes it: the `test`
/// profile for `target/debug` (`cargo test`'s own: the compiler crates
/// optimised, unlike `dev`'s), else the directory's name (`release`,
/// `bench`...). A build the tests start with it reuses the test build's
/// crates.
pub fn build_profile() -> (PathBuf, String) {
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe.parent().and_then(|deps| deps.parent()).expect("target/<profile>").to_path_buf();
    let profile = match dir.file_name().and_then(|d| d.to_str()) {
        Some("debug") | None => "test".to_owned(),
        Some(other) => other.to_owned(),
    };
    (dir, profile)
}

/// Make sure the `toolhost` binary is built and current, then return its path.
///
/// Integration tests of another package cannot use `CARGO_BIN_EXE_*`, so it
/// is built here (once per test process) with the tests' profile, into the
/// directory beside the test executable.
pub fn toolhost() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let (dir, profile) = build_profile();
            let status = nested_cargo()
                .args(["build", "--quiet", "--package", "toolhost-cli", "--bin", "toolhost", "--profile", &profile])
                .status()
                .expect("run cargo to build the toolhost binary");
            assert!(status.success(), "building the toolhost binary failed");
            dir.join(format!("toolhost{}", std::env::consts::EXE_SUFFIX))
        })
        .clone()
}

/// Cargo, to be run from a test or a benchmark, with the environment the
/// outer `cargo` was started with ([`without_package_env`]).
pub fn nested_cargo() -> std::process::Command {
    let mut cargo = std::process::Command::new(env!("CARGO"));
    without_package_env(&mut cargo);
    cargo
}

/// Take off `command` the variables cargo sets for the package under test
/// (`CARGO_MANIFEST_DIR`, `CARGO_PKG_NAME`, its build script's `OUT_DIR`,
/// …), for a command that runs cargo (directly, or through maturin).
/// Build scripts that read those through `rerun-if-env-changed` (ring's
/// reads `OUT_DIR`) would otherwise run again, and everything above them
/// be rebuilt, each time a nested build and an outer one take turns: a
/// `cargo bench` paid a whole release link of the CLI on every run.
pub fn without_package_env(command: &mut std::process::Command) -> &mut std::process::Command {
    for (name, _) in std::env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        let set_for_the_package = name.starts_with("CARGO_PKG_")
            || name.starts_with("CARGO_MANIFEST_")
            || name.starts_with("CARGO_BIN_EXE_")
            || matches!(
                name,
                "CARGO_CRATE_NAME"
                    | "CARGO_BIN_NAME"
                    | "CARGO_PRIMARY_PACKAGE"
                    | "CARGO_TARGET_TMPDIR"
                    | "CARGO_RUSTC_CURRENT_DIR"
                    | "OUT_DIR"
            );
        if set_for_the_package {
            command.env_remove(name);
        }
    }
    command
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

/// `toolhost serve --http 127.0.0.1:0 ARGS...` with `env`, and the URL it
/// printed (its stderr is read, and dropped, from then on). For benches;
/// the tests' own helper keeps the log lines.
pub fn spawn_serve_http(args: &[&str], env: &[(&str, &str)]) -> (std::process::Child, String) {
    spawn_serve_http_of(&toolhost(), args, env)
}

/// [`spawn_serve_http`] of another `toolhost` binary (a build to compare
/// with).
pub fn spawn_serve_http_of(
    binary: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (std::process::Child, String) {
    use std::io::BufRead as _;
    let mut child = std::process::Command::new(binary)
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
