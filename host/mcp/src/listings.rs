//! The `tools/list` answers of registries, kept until each changes.

use std::collections::HashMap;
use std::sync::Arc;

use toolhost::Registry;

use crate::wire;

/// The `tools/list` answers of registries, each kept until its registry
/// changes (its [`generation`](Registry::generation) moves): listing 10,000
/// tools does not clone and convert each tool's schemas again for every
/// client that lists them.
#[derive(Default)]
pub(crate) struct Listings(std::sync::Mutex<HashMap<(usize, Option<toolhost::Scopes>), Listing>>);

/// One registry's tools as `tools/list` lists them, for callers holding
/// some scopes.
struct Listing {
    /// The registry listed (its address is the key; a registry dropped and
    /// another made at the same address is not this one).
    registry: std::sync::Weak<Registry>,
    /// Its generation when listed.
    generation: u64,
    tools: Arc<Vec<rmcp::model::Tool>>,
}

/// Listings kept at most: one per registry (workspace) and set of scopes
/// listing at once. Past it, the map starts again.
const LISTINGS: usize = 256;

impl Listings {
    /// The tools of `registry` that callers holding `scopes` see, listed
    /// anew only if the registry changed since they were last listed.
    pub(crate) fn of(
        &self,
        registry: &Arc<Registry>,
        scopes: Option<&toolhost::Scopes>,
    ) -> Arc<Vec<rmcp::model::Tool>> {
        // Read before the tools are: a change after this is listed again
        // next time (its generation moves after its tools do).
        let generation = registry.generation();
        let key = (Arc::as_ptr(registry) as usize, scopes.cloned());
        let kept = |map: &HashMap<_, Listing>| {
            map.get(&key)
                .filter(|l| l.generation == generation && std::ptr::eq(l.registry.as_ptr(), Arc::as_ptr(registry)))
                .map(|l| Arc::clone(&l.tools))
        };
        if let Some(tools) = kept(&self.lock()) {
            return tools;
        }
        let tools: Arc<Vec<rmcp::model::Tool>> = Arc::new(
            registry
                .snapshot()
                .tools()
                .into_iter()
                .filter(|t| t.permits(scopes))
                .map(|t| wire::tool(t.exposed()))
                .collect(),
        );
        let mut map = self.lock();
        if map.len() >= LISTINGS {
            map.retain(|_, l| l.registry.strong_count() > 0);
            if map.len() >= LISTINGS {
                map.clear();
            }
        }
        map.insert(key, Listing { registry: Arc::downgrade(registry), generation, tools: Arc::clone(&tools) });
        tools
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(usize, Option<toolhost::Scopes>), Listing>> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
