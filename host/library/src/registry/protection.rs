//! What a Wasm toolset may not be granted: the files of the other
//! toolsets of its registry (their plugins, and what they may write).

use super::*;

/// What a Wasm toolset's grants are checked against: the other toolsets
/// of the registry (loaded, or being loaded beside it), each with its
/// plugin file and its read-write grants, resolved once for all the
/// toolsets checked against them.
#[derive(Debug, Clone)]
pub(super) struct Peer {
    id: String,
    /// Its plugin file, resolved (`None` also when no toolset of the set
    /// has a read-write grant: then nothing needs it).
    file: Option<PathBuf>,
    /// Its read-write grants.
    writable: Reach,
    /// Loaded (and staying): its grants were checked before, and a new
    /// toolset's plugin file must not be in their reach. (One being loaded
    /// beside it is refused itself if its grants reach another's file.)
    loaded: bool,
}

/// The peers of `configs`, each with whether it is loaded and stays. Paths
/// are resolved here, once (a registry of a thousand toolsets checks each
/// against all the others), and files only when some toolset has a
/// read-write grant.
pub(super) fn peers<'a>(configs: impl IntoIterator<Item = (&'a ToolsetConfig, bool)>) -> Arc<[Peer]> {
    let configs: Vec<(&ToolsetConfig, bool, Reach)> = (configs.into_iter())
        .filter(|(config, _)| config.kind == "uri")
        .map(|(config, loaded)| (config, loaded, writable(config)))
        .collect();
    let any_writable = configs.iter().any(|(_, _, writable)| !writable.is_empty());
    (configs.into_iter())
        .map(|(config, loaded, writable)| Peer {
            loaded,
            id: config.id.clone(),
            file: any_writable.then(|| own_file(config)).flatten(),
            writable,
        })
        .collect()
}

/// A toolset's plugin file, resolved, if it is a local file.
pub(super) fn own_file(config: &ToolsetConfig) -> Option<PathBuf> {
    match &config.source {
        Some(PluginSource::File(file)) => protected::resolved(file),
        _ => None,
    }
}

/// A toolset's read-write grants, resolved.
pub(super) fn writable(config: &ToolsetConfig) -> Reach {
    Reach::of(config.policy.allowed_paths.iter().filter(|grant| grant.access == crate::Access::ReadWrite))
}

/// A Wasm toolset may not write the files that say what it and the other
/// toolsets run: its toolsets file (it could grant itself anything, and a
/// watched file is applied at once), nor another toolset's plugin file (it
/// could run as that toolset, with its grants and secrets). And its own
/// plugin file may not be in reach of a loaded toolset's read-write grant.
pub(super) fn protect(config: &ToolsetConfig, peers: &[Peer]) -> Result<(), Error> {
    let refuse = |source: crate::PolicyError| Error::Policy { plugin: config.id.clone(), source };
    let others = || peers.iter().filter(|peer| peer.id != config.id);
    let own_grants = writable(config);
    if !own_grants.is_empty() {
        if let Some(file) = config.file.as_deref().and_then(protected::resolved)
            && let Some(grant) = own_grants.holder(&file)
        {
            let what = "the toolsets file this toolset is configured in (a plugin that can change it can grant \
                        itself anything)";
            return Err(refuse(protected::refusal(grant, &file, what)));
        }
        for peer in others() {
            if let Some(file) = &peer.file
                && let Some(grant) = own_grants.holder(file)
            {
                let what = format!(
                    "the plugin file of toolset `{}` (a plugin that can change it runs as that toolset, with its \
                     grants and secrets)",
                    peer.id
                );
                return Err(refuse(protected::refusal(grant, file, &what)));
            }
        }
    }
    let mut writers = others().filter(|peer| peer.loaded && !peer.writable.is_empty()).peekable();
    if writers.peek().is_some()
        && let Some(own) = own_file(config)
    {
        for peer in writers {
            if let Some(grant) = peer.writable.holder(&own) {
                return Err(refuse(crate::PolicyError::Path {
                    grant: grant.to_string(),
                    reason: format!(
                        "toolset `{}` is granted it read-write, and it holds this toolset's plugin file {} (that \
                         toolset could run as this one, with its grants and secrets)",
                        peer.id,
                        own.display()
                    ),
                }));
            }
        }
    }
    Ok(())
}
