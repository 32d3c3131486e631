//! Build tasks for the toolhost workspace.
//!
//! The Wasm plugins are ordinary workspace crates built for `wasm32-wasip1`
//! with the `wasm-release` profile. [`build_plugins`] runs that build and
//! copies each module to `<out>/<package>.wasm`. It is used by
//! `cargo xtask build-plugins` and by the integration tests' build script, so
//! both build the plugins the same way, into the same target directory.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The Wasm target plugins are built for.
pub const WASM_TARGET: &str = "wasm32-wasip1";
/// The cargo profile plugins are built with.
pub const WASM_PROFILE: &str = "wasm-release";
/// The example plugins, by package name.
pub const EXAMPLE_PLUGINS: &[&str] = &["calculator", "clock", "doorbell", "text"];
/// The test fixture plugins, by package name (`tests/fixtures/<name>`; the
/// package is `fixture-<name>`).
pub const TEST_FIXTURES: &[&str] = &["hostile", "nonconforming", "raw-servlet", "scripted", "sdk-secrets"];

/// The workspace root (the directory above this crate).
pub fn workspace_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().unwrap_or(manifest_dir).to_path_buf()
}

/// The workspace's target directory: `CARGO_TARGET_DIR` if set, else `target/`.
pub fn target_dir(root: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => root.join(dir),
        None => root.join("target"),
    }
}

/// Build the given packages for Wasm, in one cargo invocation.
///
/// `cargo` is the cargo binary to run (the `CARGO` of the calling build).
pub fn build_wasm(cargo: &Path, root: &Path, packages: &[String]) -> Result<(), String> {
    let mut command = Command::new(cargo);
    command
        .current_dir(root)
        .args(["build", "--quiet", "--locked", "--target", WASM_TARGET, "--profile", WASM_PROFILE])
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir(root));
    for package in packages {
        command.args(["--package", package]);
    }
    // Flags meant for the host build (from an enclosing cargo, or the user)
    // must not leak into the Wasm build.
    for var in ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_TARGET", "CARGO_TARGET_DIR"] {
        command.env_remove(var);
    }
    let status = command
        .status()
        .map_err(|e| format!("cannot run {}: {e}", cargo.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "building the Wasm plugins failed ({status}); is the target installed? \
             run `rustup target add {WASM_TARGET}`"
        ))
    }
}

/// Copy a built package's module to `out_dir/<name>.wasm`, where `name` is
/// the package name without a `fixture-` prefix. Returns the path written.
pub fn install_module(root: &Path, package: &str, out_dir: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(out_dir)
        .map_err(|e| format!("cannot create {}: {e}", out_dir.display()))?;
    let from = target_dir(root)
        .join(WASM_TARGET)
        .join(WASM_PROFILE)
        .join(format!("{}.wasm", package.replace('-', "_")));
    let name = package.strip_prefix("fixture-").unwrap_or(package);
    let to = out_dir.join(format!("{name}.wasm"));
    copy_if_changed(&from, &to)?;
    Ok(to)
}

/// Build the packages and install each into `out_dir`.
pub fn build_plugins(
    cargo: &Path,
    root: &Path,
    packages: &[String],
    out_dir: &Path,
) -> Result<Vec<PathBuf>, String> {
    build_wasm(cargo, root, packages)?;
    packages.iter().map(|package| install_module(root, package, out_dir)).collect()
}

/// Copy a file unless the destination already has the same bytes (keeps its
/// modification time, so nothing downstream rebuilds for nothing).
fn copy_if_changed(from: &Path, to: &Path) -> Result<(), String> {
    let bytes = std::fs::read(from).map_err(|e| format!("cannot read {}: {e}", from.display()))?;
    if std::fs::read(to).is_ok_and(|existing| existing == bytes) {
        return Ok(());
    }
    std::fs::write(to, bytes).map_err(|e| format!("cannot write {}: {e}", to.display()))
}
