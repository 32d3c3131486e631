//! Following a toolsets file: apply it to a registry again whenever it, or
//! one of the plugin files it names, changes (the `watch` feature).
//!
//! The files' metadata (size and modification time) is looked at every
//! interval (500 ms by default); only a change makes the file be read again,
//! its secrets resolved and the registry synced, which applies the new
//! configuration as one swap and announces it once. A file that no longer
//! parses is reported and not applied: the registry keeps what it had.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::config::{ConfigError, PluginSource, ToolsetConfig, load_toolsets};
use crate::registry::{LoadReport, Registry};
use crate::secrets::SecretProvider;

/// How often the files are looked at unless told otherwise.
const DEFAULT_INTERVAL: Duration = Duration::from_millis(500);

/// What a [`ToolsetsWatcher`] did about a change.
#[derive(Debug)]
#[non_exhaustive]
pub enum WatchEvent {
    /// The changed file was read and applied; what loaded and what failed.
    Applied(LoadReport),
    /// The changed file was not applied (it does not parse, or names a
    /// secret that cannot be resolved): the registry keeps what it had.
    Rejected(ConfigError),
}

/// Applies a toolsets file to a [`Registry`] again whenever it changes.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use toolhost::{EnvSecretProvider, Registry, ToolsetsWatcher, WatchEvent};
/// let secrets: Arc<dyn toolhost::SecretProvider> = Arc::new(EnvSecretProvider::new());
/// let file = toolhost::load_toolsets("toolsets.yaml".as_ref(), secrets.as_ref()).await?;
/// let registry = Arc::new(Registry::new(Arc::clone(&secrets)));
/// registry.sync(file.toolsets).await;
/// let _watching = ToolsetsWatcher::new("toolsets.yaml", secrets, Arc::clone(&registry))
///     .on_event(|event| match event {
///         WatchEvent::Applied(report) => eprintln!("reloaded ({} toolsets failed)", report.failures.len()),
///         WatchEvent::Rejected(error) => eprintln!("not applied: {error}"),
///         _ => {}
///     })
///     .spawn();
/// // ... serve; dropping `_watching` stops following the file.
/// # Ok(()) }
/// ```
pub struct ToolsetsWatcher {
    file: PathBuf,
    secrets: Arc<dyn SecretProvider>,
    registry: Arc<Registry>,
    interval: Duration,
    on_event: Box<dyn FnMut(WatchEvent) + Send>,
    /// The file's stamp when the watcher was made: a change between then
    /// and the first look is a change.
    first_seen: Stamp,
}

impl std::fmt::Debug for ToolsetsWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolsetsWatcher")
            .field("file", &self.file)
            .field("secrets", &self.secrets.describe())
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

impl ToolsetsWatcher {
    /// Follow `file` (a toolsets file, already applied to `registry` as it
    /// is now), resolving its secret references with `secrets`. A change
    /// made after this returns is seen, even before the watcher runs.
    pub fn new(file: impl Into<PathBuf>, secrets: Arc<dyn SecretProvider>, registry: Arc<Registry>) -> Self {
        let file = file.into();
        ToolsetsWatcher {
            first_seen: stamp(&file),
            file,
            secrets,
            registry,
            interval: DEFAULT_INTERVAL,
            on_event: Box::new(|_| {}),
        }
    }

    /// Look at the files this often (500 ms unless set; at least 10 ms).
    pub fn with_interval(mut self, interval: Duration) -> Self {
        self.interval = interval.max(Duration::from_millis(10));
        self
    }

    /// Tell `on_event` what each change led to.
    pub fn on_event(mut self, on_event: impl FnMut(WatchEvent) + Send + 'static) -> Self {
        self.on_event = Box::new(on_event);
        self
    }

    /// Follow the file on a task of the current tokio runtime until the
    /// handle is dropped (or [`WatchHandle::stop`]ped), or the registry's
    /// runtime is shut down.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, as [`tokio::spawn`].
    pub fn spawn(self) -> WatchHandle {
        WatchHandle { task: tokio::spawn(self.run()) }
    }

    /// Follow the file on this task, until the registry's runtime is shut
    /// down.
    pub async fn run(mut self) {
        let mut plugins = match load_toolsets(&self.file, self.secrets.as_ref()).await {
            Ok(parsed) => plugin_files(&parsed.toolsets),
            Err(_) => Vec::new(),
        };
        let mut seen = Stamps::of(&self.file, plugins.clone());
        seen.0[0].1 = self.first_seen;
        let mut ticker = tokio::time::interval(self.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            if self.registry.runtime().is_shut_down() {
                return;
            }
            if !seen.changed() {
                continue;
            }
            // Stamp before reading: a change while reading is seen next time.
            seen = Stamps::of(&self.file, plugins.clone());
            tracing::debug!(file = %self.file.display(), "configuration changed: reading it again");
            let event = match load_toolsets(&self.file, self.secrets.as_ref()).await {
                Ok(parsed) => {
                    plugins = plugin_files(&parsed.toolsets);
                    seen = Stamps::of(&self.file, plugins.clone());
                    WatchEvent::Applied(self.registry.sync(parsed.toolsets).await)
                }
                Err(error) => {
                    tracing::warn!(file = %self.file.display(), "the changed configuration was not applied: {error}");
                    WatchEvent::Rejected(error)
                }
            };
            (self.on_event)(event);
        }
    }
}

/// A [`ToolsetsWatcher`] at work: dropping it stops the watching.
#[derive(Debug)]
pub struct WatchHandle {
    task: tokio::task::JoinHandle<()>,
}

impl WatchHandle {
    /// Stop following the file.
    pub fn stop(self) {}

    /// Whether it has stopped (the registry's runtime was shut down).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

impl Drop for WatchHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The metadata a reload depends on: size and modification time of a file.
type Stamp = Option<(u64, SystemTime)>;

fn stamp(path: &Path) -> Stamp {
    let metadata = std::fs::metadata(path).ok()?;
    Some((metadata.len(), metadata.modified().ok()?))
}

/// The files a configuration depends on (the toolsets file first, then its
/// plugin files) and their stamps when it was last read.
#[derive(Debug, Default, PartialEq)]
struct Stamps(Vec<(PathBuf, Stamp)>);

impl Stamps {
    /// Stamps of `file` and of `plugins`, now.
    fn of(file: &Path, plugins: impl IntoIterator<Item = PathBuf>) -> Stamps {
        let mut paths = vec![file.to_path_buf()];
        paths.extend(plugins);
        Stamps(paths.into_iter().map(|path| (path.clone(), stamp(&path))).collect())
    }

    /// Whether any of the files has changed (or appeared, or gone) since.
    fn changed(&self) -> bool {
        self.0.iter().any(|(path, seen)| stamp(path) != *seen)
    }
}

/// The plugin files a configuration names.
fn plugin_files(toolsets: &[ToolsetConfig]) -> Vec<PathBuf> {
    toolsets
        .iter()
        .filter_map(|t| match &t.source {
            Some(PluginSource::File(path)) => Some(path.clone()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_change_only_when_a_file_does() {
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("t.json");
        let plugin = dir.path().join("p.wasm");
        std::fs::write(&file, "{}").expect("write");
        std::fs::write(&plugin, "x").expect("write");
        let stamps = Stamps::of(&file, [plugin.clone()]);
        assert!(!stamps.changed());
        std::fs::write(&plugin, "xy").expect("write");
        assert!(stamps.changed(), "a plugin file grew");
        let stamps = Stamps::of(&file, [plugin.clone()]);
        assert!(!stamps.changed());
        std::fs::remove_file(&file).expect("remove");
        assert!(stamps.changed(), "the configuration is gone");
    }
}
