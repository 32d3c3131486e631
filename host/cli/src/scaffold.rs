//! `toolhost new` and `toolhost build`: start a plugin crate on the SDK, and
//! build one for Wasm.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::exit::Failure;
use crate::{exit, scaffold};

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};

/// The SDK version a new crate depends on: the release this CLI belongs to.
const SDK_VERSION: &str = env!("CARGO_PKG_VERSION");

// `Cargo.toml.in`, not `Cargo.toml`: cargo leaves a directory with a
// manifest out of the package it publishes (it is another package).
const TEMPLATE_CARGO: &str = include_str!("../templates/plugin/Cargo.toml.in");
const TEMPLATE_LIB: &str = include_str!("../templates/plugin/src/lib.rs");
const TEMPLATE_README: &str = include_str!("../templates/plugin/README.md");
const TEMPLATE_GITIGNORE: &str = include_str!("../templates/plugin/gitignore");
const TEMPLATE_TOOLCHAIN: &str = include_str!("../templates/plugin/rust-toolchain.toml");
/// The toolchain new plugins are pinned to: the workspace's `rust-version`,
/// which names the project's pinned toolchain exactly (`rust-toolchain.toml`).
const PLUGIN_TOOLCHAIN: &str = env!("CARGO_PKG_RUST_VERSION");

/// Why `new` or `build` did not happen: the caller's mistake, or the build's.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// A bad name, an occupied directory, a missing crate or target.
    #[error("{0}")]
    Usage(String),
    /// Cargo ran and failed (its messages were shown).
    #[error("{0}")]
    BuildFailed(String),
    /// Anything else (I/O).
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

/// A scaffolding failure's exit code: the user's mistake, the plugin's
/// build failing, or anything else.
impl From<ScaffoldError> for Failure {
    fn from(error: ScaffoldError) -> Self {
        let code = match &error {
            ScaffoldError::Usage(_) => exit::USAGE,
            ScaffoldError::BuildFailed(_) => exit::TOOL_ERROR,
            ScaffoldError::Other(_) => exit::PLUGIN_FAILED,
        };
        Failure { code, error: error.into() }
    }
}

/// Create the crate `name` in `dir` (which must not exist, or be empty).
/// Returns the files written.
pub fn new_plugin(name: &str, dir: &Path, sdk_path: Option<&Path>) -> Result<Vec<PathBuf>, ScaffoldError> {
    check_name(name)?;
    if dir.exists() {
        let empty = dir.read_dir().map(|mut entries| entries.next().is_none()).unwrap_or(false);
        if !empty {
            return Err(ScaffoldError::Usage(format!(
                "{} already exists and is not empty: choose another name, or another place with --path DIR",
                dir.display()
            )));
        }
    }
    let sdk = match sdk_path {
        Some(path) => {
            let path =
                path.canonicalize().map_err(|e| ScaffoldError::Usage(format!("--sdk-path {}: {e}", path.display())))?;
            if !path.join("Cargo.toml").is_file() {
                return Err(ScaffoldError::Usage(format!(
                    "--sdk-path {}: no Cargo.toml there; give the `plugin-sdk` directory of a toolhost checkout",
                    path.display()
                )));
            }
            path_dependency(&path)
        }
        None => format!("\"{SDK_VERSION}\""),
    };
    let crate_name = name.replace('-', "_");
    let fill = |template: &str| {
        template
            .replace("{{name}}", name)
            .replace("{{crate}}", &crate_name)
            .replace("{{sdk}}", &sdk)
            .replace("{{toolchain}}", PLUGIN_TOOLCHAIN)
    };
    let files = [
        ("Cargo.toml", fill(TEMPLATE_CARGO)),
        ("src/lib.rs", fill(TEMPLATE_LIB)),
        ("README.md", fill(TEMPLATE_README)),
        ("rust-toolchain.toml", fill(TEMPLATE_TOOLCHAIN)),
        (".gitignore", TEMPLATE_GITIGNORE.to_owned()),
    ];
    let mut written = Vec::new();
    for (relative, contents) in files {
        let path = dir.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, contents).with_context(|| format!("cannot write {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// A package name cargo accepts and a crate name Rust accepts.
fn check_name(name: &str) -> Result<(), ScaffoldError> {
    let valid = name.len() <= 64
        && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid {
        return Err(ScaffoldError::Usage(format!(
            "`{name}` is not a valid plugin name: use ASCII letters, digits, `-` and `_`, starting with a letter"
        )));
    }
    const RESERVED: &[&str] = &["test", "std", "core", "alloc", "proc_macro", "self", "super", "crate"];
    if RESERVED.contains(&name) {
        return Err(ScaffoldError::Usage(format!("`{name}` is reserved by Rust or cargo; choose another name")));
    }
    Ok(())
}

/// `{ path = "..." }` as a TOML inline table.
fn path_dependency(path: &Path) -> String {
    let text = path.to_string_lossy().replace('\\', "\\\\").replace('"', "\\\"");
    format!("{{ path = \"{text}\" }}")
}

/// Build the plugin crate at `path` (a directory or its `Cargo.toml`) for
/// `target` with cargo's `profile`, showing cargo's output on stderr.
/// Returns the `.wasm` files built.
pub fn build_plugin(path: &Path, target: &str, profile: &str) -> Result<Vec<PathBuf>, ScaffoldError> {
    let manifest = if path.is_dir() { path.join("Cargo.toml") } else { path.to_path_buf() };
    let manifest = manifest.canonicalize().map_err(|_| {
        ScaffoldError::Usage(format!(
            "no plugin crate at {}: {} not found; run `toolhost build` in a plugin crate, pass its directory, \
             or start one with `toolhost new NAME`",
            path.display(),
            manifest.display()
        ))
    })?;
    let crate_dir = manifest.parent().unwrap_or(Path::new("/")).to_path_buf();
    check_target(&crate_dir, target)?;

    let mut child = Command::new("cargo")
        .current_dir(&crate_dir)
        .args(["build", "--manifest-path"])
        .arg(&manifest)
        .args(["--target", target, "--profile", profile, "--message-format=json-render-diagnostics"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("cannot run cargo (is it on PATH?)")?;
    let mut wasm = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines() {
            let line = line.context("cannot read cargo's output")?;
            let Ok(message) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            if message["reason"] != "compiler-artifact" {
                continue;
            }
            // Only the crate's own artifacts (or its workspace members'), not
            // its dependencies'.
            let own = message["manifest_path"].as_str().is_some_and(|m| Path::new(m).starts_with(&crate_dir));
            let cdylib =
                message["target"]["crate_types"].as_array().is_some_and(|types| types.iter().any(|t| t == "cdylib"));
            if own && cdylib {
                let files = message["filenames"].as_array().into_iter().flatten().filter_map(|f| f.as_str());
                wasm.extend(files.filter(|f| f.ends_with(".wasm")).map(PathBuf::from));
            }
        }
    }
    let status = child.wait().context("cargo did not finish")?;
    if !status.success() {
        return Err(ScaffoldError::BuildFailed(format!("cargo build failed ({status})")));
    }
    if wasm.is_empty() {
        return Err(ScaffoldError::Usage(format!(
            "{} builds no Wasm module: a plugin crate needs `[lib] crate-type = [\"cdylib\"]`",
            manifest.display()
        )));
    }
    Ok(wasm)
}

/// Refuse early, with the fix, when the toolchain that will build the crate
/// lacks the target (cargo's own message is much less clear).
fn check_target(crate_dir: &Path, target: &str) -> Result<(), ScaffoldError> {
    let output = Command::new("rustc")
        .current_dir(crate_dir)
        .args(["--print", "target-libdir", "--target", target])
        .stderr(Stdio::null())
        .output();
    match output {
        Ok(output) if output.status.success() => {
            let libdir = String::from_utf8_lossy(&output.stdout).trim().to_owned();
            if Path::new(&libdir).is_dir() {
                Ok(())
            } else {
                Err(ScaffoldError::Usage(format!(
                    "the Rust target {target} is not installed for this toolchain: run `rustup target add {target}`"
                )))
            }
        }
        // No rustc to ask, or it does not know the target: cargo will say.
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for good in ["demo", "my-tools", "a_b2"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", "2fast", "has space", "dots.no", "test", "ünï"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_templates_have_no_unfilled_placeholders() {
        let written =
            new_plugin("some-tool", &std::env::temp_dir().join(format!("toolhost-new-{}", std::process::id())), None)
                .expect("scaffold");
        for file in &written {
            let text = std::fs::read_to_string(file).expect("read");
            assert!(!text.contains("{{"), "{}: {text}", file.display());
        }
        let cargo = std::fs::read_to_string(&written[0]).expect("Cargo.toml");
        let released = format!("toolhost-plugin-sdk = \"{SDK_VERSION}\"");
        assert!(cargo.contains("name = \"some-tool\"") && cargo.contains(&released), "{cargo}");
        let dir = written[0].parent().expect("dir");
        assert!(new_plugin("some-tool", dir, None).is_err(), "an existing crate is not overwritten");
        std::fs::remove_dir_all(dir).expect("clean up");
    }
}
#[derive(Debug, clap::Args)]
pub(crate) struct NewArgs {
    /// The plugin's name (its crate's name)
    pub(crate) name: String,
    /// Where to create it [default: ./NAME]
    #[arg(long, value_name = "DIR")]
    pub(crate) path: Option<PathBuf>,
    /// Use a local SDK checkout, not the crates.io release
    #[arg(long, value_name = "DIR")]
    pub(crate) sdk_path: Option<PathBuf>,
}

pub(crate) async fn new_command(args: NewArgs) -> Result<u8, Failure> {
    let NewArgs { name, path, sdk_path } = args;
    let dir = path.unwrap_or_else(|| PathBuf::from(&name));
    let written = scaffold::new_plugin(&name, &dir, sdk_path.as_deref()).map_err(Failure::from)?;
    eprintln!("Created plugin `{name}` in {}:", dir.display());
    for file in &written {
        eprintln!("  {}", file.display());
    }
    eprintln!(
        "\nNext:\n  cd {}\n  toolhost build\n  toolhost check target/wasm32-wasip1/release/{}.wasm",
        dir.display(),
        name.replace('-', "_")
    );
    Ok(0)
}

#[derive(Debug, clap::Args)]
pub(crate) struct BuildArgs {
    /// The crate's directory or its Cargo.toml
    #[arg(default_value = ".")]
    pub(crate) path: PathBuf,
    /// The Wasm target
    #[arg(long, default_value = "wasm32-wasip1")]
    pub(crate) target: String,
    /// The cargo profile
    #[arg(long, default_value = "release")]
    pub(crate) profile: String,
}

pub(crate) async fn build_command(args: BuildArgs) -> Result<u8, Failure> {
    let BuildArgs { path, target, profile } = args;
    let built = tokio::task::spawn_blocking(move || scaffold::build_plugin(&path, &target, &profile))
        .await
        .map_err(|e| Failure { code: exit::PLUGIN_FAILED, error: e.into() })?
        .map_err(Failure::from)?;
    let mut stdout = std::io::stdout().lock();
    for wasm in built {
        let size = std::fs::metadata(&wasm).map(|m| m.len()).unwrap_or(0);
        eprintln!("Built {} ({size} bytes)", wasm.display());
        writeln!(stdout, "{}", wasm.display()).map_err(|e| Failure { code: exit::PLUGIN_FAILED, error: e.into() })?;
    }
    Ok(0)
}
