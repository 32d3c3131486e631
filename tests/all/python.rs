//! The Python package (`host/python`): built into a wheel by maturin (from
//! PyPI, pinned) with `pip install`, the way its README says, into a venv of
//! its own, then its pytest suite run against the plugins this repository
//! builds. The wheel reuses the workspace's target directory, so only the
//! package's own crate is compiled.

use toolhost_tests::{example, fixture, python_venv};

/// What builds and tests the package, pinned.
const MATURIN: &str = "maturin==1.16.0";
const PYTEST: &str = "pytest==9.2.0";

#[test]
fn the_python_package_builds_with_pip_and_passes_its_tests() {
    let venv = python_venv("python-package-venv", &[MATURIN, PYTEST]);
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let package = root.join("host/python");
    let path = format!("{}:{}", venv.display(), std::env::var("PATH").unwrap_or_default());
    let install = std::process::Command::new(venv.join("python"))
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
    let tests = std::process::Command::new(venv.join("python"))
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs"])
        .arg(package.join("tests"))
        .env("TOOLHOST_PLUGINS", plugins)
        .env("TOOLHOST_FIXTURES", fixtures)
        .env("PATH", &path)
        .output()
        .expect("run pytest");
    let said = format!("{}{}", String::from_utf8_lossy(&tests.stdout), String::from_utf8_lossy(&tests.stderr));
    assert!(tests.status.success(), "pytest failed:\n{said}");
    let summary = said.lines().rev().find(|line| line.contains(" passed")).unwrap_or_default();
    assert!(!summary.contains("skipped") && !summary.contains("failed"), "{said}");
    let passed: usize = summary.trim().split(' ').next().and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(passed >= 12, "{said}");
}
