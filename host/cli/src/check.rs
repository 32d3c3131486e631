//! `toolhost check`: the conformance checker of `toolhost-check`, as a table or JSON.

use std::io::Write;
use std::path::PathBuf;

use toolhost::Error;
use toolhost_check::{CheckOptions, CheckReport, check_plugin};

use crate::args::{PluginOptions, SecretOptions};
use crate::exit;
use crate::exit::{Failure, usage};
use crate::output::{print_json, write_table};
use crate::terminal::escaped;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The plugin's .wasm file
    pub(crate) plugin: PathBuf,
    /// Seed of the generated arguments
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
    /// Valid calls per tool; invalid: half as many
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) samples: u16,
    /// Print the report as JSON
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) secrets: SecretOptions,
    #[command(flatten)]
    pub(crate) options: PluginOptions,
}

pub(crate) async fn run(args: Args) -> Result<u8, Failure> {
    let Args { plugin, seed, samples, json, secrets, options } = args;
    let (pairs, _) = options.config(Some("check")).map_err(usage)?;
    let loaded = match options.load(&plugin, pairs, Some(&secrets)).await {
        Ok(loaded) => loaded,
        Err(error) if json => {
            let problems: Vec<String> = match &error {
                Error::InvalidPlugin { problems, .. } => problems.iter().map(ToString::to_string).collect(),
                _ => Vec::new(),
            };
            print_json(&serde_json::json!({
                "plugin": plugin.display().to_string(),
                "passed": false,
                "error": error.to_string(),
                "problems": problems,
                "tools": [],
            }))?;
            return Ok(Failure::from(error).code);
        }
        Err(error) => return Err(error.into()),
    };
    let check_options =
        CheckOptions { seed, valid_calls: usize::from(samples), invalid_calls: usize::from(samples).div_ceil(2) };
    let report = check_plugin(&loaded, &check_options).await;
    if json {
        print_json(&report)?;
    } else {
        print_check(&report).map_err(|error| Failure { code: exit::PLUGIN_FAILED, error })?;
    }
    Ok(if report.passed { 0 } else { exit::TOOL_ERROR })
}

pub(crate) const SHOWN_FAILURES: usize = 3;

/// The check's table, each failure on a line of its own below it, and a
/// verdict.
pub(crate) fn print_check(report: &CheckReport) -> anyhow::Result<()> {
    let rows: Vec<[String; 4]> = report
        .tools
        .iter()
        .map(|t| [t.tool.clone(), t.calls.to_string(), t.passed.to_string(), t.failures.len().to_string()])
        .collect();
    let mut stdout = std::io::stdout().lock();
    write_table(&mut stdout, ["TOOL", "CALLS", "PASSED", "FAILED"], &rows)?;
    let failing: Vec<&toolhost_check::ToolCheck> =
        report.tools.iter().filter(|t| !t.failures.is_empty() || !t.notes.is_empty()).collect();
    if !failing.is_empty() {
        writeln!(stdout)?;
    }
    for tool in failing {
        // The smallest failing arguments first: the easiest to reproduce.
        let mut failures: Vec<&toolhost_check::CheckFailure> = tool.failures.iter().collect();
        failures.sort_by_key(|f| f.arguments.to_string().len());
        let name = escaped(&tool.tool);
        for failure in failures.iter().take(SHOWN_FAILURES) {
            writeln!(stdout, "{name}: {}", escaped(&failure.reason))?;
            if !failure.arguments.is_null() {
                writeln!(stdout, "  arguments: {}", escaped(&failure.arguments.to_string()))?;
            }
        }
        if failures.len() > SHOWN_FAILURES {
            writeln!(stdout, "{name}: ... and {} more failures (--json lists all)", failures.len() - SHOWN_FAILURES)?;
        }
        for note in &tool.notes {
            writeln!(stdout, "{name}: note: {}", escaped(note))?;
        }
    }
    writeln!(stdout)?;
    let tools = report.tools.len();
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    if report.passed {
        writeln!(
            stdout,
            "passed: {tools} tool{}, {} call{} (seed {})",
            plural(tools),
            report.calls(),
            plural(report.calls()),
            report.seed
        )?;
    } else {
        let failed_tools = report.tools.iter().filter(|t| !t.failures.is_empty()).count();
        writeln!(
            stdout,
            "FAILED: {} failure{} in {failed_tools} of {tools} tool{} (seed {})",
            report.failures(),
            plural(report.failures()),
            plural(tools),
            report.seed,
        )?;
    }
    Ok(())
}
