//! `cargo xtask`: build tasks of the toolhost workspace.
//!
//! - `cargo xtask build-plugins`: build the example plugins into
//!   `target/plugins/<name>.wasm`.
//! - `cargo xtask build-fixtures`: build the test fixture plugins into
//!   `target/fixtures/<name>.wasm`.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (packages, dir): (Vec<String>, &str) = match args.first().map(String::as_str) {
        Some("build-plugins") => (xtask::EXAMPLE_PLUGINS.iter().map(|p| p.to_string()).collect(), "plugins"),
        Some("build-fixtures") => (xtask::TEST_FIXTURES.iter().map(|p| format!("fixture-{p}")).collect(), "fixtures"),
        _ => {
            eprintln!("usage: cargo xtask <build-plugins | build-fixtures>");
            return ExitCode::from(2);
        }
    };
    let cargo = PathBuf::from(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    let root = xtask::workspace_root();
    let out = xtask::target_dir(&root).join(dir);
    match xtask::build_plugins(&cargo, &root, &packages, &out) {
        Ok(paths) => {
            for path in paths {
                let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                let shown = path.strip_prefix(&root).unwrap_or(&path);
                println!("{:>10} bytes  {}", size, shown.display());
            }
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}
