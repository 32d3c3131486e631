//! The watcher of `toolhost serve --config FILE`: applies a changed toolsets
//! file to the registry.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use toolhost::{Registry, SecretProvider};

/// The metadata a reload depends on: size and modification time of a file.
type Stamp = Option<(u64, SystemTime)>;

fn stamp(path: &Path) -> Stamp {
    let metadata = std::fs::metadata(path).ok()?;
    Some((metadata.len(), metadata.modified().ok()?))
}

/// The files a configuration depends on (the toolsets file first, then its
/// plugin files) and their stamps when it was last read.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Stamps(Vec<(PathBuf, Stamp)>);

impl Stamps {
    /// Stamps of `file` and of `plugins`, now.
    pub(crate) fn of(file: &Path, plugins: impl IntoIterator<Item = PathBuf>) -> Stamps {
        let mut paths = vec![file.to_path_buf()];
        paths.extend(plugins);
        Stamps(paths.into_iter().map(|path| (path.clone(), stamp(&path))).collect())
    }

    /// Whether any of the files has changed (or appeared, or gone) since.
    pub(crate) fn changed(&self) -> bool {
        self.0.iter().any(|(path, seen)| stamp(path) != *seen)
    }
}

/// The plugin files a configuration names.
fn plugin_files(toolsets: &[toolhost::ToolsetConfig]) -> Vec<PathBuf> {
    toolsets
        .iter()
        .filter_map(|t| match &t.source {
            Some(toolhost::PluginSource::File(path)) => Some(path.clone()),
            _ => None,
        })
        .collect()
}

/// Reload the toolsets file when it (or a plugin file) changes: the files'
/// metadata is looked at every 500 ms, and only a change makes the file be
/// read again (and its secrets resolved) and the registry synced, which
/// applies the new configuration as one swap and announces it once.
pub(crate) async fn watch_config(file: PathBuf, secrets: Arc<dyn SecretProvider>, registry: Arc<Registry>) {
    let mut plugins = match toolhost::load_toolsets(&file, secrets.as_ref()).await {
        Ok(parsed) => plugin_files(&parsed.toolsets),
        Err(_) => Vec::new(),
    };
    let mut seen = Stamps::of(&file, plugins.clone());
    let mut ticker = tokio::time::interval(Duration::from_millis(500));
    loop {
        ticker.tick().await;
        if !seen.changed() {
            continue;
        }
        // Stamp before reading: a change while reading is seen next time.
        seen = Stamps::of(&file, plugins.clone());
        tracing::debug!(file = %file.display(), "configuration changed: reading it again");
        match toolhost::load_toolsets(&file, secrets.as_ref()).await {
            Ok(parsed) => {
                plugins = plugin_files(&parsed.toolsets);
                seen = Stamps::of(&file, plugins.clone());
                let report = registry.sync(parsed.toolsets).await;
                crate::output::print_load_report(&report);
            }
            Err(error) => {
                eprintln!(
                    "warning: the changed configuration was not applied: {}",
                    crate::terminal::escaped(&error.to_string())
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_change_only_when_a_file_does() {
        let dir = std::env::temp_dir().join(format!("toolhost-stamps-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("t.json");
        let plugin = dir.join("p.wasm");
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
        std::fs::remove_dir_all(dir).ok();
    }
}
