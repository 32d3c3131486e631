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
    let (parsed, registry) = parsed_with_registry(file, secrets).await?;
    let report = registry.load_all(parsed.toolsets).await;
    print_load_report(&report);
    Ok((registry, parsed.serve))
}

/// A toolsets file, read, and an empty registry for its toolsets (on the
/// CLI's runtime, with its secret provider, connecting `kind: mcp`).
async fn parsed_with_registry(
    file: &Path,
    secrets: &SecretOptions,
) -> Result<(toolhost::ToolsetsFile, Registry), Failure> {
    let provider = secrets.provider();
    let parsed = toolhost::load_toolsets(file, provider.as_ref())
        .await
        .map_err(|error| Failure { code: exit::USAGE, error: error.into() })?;
    let registry = Registry::with_runtime(crate::runtime().clone(), provider)
        .with_connector("mcp", std::sync::Arc::new(toolhost_mcp::McpConnector::new()));
    Ok((parsed, registry))
}

/// How long `serve` waits for toolsets that come from elsewhere (an
/// `https://` or `oci://` download, a remote MCP server) before it answers:
/// past it, it serves what is loaded and they join as they load, announced
/// with `notifications/tools/list_changed`. Local plugins and built-in
/// toolsets are always waited for.
pub(crate) const REMOTE_START_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// A toolsets file's registry for `serve`, and its `serve` section: the
/// local toolsets loaded, the remote ones loaded or (past
/// [`REMOTE_START_WAIT`]) still loading in the background.
pub(crate) async fn load_serving(
    file: &Path,
    secrets: &SecretOptions,
) -> Result<(std::sync::Arc<Registry>, Option<serde_json::Value>, toolhost::VerifyPolicy), Failure> {
    let (parsed, registry) = parsed_with_registry(file, secrets).await?;
    let registry = std::sync::Arc::new(registry);
    let (remote, local): (Vec<_>, Vec<_>) = parsed.toolsets.into_iter().partition(|config| {
        config.kind == "mcp"
            || matches!(config.source, Some(toolhost::PluginSource::Https(_) | toolhost::PluginSource::Oci(_)))
    });
    let load = |toolsets: Vec<toolhost::ToolsetConfig>| {
        let registry = std::sync::Arc::clone(&registry);
        tokio::spawn(async move { registry.load_all(toolsets).await })
    };
    let (local, mut remote) = (load(local), load(remote));
    if let Ok(report) = local.await {
        print_load_report(&report);
    }
    match tokio::time::timeout(REMOTE_START_WAIT, &mut remote).await {
        Ok(Ok(report)) => print_load_report(&report),
        Ok(Err(_)) => {}
        Err(_) => {
            eprintln!(
                "toolhost: serving the toolsets loaded so far; the ones still loading after {}s join as they load \
                 (clients are told with notifications/tools/list_changed)",
                REMOTE_START_WAIT.as_secs()
            );
            tokio::spawn(async move {
                if let Ok(report) = remote.await {
                    print_load_report(&report);
                }
            });
        }
    }
    Ok((registry, parsed.serve, parsed.verify))
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
