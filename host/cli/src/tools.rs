//! `toolhost tools`: the effective tools of a toolsets file.

use std::path::PathBuf;

use serde_json::Value;

use crate::args::SecretOptions;
use crate::exit;
use crate::exit::Failure;
use crate::output::{load_registry, print_json, write_table};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The toolsets file (JSON, YAML or TOML)
    #[arg(long = "config", value_name = "FILE")]
    pub(crate) config: PathBuf,
    /// Print JSON instead of a table
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) secrets: SecretOptions,
}

pub(crate) async fn run(args: Args) -> Result<u8, Failure> {
    let Args { config, json, secrets } = args;
    secrets.not_with_toolsets()?;
    let registry = load_registry(&config, &secrets).await?;
    let tools = registry.all_tools();
    let syncs = registry.last_syncs();
    if json {
        let rows: Vec<Value> = tools
            .iter()
            .map(|t| {
                serde_json::json!({
                    "name": t.name,
                    "toolset": t.toolset,
                    "tool": t.tool.name,
                    "source": t.source,
                    "signedBy": registry.signer(&t.toolset).map(|signer| signer.to_string()),
                    "enabled": t.enabled,
                    "status": t.status().to_string(),
                    "disabledReason": t.disabled_reason,
                    "requiresApproval": t.requires_approval,
                    "title": t.tool.title,
                    "description": t.tool.description,
                })
            })
            .collect();
        print_json(&rows)?;
    } else {
        print_table(&tools).map_err(|error| Failure { code: exit::PLUGIN_FAILED, error })?;
        println!();
        print_syncs(&registry, &syncs).map_err(|error| Failure { code: exit::PLUGIN_FAILED, error })?;
    }
    Ok(0)
}

/// How each toolset's sync ended: `SyncCompleted` with its tool count (and
/// who signed its plugin, if it was verified), or `SyncFailed` with the
/// error type and message.
pub(crate) fn print_syncs(registry: &toolhost::Registry, syncs: &[toolhost::ToolsetEvent]) -> anyhow::Result<()> {
    let rows: Vec<[String; 2]> = syncs
        .iter()
        .map(|sync| {
            let outcome = match &sync.event {
                toolhost::SyncEvent::SyncCompleted { tools_synced, .. } => match registry.signer(&sync.tool_set_id) {
                    Some(signer) => format!("SyncCompleted ({tools_synced} tools synced, signed by {signer})"),
                    None => format!("SyncCompleted ({tools_synced} tools synced)"),
                },
                toolhost::SyncEvent::SyncFailed { error_type, message, .. } => {
                    format!("SyncFailed {error_type}: {message}")
                }
                other => format!("{other:?}"),
            };
            [sync.tool_set_id.clone(), outcome]
        })
        .collect();
    write_table(&mut std::io::stdout().lock(), ["TOOLSET", "SYNC"], &rows)
}

pub(crate) fn print_table(tools: &[toolhost::RegisteredTool]) -> anyhow::Result<()> {
    let rows: Vec<[String; 5]> = tools
        .iter()
        .map(|t| {
            let enabled = match &t.disabled_reason {
                None => "yes".to_owned(),
                Some(reason) => format!("no ({reason})"),
            };
            let approval = if t.requires_approval { "yes" } else { "no" }.to_owned();
            [t.name.clone(), t.status().to_string(), enabled, approval, t.source.clone()]
        })
        .collect();
    write_table(&mut std::io::stdout().lock(), ["TOOL", "STATUS", "ENABLED", "APPROVAL", "SOURCE"], &rows)
}
