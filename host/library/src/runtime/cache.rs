//! Compiled modules on disk, so a second process start loads a plugin
//! without compiling it.
//!
//! An entry is named by a BLAKE3 hash of the Wasm bytes, the wasmtime version
//! and the engine's configuration (everything that changes the machine
//! code), so a plugin that changed, or a toolhost built differently, never
//! finds an old entry, and no plugin can be made to find another's. An
//! entry holds the payload (wasmtime's serialised module) followed by a
//! trailer: that key again, the payload's length and CRC-32. Before an
//! entry is used its key is compared with the one it was found under (an
//! entry copied or renamed onto another plugin's name would run the other
//! plugin's code), and its length and checksum are verified; wasmtime then
//! checks its own header (version, target, flags). An entry that fails a
//! check is reported, deleted and rebuilt: it is never trusted blindly.
//! Writes go to a temporary file renamed into place, so a reader never sees
//! half an entry, and an entry is never changed in place.
//!
//! A sound entry is mapped, not copied: wasmtime maps the file (the
//! payload comes first, where it expects it, and the trailer after its
//! object file is not read). The plugin's code is then file-backed memory,
//! paged in where it runs and shared between plugins loaded from the same
//! entry, instead of a private copy of the whole module per plugin. Since
//! entries are only ever replaced by renaming, a mapped entry never
//! changes under a running plugin.
//!
//! The checksum is there to catch corruption (a torn write, a bad disk, a
//! truncated copy), which a CRC does reliably at a fraction of a
//! cryptographic hash's cost on a cache hit; it is not a defence against
//! someone who can write to the cache directory.
//!
//! The cache directory must be as trusted as the toolhost binary: loading an
//! entry runs its machine code. It is created readable by its owner only,
//! and a directory that another user owns or may write to (or whose parent
//! they may, without the sticky bit) is refused: the cache is then off, with
//! a warning, and plugins are compiled.

use std::collections::HashMap;
use std::hash::Hasher;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use wasmtime::Engine;

use super::PluginKind;
use super::compile::{CacheStatus, CompileInfo, Compiled, Mapping};

/// Last bytes of every entry (16 bytes, the last one the format version).
const MAGIC: &[u8; 16] = b"toolhost-cwasm\n\x04";
/// Bytes of an entry's key (a BLAKE3 hash).
const KEY: usize = 32;
/// Trailer: the entry's key, payload length (u64 LE), payload CRC-32
/// (u32 LE), magic.
const TRAILER: usize = KEY + 8 + 4 + MAGIC.len();
/// Bytes of an entry read at a time to check its checksum.
const CHECK_PIECE: usize = 64 * 1024;
/// Entries kept at most, and their bytes at most: past either, the least
/// recently used are removed when a new one is written. (A plugin's entry
/// is typically 0.1–2 MB; 1,000 distinct plugins must all stay warm.)
const MAX_ENTRIES: usize = 8192;
const MAX_BYTES: u64 = 4 << 30;

/// Where compiled modules are kept between processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleCache {
    dir: Option<PathBuf>,
}

impl Default for ModuleCache {
    /// The cache of [`ModuleCache::from_env`].
    fn default() -> Self {
        Self::from_env()
    }
}

impl ModuleCache {
    /// `$TOOLHOST_CACHE_DIR` if set (`off` or empty: no cache), else
    /// `$XDG_CACHE_HOME/toolhost/modules`, else
    /// `$HOME/.cache/toolhost/modules`; no cache if none of these is set.
    pub fn from_env() -> Self {
        ModuleCache { dir: crate::cache_folder::cache_dir_from_env("modules", false) }
    }

    /// A cache in this directory (created when first written).
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        ModuleCache { dir: Some(dir.into()) }
    }

    /// No cache: every load compiles.
    pub fn disabled() -> Self {
        ModuleCache { dir: None }
    }

    /// The directory, if the cache is on.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The compiled plugin for `wasm` on `engine`: from the cache if a
    /// sound entry exists, else compiled (and stored).
    pub(crate) fn load_or_compile(
        &self,
        engine: &Engine,
        wasm: &[u8],
        kind: PluginKind,
    ) -> wasmtime::Result<(Compiled, CompileInfo)> {
        let Some(dir) = &self.dir else {
            return Compiled::compile_uncached(engine, wasm, kind);
        };
        let started = Instant::now();
        if let Some(reason) = unsafe_dir(dir) {
            tracing::warn!(dir = %dir.display(), "the compiled-module cache is off: {reason}; compiling");
            let module = Compiled::compile(engine, wasm, kind)?;
            return Ok((
                module,
                CompileInfo {
                    cache: CacheStatus::Unsafe(reason),
                    elapsed: started.elapsed(),
                    tier: super::Tier::Optimized,
                },
            ));
        }
        let key = key(engine, wasm, kind);
        let path = dir.join(format!("{}.cwasm", hex(&key)));
        let hit = |module| {
            Ok((
                module,
                CompileInfo { cache: CacheStatus::Hit, elapsed: started.elapsed(), tier: super::Tier::Optimized },
            ))
        };
        let status = match lookup(engine, &path, &key, kind) {
            Ok(module) => return hit(module),
            Err(status) => status,
        };
        // The same module loaded several times at once (one plugin under
        // several ids, a registry starting cold) is compiled once: the
        // first load compiles, the others wait for its module.
        let compiling = match Compiling::join(&path) {
            Joined::Leader(compiling) => {
                // The load that compiled it may have finished between our
                // look and our joining: its entry is there now.
                if status == CacheStatus::Miss
                    && let Ok(module) = lookup(engine, &path, &key, kind)
                {
                    compiling.done(&module);
                    return hit(module);
                }
                compiling
            }
            Joined::Follower(Some(module)) if module.is_for(engine) => return hit(module),
            // The first load compiled it for another runtime's engine (the
            // same configuration, another `Engine`): its entry is there now.
            Joined::Follower(Some(_)) if let Ok(module) = lookup(engine, &path, &key, kind) => return hit(module),
            // The first load failed (or its entry cannot be read): compile,
            // and meet its error ourselves.
            Joined::Follower(_) => Compiling::alone(),
        };
        if let CacheStatus::Rebuilt(reason) = &status {
            tracing::warn!(entry = %path.display(), "the compiled-module cache entry is unusable: {reason}; recompiling");
            let _ = std::fs::remove_file(&path);
        }
        let module = Compiled::compile(engine, wasm, kind)?;
        if let Err(e) = store(dir, &path, &key, &module) {
            tracing::warn!(dir = %dir.display(), "cannot write the compiled-module cache: {e}");
        }
        compiling.done(&module);
        Ok((module, CompileInfo { cache: status, elapsed: started.elapsed(), tier: super::Tier::Optimized }))
    }
}

impl ModuleCache {
    /// The compiled plugin for `wasm` on `engine` if a sound entry is in
    /// the cache; else why not (`Miss`, `Rebuilt`: an entry that cannot be
    /// used, left for the compile that replaces it; `Disabled`; `Unsafe`).
    /// Compiles nothing, waits for nothing.
    pub(crate) fn find(
        &self,
        engine: &Engine,
        wasm: &[u8],
        kind: PluginKind,
    ) -> Result<(Compiled, CompileInfo), CacheStatus> {
        let Some(dir) = &self.dir else { return Err(CacheStatus::Disabled) };
        let started = Instant::now();
        if let Some(reason) = unsafe_dir(dir) {
            return Err(CacheStatus::Unsafe(reason));
        }
        let key = key(engine, wasm, kind);
        let path = dir.join(format!("{}.cwasm", hex(&key)));
        let module = lookup(engine, &path, &key, kind)?;
        Ok((module, CompileInfo { cache: CacheStatus::Hit, elapsed: started.elapsed(), tier: super::Tier::Optimized }))
    }

    /// Compile `wasm` on the baseline compiler's `engine`, never stored:
    /// the module, and whether this load compiled it. Loads of the same
    /// module through this cache at the same time compile it once (the
    /// others wait for its module, as [`load_or_compile`](Self::load_or_compile)'s do).
    pub(crate) fn compile_baseline(
        &self,
        engine: &Engine,
        wasm: &[u8],
        kind: PluginKind,
    ) -> wasmtime::Result<(Compiled, bool)> {
        let Some(dir) = &self.dir else { return Ok((Compiled::compile(engine, wasm, kind)?, true)) };
        // Named like an entry, which it never becomes: only the table of
        // compilations under way holds the name.
        let name = dir.join(format!("{}.baseline", hex(&key(engine, wasm, kind))));
        let compiling = match Compiling::join(&name) {
            Joined::Leader(compiling) => compiling,
            Joined::Follower(Some(module)) if module.is_for(engine) => return Ok((module, false)),
            // (It failed, or compiled for another runtime's engine.)
            Joined::Follower(_) => Compiling::alone(),
        };
        let module = Compiled::compile(engine, wasm, kind)?;
        compiling.done(&module);
        Ok((module, true))
    }
}

/// The module of cache entry `path`, checked and mapped (or, if this
/// process holds it mapped already for `engine`, that mapping); else why
/// not: `Miss` (no entry) or `Rebuilt` (an entry that cannot be used).
fn lookup(engine: &Engine, path: &Path, key: &[u8; KEY], kind: PluginKind) -> Result<Compiled, CacheStatus> {
    if let Some(mapped) = find_mapped(path, engine) {
        return Ok(mapped);
    }
    map_entry(engine, path, key, kind).map(|compiled| share_mapped(path, compiled))
}

/// The entries this process holds mapped, by path: a module loaded again
/// while a plugin holds it (the same plugin under several ids, a registry's
/// copies of one plugin) takes the mapping that plugin holds, rather than
/// mapping the file again (each mapping of an entry counts all its pages in
/// the process's resident memory again, and costs a deserialisation). Held
/// weakly: a mapping goes with the last plugin that holds it.
static MAPPED: std::sync::LazyLock<Mutex<MappedEntries>> = std::sync::LazyLock::new(Default::default);

#[derive(Default)]
struct MappedEntries {
    entries: HashMap<PathBuf, std::sync::Weak<Compiled>>,
    /// Entries left after the last sweep of those no plugin holds.
    after_sweep: usize,
}

/// The module mapped from `path` that a plugin of this process still holds,
/// if it was mapped for `engine`.
fn find_mapped(path: &Path, engine: &Engine) -> Option<Compiled> {
    let held = MAPPED.lock().unwrap_or_else(|e| e.into_inner()).entries.get(path)?.upgrade()?;
    held.is_for(engine).then(|| Compiled::clone(&held).with_mapping(Mapping::of(held)))
}

/// `compiled`, just mapped from `path`, holding the share that the next
/// loads of the entry find while it lives.
fn share_mapped(path: &Path, compiled: Compiled) -> Compiled {
    let held = Arc::new(compiled.clone());
    let mut mapped = MAPPED.lock().unwrap_or_else(|e| e.into_inner());
    mapped.entries.insert(path.to_owned(), Arc::downgrade(&held));
    // Entries whose plugins are gone are swept when the table has doubled
    // since the last sweep: it stays within twice the entries held.
    if mapped.entries.len() >= 2 * mapped.after_sweep.max(32) {
        mapped.entries.retain(|_, held| held.strong_count() > 0);
        mapped.after_sweep = mapped.entries.len();
    }
    drop(mapped);
    compiled.with_mapping(Mapping::of(held))
}

/// Check and map cache entry `path`.
fn map_entry(engine: &Engine, path: &Path, key: &[u8; KEY], kind: PluginKind) -> Result<Compiled, CacheStatus> {
    match std::fs::File::open(path) {
        Ok(mut file) => match check_file(&mut file, key).inspect(|()| crate::cache_folder::touch(&file)) {
            // SAFETY: the file's payload is what `Module::serialize` wrote
            // for this engine configuration (the key says so) and its
            // checksum matches; wasmtime checks its own header too. Entries
            // are replaced by renaming, never written in place, so the
            // mapped file does not change.
            Ok(()) => unsafe { Compiled::deserialize_file(engine, file, path, kind) }
                .map_err(|e| CacheStatus::Rebuilt(format!("wasmtime refused it ({e})"))),
            Err(reason) => Err(CacheStatus::Rebuilt(reason)),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(CacheStatus::Miss),
        Err(e) => Err(CacheStatus::Rebuilt(format!("it cannot be read ({e})"))),
    }
}

/// Compilations under way in this process, by the cache entry they will
/// write (a cache directory and a key: loads through another cache write
/// their own entry).
static COMPILING: std::sync::LazyLock<Mutex<HashMap<PathBuf, Arc<Slot>>>> = std::sync::LazyLock::new(Default::default);

/// One compilation's outcome, awaited by the loads that joined it: `None`
/// while it runs, then the module (`Some(None)` if it failed).
#[derive(Default)]
struct Slot {
    outcome: Mutex<Option<Option<Compiled>>>,
    ready: Condvar,
}

/// What joining a key's compilation gave.
enum Joined {
    /// Nobody was compiling it: this load does, and publishes the outcome.
    Leader(Compiling),
    /// Another load compiled it (`None`: it failed).
    Follower(Option<Compiled>),
}

/// The right to compile a key, held by the load that compiles it. Dropped
/// without [`Compiling::done`] (an error, a panic), it tells the waiting
/// loads that it failed, so each compiles on its own.
struct Compiling {
    entry: Option<PathBuf>,
    slot: Arc<Slot>,
}

impl Compiling {
    /// Compile the module of cache entry `entry`, or wait for the load
    /// compiling it. Called on a blocking thread (loads compile on tokio's
    /// blocking pool).
    fn join(entry: &Path) -> Joined {
        let slot = {
            let mut table = COMPILING.lock().unwrap_or_else(|e| e.into_inner());
            match table.get(entry) {
                Some(slot) => Arc::clone(slot),
                None => {
                    let slot = Arc::new(Slot::default());
                    table.insert(entry.to_owned(), Arc::clone(&slot));
                    return Joined::Leader(Compiling { entry: Some(entry.to_owned()), slot });
                }
            }
        };
        let mut outcome = slot.outcome.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(module) = &*outcome {
                return Joined::Follower(module.clone());
            }
            outcome = slot.ready.wait(outcome).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// A compilation nobody waits for.
    fn alone() -> Compiling {
        Compiling { entry: None, slot: Arc::default() }
    }

    /// Hand `module` to the loads waiting for it.
    fn done(mut self, module: &Compiled) {
        self.publish(Some(module.clone()));
    }

    fn publish(&mut self, module: Option<Compiled>) {
        let Some(entry) = self.entry.take() else { return };
        COMPILING.lock().unwrap_or_else(|e| e.into_inner()).remove(&entry);
        *self.slot.outcome.lock().unwrap_or_else(|e| e.into_inner()) = Some(module);
        self.slot.ready.notify_all();
    }
}

impl Drop for Compiling {
    fn drop(&mut self) {
        self.publish(None);
    }
}

/// The entry name: BLAKE3 over a format tag, wasmtime's version, the
/// engine's compatibility hash and the Wasm bytes. (A cryptographic hash:
/// no plugin may be made to find another's entry. BLAKE3 rather than
/// SHA-256 because a warm start hashes the whole plugin: 45 µs for 313 KB
/// here, against SHA-256's 185.)
fn key(engine: &Engine, wasm: &[u8], kind: PluginKind) -> [u8; KEY] {
    struct Blake3(blake3::Hasher);
    impl Hasher for Blake3 {
        fn finish(&self) -> u64 {
            0
        }
        fn write(&mut self, bytes: &[u8]) {
            self.0.update(bytes);
        }
    }
    let mut hasher = Blake3(blake3::Hasher::new());
    hasher.write(MAGIC);
    hasher.write(env!("CARGO_PKG_VERSION").as_bytes());
    hasher.write(kind.to_string().as_bytes());
    std::hash::Hash::hash(&engine.precompile_compatibility_hash(), &mut hasher);
    hasher.write(&(wasm.len() as u64).to_le_bytes());
    hasher.write(wasm);
    hasher.0.finalize().into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An entry: payload and trailer.
fn entry(key: &[u8; KEY], payload: &[u8]) -> Vec<u8> {
    let mut entry = Vec::with_capacity(payload.len() + TRAILER);
    entry.extend_from_slice(payload);
    entry.extend_from_slice(key);
    entry.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    entry.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    entry.extend_from_slice(MAGIC);
    entry
}

/// Whether the entry in `file` is sound for `key`: its trailer (read
/// first), then its payload's length and checksum, read in pieces (the
/// payload is mapped afterwards, not kept).
fn check_file(file: &mut std::fs::File, key: &[u8; KEY]) -> Result<(), String> {
    use std::io::{Read as _, Seek as _};
    let unreadable = |e: std::io::Error| format!("it cannot be read ({e})");
    let size = file.metadata().map_err(unreadable)?.len();
    if size < TRAILER as u64 {
        return Err("its trailer is not toolhost's".to_owned());
    }
    let mut trailer = [0u8; TRAILER];
    file.seek(std::io::SeekFrom::Start(size - TRAILER as u64)).map_err(unreadable)?;
    file.read_exact(&mut trailer).map_err(unreadable)?;
    let (length, sum) = check_trailer(&trailer, key, size - TRAILER as u64)?;
    file.seek(std::io::SeekFrom::Start(0)).map_err(unreadable)?;
    let mut crc = crc32fast::Hasher::new();
    let mut left = length;
    let mut buffer = vec![0u8; CHECK_PIECE];
    while left > 0 {
        let piece = &mut buffer[..left.min(CHECK_PIECE as u64) as usize];
        file.read_exact(piece).map_err(unreadable)?;
        crc.update(piece);
        left -= piece.len() as u64;
    }
    if crc.finalize() != sum {
        return Err("its checksum does not match its contents (the file is corrupt)".to_owned());
    }
    Ok(())
}

/// The payload length and checksum a trailer records, if it is toolhost's,
/// made for `key`, and `payload` bytes long.
fn check_trailer(trailer: &[u8; TRAILER], key: &[u8; KEY], payload: u64) -> Result<(u64, u32), String> {
    if &trailer[TRAILER - MAGIC.len()..] != MAGIC {
        return Err("its trailer is not toolhost's".to_owned());
    }
    if &trailer[..KEY] != key {
        return Err("it was made for another plugin or engine (its key is not the one it is named by: \
                    copied or renamed?)"
            .to_owned());
    }
    let length = u64::from_le_bytes(trailer[KEY..KEY + 8].try_into().expect("8 bytes"));
    let sum = u32::from_le_bytes(trailer[KEY + 8..KEY + 12].try_into().expect("4 bytes"));
    if payload != length {
        return Err(format!("its payload is {payload} bytes long, not {length} (the file is truncated)"));
    }
    Ok((length, sum))
}

/// Write an entry atomically, then trim the cache.
fn store(dir: &Path, path: &Path, key: &[u8; KEY], module: &Compiled) -> std::io::Result<()> {
    let payload = module.serialize().map_err(std::io::Error::other)?;
    crate::cache_folder::create_private_dir(dir)?;
    // Made by someone else in the meantime?
    if let Some(reason) = unsafe_dir(dir) {
        return Err(std::io::Error::other(reason));
    }
    let mut temp = tempfile::NamedTempFile::new_in(dir)?;
    temp.write_all(&entry(key, &payload))?;
    // Not synced: a sync took milliseconds off a cold start, and an entry
    // a crash leaves torn (or empty) fails its length, key or checksum on
    // the next lookup and is compiled again.
    temp.persist(path).map_err(|e| e.error)?;
    crate::cache_folder::trim(dir, path, MAX_ENTRIES, MAX_BYTES, |entry| {
        entry.extension().is_some_and(|x| x == "cwasm")
    });
    Ok(())
}

/// Why `dir` is not safe to keep machine code in, if it is not: it (or,
/// if it does not exist yet, nothing) must be a directory owned by the
/// current user and writable by no one else; its parent must be owned by
/// the current user or root and writable by no one else unless it has the
/// sticky bit (like `/tmp`), so that no one else can replace the directory.
#[cfg(unix)]
fn unsafe_dir(dir: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt as _;
    // SAFETY: `geteuid` has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let check = |path: &Path, parent: bool| -> Option<String> {
        let meta = match std::fs::metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => return Some(format!("{} cannot be inspected ({e})", path.display())),
        };
        let what = if parent { "its parent directory" } else { "the directory" };
        if !meta.is_dir() {
            return Some(format!("{what} {} is not a directory", path.display()));
        }
        if meta.uid() != me && !(parent && meta.uid() == 0) {
            return Some(format!("{what} {} is owned by another user (uid {}, not {me})", path.display(), meta.uid()));
        }
        let mode = meta.mode();
        if mode & 0o022 != 0 && !(parent && mode & 0o1000 != 0) {
            return Some(format!("{what} {} may be written by other users (mode {:o})", path.display(), mode & 0o7777));
        }
        None
    };
    check(dir, false).or_else(|| dir.parent().filter(|p| !p.as_os_str().is_empty()).and_then(|p| check(p, true)))
}

#[cfg(not(unix))]
fn unsafe_dir(_dir: &Path) -> Option<String> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `check_file` on these bytes.
    fn check_entry(bytes: &[u8], key: &[u8; KEY]) -> Result<(), String> {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(bytes).unwrap();
        check_file(&mut file, key)
    }

    fn is_entry(path: &Path) -> bool {
        path.extension().is_some_and(|x| x == "cwasm")
    }

    #[test]
    fn trimming_removes_the_least_recently_used_entries_first() {
        let dir = tempfile::tempdir().unwrap();
        let hour = std::time::Duration::from_secs(3600);
        let now = std::time::SystemTime::now();
        // Entry `i` was last used `5 - i` hours ago: 0 is the oldest.
        let paths: Vec<PathBuf> = (0..5)
            .map(|i| {
                let path = dir.path().join(format!("{i}.cwasm"));
                std::fs::write(&path, [0u8; 10]).unwrap();
                let file = std::fs::File::options().write(true).open(&path).unwrap();
                file.set_modified(now - hour * (5 - i)).unwrap();
                path
            })
            .collect();
        std::fs::write(dir.path().join("other.txt"), [0u8; 100]).unwrap();
        let left = || {
            let mut names: Vec<String> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        };
        // A hit on entry 1 marks it used now.
        crate::cache_folder::touch(&std::fs::File::open(&paths[1]).unwrap());
        // Within both bounds: nothing goes (other files are not entries).
        crate::cache_folder::trim(dir.path(), &paths[4], 5, 50, is_entry);
        assert_eq!(left().len(), 6);
        // Four entries at most: the least recently used (0) goes.
        crate::cache_folder::trim(dir.path(), &paths[4], 4, 1000, is_entry);
        assert_eq!(left(), ["1.cwasm", "2.cwasm", "3.cwasm", "4.cwasm", "other.txt"]);
        // 25 bytes at most: 2 and 3 go, then 4 and 1 are within bounds.
        crate::cache_folder::trim(dir.path(), &paths[4], 100, 25, is_entry);
        assert_eq!(left(), ["1.cwasm", "4.cwasm", "other.txt"]);
        // The entry just written stays, however old it looks.
        let old = dir.path().join("5.cwasm");
        std::fs::write(&old, [0u8; 10]).unwrap();
        std::fs::File::options().write(true).open(&old).unwrap().set_modified(now - hour * 9).unwrap();
        crate::cache_folder::trim(dir.path(), &old, 1, 1000, is_entry);
        assert_eq!(left(), ["5.cwasm", "other.txt"]);
    }

    #[test]
    fn entries_are_checked_before_use() {
        let key = [7; KEY];
        // Longer than one read, so that the checksum spans pieces.
        let payload: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let entry = entry(&key, &payload);
        assert_eq!(check_entry(&entry, &key), Ok(()));
        assert_eq!(&entry[..payload.len()], &payload[..], "the payload comes first, where wasmtime maps it");

        let mut flipped = entry.clone();
        flipped[100_000] ^= 1;
        assert!(check_entry(&flipped, &key).unwrap_err().contains("checksum"));
        // Cut short: the trailer is gone with the end of the file.
        assert!(check_entry(&entry[..entry.len() - 1], &key).unwrap_err().contains("trailer"));
        assert!(check_entry(&entry[..20], &key).unwrap_err().contains("trailer"));
        // Cut in the payload, trailer kept: the recorded length disagrees.
        let mut short = entry[..1000].to_vec();
        short.extend_from_slice(&entry[entry.len() - TRAILER..]);
        assert!(check_entry(&short, &key).unwrap_err().contains("truncated"));
        let garbage = b"\0asm garbage garbage garbage garbage garbage garbage garbage garbage garbage";
        assert!(check_entry(garbage, &key).unwrap_err().contains("trailer"));
        assert!(check_entry(&entry, &[8; KEY]).unwrap_err().contains("another plugin"));
    }

    #[cfg(unix)]
    #[test]
    fn directories_others_may_write_are_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("modules");
        assert_eq!(unsafe_dir(&dir), None, "not there yet, in a private parent");
        crate::cache_folder::create_private_dir(&dir).unwrap();
        assert_eq!(unsafe_dir(&dir), None);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(unsafe_dir(&dir).unwrap().contains("written by other users"), "{:?}", unsafe_dir(&dir));
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(unsafe_dir(&dir).unwrap().contains("parent"), "{:?}", unsafe_dir(&dir));
        // A sticky parent (like /tmp) is fine.
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert_eq!(unsafe_dir(&dir), None);
    }
}
