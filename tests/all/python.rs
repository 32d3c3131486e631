//! The Python package (`host/python`): built into a wheel by maturin (from
//! PyPI, pinned) with `pip install`, the way its README says, into a venv of
//! its own with the agent frameworks its adapters serve (from PyPI,
//! pinned), then its pytest suite run against the plugins and fixtures this
//! repository builds, the `toolhost` binary (a remote MCP server) and an
//! HTTPS file server with a test CA made here. The wheel reuses the
//! workspace's target directory, so only the package's own crate is
//! compiled.

use toolhost_tests::{example, fixture, python_venv, toolhost};

/// What builds and tests the package, pinned: maturin and pytest; pydantic
/// (tools written in Python); the frameworks of the adapters; Extism's
/// Python SDK, which the benchmark runs beside toolhost.
const PACKAGES: &[&str] = &[
    "maturin==1.16.0",
    "pytest==9.2.0",
    "pydantic==2.14.4",
    "pydantic-ai-slim==2.78.0",
    "openai-agents==0.24.0",
    "langchain-core==1.8.3",
    "extism==1.1.1",
];

#[test]
fn the_python_package_builds_with_pip_and_passes_its_tests() {
    let venv = python_venv("python-package-venv", PACKAGES);
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let package = root.join("host/python");
    let path = format!("{}:{}", venv.display(), std::env::var("PATH").unwrap_or_default());
    let install = toolhost_tests::without_package_env(&mut std::process::Command::new(venv.join("python")))
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-build-isolation"])
        .args(["--force-reinstall", "--no-deps"])
        .arg(&package)
        .env("PATH", &path)
        .output()
        .expect("run pip");
    assert!(
        install.status.success(),
        "pip install ./host/python failed:\n{}{}",
        String::from_utf8_lossy(&install.stdout),
        String::from_utf8_lossy(&install.stderr)
    );
    let plugins = example("calculator").parent().expect("the plugins' directory").to_path_buf();
    let fixtures = fixture("hostile").parent().expect("the fixtures' directory").to_path_buf();
    let scratch = std::env::temp_dir().join(format!("toolhost-python-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).expect("scratch dir");
    let ca = crate::sources::test_ca(&scratch, "python");
    // Compiled plugins are kept between runs, as a user's would be.
    let cache = plugins.join("..").join("python-package-cache");
    let tests = std::process::Command::new(venv.join("python"))
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs"])
        .arg(package.join("tests"))
        .env("TOOLHOST_PLUGINS", plugins)
        .env("TOOLHOST_FIXTURES", fixtures)
        .env("TOOLHOST_BIN", toolhost())
        .env("TOOLHOST_HTTPS_SERVER", root.join("tests/https/serve.py"))
        .env("TOOLHOST_TLS_CA", &ca.ca)
        .env("TOOLHOST_TLS_CERT", &ca.cert)
        .env("TOOLHOST_TLS_KEY", &ca.key)
        .env("TOOLHOST_CACHE_DIR", cache)
        .env("PATH", &path)
        .output()
        .expect("run pytest");
    let _ = std::fs::remove_dir_all(&scratch);
    let said = format!("{}{}", String::from_utf8_lossy(&tests.stdout), String::from_utf8_lossy(&tests.stderr));
    assert!(tests.status.success(), "pytest failed:\n{said}");
    let summary = said.lines().rev().find(|line| line.contains(" passed")).unwrap_or_default();
    assert!(!summary.contains("skipped") && !summary.contains("failed") && !summary.contains("warning"), "{said}");
    let passed: usize = summary.trim().split(' ').next().and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(passed >= 57, "{said}");
}
