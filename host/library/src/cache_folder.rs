//! The folders the caches keep their files in (compiled modules,
//! downloaded plugins): where they are, made private, entries marked when
//! used and the least recently used trimmed. A leaf: the caches above use
//! it, it uses nothing of the crate.

/// Create `dir` and the directories above it that are missing, each
/// readable and writable by the current user alone (the umask may allow
/// more: a cache directory others may write is refused as unsafe).
#[cfg(any(feature = "cache", feature = "https", feature = "oci"))]
pub(crate) fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// Remove the least recently used files of `dir` that `is_entry` names
/// (by modification time: written, or marked by a hit) while there are
/// more than `max_entries` or they hold more than `max_bytes`; never
/// `kept`, the entry just written.
#[cfg(any(feature = "cache", feature = "https", feature = "oci"))]
pub(crate) fn trim(
    dir: &std::path::Path,
    kept: &std::path::Path,
    max_entries: usize,
    max_bytes: u64,
    is_entry: impl Fn(&std::path::Path) -> bool,
) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut files: Vec<(std::time::SystemTime, u64, std::path::PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| is_entry(&e.path()))
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            Some((meta.modified().ok()?, meta.len(), e.path()))
        })
        .collect();
    let (mut count, mut bytes) = (files.len(), files.iter().map(|f| f.1).sum::<u64>());
    if count <= max_entries && bytes <= max_bytes {
        return;
    }
    files.sort();
    for (_, len, path) in &files {
        if count <= max_entries && bytes <= max_bytes {
            break;
        }
        if path != kept && std::fs::remove_file(path).is_ok() {
            count -= 1;
            bytes = bytes.saturating_sub(*len);
        }
    }
}

/// A hit older than this marks its cache entry used again (its
/// modification time), so that trimming removes the least recently used
/// first, at most one metadata write per entry per hour.
#[cfg(any(feature = "cache", feature = "https", feature = "oci"))]
const TOUCH_AFTER: std::time::Duration = std::time::Duration::from_secs(3600);

/// Mark a hit's entry as used now, if it was last marked (or written)
/// more than [`TOUCH_AFTER`] ago. Best effort: a cache on a read-only file
/// system just trims by age of writing.
#[cfg(any(feature = "cache", feature = "https", feature = "oci"))]
pub(crate) fn touch(file: &std::fs::File) {
    let now = std::time::SystemTime::now();
    let stale = file
        .metadata()
        .and_then(|meta| meta.modified())
        .is_ok_and(|modified| now.duration_since(modified).is_ok_and(|age| age > TOUCH_AFTER));
    if stale {
        let _ = file.set_modified(now);
    }
}

/// The environment variable that moves (or, set to `off` or empty, turns
/// off) the CLI's caches: compiled modules
/// ([`ModuleCache::from_env`](crate::ModuleCache)) in it, downloaded
/// plugins ([`DownloadCache::from_env`](crate::DownloadCache::from_env)) in
/// its `downloads` directory.
pub const CACHE_DIR_ENV: &str = "TOOLHOST_CACHE_DIR";

/// The CLI's directory for its cache `name`: `$TOOLHOST_CACHE_DIR` (with
/// `name` under it if `nested`; `off` or empty: none), else
/// `$XDG_CACHE_HOME/toolhost/<name>`, else `$HOME/.cache/toolhost/<name>`.
pub(crate) fn cache_dir_from_env(name: &str, nested: bool) -> Option<std::path::PathBuf> {
    use std::path::PathBuf;
    if let Some(dir) = std::env::var_os(CACHE_DIR_ENV) {
        if dir.is_empty() || dir == "off" {
            return None;
        }
        let dir = PathBuf::from(dir);
        return Some(if nested { dir.join(name) } else { dir });
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").filter(|d| !d.is_empty()).map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("toolhost").join(name))
}
