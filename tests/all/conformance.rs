//! The official MCP conformance suite (`@modelcontextprotocol/conformance`,
//! its server scenarios) against `toolhost serve --http` serving the
//! `conformance` fixture, with `tests/conformance-baseline.yml` listing
//! exactly the scenarios that do not pass yet and why.

use std::path::PathBuf;
use std::process::Command;

use crate::serve::spawn_http;

#[test]
fn the_official_conformance_suite_passes_but_for_its_baseline() {
    let bin = toolhost_tests::mcp_conformance();
    let (server, url, _logs) = spawn_http(&[&toolhost_tests::fixture("conformance").display().to_string()]);
    let baseline = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("conformance-baseline.yml");
    let path = std::env::join_paths(
        std::iter::once(bin.clone()).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .expect("PATH");
    let output = Command::new(bin.join("conformance"))
        .args(["server", "--url", &url, "--expected-failures"])
        .arg(&baseline)
        .env("PATH", path)
        .output()
        .expect("run the conformance suite");
    drop(server);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let summary = stdout.find("=== SUMMARY ===").map_or(stdout.as_ref(), |at| &stdout[at..]);
    assert!(
        output.status.success(),
        "the conformance suite found a regression, or a baselined scenario that now passes (remove it from {}):\n{summary}\n{}",
        baseline.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    // The scenarios toolhost passes today: their names in the summary.
    for scenario in [
        "server-initialize",
        "logging-set-level",
        "ping",
        "completion-complete",
        "tools-list",
        "tools-call-simple-text",
        "tools-call-image",
        "tools-call-audio",
        "tools-call-embedded-resource",
        "tools-call-mixed-content",
        "tools-call-error",
        "tools-call-with-logging",
        "tools-call-with-progress",
        "tools-call-sampling",
        "tools-call-elicitation",
        "elicitation-sep1034-defaults",
        "elicitation-sep1330-enums",
        "resources-list",
        "resources-read-text",
        "resources-read-binary",
        "resources-templates-read",
        "resources-subscribe",
        "resources-unsubscribe",
        "prompts-list",
        "prompts-get-simple",
        "prompts-get-with-args",
        "prompts-get-embedded-resource",
        "prompts-get-with-image",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
    ] {
        assert!(summary.contains(&format!("✓ {scenario}:")), "{scenario} did not pass:\n{summary}");
    }
}
