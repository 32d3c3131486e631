//! `toolhost new` and `toolhost build`: a new plugin crate builds and passes
//! `toolhost check` as generated.

use std::path::Path;
use std::process::{Command, Output};

use toolhost_tests::{run_toolhost, toolhost};

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// `toolhost ARGS` in `dir`, building into a target directory shared by
/// test runs (the scaffold's dependencies are built once, not every run).
fn toolhost_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(toolhost())
        .current_dir(dir)
        .args(args)
        .env("CARGO_TARGET_DIR", xtask_target().join("scaffold-test"))
        .output()
        .expect("run toolhost")
}

fn xtask_target() -> std::path::PathBuf {
    // target/plugins/<name>.wasm → target/
    toolhost_tests::example("calculator").parent().and_then(Path::parent).expect("target dir").to_path_buf()
}

#[test]
fn new_build_check() {
    let temp = tempfile::tempdir().expect("temp dir");
    let work = temp.path();

    // The SDK of this checkout (a scaffold depends on the released SDK
    // unless told otherwise).
    let sdk = concat!(env!("CARGO_MANIFEST_DIR"), "/../plugin-sdk");
    let created = toolhost_in(work, &["new", "demo", "--sdk-path", sdk]);
    assert_eq!(created.status.code(), Some(0), "{}", text(&created));
    let demo = work.join("demo");
    for file in ["Cargo.toml", "src/lib.rs", "README.md", "rust-toolchain.toml", ".gitignore"] {
        assert!(demo.join(file).is_file(), "{file} was not created: {}", text(&created));
    }
    let again = toolhost_in(work, &["new", "demo"]);
    assert_eq!(again.status.code(), Some(2), "an existing crate is not overwritten: {}", text(&again));

    let built = toolhost_in(&demo, &["build"]);
    assert_eq!(built.status.code(), Some(0), "{}", text(&built));
    let wasm = String::from_utf8_lossy(&built.stdout).trim().to_owned();
    assert!(wasm.ends_with("wasm32-wasip1/release/demo.wasm") && Path::new(&wasm).is_file(), "{}", text(&built));

    let checked = toolhost_in(&demo, &["check", &wasm]);
    assert_eq!(checked.status.code(), Some(0), "{}", text(&checked));
    assert!(String::from_utf8_lossy(&checked.stdout).contains("greet"), "{}", text(&checked));

    let called = toolhost_in(&demo, &["call", &wasm, "greet", r#"{"name": "Ada", "excitement": 2}"#]);
    assert_eq!(called.status.code(), Some(0), "{}", text(&called));
    assert!(String::from_utf8_lossy(&called.stdout).contains("Hello, Ada!!"), "{}", text(&called));

    // The same crate, unchanged, as a component.
    let built = toolhost_in(&demo, &["build", "--target", "wasm32-wasip2"]);
    assert_eq!(built.status.code(), Some(0), "{}", text(&built));
    let component = String::from_utf8_lossy(&built.stdout).trim().to_owned();
    assert!(component.ends_with("wasm32-wasip2/release/demo.wasm"), "{}", text(&built));
    let called_component = toolhost_in(&demo, &["call", &component, "greet", r#"{"name": "Ada", "excitement": 2}"#]);
    assert_eq!(called_component.status.code(), Some(0), "{}", text(&called_component));
    assert_eq!(called_component.stdout, called.stdout, "the same answer from both builds");

    // The crate's own test passes too.
    let tested = Command::new(env!("CARGO"))
        .current_dir(&demo)
        .args(["test", "--quiet"])
        .env("CARGO_TARGET_DIR", xtask_target().join("scaffold-test"))
        .output()
        .expect("cargo test");
    assert!(tested.status.success(), "{}", text(&tested));
    assert!(String::from_utf8_lossy(&tested.stdout).contains("2 passed"), "{}", text(&tested));
}

/// Without `--sdk-path`, a new crate depends on the SDK release of this
/// toolhost's version, and is pinned to the project's toolchain.
#[test]
fn new_depends_on_the_released_sdk() {
    let temp = tempfile::tempdir().expect("temp dir");
    let work = temp.path();
    let created = toolhost_in(work, &["new", "released"]);
    assert_eq!(created.status.code(), Some(0), "{}", text(&created));
    let manifest = std::fs::read_to_string(work.join("released/Cargo.toml")).expect("Cargo.toml");
    let wanted = format!("toolhost-plugin-sdk = \"{}\"", env!("CARGO_PKG_VERSION"));
    assert!(manifest.contains(&wanted), "wanted `{wanted}` in:\n{manifest}");
    assert!(!manifest.contains("path ="), "no path dependency without --sdk-path:\n{manifest}");

    let project =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../rust-toolchain.toml")).expect("toolchain");
    let channel =
        |text: &str| text.lines().find(|line| line.starts_with("channel")).map(str::to_owned).expect("a channel line");
    let plugin = std::fs::read_to_string(work.join("released/rust-toolchain.toml")).expect("rust-toolchain.toml");
    assert_eq!(channel(&plugin), channel(&project), "a new plugin is pinned to the project's toolchain");

    let missing = toolhost_in(work, &["new", "other", "--sdk-path", "/nonexistent/sdk"]);
    assert_eq!(missing.status.code(), Some(2), "{}", text(&missing));
    assert!(text(&missing).contains("--sdk-path /nonexistent/sdk"), "{}", text(&missing));
}

#[test]
fn bad_names_and_missing_crates_are_usage_errors() {
    let output = run_toolhost(&["new", "2fast", "--path", "/nonexistent/never"], None);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("not a valid plugin name"), "{}", text(&output));

    let output = run_toolhost(&["build", "/nonexistent/crate"], None);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("no plugin crate at /nonexistent/crate"), "{}", text(&output));
}
