//! The options several commands share: what a plugin is granted, which
//! secrets, how it is validated.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use toolhost::{
    EnvSecretProvider, Error, FileSecretProvider, PathGrant, Plugin, Policy, SecretProvider, ValidationOptions,
};

use crate::exit::{Failure, usage};
use crate::terminal::escaped;

/// Which secrets a plugin may have, and where their values come from.
#[derive(Debug, Args)]
pub(crate) struct SecretOptions {
    /// Grant the secret NAME (repeatable)
    #[arg(long = "secret", value_name = "NAME")]
    pub(crate) secret: Vec<String>,
    /// Read secrets from files DIR/NAME, not the environment
    #[arg(long, value_name = "DIR")]
    pub(crate) secrets_dir: Option<PathBuf>,
}

impl SecretOptions {
    /// Refuse `--secret` with a toolsets file, where grants are per toolset.
    pub(crate) fn not_with_toolsets(&self) -> Result<(), Failure> {
        if self.secret.is_empty() {
            return Ok(());
        }
        Err(usage(anyhow::anyhow!(
            "--secret grants a secret to a single plugin; in a toolsets file, grant secrets per toolset with `secrets: [NAME, ...]` beside `server`"
        )))
    }

    pub(crate) fn provider(&self) -> Arc<dyn SecretProvider> {
        match &self.secrets_dir {
            Some(dir) => Arc::new(FileSecretProvider::new(dir)),
            None => Arc::new(EnvSecretProvider::new()),
        }
    }
}

/// How a plugin is loaded: what it is granted, its limits, its validation.
/// Nothing is granted unless a flag says so.
#[derive(Debug, Args)]
pub(crate) struct PluginOptions {
    /// A config value the plugin can read (repeatable)
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_pair)]
    pub(crate) set: Vec<(String, String)>,
    /// A toolsets file (JSON, YAML or TOML)
    #[arg(long = "config", value_name = "FILE")]
    pub(crate) config: Vec<String>,
    /// Grant a directory, read-only unless :rw (repeatable)
    #[arg(long = "allow-path", value_name = "HOST[:GUEST][:rw]", value_parser = parse_path_grant)]
    pub(crate) allow_path: Vec<PathGrant>,
    /// Grant HTTP to hosts matching PATTERN (repeatable)
    #[arg(long = "allow-host", value_name = "PATTERN", value_parser = parse_host_pattern)]
    pub(crate) allow_host: Vec<String>,
    /// Wall-clock limit per call [default: 30s]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) timeout: Option<Duration>,
    /// Memory cap per instance [default: 256MiB]
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub(crate) memory_limit: Option<u64>,
    /// Largest output of a call [default: 16MiB]
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub(crate) max_output_size: Option<u64>,
    /// Ready instances per plugin [default: one per core]
    #[arg(long, value_name = "N", value_parser = parse_pool_size)]
    pub(crate) pool_size: Option<usize>,
    /// Instruction budget per call [default: none]
    #[arg(long, value_name = "UNITS", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) fuel: Option<u64>,
    /// Load a faulty plugin's valid tools, with warnings
    #[arg(long)]
    lenient: bool,
    /// Enforce `format` in schemas (date-time, email...)
    #[arg(long)]
    enforce_formats: bool,
}

pub(crate) fn parse_pool_size(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if (1..=4096).contains(&n) => Ok(n),
        _ => Err("expected a number of instances from 1 to 4096".to_owned()),
    }
}

/// The pool size a plugin gets by default: one instance per core.
pub(crate) fn default_pool_size() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

pub(crate) fn parse_path_grant(text: &str) -> Result<PathGrant, String> {
    let grant: PathGrant = text.parse().map_err(|e: toolhost::PolicyError| e.to_string())?;
    grant.check().map_err(|e| e.to_string())?;
    Ok(grant)
}

pub(crate) fn parse_host_pattern(text: &str) -> Result<String, String> {
    toolhost::check_host_pattern(text).map_err(|e| e.to_string())?;
    Ok(text.to_owned())
}

pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let duration = toolhost::parse_duration(text).map_err(|e| e.to_string())?;
    if duration.is_zero() {
        return Err("the timeout must be longer than zero".to_owned());
    }
    Ok(duration)
}

pub(crate) fn parse_size(text: &str) -> Result<u64, String> {
    toolhost::parse_size(text).map_err(|e| e.to_string())
}

pub(crate) fn parse_pair(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err("expected KEY=VALUE with a non-empty KEY".to_owned()),
    }
}

/// Plugin config pairs (`--set`, and the deprecated `--config KEY=VALUE`)
/// and a toolsets file (`--config FILE`).
pub(crate) type ConfigArgs = (Vec<(String, String)>, Option<PathBuf>);

impl PluginOptions {
    /// The plugin config values and the toolsets file. `command` names the
    /// subcommand when it takes no toolsets file.
    pub(crate) fn config(&self, refuse_file_for: Option<&str>) -> anyhow::Result<ConfigArgs> {
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
    pub(crate) fn configures_a_plugin(&self) -> bool {
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
    pub(crate) async fn load(
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
        let mut builder = crate::runtime().plugin_from_file(path).with_validation(validation).with_policy(policy);
        if let Some(size) = self.pool_size {
            builder = builder.with_max_idle_instances(size);
        }
        if let Some(secrets) = secrets {
            builder =
                builder.with_secret_provider(secrets.provider()).with_granted_secrets(secrets.secret.iter().cloned());
        }
        let plugin = builder.build().await?;
        for warning in plugin.warnings() {
            eprintln!("warning: {}", escaped(&warning.as_warning()));
        }
        Ok(plugin)
    }
}
