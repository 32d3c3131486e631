//! Paths no read-write grant may hold.
//!
//! A directory granted read-write lets the plugin create, change and delete
//! everything under it. Some files there would give it more than the grant
//! says:
//!
//! - toolhost's compiled-module cache: an entry is machine code that
//!   toolhost maps and runs *outside* the sandbox. Its name (a SHA-256 of
//!   the Wasm and the engine's settings) and checksum are no secret, so a
//!   plugin that can write the directory can write an entry for its own
//!   Wasm, and run native code at its next load.
//! - what the embedding program protects with
//!   [`PluginBuilder::with_protected_path`](crate::PluginBuilder::with_protected_path).
//!
//! A registry refuses as well a toolset whose read-write grant holds its
//! toolsets file (a plugin could grant itself anything, and a watched file
//! is applied at once) or another toolset's plugin file (a plugin could
//! replace another's code, and get its grants and secrets at its next
//! load): `registry.rs`, `protect`, with every toolset's paths resolved once.
//!
//! Such a grant is refused when the plugin loads, naming the grant and what
//! it holds. A read-only grant may hold them: reading them gives the
//! plugin nothing the grant does not.
//!
//! Where the plugin's secret provider reads secrets from
//! ([`SecretProvider::files`](crate::SecretProvider::files): a
//! `FileSecretProvider`'s directory) may not be held by any grant, read-only
//! either: the plugin would read every secret there, granted or not.
//!
//! (The download cache needs no protection: every download is kept under
//! its SHA-256 digest and checked again whenever it is read.)

use std::path::{Component, Path, PathBuf};

use crate::error::PolicyError;
use crate::sandbox::{Access, PathGrant};

/// A file or directory of the host that no read-write grant may hold (no
/// grant at all, if `unreadable`), and what it is (for the error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Protected {
    pub(crate) path: PathBuf,
    pub(crate) what: String,
    pub(crate) unreadable: bool,
}

impl Protected {
    /// A compiled-module cache directory.
    pub(crate) fn module_cache(dir: &Path) -> Protected {
        Protected {
            unreadable: false,
            path: dir.to_path_buf(),
            what: "toolhost's compiled-module cache, whose machine code runs outside the sandbox (grant a \
                   directory that does not hold it, or keep the cache elsewhere: TOOLHOST_CACHE_DIR for the CLI)"
                .to_owned(),
        }
    }
}

/// The first grant that holds a protected path (a read-write one, unless
/// the path is unreadable too), as the policy error that refuses it.
pub(crate) fn check(grants: &[PathGrant], protected: &[Protected]) -> Result<(), PolicyError> {
    let all = Reach::of(grants);
    let writable = all.read_write();
    for item in protected {
        let reach = if item.unreadable { &all } else { &writable };
        if reach.is_empty() {
            continue;
        }
        let Some(path) = resolved(&item.path) else { continue };
        if let Some(grant) = reach.holder(&path) {
            return Err(refusal(grant, &path, &item.what));
        }
    }
    Ok(())
}

/// The error refusing `grant`, which holds `path` (resolved), `what` that
/// is.
pub(crate) fn refusal(grant: &PathGrant, path: &Path, what: &str) -> PolicyError {
    let verb = if grant.access == Access::ReadWrite { "write" } else { "read" };
    PolicyError::Path {
        grant: grant.to_string(),
        reason: format!("it lets the plugin {verb} {}, which is {what}", path.display()),
    }
}

/// Grants with their directories resolved, once, to test many paths
/// against.
#[derive(Debug, Clone, Default)]
pub(crate) struct Reach {
    grants: Vec<(PathGrant, PathBuf)>,
}

impl Reach {
    /// `grants`, resolved (one whose directory cannot be resolved reaches
    /// nothing: its check at load refuses it anyway).
    pub(crate) fn of<'a>(grants: impl IntoIterator<Item = &'a PathGrant>) -> Reach {
        let grants = grants.into_iter().filter_map(|grant| Some((grant.clone(), resolved(&grant.host)?))).collect();
        Reach { grants }
    }

    /// The read-write ones.
    pub(crate) fn read_write(&self) -> Reach {
        let grants = self.grants.iter().filter(|(grant, _)| grant.access == Access::ReadWrite).cloned().collect();
        Reach { grants }
    }

    /// No grant at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.grants.is_empty()
    }

    /// The first grant that holds `path` (resolved).
    pub(crate) fn holder(&self, path: &Path) -> Option<&PathGrant> {
        self.grants.iter().find(|(_, dir)| path.starts_with(dir)).map(|(grant, _)| grant)
    }
}

/// `path` with symbolic links and `.`/`..` resolved, as far as it exists
/// (a cache directory may not be made yet): the canonical form of its
/// longest existing ancestor, then the rest. `None` if even that cannot be
/// worked out.
pub(crate) fn resolved(path: &Path) -> Option<PathBuf> {
    let absolute = std::path::absolute(path).ok()?;
    let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
    let mut existing = absolute.as_path();
    loop {
        match std::fs::canonicalize(existing) {
            Ok(mut canonical) => {
                for name in rest.iter().rev() {
                    canonical.push(name);
                }
                return Some(canonical);
            }
            Err(_) => match existing.components().next_back()? {
                Component::Normal(name) => {
                    rest.push(name);
                    existing = existing.parent()?;
                }
                // `..` past a directory that does not exist: give up
                // rather than guess.
                _ => return None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(host: &Path, access: Access) -> PathGrant {
        PathGrant { host: host.to_path_buf(), guest: None, access }
    }

    fn protected(path: &Path) -> Protected {
        Protected { path: path.to_path_buf(), what: "a test's file".to_owned(), unreadable: false }
    }

    #[test]
    fn a_read_write_grant_holding_a_protected_path_is_refused() {
        let home = tempfile::tempdir().unwrap();
        let cache = home.path().join(".cache/toolhost");
        std::fs::create_dir_all(&cache).unwrap();
        let error = check(&[grant(home.path(), Access::ReadWrite)], &[Protected::module_cache(&cache)]).unwrap_err();
        let message = error.to_string();
        assert!(message.contains(&home.path().display().to_string()), "{message}");
        assert!(message.contains("compiled-module cache"), "{message}");
        // The directory itself, too.
        assert!(check(&[grant(&cache, Access::ReadWrite)], &[protected(&cache)]).is_err());
    }

    #[test]
    fn read_only_grants_and_grants_beside_it_are_not() {
        let home = tempfile::tempdir().unwrap();
        let cache = home.path().join("cache");
        let data = home.path().join("data");
        std::fs::create_dir_all(&cache).unwrap();
        std::fs::create_dir_all(data.join("inner")).unwrap();
        assert!(check(&[grant(home.path(), Access::ReadOnly)], &[protected(&cache)]).is_ok());
        assert!(check(&[grant(&data, Access::ReadWrite)], &[protected(&cache)]).is_ok());
        // `data` is a prefix of `database` as a string, not as a path.
        let database = home.path().join("database");
        std::fs::create_dir_all(&database).unwrap();
        assert!(check(&[grant(&data, Access::ReadWrite)], &[protected(&database)]).is_ok());
        // A grant inside the protected directory does not hold it.
        assert!(check(&[grant(&data.join("inner"), Access::ReadWrite)], &[protected(&data)]).is_ok());
    }

    #[test]
    fn an_unreadable_path_is_refused_to_read_only_grants_too() {
        let home = tempfile::tempdir().unwrap();
        let secrets = home.path().join("secrets");
        std::fs::create_dir_all(&secrets).unwrap();
        let unreadable = Protected { unreadable: true, ..protected(&secrets) };
        let error = check(&[grant(home.path(), Access::ReadOnly)], std::slice::from_ref(&unreadable)).unwrap_err();
        assert!(error.to_string().contains("lets the plugin read"), "{error}");
        let error = check(&[grant(&secrets, Access::ReadWrite)], std::slice::from_ref(&unreadable)).unwrap_err();
        assert!(error.to_string().contains("lets the plugin write"), "{error}");
        assert!(check(&[grant(&home.path().join("secrets-not"), Access::ReadOnly)], &[unreadable]).is_ok());
    }

    #[test]
    fn paths_are_compared_resolved() {
        let home = tempfile::tempdir().unwrap();
        let real = home.path().join("real");
        std::fs::create_dir_all(real.join("sub")).unwrap();
        // A cache that is not made yet, named through `..`.
        let cache = real.join("sub/../later/cache");
        assert!(check(&[grant(&real, Access::ReadWrite)], &[protected(&cache)]).is_err());
        // A grant through a symbolic link to the directory holding it.
        #[cfg(unix)]
        {
            let link = home.path().join("link");
            std::os::unix::fs::symlink(&real, &link).unwrap();
            assert!(check(&[grant(&link, Access::ReadWrite)], &[protected(&real.join("later"))]).is_err());
            // And a protected path named through the link.
            assert!(check(&[grant(&real, Access::ReadWrite)], &[protected(&link.join("x"))]).is_err());
        }
    }
}
