//! A plugin's code, on one tier or moving from the baseline compiler's to
//! Cranelift's ([`Tier`]).
//!
//! A plugin that missed the compiled-module cache starts on Winch's code
//! while Cranelift compiles it on a blocking thread. When Cranelift's
//! module is ready it replaces Winch's: new instances are made from it, and
//! a Winch instance is dropped when its call ends instead of going back to
//! the pool, so the pool turns over to Cranelift's code call by call. No
//! call is interrupted, and no instance of either tier is ever given the
//! other's code. Winch's module is freed with its last instance.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use wasmtime::Engine;

use crate::error::Fault;
use crate::runtime::Tier;
use crate::runtime::extism::Interface;
use crate::runtime::guest::HostEnv;
use crate::runtime::instance::{Instance, Module, PluginKind};

/// The module every new instance is made from, and what is the same on
/// either tier (read on every call without a lock).
pub(crate) struct Code {
    kind: PluginKind,
    interface: Option<Interface>,
    dynamic: bool,
    current: RwLock<Arc<Module>>,
    /// The tier the plugin started on.
    started: Tier,
    /// The baseline compiler's engine, while Cranelift's code may replace
    /// its code.
    baseline: Option<Engine>,
    /// Set once Cranelift's module has replaced the baseline's.
    upgraded: AtomicBool,
    /// Set once the pool's idle instances of the baseline's code went.
    swept: AtomicBool,
    /// `None` while Cranelift compiles; then the tier the plugin stays on.
    settled: tokio::sync::watch::Sender<Option<Tier>>,
}

impl Code {
    /// Code that stays what it is: compiled by `tier`'s compiler (built-in
    /// tools are `Optimized`).
    pub(crate) fn settled(module: Module, tier: Tier) -> Code {
        Code::new(module, tier, None)
    }

    /// Code compiled by the baseline compiler on `engine`, until
    /// [`upgrade`](Self::upgrade) replaces it.
    pub(crate) fn baseline(module: Module, engine: Engine) -> Code {
        Code::new(module, Tier::Baseline, Some(engine))
    }

    fn new(module: Module, started: Tier, baseline: Option<Engine>) -> Code {
        let settled = if baseline.is_some() { None } else { Some(started) };
        Code {
            started,
            kind: module.kind(),
            interface: module.interface(),
            dynamic: module.dynamic_tools(),
            current: RwLock::new(Arc::new(module)),
            baseline,
            upgraded: AtomicBool::new(false),
            swept: AtomicBool::new(false),
            settled: tokio::sync::watch::channel(settled).0,
        }
    }

    fn module(&self) -> Arc<Module> {
        Arc::clone(&self.current.read().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }

    pub(crate) fn kind(&self) -> PluginKind {
        self.kind
    }

    pub(crate) fn interface(&self) -> Option<Interface> {
        self.interface
    }

    pub(crate) fn dynamic_tools(&self) -> bool {
        self.dynamic
    }

    pub(crate) fn exports(&self, name: &str) -> bool {
        self.module().exports(name)
    }

    /// A new instance, of the best code there is now.
    pub(crate) async fn instantiate(&self, env: &Arc<HostEnv>) -> Result<Instance, Fault> {
        let module = self.module();
        module.instantiate(env).await
    }

    /// The tier new instances are made on.
    pub(crate) fn tier(&self) -> Tier {
        if self.upgraded.load(Ordering::Acquire) { Tier::Optimized } else { self.started }
    }

    /// The tier the plugin ends up on, once its background compile is over.
    pub(crate) async fn settled_tier(&self) -> Tier {
        let mut settled = self.settled.subscribe();
        match settled.wait_for(Option::is_some).await {
            Ok(tier) => tier.unwrap_or(Tier::Baseline),
            // (The sender lives as long as `self`.)
            Err(_) => self.tier(),
        }
    }

    /// Whether `instance` runs code that has since been replaced: it is
    /// dropped after its call rather than returned to the pool.
    pub(crate) fn outdated(&self, instance: &Instance) -> bool {
        self.upgraded.load(Ordering::Acquire) && self.baseline.as_ref().is_some_and(|engine| instance.runs_on(engine))
    }

    /// Whether the pool's idle instances of replaced code are yet to be
    /// dropped: true once, after the move to Cranelift's code.
    pub(crate) fn sweep_due(&self) -> bool {
        self.upgraded.load(Ordering::Acquire)
            && !self.swept.load(Ordering::Relaxed)
            && !self.swept.swap(true, Ordering::AcqRel)
    }

    /// Whether `instance` runs the baseline compiler's code.
    pub(crate) fn on_baseline(&self, instance: &Instance) -> bool {
        match &self.baseline {
            Some(engine) => instance.runs_on(engine),
            None => self.started == Tier::Baseline,
        }
    }

    /// Cranelift's module is ready: new instances are made from it.
    pub(crate) fn upgrade(&self, module: Module) {
        *self.current.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(module);
        self.upgraded.store(true, Ordering::Release);
        self.settled.send_replace(Some(Tier::Optimized));
    }

    /// Cranelift could not compile it (or never ran: the runtime shut
    /// down first): the plugin stays on the baseline. No change once
    /// settled.
    pub(crate) fn stay(&self) {
        self.settled.send_if_modified(|settled| settled.is_none() && settled.replace(Tier::Baseline).is_none());
    }
}

/// Held by a background compile: if it ends without settling the plugin's
/// tier (it failed, panicked, or was dropped unrun), the plugin stays on the
/// baseline, so that nobody waits for it forever.
pub(crate) struct Settling(pub(crate) std::sync::Weak<Code>);

impl Drop for Settling {
    fn drop(&mut self) {
        if let Some(code) = self.0.upgrade() {
            code.stay();
        }
    }
}
