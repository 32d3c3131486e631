//! `toolhost`: describe and call the tools of Wasm plugins from the command line.
//!
//! Exit codes: 0 success; 1 the tool returned `isError: true`; 2 usage error,
//! unknown tool or arguments rejected; 3 the plugin failed (it could not be
//! loaded, trapped, returned an Extism error, hit a limit or returned invalid
//! output).

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use serde_json::Value;
use std::time::Duration;

use toolhost::{Error, PathGrant, Plugin, Policy, ValidationOptions};

/// Run WebAssembly tool plugins: describe them, call their tools.
#[derive(Debug, Parser)]
#[command(name = "toolhost", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the plugin's tools (its ListToolsResult) as JSON.
    Describe {
        /// The plugin's .wasm file.
        plugin: PathBuf,
        #[command(flatten)]
        options: PluginOptions,
    },
    /// Call one tool and print its CallToolResult as JSON.
    Call {
        /// The plugin's .wasm file.
        plugin: PathBuf,
        /// The tool to call.
        tool: String,
        /// The arguments as a JSON object; `-` reads them from stdin. Omitted: `{}`.
        #[arg(value_name = "ARGS_JSON", conflicts_with = "args_file")]
        args: Option<String>,
        /// Read the arguments from a file (`-` for stdin).
        #[arg(long, value_name = "FILE")]
        args_file: Option<PathBuf>,
        #[command(flatten)]
        options: PluginOptions,
    },
}

/// How a plugin is loaded: what it is granted, its limits, its validation.
/// Nothing is granted unless a flag says so.
#[derive(Debug, Args)]
struct PluginOptions {
    /// A config value the plugin can read (repeatable). The plugin sees no
    /// host environment variables; pass values this way.
    #[arg(long = "config", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    config: Vec<(String, String)>,
    /// Make a host directory visible to the plugin, read-only unless `:rw`
    /// (repeatable). GUEST defaults to HOST.
    #[arg(long = "allow-path", value_name = "HOST[:GUEST][:ro|rw]", value_parser = parse_path_grant)]
    allow_path: Vec<PathGrant>,
    /// Let the plugin make HTTP requests to hosts matching PATTERN
    /// (`api.example.com`, `*.example.com`; repeatable). Others are refused.
    #[arg(long = "allow-host", value_name = "PATTERN", value_parser = parse_host_pattern)]
    allow_host: Vec<String>,
    /// Wall-clock limit per call, like `500ms` or `10s` [default: 30s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    timeout: Option<Duration>,
    /// Memory cap per plugin instance, like `64MiB` [default: 256MiB].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    memory_limit: Option<u64>,
    /// Largest output accepted from a call, like `1MiB` [default: 16MiB].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    max_output_size: Option<u64>,
    /// Instruction (fuel) budget per call [default: none].
    #[arg(long, value_name = "UNITS", value_parser = clap::value_parser!(u64).range(1..))]
    fuel: Option<u64>,
    /// Load the valid tools of a plugin whose describe output has problems,
    /// and print the problems as warnings, instead of refusing the plugin.
    #[arg(long)]
    lenient: bool,
    /// Enforce `format` (date-time, email, ...) in schemas instead of treating
    /// it as an annotation.
    #[arg(long)]
    enforce_formats: bool,
}

fn parse_path_grant(text: &str) -> Result<PathGrant, String> {
    let grant: PathGrant = text.parse().map_err(|e: toolhost::PolicyError| e.to_string())?;
    grant.check().map_err(|e| e.to_string())?;
    Ok(grant)
}

fn parse_host_pattern(text: &str) -> Result<String, String> {
    toolhost::check_host_pattern(text).map_err(|e| e.to_string())?;
    Ok(text.to_owned())
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let duration = toolhost::parse_duration(text).map_err(|e| e.to_string())?;
    if duration.is_zero() {
        return Err("the timeout must be longer than zero".to_owned());
    }
    Ok(duration)
}

fn parse_size(text: &str) -> Result<u64, String> {
    toolhost::parse_size(text).map_err(|e| e.to_string())
}

fn parse_key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("expected KEY=VALUE, got `{text}`")),
    }
}

impl PluginOptions {
    async fn load(self, path: &std::path::Path) -> Result<Plugin, Error> {
        let validation = ValidationOptions {
            lenient: self.lenient,
            enforce_formats: self.enforce_formats,
            ..ValidationOptions::default()
        };
        let mut policy = Policy {
            allowed_paths: self.allow_path,
            allowed_hosts: self.allow_host,
            config: self.config.into_iter().collect(),
            ..Policy::default()
        };
        if let Some(timeout) = self.timeout {
            policy.limits.timeout = Some(timeout);
        }
        if let Some(bytes) = self.memory_limit {
            policy.limits.memory_max_bytes = Some(bytes);
        }
        if let Some(bytes) = self.max_output_size {
            policy.limits.max_output_bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        }
        policy.limits.fuel = self.fuel;
        let plugin = Plugin::builder_from_file(path)
            .with_validation(validation)
            .with_policy(policy)
            .build()
            .await?;
        for warning in plugin.warnings() {
            eprintln!("warning: left out {warning}");
        }
        Ok(plugin)
    }
}

/// Exit codes, a contract with scripts.
mod exit {
    pub const TOOL_ERROR: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const PLUGIN_FAILED: u8 = 3;
}

/// A failure with the exit code it maps to.
struct Failure {
    code: u8,
    error: anyhow::Error,
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        let code = match &error {
            Error::Read { .. } | Error::Policy { .. } => exit::USAGE,
            e if e.is_caller_error() => exit::USAGE,
            _ => exit::PLUGIN_FAILED,
        };
        Failure { code, error: error.into() }
    }
}

fn usage(error: anyhow::Error) -> Failure {
    Failure { code: exit::USAGE, error }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(exit::PLUGIN_FAILED);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(Failure { code, error }) => {
            match error.downcast_ref::<Error>() {
                Some(toolhost_error) => report(toolhost_error),
                None => eprintln!("error: {error:#}"),
            }
            ExitCode::from(code)
        }
    }
}

/// One sentence on stderr; where the error lists problems, one per line
/// below it.
fn report(error: &Error) {
    let (header, lines): (String, Vec<String>) = match error {
        Error::InvalidArguments { plugin, tool, violations } => (
            format!("invalid arguments for tool `{tool}` of plugin `{plugin}`; the plugin did not run:"),
            violations.iter().map(ToString::to_string).collect(),
        ),
        Error::InvalidOutput {
            plugin,
            operation,
            problem: toolhost::OutputProblem::Invalid { violations },
        } => (
            format!("plugin `{plugin}` returned invalid output from {operation}:"),
            violations.iter().map(ToString::to_string).collect(),
        ),
        Error::InvalidPlugin { plugin, problems } => (
            format!(
                "plugin `{plugin}` describes its tools wrongly ({} problem{}):",
                problems.len(),
                if problems.len() == 1 { "" } else { "s" }
            ),
            problems.iter().map(ToString::to_string).collect(),
        ),
        other => (other.to_string(), Vec::new()),
    };
    eprintln!("error: {header}");
    for line in lines {
        eprintln!("  {line}");
    }
}

fn init_logging() {
    // Logs go to stderr, off unless `TOOLHOST_LOG` (e.g. `debug`,
    // `toolhost=debug,extism=trace`) asks for them: what the user must see,
    // the CLI prints itself.
    let filter = tracing_subscriber::EnvFilter::try_from_env("TOOLHOST_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

async fn run(cli: Cli) -> Result<u8, Failure> {
    match cli.command {
        Command::Describe { plugin, options } => {
            let plugin = options.load(&plugin).await?;
            print_json(plugin.describe())?;
            Ok(0)
        }
        Command::Call { plugin, tool, args, args_file, options } => {
            let arguments = read_arguments(args.as_deref(), args_file.as_deref()).map_err(usage)?;
            let plugin = options.load(&plugin).await?;
            let result = plugin.call_tool(&tool, arguments).await?;
            print_json(&result)?;
            Ok(if result.is_error() { exit::TOOL_ERROR } else { 0 })
        }
    }
}

/// The call's arguments: inline JSON, a file, or stdin (`-`); none means `{}`.
fn read_arguments(inline: Option<&str>, file: Option<&std::path::Path>) -> anyhow::Result<Value> {
    let from_stdin = || -> anyhow::Result<(String, String)> {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the arguments from stdin")?;
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

fn print_json<T: serde::Serialize>(value: &T) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut stdout, value)
        .map_err(anyhow::Error::from)
        .and_then(|()| writeln!(stdout).map_err(anyhow::Error::from))
        .map_err(|error| Failure { code: exit::PLUGIN_FAILED, error: error.context("cannot write the output") })
}
