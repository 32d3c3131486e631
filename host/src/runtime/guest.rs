//! What both kinds of plugin instance share: a store with the memory
//! budget, the per-call deadline and fuel, and a WASI context granting only
//! what the policy grants.

use std::time::Instant;

use wasmtime::{Store, StoreContextMut, UpdateDeadline};
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use super::extism::{HostEnv, MemoryBudget};
use super::stdio::Tail;
use super::{EngineKind, Stop, engine};
use crate::error::{Fault, FaultKind};
use crate::sandbox::Access;

/// The data of a store, as the shared machinery needs it.
pub(crate) trait Guest: Send + 'static {
    /// The plugin's grants and limits.
    fn env(&self) -> &HostEnv;
    /// When the running call must stop.
    fn deadline(&self) -> Option<Instant>;
    /// Set it.
    fn set_deadline(&mut self, deadline: Option<Instant>);
    /// The memory budget (the store's resource limiter).
    fn memory(&mut self) -> &mut MemoryBudget;
}

/// A store for `state` on the shared engine: limited, with the epoch
/// callback, armed for its first run (instantiation and start-up code).
pub(crate) fn new_store<T: Guest>(kind: EngineKind, state: T) -> Result<Store<T>, Fault> {
    let engine = engine(kind).map_err(|message| Fault { kind: FaultKind::Runtime, message })?;
    let mut store = Store::new(engine, state);
    store.limiter(|state| state.memory());
    store.epoch_deadline_callback(on_tick::<T>);
    arm(&mut store);
    Ok(store)
}

/// Set the deadline of whatever runs next in this store, and its fuel.
pub(crate) fn arm<T: Guest>(store: &mut Store<T>) {
    let limits = &store.data().env().limits;
    let deadline = limits.timeout.map(|t| Instant::now() + t);
    let fuel = limits.fuel;
    store.data_mut().set_deadline(deadline);
    if let Some(fuel) = fuel {
        // Only fails on an engine without fuel, which a fuel limit never gets.
        let _ = store.set_fuel(fuel);
    }
    store.set_epoch_deadline(1);
}

/// At every epoch tick: stop the call if its deadline passed, else yield to
/// the executor and run on.
fn on_tick<T: Guest>(store: StoreContextMut<'_, T>) -> wasmtime::Result<UpdateDeadline> {
    if store.data().deadline().is_some_and(|deadline| Instant::now() >= deadline) {
        return Err(wasmtime::Error::new(Stop::Timeout));
    }
    Ok(UpdateDeadline::Yield(1))
}

/// A WASI context builder that grants the policy's directories and nothing
/// else, with stdout and stderr kept in `stdout` and `stderr`.
pub(crate) fn wasi(env: &HostEnv, stdout: &Tail, stderr: &Tail) -> Result<WasiCtxBuilder, Fault> {
    let mut wasi = WasiCtxBuilder::new();
    wasi.stdout(stdout.clone()).stderr(stderr.clone()).allow_tcp(false).allow_udp(false).allow_ip_name_lookup(false);
    for grant in &env.allowed_paths {
        let perms = match grant.access {
            Access::ReadOnly => FsPerms::ReadOnly,
            Access::ReadWrite => FsPerms::ReadWrite,
        };
        let guest = grant.guest_path().to_string_lossy();
        wasi.preopened_dir(&grant.host, guest.as_ref(), perms).map_err(|e| Fault {
            kind: FaultKind::Runtime,
            message: format!("cannot open the granted directory {}: {e}", grant.host.display()),
        })?;
    }
    Ok(wasi)
}
