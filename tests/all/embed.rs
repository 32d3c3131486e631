//! toolhost as an agent runtime embeds it: what a crate that depends on the
//! library pays, and the example agent loop (`host/library/examples/agent_loop.rs`)
//! run against the example plugins.

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The most crates an embedder may compile with the default features.
const CRATE_BUDGET: usize = 260;

/// A crate outside the workspace that depends on `toolhost` (with default
/// features, or as `features` says), and on what the example agent loop
/// uses besides: written into `dir` with the workspace's lock file, so it
/// resolves to the same versions the workspace is tested with.
fn embedder_crate(dir: &Path, features: &str) {
    std::fs::create_dir_all(dir.join("src")).expect("embedder dir");
    let host = workspace().join("host/library").canonicalize().expect("the library's dir");
    let manifest = format!(
        r#"[package]
name = "embedder"
version = "0.1.0"
edition = "2024"
publish = false

[dependencies]
toolhost = {{ path = {host:?}{features} }}
serde_json = "1"
tokio = {{ version = "1", default-features = false, features = ["rt-multi-thread", "macros"] }}

# Its own workspace: it is not a member of toolhost's.
[workspace]
"#,
        host = host.display().to_string()
    );
    std::fs::write(dir.join("Cargo.toml"), manifest).expect("manifest");
    std::fs::copy(workspace().join("Cargo.lock"), dir.join("Cargo.lock")).expect("lock file");
    std::fs::copy(workspace().join("host/library/examples/agent_loop.rs"), dir.join("src/main.rs")).expect("main.rs");
}

/// The distinct packages (name and version) a build of `dir` compiles for
/// this machine: normal and build dependencies, the crate itself included.
fn crates_compiled(dir: &Path) -> Vec<String> {
    let output = Command::new(env!("CARGO"))
        .args(["tree", "-e", "normal,build", "--prefix", "none", "--color", "never"])
        .current_dir(dir)
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .expect("run cargo tree");
    assert!(output.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&output.stderr));
    let mut crates: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| line.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
        .collect();
    crates.sort();
    crates.dedup();
    crates
}

#[test]
fn an_embedder_with_default_features_compiles_at_most_260_crates_and_none_of_the_cli() {
    let dir = std::env::temp_dir().join(format!("toolhost-embedder-{}", std::process::id()));
    embedder_crate(&dir, "");
    let crates = crates_compiled(&dir);
    std::fs::remove_dir_all(&dir).ok();
    assert!(crates.iter().any(|c| c.starts_with("toolhost ")), "{crates:?}");
    assert!(crates.iter().any(|c| c.starts_with("wasmtime ")), "{crates:?}");
    eprintln!("an embedder compiles {} crates", crates.len());
    assert!(crates.len() <= CRATE_BUDGET, "{} crates, more than {CRATE_BUDGET}: {crates:#?}", crates.len());
    // (anyhow is compiled: wasmtime uses it inside; toolhost's API has none of it.)
    for cli_only in ["clap", "axum", "rmcp", "tracing-subscriber", "rand_regex", "zstd"] {
        assert!(!crates.iter().any(|c| c.starts_with(&format!("{cli_only} "))), "{cli_only} is compiled: {crates:#?}");
    }
}

#[test]
fn features_leave_out_what_an_embedder_does_not_use() {
    let compiled = |name: &str, features: &str| {
        let dir = std::env::temp_dir().join(format!("toolhost-embedder-{name}-{}", std::process::id()));
        embedder_crate(&dir, features);
        let crates = crates_compiled(&dir);
        std::fs::remove_dir_all(&dir).ok();
        eprintln!("{name}: {} crates", crates.len());
        crates
    };
    let has = |crates: &[String], name: &str| crates.iter().any(|c| c.starts_with(&format!("{name} ")));
    // Default features: HTTP for plugins, no compiled-module cache.
    let default = compiled("default", "");
    assert!(has(&default, "ureq") && !has(&default, "tempfile"), "{default:#?}");
    // None: no HTTP client, no TLS, no YAML or TOML parser.
    let bare = compiled("bare", ", default-features = false");
    for left_out in ["ureq", "rustls", "serde_norway", "toml", "tempfile"] {
        assert!(!has(&bare, left_out), "{left_out} is compiled without the features that use it: {bare:#?}");
    }
    assert!(bare.len() < default.len());
    // The cache, asked for.
    let cached = compiled("cache", r#", features = ["cache"]"#);
    assert!(has(&cached, "tempfile"), "{cached:#?}");
}

/// Build the example (an example of the library) and return its path.
/// Built from the workspace's root with no package named, features resolve
/// as in `cargo test` there (the workspace's default members), so the build
/// reuses the test build's crates; with `-p toolhost-tests` alone it would
/// build wasmtime and most else again.
fn agent_loop() -> PathBuf {
    let (profile_dir, profile) = toolhost_tests::build_profile();
    let status = toolhost_tests::nested_cargo()
        .current_dir(workspace())
        .args(["build", "--quiet", "--example", "agent_loop", "--profile", &profile])
        .status()
        .expect("run cargo to build the example");
    assert!(status.success(), "building the agent_loop example failed");
    profile_dir.join("examples").join(format!("agent_loop{}", std::env::consts::EXE_SUFFIX))
}

#[test]
fn the_example_agent_loop_runs_against_the_example_plugins() {
    let dir = std::env::temp_dir().join(format!("toolhost-agent-loop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let config = toolhost_tests::example_config(&dir);
    let output = Command::new(agent_loop()).arg(&config).output().expect("run the example");
    std::fs::remove_dir_all(&dir).ok();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let lines: Vec<&str> = stdout.lines().map(str::trim).collect();
    for expected in [
        "8 tools offered to the model",
        "c1 calc__add -> ok: 5",
        "c2 calc__multiply -> ok: 42",
        "c4 calc__divide -> ok: 0.25",
        "c5 calc__divide -> error: the call to `calc__divide` was not approved: the user refused a division by zero",
        "c6 text__change_case -> ok: ALL DONE",
        "c7 calc__add -> cancelled by the user",
        "approval asked for calc__divide {\"a\":1,\"b\":4} -> Approved",
        "shut down (0 calls in flight, 0 cancelled)",
    ] {
        assert!(lines.contains(&expected), "missing `{expected}` in:\n{stdout}");
    }
    let invalid = lines.iter().find(|l| l.starts_with("c3 calc__add -> error: ")).expect("c3's answer");
    assert!(invalid.contains("at /a:") && invalid.contains("at /b:") && invalid.contains("did not run"), "{invalid}");
}
