//! `toolhost call`: one call of one tool, of a plugin or of a toolsets file.

use std::io::{IsTerminal as _, Read as _};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_json::Value;
use toolhost::{Approval, ApprovalRequest, ApproveAll, Approver, BoxFuture};

use crate::args::{PluginOptions, SecretOptions};
use crate::exit;
use crate::exit::{Failure, usage};
use crate::output::{load_registry, print_json};
use crate::terminal::escaped;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// PLUGIN.wasm TOOL [ARGS], or TOOL [ARGS] with --config
    #[arg(value_name = "PLUGIN TOOL [ARGS_JSON]", num_args = 1..=3, required = true)]
    pub(crate) targets: Vec<String>,
    /// Read the arguments from a file (`-`: stdin)
    #[arg(long, value_name = "FILE")]
    pub(crate) args_file: Option<PathBuf>,
    /// Approve calls that require approval, without asking
    #[arg(long)]
    pub(crate) yes: bool,
    #[command(flatten)]
    pub(crate) secrets: SecretOptions,
    #[command(flatten)]
    pub(crate) options: PluginOptions,
}

pub(crate) async fn run(args: Args) -> Result<u8, Failure> {
    let Args { targets, args_file, yes, secrets, options } = args;
    let (pairs, toolsets) = options.config(None).map_err(usage)?;
    let result = match toolsets {
        Some(file) => {
            if options.configures_a_plugin() || !pairs.is_empty() {
                return Err(usage(anyhow::anyhow!(
                    "with a toolsets file, grants, limits and config come from the file, not from flags"
                )));
            }
            let (tool, args) = match targets.as_slice() {
                [tool] => (tool, None),
                [tool, args] => (tool, Some(args.as_str())),
                _ => {
                    return Err(usage(anyhow::anyhow!("with --config FILE, give NAMESPACED_TOOL [ARGS_JSON]")));
                }
            };
            secrets.not_with_toolsets()?;
            let registry = load_registry(&file, &secrets).await?;
            let arguments = read_arguments(args, args_file.as_deref()).map_err(usage)?;
            let approver: Box<dyn Approver> = if yes { Box::new(ApproveAll) } else { Box::new(TerminalApprover) };
            registry.call_tool(tool, arguments, approver.as_ref()).await?
        }
        None => {
            let (plugin, tool, args) = match targets.as_slice() {
                [plugin, tool] => (plugin, tool, None),
                [plugin, tool, args] => (plugin, tool, Some(args.as_str())),
                _ => {
                    return Err(usage(anyhow::anyhow!(
                        "give PLUGIN.wasm TOOL [ARGS_JSON] (or --config TOOLSETS_FILE NAMESPACED_TOOL [ARGS_JSON])"
                    )));
                }
            };
            let arguments = read_arguments(args, args_file.as_deref()).map_err(usage)?;
            let plugin = options.load(Path::new(plugin), pairs, Some(&secrets)).await?;
            plugin.call_tool(tool, arguments).await?
        }
    };
    print_json(&result)?;
    Ok(if result.is_error() { exit::TOOL_ERROR } else { 0 })
}

/// Asks on the terminal; refuses clearly when there is none.
pub(crate) struct TerminalApprover;

impl Approver for TerminalApprover {
    fn approve<'a>(&'a self, request: ApprovalRequest<'a>) -> BoxFuture<'a, Approval> {
        let name = request.tool.name.clone();
        let arguments = request.arguments.to_string();
        let destructive = request.annotations().and_then(|a| a.destructive_hint).unwrap_or(false);
        Box::pin(async move {
            if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
                return Approval::Denied(format!(
                    "`{name}` requires approval and there is no terminal to ask on; pass --yes to approve it"
                ));
            }
            let asked = tokio::task::spawn_blocking(move || {
                let warning = if destructive { " (it may be destructive)" } else { "" };
                eprint!("Run `{}`{warning} with {}? [y/N] ", escaped(&name), escaped(&arguments));
                let mut answer = String::new();
                std::io::stdin().read_line(&mut answer).map(|_| answer)
            })
            .await;
            match asked {
                Ok(Ok(answer)) if matches!(answer.trim(), "y" | "Y" | "yes" | "Yes") => Approval::Approved,
                _ => Approval::Denied("the user declined".to_owned()),
            }
        })
    }
}

/// The call's arguments: inline JSON, a file, or stdin (`-`); none means `{}`.
pub(crate) fn read_arguments(inline: Option<&str>, file: Option<&std::path::Path>) -> anyhow::Result<Value> {
    let from_stdin = || -> anyhow::Result<(String, String)> {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).context("cannot read the arguments from stdin")?;
        Ok((text, "stdin".to_owned()))
    };
    let (text, origin) = match (inline, file) {
        (Some("-"), _) => from_stdin()?,
        (Some(json), _) => (json.to_owned(), "ARGS_JSON".to_owned()),
        (None, Some(path)) if path.as_os_str() == "-" => from_stdin()?,
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the arguments file {}", path.display()))?;
            (text, path.display().to_string())
        }
        (None, None) => return Ok(Value::Object(Default::default())),
    };
    serde_json::from_str(&text).with_context(|| format!("the arguments in {origin} are not valid JSON"))
}
