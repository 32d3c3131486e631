//! What several commands print: JSON, tables, load reports.

use std::io::Write;
use std::path::Path;

use toolhost::Registry;

use crate::args::SecretOptions;
use crate::exit;
use crate::exit::Failure;
use crate::terminal::escaped;

pub(crate) async fn load_registry(file: &Path, secrets: &SecretOptions) -> Result<Registry, Failure> {
    Ok(load_configuration(file, secrets).await?.0)
}

/// A toolsets file's registry, loaded, and its `serve` section.
pub(crate) async fn load_configuration(
    file: &Path,
    secrets: &SecretOptions,
) -> Result<(Registry, Option<serde_json::Value>), Failure> {
    let provider = secrets.provider();
    let parsed = toolhost::load_toolsets(file, provider.as_ref())
        .await
        .map_err(|error| Failure { code: exit::USAGE, error: error.into() })?;
    let registry = Registry::with_runtime(crate::runtime().clone(), provider)
        .with_connector("mcp", std::sync::Arc::new(toolhost_mcp::McpConnector::new()));
    let report = registry.load_all(parsed.toolsets).await;
    print_load_report(&report);
    Ok((registry, parsed.serve))
}

/// The toolsets that failed to load, and warnings, on stderr.
pub(crate) fn print_load_report(report: &toolhost::LoadReport) {
    for failure in &report.failures {
        eprintln!("warning: {}", escaped(&format!("{} was not loaded: {}", failure.source, failure.error)));
    }
    for warning in &report.warnings {
        eprintln!("warning: {}", escaped(warning));
    }
}

/// Failures printed per tool; `--json` has them all.
/// Left-aligned columns, two spaces apart; cells escaped.
pub(crate) fn write_table<const N: usize>(
    out: &mut impl Write,
    header: [&str; N],
    rows: &[[String; N]],
) -> anyhow::Result<()> {
    let header = header.map(str::to_owned);
    let rows: Vec<[String; N]> = rows.iter().map(|row| row.clone().map(|cell| escaped(&cell).into_owned())).collect();
    let rows = rows.as_slice();
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (cell, width) in row.iter().zip(widths) {
            line.push_str(cell);
            line.extend(std::iter::repeat_n(' ', width.saturating_sub(cell.chars().count()) + 2));
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

pub(crate) fn print_json<T: serde::Serialize>(value: &T) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut stdout, value)
        .map_err(anyhow::Error::from)
        .and_then(|()| writeln!(stdout).map_err(anyhow::Error::from))
        .map_err(|error| Failure { code: exit::PLUGIN_FAILED, error: error.context("cannot write the output") })
}
