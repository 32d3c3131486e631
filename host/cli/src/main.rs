//! `toolhost`: describe and call the tools of Wasm plugins from the command line.
//!
//! Exit codes: 0 success; 1 the tool returned `isError: true` (a call that was
//! not approved too); 2 usage error, invalid configuration, unknown tool,
//! arguments rejected or a missing secret; 3 the plugin failed (it could not be
//! loaded, trapped, returned an Extism error, hit a limit or returned invalid
//! output).

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

mod bench;
mod scaffold;
mod serve;
mod terminal;
mod watch;
use clap::{Args, Parser, Subcommand};
use serde_json::Value;
use terminal::escaped;
use toolhost::{
    Approval, ApprovalRequest, ApproveAll, Approver, BoxFuture, EnvSecretProvider, Error, FileSecretProvider,
    PathGrant, Plugin, Policy, Registry, SecretProvider, ValidationOptions,
};
use toolhost_check::{CheckOptions, CheckReport, check_plugin};
use toolhost_mcp::{McpServer, ToolSource};

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
    ///
    /// `toolhost describe PLUGIN.wasm`, or `toolhost describe --config
    /// TOOLSETS_FILE` for the tools a toolsets configuration exposes (under
    /// their namespaced names, as `serve` lists them).
    Describe {
        /// The plugin's .wasm file (omit it with --config FILE).
        plugin: Option<PathBuf>,
        #[command(flatten)]
        secrets: SecretOptions,
        #[command(flatten)]
        options: PluginOptions,
    },
    /// Call one tool and print its CallToolResult as JSON.
    ///
    /// `toolhost call PLUGIN.wasm TOOL [ARGS_JSON]` calls a plugin's tool;
    /// `toolhost call --config TOOLSETS_FILE NAMESPACED_TOOL [ARGS_JSON]`
    /// calls a tool of a toolsets configuration. ARGS_JSON is a JSON object
    /// (`-` reads it from stdin); omitted, it is `{}`.
    Call {
        /// PLUGIN.wasm TOOL [ARGS_JSON], or NAMESPACED_TOOL [ARGS_JSON] with a
        /// toolsets file.
        #[arg(value_name = "PLUGIN TOOL [ARGS_JSON]", num_args = 1..=3, required = true)]
        targets: Vec<String>,
        /// Read the arguments from a file (`-` for stdin).
        #[arg(long, value_name = "FILE")]
        args_file: Option<PathBuf>,
        /// Approve every call that requires approval, without asking.
        #[arg(long)]
        yes: bool,
        #[command(flatten)]
        secrets: SecretOptions,
        #[command(flatten)]
        options: PluginOptions,
    },
    /// Serve the tools of a plugin, or of a toolsets configuration, as an MCP
    /// server: over stdio (the default) or streamable HTTP (`--http`).
    ///
    /// `toolhost serve PLUGIN.wasm` or `toolhost serve --config TOOLSETS_FILE`.
    /// Logs go to stderr, never into the protocol stream. With a toolsets
    /// file, changes to it (or to its plugins' files) are picked up and
    /// announced with `notifications/tools/list_changed`.
    Serve {
        /// The plugin's .wasm file (omit it with --config FILE).
        plugin: Option<PathBuf>,
        /// Serve streamable HTTP at ADDR (default 127.0.0.1:8000) under
        /// `/mcp`, instead of stdio.
        #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:8000")]
        http: Option<std::net::SocketAddr>,
        /// With --http: also accept requests from this browser origin
        /// (`scheme://host[:port]`, `:*` for any port; repeatable). Requests
        /// with any other `Origin` than the server's own get 403.
        #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "http")]
        allow_origins: Vec<String>,
        /// Approve every call that requires approval. Without it such calls
        /// are refused: a server has no terminal to ask on.
        #[arg(long)]
        yes: bool,
        #[command(flatten)]
        secrets: SecretOptions,
        #[command(flatten)]
        options: PluginOptions,
    },
    /// Check that a plugin conforms: its describe output, and every tool
    /// called with arguments generated from its inputSchema.
    ///
    /// Valid arguments (edge values included) must get a result that is
    /// valid against the protocol and the tool's outputSchema, within the
    /// limits, without a trap; invalid arguments (sent past the host's own
    /// check) must get a result or an error, not a trap. Prints a table and
    /// exits 1 on any failure (3 when the plugin does not even load).
    Check {
        /// The plugin's .wasm file.
        plugin: PathBuf,
        /// Seed of the generated arguments: the same seed makes the same
        /// calls.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Calls with valid arguments per tool (invalid ones: half as many).
        #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
        samples: u16,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        secrets: SecretOptions,
        #[command(flatten)]
        options: PluginOptions,
    },
    /// Measure a tool: call it N times from C concurrent callers through the
    /// validating host, and print calls/s and latency percentiles.
    Bench {
        /// The plugin's .wasm file.
        plugin: PathBuf,
        /// The tool to call.
        tool: String,
        /// The arguments, a JSON object [default: {}].
        #[arg(value_name = "ARGS_JSON")]
        arguments: Option<String>,
        /// Calls to make (after one warm-up call per caller).
        #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
        calls: u32,
        /// Concurrent callers.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
        concurrency: u16,
        /// Print the figures as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        secrets: SecretOptions,
        #[command(flatten)]
        options: PluginOptions,
    },
    /// Create a plugin crate on the toolhost SDK: one example tool, a test
    /// and a README, ready for `toolhost build` and `toolhost check`.
    New {
        /// The plugin's name (its crate's name).
        name: String,
        /// Where to create it [default: ./NAME].
        #[arg(long, value_name = "DIR")]
        path: Option<PathBuf>,
        /// Depend on the SDK at this path [default: the SDK of the toolhost
        /// checkout this binary was built from, if it is there].
        #[arg(long, value_name = "DIR")]
        sdk_path: Option<PathBuf>,
    },
    /// Build a plugin crate for Wasm (`cargo build --release --target
    /// wasm32-wasip1`) and print the path of the .wasm it built.
    Build {
        /// The crate's directory or its Cargo.toml.
        #[arg(default_value = ".")]
        path: PathBuf,
        /// The Wasm target.
        #[arg(long, default_value = "wasm32-wasip1")]
        target: String,
        /// The cargo profile.
        #[arg(long, default_value = "release")]
        profile: String,
    },
    /// List the tools of a toolsets configuration: namespaced name, whether it
    /// is enabled, whether it requires approval, and where it comes from.
    Tools {
        /// The toolsets file (JSON, YAML or TOML).
        #[arg(long = "config", value_name = "FILE")]
        config: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        secrets: SecretOptions,
    },
}

/// Which secrets a plugin may have, and where their values come from.
#[derive(Debug, Args)]
struct SecretOptions {
    /// Grant the secret NAME (repeatable): a tool that declares it gets its
    /// value, from the environment variable NAME or from the file NAME in
    /// --secrets-dir. Nothing else grants a secret; with a toolsets file,
    /// grant secrets per toolset with `secrets: [NAME, ...]`.
    #[arg(long = "secret", value_name = "NAME")]
    secret: Vec<String>,
    /// Read secrets from files in DIR (the secret NAME is the file DIR/NAME)
    /// instead of from environment variables of the same name.
    #[arg(long, value_name = "DIR")]
    secrets_dir: Option<PathBuf>,
}

impl SecretOptions {
    /// Refuse `--secret` with a toolsets file, where grants are per toolset.
    fn not_with_toolsets(&self) -> Result<(), Failure> {
        if self.secret.is_empty() {
            return Ok(());
        }
        Err(usage(anyhow::anyhow!(
            "--secret grants a secret to a single plugin; in a toolsets file, grant secrets per toolset with `secrets: [NAME, ...]` beside `server`"
        )))
    }

    fn provider(&self) -> Arc<dyn SecretProvider> {
        match &self.secrets_dir {
            Some(dir) => Arc::new(FileSecretProvider::new(dir)),
            None => Arc::new(EnvSecretProvider::new()),
        }
    }
}

/// How a plugin is loaded: what it is granted, its limits, its validation.
/// Nothing is granted unless a flag says so.
#[derive(Debug, Args)]
struct PluginOptions {
    /// A config value the plugin can read (repeatable). The plugin sees no
    /// host environment variables; pass values this way.
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_pair)]
    set: Vec<(String, String)>,
    /// A toolsets file (for `call`, `describe` and `serve`). The old form
    /// `--config KEY=VALUE` still sets a plugin config value, with a warning:
    /// use `--set KEY=VALUE`.
    #[arg(long = "config", value_name = "FILE")]
    config: Vec<String>,
    /// Make a host directory visible to the plugin, read-only unless `:rw`
    /// (repeatable). GUEST defaults to HOST.
    #[arg(long = "allow-path", value_name = "HOST[:GUEST][:ro|rw]", value_parser = parse_path_grant)]
    allow_path: Vec<PathGrant>,
    /// Let the plugin make HTTP requests to hosts matching PATTERN
    /// (`api.example.com`, `*.example.com`: any port; `127.0.0.1:8080`:
    /// that port only; repeatable). Others are refused.
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
    /// Ready instances kept per plugin [default: the number of cores].
    #[arg(long, value_name = "N", value_parser = parse_pool_size)]
    pool_size: Option<usize>,
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

fn parse_pool_size(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if (1..=4096).contains(&n) => Ok(n),
        _ => Err("expected a number of instances from 1 to 4096".to_owned()),
    }
}

/// The pool size a plugin gets by default: one instance per core.
fn default_pool_size() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
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

fn parse_pair(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err("expected KEY=VALUE with a non-empty KEY".to_owned()),
    }
}

/// Plugin config pairs (`--set`, and the deprecated `--config KEY=VALUE`)
/// and a toolsets file (`--config FILE`).
type ConfigArgs = (Vec<(String, String)>, Option<PathBuf>);

impl PluginOptions {
    /// The plugin config values and the toolsets file. `command` names the
    /// subcommand when it takes no toolsets file.
    fn config(&self, refuse_file_for: Option<&str>) -> anyhow::Result<ConfigArgs> {
        let mut pairs = self.set.clone();
        let mut file = None;
        for value in &self.config {
            match value.split_once('=') {
                Some((key, v)) if !key.is_empty() => {
                    eprintln!(
                        "warning: `--config {}` is deprecated: use `--set {}` (`--config` names a toolsets file)",
                        escaped(value),
                        escaped(value)
                    );
                    pairs.push((key.to_owned(), v.to_owned()));
                }
                Some(_) => anyhow::bail!(
                    "invalid --config `{value}`: expected a toolsets FILE (or KEY=VALUE with a non-empty KEY; use --set)"
                ),
                None => match refuse_file_for {
                    Some(command) => anyhow::bail!(
                        "`{command}` takes a plugin file, not a toolsets file (--config `{value}`); to set a plugin config value use --set KEY=VALUE"
                    ),
                    None if file.is_none() => file = Some(PathBuf::from(value)),
                    None => anyhow::bail!("give one toolsets file with --config, not several"),
                },
            }
        }
        Ok((pairs, file))
    }

    /// Whether any flag that configures a single plugin was given.
    fn configures_a_plugin(&self) -> bool {
        !self.set.is_empty()
            || !self.allow_path.is_empty()
            || !self.allow_host.is_empty()
            || self.timeout.is_some()
            || self.memory_limit.is_some()
            || self.max_output_size.is_some()
            || self.fuel.is_some()
            || self.pool_size.is_some()
            || self.lenient
            || self.enforce_formats
    }

    /// Load the plugin; the secrets its tools declare come from `secrets`.
    async fn load(
        self,
        path: &Path,
        config: Vec<(String, String)>,
        secrets: Option<&SecretOptions>,
    ) -> Result<Plugin, Error> {
        let mut validation = ValidationOptions::default();
        validation.lenient = self.lenient;
        validation.enforce_formats = self.enforce_formats;
        let mut policy = Policy::default();
        policy.allowed_paths = self.allow_path;
        policy.allowed_hosts = self.allow_host;
        policy.config = config.into_iter().collect();
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
        let mut builder = Plugin::builder_from_file(path).with_validation(validation).with_policy(policy);
        if let Some(size) = self.pool_size {
            builder = builder.with_max_idle_instances(size);
        }
        if let Some(secrets) = secrets {
            builder =
                builder.with_secret_provider(secrets.provider()).with_granted_secrets(secrets.secret.iter().cloned());
        }
        let plugin = builder.build().await?;
        for warning in plugin.warnings() {
            eprintln!("warning: left out {}", escaped(&warning.to_string()));
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
            Error::Read { .. } | Error::Policy { .. } | Error::Registry(_) => exit::USAGE,
            e if e.is_caller_error() => exit::USAGE,
            _ => exit::PLUGIN_FAILED,
        };
        Failure { code, error: error.into() }
    }
}

fn scaffold_failure(error: scaffold::ScaffoldError) -> Failure {
    let code = match &error {
        scaffold::ScaffoldError::Usage(_) => exit::USAGE,
        scaffold::ScaffoldError::BuildFailed(_) => exit::TOOL_ERROR,
        scaffold::ScaffoldError::Other(_) => exit::PLUGIN_FAILED,
    };
    Failure { code, error: error.into() }
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
            // Errors quote plugins (names, messages, values): escaped.
            if let Some(toolhost_error) = error.downcast_ref::<Error>() {
                report(toolhost_error);
            } else if let Some(config) = error.downcast_ref::<toolhost::ConfigError>() {
                eprintln!("error: invalid configuration {}:", escaped(&config.file.display().to_string()));
                for problem in &config.problems {
                    eprintln!("  {}", escaped(&problem.to_string()));
                }
            } else {
                eprintln!("error: {}", escaped(&format!("{error:#}")));
            }
            ExitCode::from(code)
        }
    }
}

/// One sentence on stderr; where the error lists problems, one per line
/// below it. Each line escaped: what a plugin said cannot make lines of its
/// own.
fn report(error: &Error) {
    let (header, lines): (String, Vec<String>) = match error {
        Error::InvalidArguments { plugin, tool, violations, .. } => (
            format!("invalid arguments for tool `{tool}` of plugin `{plugin}`; the plugin did not run:"),
            violations.iter().map(ToString::to_string).collect(),
        ),
        Error::InvalidOutput {
            plugin,
            operation,
            problem: toolhost::OutputProblem::Invalid { violations, .. },
            ..
        } => (
            format!("plugin `{plugin}` returned invalid output from {operation}:"),
            violations.iter().map(ToString::to_string).collect(),
        ),
        Error::InvalidPlugin { plugin, problems, .. } => (
            format!(
                "plugin `{plugin}` describes its tools wrongly ({} problem{}):",
                problems.len(),
                if problems.len() == 1 { "" } else { "s" }
            ),
            problems.iter().map(ToString::to_string).collect(),
        ),
        other => (other.to_string(), Vec::new()),
    };
    eprintln!("error: {}", escaped(&header));
    for line in lines {
        eprintln!("  {}", escaped(&line));
    }
}

fn init_logging() {
    // Logs go to stderr, off unless `TOOLHOST_LOG` (e.g. `debug`,
    // `toolhost=debug`; plugins' own logs are `toolhost::guest`) asks for them: what the user must see,
    // the CLI prints itself.
    let filter = tracing_subscriber::EnvFilter::try_from_env("TOOLHOST_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .try_init();
}

async fn run(cli: Cli) -> Result<u8, Failure> {
    match cli.command {
        Command::Describe { plugin, secrets, options } => {
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
        Command::Call { targets, args_file, yes, secrets, options } => {
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
                    let approver: Box<dyn Approver> =
                        if yes { Box::new(ApproveAll) } else { Box::new(TerminalApprover) };
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
        Command::Serve { plugin, http, allow_origins, yes, secrets, options } => {
            let (pairs, toolsets) = options.config(None).map_err(usage)?;
            let approver: Arc<dyn Approver> = if yes {
                Arc::new(ApproveAll)
            } else {
                Arc::new(toolhost::DenyAll("it requires approval and the server was not started with --yes".to_owned()))
            };
            let source = match (plugin, toolsets) {
                (Some(plugin), None) => ToolSource::Plugin(options.load(&plugin, pairs, Some(&secrets)).await?),
                (None, Some(file)) => {
                    if options.configures_a_plugin() || !pairs.is_empty() {
                        return Err(usage(anyhow::anyhow!(
                            "with a toolsets file, grants, limits and config come from the file, not from flags"
                        )));
                    }
                    secrets.not_with_toolsets()?;
                    let registry = Arc::new(load_registry(&file, &secrets).await?);
                    tokio::spawn(watch::watch_config(file, secrets.provider(), Arc::clone(&registry)));
                    ToolSource::Registry(registry)
                }
                _ => return Err(usage(anyhow::anyhow!("give PLUGIN.wasm or --config TOOLSETS_FILE (one of them)"))),
            };
            let server = McpServer::new(source, approver);
            let http = http.map(|addr| toolhost_mcp::HttpOptions::new(addr).allow_origins(allow_origins));
            serve::serve(server, http).await.map_err(|error| Failure { code: exit::PLUGIN_FAILED, error })?;
            Ok(0)
        }
        Command::Check { plugin, seed, samples, json, secrets, options } => {
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
            let check_options = CheckOptions {
                seed,
                valid_calls: usize::from(samples),
                invalid_calls: usize::from(samples).div_ceil(2),
            };
            let report = check_plugin(&loaded, &check_options).await;
            if json {
                print_json(&report)?;
            } else {
                print_check(&report).map_err(|error| Failure { code: exit::PLUGIN_FAILED, error })?;
            }
            Ok(if report.passed { 0 } else { exit::TOOL_ERROR })
        }
        Command::Bench { plugin, tool, arguments, calls, concurrency, json, secrets, mut options } => {
            let (pairs, _) = options.config(Some("bench")).map_err(usage)?;
            let concurrency = usize::from(concurrency);
            // Enough idle instances for every caller, unless told otherwise.
            options.pool_size.get_or_insert(concurrency.max(default_pool_size()));
            let arguments = read_arguments(arguments.as_deref(), None).map_err(usage)?;
            let started = std::time::Instant::now();
            let plugin = Arc::new(options.load(&plugin, pairs, Some(&secrets)).await?);
            let load_seconds = started.elapsed().as_secs_f64();
            // Refuse bad arguments once, not on every call.
            plugin.validate_arguments(&tool, arguments.clone())?;
            let mut report = bench::run(Arc::clone(&plugin), &tool, arguments, calls as usize, concurrency).await;
            report.load_seconds = load_seconds;
            if json {
                print_json(&report)?;
            } else {
                let l = &report.latency_us;
                let h = bench::human;
                println!(
                    "{}.{}: {} calls from {} concurrent caller{} in {:.2} s",
                    escaped(&report.plugin),
                    escaped(&report.tool),
                    report.calls,
                    report.concurrency,
                    if report.concurrency == 1 { "" } else { "s" },
                    report.seconds
                );
                println!("  throughput:  {:.0} calls/s", report.calls_per_second);
                println!(
                    "  latency:     p50 {}  p90 {}  p99 {}  (min {}, mean {}, max {})",
                    h(l.p50),
                    h(l.p90),
                    h(l.p99),
                    h(l.min),
                    h(l.mean),
                    h(l.max)
                );
                println!("  tool errors: {}  failures: {}", report.tool_errors, report.failures);
                if let Some(failure) = &report.first_failure {
                    println!("  first failure: {}", escaped(failure));
                }
                println!(
                    "  load:        {} (compiled-module cache: {}), describe included",
                    h(report.load_seconds * 1e6),
                    report.module_cache
                );
                println!(
                    "  instances:   {} idle, {} each held against the memory limit",
                    report.idle_instances,
                    bench::human_bytes(report.instance_memory_bytes)
                );
            }
            Ok(if report.failures == 0 { 0 } else { exit::PLUGIN_FAILED })
        }
        Command::New { name, path, sdk_path } => {
            let dir = path.unwrap_or_else(|| PathBuf::from(&name));
            let written = scaffold::new_plugin(&name, &dir, sdk_path.as_deref()).map_err(scaffold_failure)?;
            eprintln!("Created plugin `{name}` in {}:", dir.display());
            for file in &written {
                eprintln!("  {}", file.display());
            }
            eprintln!(
                "\nNext:\n  cd {}\n  toolhost build\n  toolhost check target/wasm32-wasip1/release/{}.wasm",
                dir.display(),
                name.replace('-', "_")
            );
            Ok(0)
        }
        Command::Build { path, target, profile } => {
            let built = tokio::task::spawn_blocking(move || scaffold::build_plugin(&path, &target, &profile))
                .await
                .map_err(|e| Failure { code: exit::PLUGIN_FAILED, error: e.into() })?
                .map_err(scaffold_failure)?;
            let mut stdout = std::io::stdout().lock();
            for wasm in built {
                let size = std::fs::metadata(&wasm).map(|m| m.len()).unwrap_or(0);
                eprintln!("Built {} ({size} bytes)", wasm.display());
                writeln!(stdout, "{}", wasm.display())
                    .map_err(|e| Failure { code: exit::PLUGIN_FAILED, error: e.into() })?;
            }
            Ok(0)
        }
        Command::Tools { config, json, secrets } => {
            secrets.not_with_toolsets()?;
            let registry = load_registry(&config, &secrets).await?;
            let tools = registry.all_tools();
            if json {
                let rows: Vec<Value> = tools
                    .iter()
                    .map(|t| {
                        serde_json::json!({
                            "name": t.name,
                            "toolset": t.toolset,
                            "tool": t.tool.name,
                            "source": t.source,
                            "enabled": t.enabled,
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
            }
            Ok(0)
        }
    }
}

/// Load every toolset of a file; report the ones that fail and go on.
async fn load_registry(file: &Path, secrets: &SecretOptions) -> Result<Registry, Failure> {
    let provider = secrets.provider();
    let parsed = toolhost::load_toolsets(file, provider.as_ref())
        .map_err(|error| Failure { code: exit::USAGE, error: error.into() })?;
    let registry = Registry::new(provider);
    let report = registry.load_all(parsed.toolsets).await;
    print_load_report(&report);
    Ok(registry)
}

/// The toolsets that failed to load, and warnings, on stderr.
fn print_load_report(report: &toolhost::LoadReport) {
    for failure in &report.failures {
        eprintln!("warning: {}", escaped(&format!("{} was not loaded: {}", failure.source, failure.error)));
    }
    for warning in &report.warnings {
        eprintln!("warning: {}", escaped(warning));
    }
}

/// Failures printed per tool; `--json` has them all.
const SHOWN_FAILURES: usize = 3;

/// The check's table, each failure on a line of its own below it, and a
/// verdict.
fn print_check(report: &CheckReport) -> anyhow::Result<()> {
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

/// Left-aligned columns, two spaces apart; cells escaped.
fn write_table<const N: usize>(out: &mut impl Write, header: [&str; N], rows: &[[String; N]]) -> anyhow::Result<()> {
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

fn print_table(tools: &[toolhost::RegisteredTool]) -> anyhow::Result<()> {
    let rows: Vec<[String; 4]> = tools
        .iter()
        .map(|t| {
            let enabled = match &t.disabled_reason {
                None => "yes".to_owned(),
                Some(reason) => format!("no ({reason})"),
            };
            let approval = if t.requires_approval { "yes" } else { "no" }.to_owned();
            [t.name.clone(), enabled, approval, t.source.clone()]
        })
        .collect();
    write_table(&mut std::io::stdout().lock(), ["TOOL", "ENABLED", "APPROVAL", "SOURCE"], &rows)
}

/// Asks on the terminal; refuses clearly when there is none.
struct TerminalApprover;

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
fn read_arguments(inline: Option<&str>, file: Option<&std::path::Path>) -> anyhow::Result<Value> {
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

fn print_json<T: serde::Serialize>(value: &T) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut stdout, value)
        .map_err(anyhow::Error::from)
        .and_then(|()| writeln!(stdout).map_err(anyhow::Error::from))
        .map_err(|error| Failure { code: exit::PLUGIN_FAILED, error: error.context("cannot write the output") })
}
