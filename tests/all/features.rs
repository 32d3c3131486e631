//! The CLI is built with the features the test build resolves, so that the
//! main job and the test suite compile every dependency once (DESIGN.md,
//! Crates, `toolhost-cli`). Nothing else would notice when a dependency
//! bump makes `extism` or `criterion` turn on a feature the CLI does not:
//! CI would only get slower, by a second build of wasmtime and the rest.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

/// Each package of `cargo tree` with the features it is built with, one
/// `name version [features]` line per unit (a crate built for the host and
/// for the target with different features gives two).
fn units(selection: &[&str]) -> BTreeSet<String> {
    let output = Command::new(env!("CARGO"))
        .current_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."))
        .args(["tree", "--locked", "--prefix", "none", "--format", "{p} [{f}]"])
        .args(selection)
        .output()
        .expect("run cargo tree");
    assert!(output.status.success(), "cargo tree {selection:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout)
        .expect("UTF-8")
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| line.trim_end_matches(" (*)").replace(" (proc-macro)", ""))
        .collect()
}

#[test]
fn the_cli_builds_every_dependency_with_the_test_builds_features() {
    let cli = units(&["--package", "toolhost-cli"]);
    // (The fuzz targets are built apart, by nightly with other flags:
    // their features are not the test build's.)
    let tests = units(&["--workspace", "--exclude", "toolhost-fuzz"]);
    assert!(cli.len() > 100, "cargo tree listed {} units for the CLI", cli.len());
    let only_cli: Vec<&String> = cli.difference(&tests).filter(|unit| !unit.starts_with("toolhost-cli ")).collect();
    assert!(
        only_cli.is_empty(),
        "the CLI builds these with other features than the test build does, so CI builds them twice; \
         turn the test build's features on in host/cli/Cargo.toml (each is `name version [features]`; \
         compare with `cargo tree --workspace`):\n{}",
        only_cli.iter().map(|unit| format!("  {unit}")).collect::<Vec<_>>().join("\n")
    );
}
