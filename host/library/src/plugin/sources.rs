//! Plugins configured on a [`Runtime`]: from a `.wasm` file, from bytes,
//! from the embedding program's built-in tools, or from wherever a
//! toolsets file's source says (a download checked against its pin).

use std::sync::Arc;

use super::PluginBuilder;
use crate::builtin::BuiltinToolset;
use crate::config::PluginSource;
use crate::error::Error;
use crate::runtime::Runtime;

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
    /// download checked against its pin (from the
    /// [download cache](crate::RuntimeBuilder::with_download_cache) when it is
    /// there).
    ///
    /// # Errors
    ///
    /// [`Error::Load`] with the [`SourceError`](crate::SourceError)
    /// as its source when a download fails, does not match its pin, or
    /// this build cannot fetch from such a source.
    pub async fn plugin_from_source(&self, source: &PluginSource, name: &str) -> Result<PluginBuilder, Error> {
        let fetched = match source {
            PluginSource::File(path) => return Ok(self.plugin_from_file(path)),
            PluginSource::Https(plugin) => {
                crate::source::fetch_https(plugin, self.download_cache(), self.download_hosts()).await
            }
            PluginSource::Oci(plugin) => {
                crate::source::fetch_oci(plugin, self.download_cache(), self.download_hosts()).await
            }
        };
        match fetched {
            Ok(fetched) => {
                if let Some(signer) = &fetched.signer {
                    tracing::info!(plugin = name, %signer, "plugin signature verified");
                }
                tracing::debug!(
                    plugin = name,
                    from_cache = fetched.from_cache,
                    bytes = fetched.wasm.len(),
                    "plugin fetched"
                );
                let mut builder = self.plugin_from_bytes(fetched.wasm);
                builder.signer = fetched.signer;
                Ok(builder)
            }
            Err(e) => Err(Error::Load { plugin: name.to_owned(), message: e.to_string(), source: Some(Box::new(e)) }),
        }
    }
}
