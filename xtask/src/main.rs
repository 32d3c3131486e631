//! `cargo xtask`: build tasks of the toolhost workspace.
//!
//! - `cargo xtask build-plugins [PLUGIN...]`: build the example plugins (all
//!   of them, or the ones named) into `target/plugins/<name>.wasm`.
//! - `cargo xtask build-fixtures [FIXTURE...]`: build the test fixture
//!   plugins (all, or the ones named) into `target/fixtures/<name>.wasm`.

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask <build-plugins | build-fixtures> [NAME...]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((task, names)) = args.split_first() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let (known, prefix, dir): (&[&str], &str, &str) = match task.as_str() {
        "build-plugins" => (xtask::EXAMPLE_PLUGINS, "", "plugins"),
        "build-fixtures" => (xtask::TEST_FIXTURES, "fixture-", "fixtures"),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let chosen: Vec<&str> = match xtask::choose(known, names) {
        Ok(chosen) => chosen,
        Err(message) => {
            eprintln!("error: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let packages: Vec<String> = chosen.iter().map(|name| format!("{prefix}{name}")).collect();
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
