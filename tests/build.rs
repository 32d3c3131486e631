//! Builds the example plugins and the test fixtures for Wasm before the
//! integration tests compile, so `cargo test` needs no other step. The `.wasm`
//! files are never committed: they are built from the workspace's sources.

use std::path::PathBuf;

fn main() {
    let root = xtask::workspace_root();
    for path in ["protocol", "plugin-sdk", "example-plugins", "tests/fixtures", "Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", root.join(path).display());
    }
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_DIR");

    let cargo = PathBuf::from(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    let examples: Vec<String> = xtask::EXAMPLE_PLUGINS.iter().map(|p| p.to_string()).collect();
    let fixtures: Vec<String> = xtask::TEST_FIXTURES.iter().map(|p| format!("fixture-{p}")).collect();
    let all: Vec<String> = examples.iter().chain(&fixtures).cloned().collect();
    xtask::build_wasm(&cargo, &root, &all, xtask::WASM_TARGET).unwrap_or_else(|message| panic!("{message}"));
    let components = xtask::components_of(&all);
    xtask::build_wasm(&cargo, &root, &components, xtask::COMPONENT_TARGET)
        .unwrap_or_else(|message| panic!("{message}"));

    let target = xtask::target_dir(&root);
    for (packages, dir, var) in
        [(&examples, "plugins", "TOOLHOST_PLUGIN_DIR"), (&fixtures, "fixtures", "TOOLHOST_FIXTURE_DIR")]
    {
        let out = target.join(dir);
        for package in packages {
            xtask::install_module(&root, package, &out, xtask::WASM_TARGET)
                .unwrap_or_else(|message| panic!("{message}"));
            if components.contains(package) {
                xtask::install_module(&root, package, &out, xtask::COMPONENT_TARGET)
                    .unwrap_or_else(|message| panic!("{message}"));
            }
        }
        println!("cargo:rustc-env={var}={}", out.display());
    }
}
