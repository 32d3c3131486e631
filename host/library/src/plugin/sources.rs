//! Plugins configured on a [`Runtime`]: from a `.wasm` file, from bytes,
//! from the embedding program's built-in tools, or from wherever a
//! toolsets file's source says (a download checked against its pin).

use std::sync::Arc;

use super::PluginBuilder;
use crate::builtin::BuiltinToolset;
use crate::config::PluginSource;
use crate::error::Error;
use crate::runtime::Runtime;
use crate::source::{FetchedPlugin, RemotePlugin, SourceError};

impl Runtime {
    /// Configure a plugin loaded from a `.wasm` file, on this runtime.
    pub fn plugin_from_file(&self, path: impl AsRef<std::path::Path>) -> PluginBuilder {
        PluginBuilder::from_file(self.clone(), path.as_ref())
    }

    /// Configure a "plugin" whose tools are the embedding program's own
    /// ([`BuiltinToolset`]): no Wasm, the same
    /// checks, approvals, limits and telemetry as a plugin's tools.
    pub fn plugin_from_builtin(&self, toolset: BuiltinToolset) -> PluginBuilder {
        PluginBuilder::from_builtin(self.clone(), Arc::new(toolset))
    }

    /// Configure a plugin loaded from Wasm bytes, on this runtime.
    pub fn plugin_from_bytes(&self, wasm: impl Into<Arc<[u8]>>) -> PluginBuilder {
        PluginBuilder::from_bytes(self.clone(), wasm.into())
    }

    /// Configure a plugin from wherever `source` says: a file, or a
    /// download checked against its pin and, when its source asks, its
    /// signature (from the
    /// [download cache](crate::RuntimeBuilder::with_download_cache) when it is
    /// there).
    ///
    /// # Errors
    ///
    /// [`Error::Load`] with the [`SourceError`](crate::SourceError)
    /// as its source when a download fails, does not match its pin or its
    /// signature, or this build cannot fetch from such a source.
    pub async fn plugin_from_source(&self, source: &PluginSource, name: &str) -> Result<PluginBuilder, Error> {
        let remote = match source {
            PluginSource::File(path) => return Ok(self.plugin_from_file(path)),
            PluginSource::Https(plugin) | PluginSource::Oci(plugin) => plugin,
        };
        let fetched = self.fetch_plugin(remote, name).await?;
        tracing::debug!(plugin = name, from_cache = fetched.from_cache, bytes = fetched.wasm.len(), "plugin fetched");
        if let Some(signer) = &fetched.signer {
            tracing::info!(plugin = name, %signer, "plugin signature verified");
        }
        let mut builder = self.plugin_from_bytes(fetched.wasm);
        builder.signer = fetched.signer;
        Ok(builder)
    }

    /// Download a plugin (or read it from the download cache), check it
    /// against its pin and, when its source asks, its signature, without
    /// loading it: what `toolhost verify` reports. An `oci://` URL is
    /// pulled from its registry, any other downloaded over HTTPS. `name`
    /// names it in the error.
    ///
    /// # Errors
    ///
    /// [`Error::Load`] with the [`SourceError`](crate::SourceError) as its
    /// source, as [`Runtime::plugin_from_source`].
    pub async fn fetch_plugin(&self, plugin: &RemotePlugin, name: &str) -> Result<FetchedPlugin, Error> {
        let fetched = if plugin.url.starts_with("oci://") {
            crate::source::fetch_oci(plugin, self.download_cache(), self.download_hosts()).await
        } else {
            crate::source::fetch_https(plugin, self.download_cache(), self.download_hosts()).await
        };
        fetched.map_err(|e| Error::Load { plugin: name.to_owned(), message: e.to_string(), source: Some(Box::new(e)) })
    }

    /// The manifest digest an OCI reference's tag names now
    /// (`oci://registry/repository:tag`), asked of its registry over HTTPS
    /// (trusting `ca_file`'s authorities instead of the built-in roots, if
    /// given), within the runtime's download hosts: what to pin.
    ///
    /// # Errors
    ///
    /// [`SourceError`] when the registry cannot be reached or answers no
    /// digest, or this build has no `oci` feature.
    pub async fn resolve_oci_tag(
        &self,
        reference: &str,
        ca_file: Option<&std::path::Path>,
    ) -> Result<crate::Sha256Digest, SourceError> {
        crate::source::resolve_oci_tag(reference, ca_file, self.download_hosts()).await
    }
}
