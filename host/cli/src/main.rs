//! `toolhost`: describe and call the tools of Wasm plugins from the command line.
//!
//! Exit codes: 0 success; 1 the tool returned `isError: true` (a call that was
//! not approved too); 2 usage error, invalid configuration, unknown tool,
//! arguments rejected or a missing secret; 3 the plugin failed (it could not be
//! loaded, downloaded or verified, trapped, returned an Extism error, hit a
//! limit or returned invalid output).

mod alloc;
mod args;
mod bench;
mod call;
mod check;
mod describe;
mod exit;
mod output;
mod scaffold;
mod serve;
mod terminal;
mod tools;
mod toolsets;
mod verify;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use toolhost::Error;

use crate::exit::{Failure, report};
use crate::terminal::escaped;

/// mimalloc, not glibc's malloc: a served call is allocated on one of
/// tokio's workers and freed on another, and glibc's arenas then contend on
/// their locks (DESIGN.md, Performance).
#[global_allocator]
static ALLOCATOR: alloc::MiMalloc = alloc::MiMalloc;

/// The CLI's runtime: the library's defaults, and the compiled-module cache
/// on (`TOOLHOST_CACHE_DIR`, else `$XDG_CACHE_HOME/toolhost` or
/// `~/.cache/toolhost`), so a plugin compiles once across runs.
pub(crate) fn runtime() -> &'static toolhost::Runtime {
    RUNTIME.get_or_init(|| runtime_builder().build())
}

static RUNTIME: std::sync::OnceLock<toolhost::Runtime> = std::sync::OnceLock::new();

/// The settings of the CLI's runtime, for a runtime of its own (the
/// tool-set service's).
pub(crate) fn runtime_builder() -> toolhost::RuntimeBuilder {
    let builder = toolhost::Runtime::builder()
        .with_module_cache(toolhost::ModuleCache::from_env())
        .with_download_cache(toolhost::DownloadCache::from_env());
    // `TOOLHOST_COMPILERS`: `tiered` (the default), `cranelift` or
    // `baseline`.
    match std::env::var("TOOLHOST_COMPILERS").as_deref() {
        Err(_) | Ok("") => builder,
        Ok("tiered") => builder.with_compilers(toolhost::Compilers::Tiered),
        Ok("cranelift") => builder.with_compilers(toolhost::Compilers::Cranelift),
        Ok("baseline") => builder.with_compilers(toolhost::Compilers::Baseline),
        Ok(other) => {
            eprintln!(
                "warning: TOOLHOST_COMPILERS={} is not `tiered`, `cranelift` or `baseline`; using the default",
                escaped(other)
            );
            builder
        }
    }
}

/// Run WebAssembly tool plugins: describe them, call their tools.
#[derive(Debug, Parser)]
#[command(
    name = "toolhost",
    version,
    long_version = long_version(),
    about,
    long_about = None,
    after_help = "Exit codes: 0 success, 1 the tool's own error, 2 usage or input, 3 the plugin failed.\n\
                  Every option in detail: the book's CLI chapter (docs/src/using/cli.md)."
)]
struct Cli {
    /// Log lines on stderr as `text` or `json` (see `TOOLHOST_LOG`)
    #[arg(long, global = true, value_name = "FORMAT", value_parser = ["text", "json"], hide_possible_values = true)]
    log_format: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the tools of a plugin or a toolsets file as JSON
    Describe(describe::Args),
    /// Call one tool and print its CallToolResult as JSON
    Call(call::Args),
    /// Serve the tools of a plugin or a toolsets file over MCP (stdio or HTTP)
    Serve(serve::Args),
    /// Check a plugin: its describe output, and each tool called with generated arguments
    Check(check::Args),
    /// Measure a tool's calls/s and latency through the validating host
    Bench(bench::Args),
    /// Create a plugin crate on the SDK, ready for `toolhost build`
    New(scaffold::NewArgs),
    /// Build a plugin crate for Wasm and print the .wasm's path
    Build(scaffold::BuildArgs),
    /// List a toolsets file's tools: name, enabled, approval, source
    Tools(tools::Args),
    /// Manage a running tool-set service's tool sets: list, get, create, apply, delete, tools, events
    Toolsets(toolsets::Args),
    /// Fetch a downloaded plugin's source and check its pin and signature, without running it
    Verify(verify::Args),
}

/// `toolhost --version`: the version, then the features this binary was
/// built with (the library's, then the MCP front's); `-V` prints the
/// version alone.
fn long_version() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        format!(
            "{}\nlibrary features: {}\nmcp features: {}",
            env!("CARGO_PKG_VERSION"),
            toolhost::features().join(", "),
            toolhost_mcp::features().join(", ")
        )
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let json = cli.log_format.clone().or_else(|| std::env::var("TOOLHOST_LOG_FORMAT").ok()).as_deref() == Some("json");
    init_logging(json);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(exit::PLUGIN_FAILED);
        }
    };
    let outcome = runtime.block_on(run(cli));
    // A plugin that missed the cache answered on the baseline compiler's
    // code; let Cranelift's compile finish, so that its entry is in the
    // cache for the next run (the answer is already out).
    if let Some(toolhost) = RUNTIME.get() {
        runtime.block_on(toolhost.background_compiles_done());
    }
    match outcome {
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

/// What `--log-format json` logs unless `TOOLHOST_LOG` says otherwise:
/// toolhost's own events at `info`, rmcp's only from `warn`. rmcp logs
/// every notification a peer sends at `info`, formatted whole: a remote
/// MCP server's (or a client's) flood of 16 MiB log messages would be
/// copied into the logs without bound.
const DEFAULT_JSON_LOGS: &str = "info,rmcp=warn";

fn init_logging(json: bool) {
    // Logs go to stderr, off unless `TOOLHOST_LOG` (e.g. `debug`,
    // `toolhost=debug`; plugins' own logs are `toolhost::guest`) asks for them: what the user must see,
    // the CLI prints itself.
    let filter = tracing_subscriber::EnvFilter::try_from_env("TOOLHOST_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(if json { DEFAULT_JSON_LOGS } else { "off" }));
    // Every line, whoever's event it is (a dependency's too: rmcp logs a
    // remote server's notifications whole), passes through the redaction
    // of every secret value the process handed out.
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| toolhost::RedactingWriter::new(std::io::stderr()));
    // `set_global_default`, not `try_init`: the build has tracing-subscriber's
    // `tracing-log` (see Cargo.toml), and `try_init` would also route the
    // `log` records of every dependency into these logs.
    let _ = if json {
        tracing::subscriber::set_global_default(logs.json().with_current_span(true).with_span_list(false).finish())
    } else {
        tracing::subscriber::set_global_default(
            logs.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())).finish(),
        )
    };
}

async fn run(cli: Cli) -> Result<u8, Failure> {
    match cli.command {
        Command::Describe(args) => describe::run(args).await,
        Command::Call(args) => call::run(args).await,
        Command::Serve(args) => serve::run(args).await,
        Command::Check(args) => check::run(args).await,
        Command::Bench(args) => bench::command(args).await,
        Command::New(args) => scaffold::new_command(args).await,
        Command::Build(args) => scaffold::build_command(args).await,
        Command::Tools(args) => tools::run(args).await,
        Command::Toolsets(args) => toolsets::run(args).await,
        Command::Verify(args) => verify::run(args).await,
    }
}
