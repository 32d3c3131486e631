//! Build tasks for the toolhost workspace.
//!
//! The Wasm plugins are ordinary workspace crates built for `wasm32-wasip1`
//! (Extism modules) with the `wasm-release` profile, and some also for
//! `wasm32-wasip2` (components of `wit/plugin.wit`; the SDK switches on the
//! target). [`build_plugins`] runs those builds and copies each module to
//! `<out>/<name>.wasm` and each component to `<out>/<name>.component.wasm`.
//! It is used by `cargo xtask build-plugins` and by the integration tests'
//! build script, so both build the plugins the same way, into the same
//! target directory.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The Wasm target plugins are built for (Extism modules).
pub const WASM_TARGET: &str = "wasm32-wasip1";
/// The Wasm target components are built for.
pub const COMPONENT_TARGET: &str = "wasm32-wasip2";
/// The cargo profile plugins are built with.
pub const WASM_PROFILE: &str = "wasm-release";
/// The example plugins, by package name.
pub const EXAMPLE_PLUGINS: &[&str] = &["calculator", "clock", "doorbell", "text"];
/// The test fixture plugins, by package name (`tests/fixtures/<name>`; the
/// package is `fixture-<name>`).
pub const TEST_FIXTURES: &[&str] = &[
    "conformance",
    "faults",
    "hostile",
    "nonconforming",
    "raw-servlet",
    "scripted",
    "sdk-secrets",
    "secret-thief",
    "hyper-v2",
    "tool-list-changed",
    "component-0-1-0",
    "fetcher",
];
/// The packages (examples and `fixture-*`) also built as components.
pub const COMPONENTS: &[&str] = &[
    "calculator",
    "clock",
    "doorbell",
    "text",
    "fixture-component-0-1-0",
    "fixture-conformance",
    "fixture-faults",
    "fixture-fetcher",
    "fixture-scripted",
    "fixture-sdk-secrets",
];

/// The names of `known` that `names` asks for, in `known`'s order, each
/// once; all of `known` when `names` is empty. A name not in `known` is an
/// error that lists the known ones.
pub fn choose<'a>(known: &[&'a str], names: &[String]) -> Result<Vec<&'a str>, String> {
    if let Some(unknown) = names.iter().find(|name| !known.contains(&name.as_str())) {
        return Err(format!("no plugin `{unknown}` here; the names are: {}", known.join(", ")));
    }
    Ok(known.iter().copied().filter(|k| names.is_empty() || names.iter().any(|n| n == k)).collect())
}

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

/// Build the given packages for a Wasm target, in one cargo invocation.
///
/// `cargo` is the cargo binary to run (the `CARGO` of the calling build).
pub fn build_wasm(cargo: &Path, root: &Path, packages: &[String], target: &str) -> Result<(), String> {
    let mut command = Command::new(cargo);
    command
        .current_dir(root)
        .args(["build", "--quiet", "--locked", "--target", target, "--profile", WASM_PROFILE])
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
    let status = command.status().map_err(|e| format!("cannot run {}: {e}", cargo.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "building the Wasm plugins for {target} failed ({status}); is the target installed? \
             run `rustup target add {target}`"
        ))
    }
}

/// Copy a built package's module to `out_dir/<name>.wasm` (a component, of
/// the [`COMPONENT_TARGET`] build: `<name>.component.wasm`), where `name` is
/// the package name without a `fixture-` prefix. Returns the path written.
pub fn install_module(root: &Path, package: &str, out_dir: &Path, target: &str) -> Result<PathBuf, String> {
    std::fs::create_dir_all(out_dir).map_err(|e| format!("cannot create {}: {e}", out_dir.display()))?;
    let from = target_dir(root).join(target).join(WASM_PROFILE).join(format!("{}.wasm", package.replace('-', "_")));
    let name = package.strip_prefix("fixture-").unwrap_or(package);
    let suffix = if target == COMPONENT_TARGET { ".component" } else { "" };
    let to = out_dir.join(format!("{name}{suffix}.wasm"));
    copy_if_changed(&from, &to)?;
    Ok(to)
}

/// Build the packages and install each into `out_dir`: every one as an
/// Extism module, those in [`COMPONENTS`] also as a component.
pub fn build_plugins(cargo: &Path, root: &Path, packages: &[String], out_dir: &Path) -> Result<Vec<PathBuf>, String> {
    build_wasm(cargo, root, packages, WASM_TARGET)?;
    let components = components_of(packages);
    if !components.is_empty() {
        build_wasm(cargo, root, &components, COMPONENT_TARGET)?;
    }
    let mut installed = Vec::new();
    for package in packages {
        installed.push(install_module(root, package, out_dir, WASM_TARGET)?);
        if components.contains(package) {
            installed.push(install_module(root, package, out_dir, COMPONENT_TARGET)?);
        }
    }
    Ok(installed)
}

/// The packages of `packages` that are also built as components.
pub fn components_of(packages: &[String]) -> Vec<String> {
    packages.iter().filter(|p| COMPONENTS.contains(&p.as_str())).cloned().collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_choose_plugins_in_order_each_once_and_none_chooses_all() {
        let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(choose(EXAMPLE_PLUGINS, &[]).unwrap(), EXAMPLE_PLUGINS);
        assert_eq!(choose(EXAMPLE_PLUGINS, &names(&["text", "calculator", "text"])).unwrap(), ["calculator", "text"]);
        let refused = choose(EXAMPLE_PLUGINS, &names(&["calculator", "calc"])).unwrap_err();
        assert!(refused.contains("`calc`") && refused.contains("calculator, clock"), "{refused}");
    }
}
