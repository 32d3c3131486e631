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
                .args(["build", "--quiet", "--package", "toolhost", "--bin", "toolhost", "--profile", profile])
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
