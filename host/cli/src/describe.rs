//! `toolhost describe`: a plugin's tools, or a toolsets file's.

use std::path::PathBuf;

use crate::args::{PluginOptions, SecretOptions};
use crate::exit::{Failure, usage};
use crate::output::{load_registry, print_json};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The plugin's .wasm file (or --config FILE)
    pub(crate) plugin: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) secrets: SecretOptions,
    #[command(flatten)]
    pub(crate) options: PluginOptions,
}

pub(crate) async fn run(args: Args) -> Result<u8, Failure> {
    let Args { plugin, secrets, options } = args;
    let (pairs, toolsets) = options.config(None).map_err(usage)?;
    match (plugin, toolsets) {
        (Some(plugin), None) => {
            if !secrets.secret.is_empty() || secrets.secrets_dir.is_some() {
                return Err(usage(anyhow::anyhow!(
                    "describe hands a plugin no secrets: --secret and --secrets-dir are for call, serve, check and bench"
                )));
            }
            let plugin = options.load(&plugin, pairs, None).await?;
            print_json(plugin.describe())?;
        }
        (None, Some(file)) => {
            if options.configures_a_plugin() || !pairs.is_empty() {
                return Err(usage(anyhow::anyhow!(
                    "with a toolsets file, grants, limits and config come from the file, not from flags"
                )));
            }
            secrets.not_with_toolsets()?;
            let registry = load_registry(&file, &secrets).await?;
            let tools: Vec<toolhost::Tool> = registry.tools().iter().map(|t| t.exposed()).collect();
            print_json(&toolhost::ListToolsResult { tools, ..Default::default() })?;
        }
        _ => return Err(usage(anyhow::anyhow!("give PLUGIN.wasm or --config TOOLSETS_FILE (one of them)"))),
    }
    Ok(0)
}
