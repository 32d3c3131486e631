//! Open files per instance, capped.
//!
//! A directory grant lets a guest open files, and an open file is a host
//! file descriptor held for as long as the guest keeps it, in a pooled
//! instance as long as the instance lives. Unbounded, one plugin could use
//! up the process's descriptors, and every other plugin's files and HTTP
//! would fail ("Too many open files"). So each instance may hold at most
//! [`MAX_OPEN_FILES`](super::guest::MAX_OPEN_FILES) files it opened; one open more is refused with a WASI
//! error the guest sees as a failed open (`EMFILE` under WASI 0.1, `quota`
//! under WASI 0.2), and nothing else happens.
//!
//! `wasmtime-wasi` has no such limit of its own, so the functions that open
//! and close files are wrapped: under WASI 0.1 `path_open`, `fd_close` and
//! `fd_renumber` (through the functions `wiggle` generates for the
//! adapter), under WASI 0.2 `descriptor.open-at` (a descriptor the guest
//! dropped is gone from the resource table, which is checked before an
//! open).
//!
//! File operations run on the calling thread (`wasmtime-wasi`'s
//! `allow_blocking_current_thread`), not as a hop to tokio's blocking pool
//! each: a directory walk makes several per entry, and the hops made it
//! ~17× slower. An operation on the calling thread cannot be cut short by
//! the call's deadline, so what could block forever is kept away from it:
//! - only regular files and directories open; a FIFO, a device or a socket
//!   in a granted directory is refused (`EACCES`, WASI 0.2 `access`)
//!   before anything opens it (opening a FIFO to read waits for a writer);
//! - WASI 0.1's single relative sleep, which `wasmtime-wasi` turns into a
//!   `std::thread::sleep` when blocking is allowed, waits on the runtime's
//!   ticker instead, so the deadline still ends a napping guest; one with
//!   nowhere valid to write its event traps at once (`wasmtime-wasi` would
//!   sleep on the thread first, and only then trap).
//!
//! Clocks: a sleep (WASI 0.1's, and WASI 0.2's `subscribe-duration` and
//! `subscribe-instant`, which `wasmtime-wasi` waits on with `tokio::time`)
//! is woken by the runtime's ticker, so a guest that sleeps cannot panic
//! the host in an embedder's runtime without tokio's time driver. (WASI
//! 0.1's `poll_oneoff` of several subscriptions at once is still
//! `wasmtime-wasi`'s own.)

use wasmtime::{AsContextMut as _, Caller};
use wasmtime_wasi::p1::types::{self as p1_types, Errno, Filetype};
use wasmtime_wasi::p1::wasi_snapshot_preview1::{self as p1, WasiSnapshotPreview1 as _};
use wiggle::GuestPtr;

use super::guest::Guest;
use super::outcome::Stop;
#[cfg(feature = "component")]
pub(crate) use p2::{cap_p2, clock_p2, resource_table};

/// WASI 0.1's import module.
const WASI_P1: &str = "wasi_snapshot_preview1";

/// A function of WASI 0.1, run with the guest's memory and the instance's
/// WASI context, as `wiggle`'s own glue runs it.
macro_rules! with_p1 {
    ($caller:ident, |$wasi:ident, $memory:ident| $call:expr) => {{
        let fuel = $caller.as_context_mut().hostcall_fuel();
        let Some(wasmtime::Extern::Memory(exported)) = $caller.get_export("memory") else {
            return Err(wasmtime::Error::new(Stop::Host("WASI needs the plugin to export its memory".to_owned())));
        };
        let (bytes, state) = exported.data_and_store_mut(&mut $caller);
        let $wasi = state.wasi_p1();
        $wasi.set_hostcall_fuel(fuel);
        let $memory = &mut wiggle::GuestMemory::Unshared(bytes);
        let result = $call.await;
        (result, exported)
    }};
}

/// The data of a store whose guest uses WASI 0.1.
pub(crate) trait P1Guest: Guest {
    /// Its WASI 0.1 context.
    fn wasi_p1(&mut self) -> &mut wasmtime_wasi::p1::WasiP1Ctx;
}

/// Wrap WASI 0.1's `path_open`, `fd_close` and `fd_renumber` in `linker`
/// (defined already) with the open-file cap, and `poll_oneoff` with a timer
/// on the runtime's ticker, bounded by the call's deadline.
pub(crate) fn cap_p1<T: P1Guest>(linker: &mut wasmtime::Linker<T>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    define_path_open(linker)?;
    define_descriptors(linker)?;
    define_poll(linker)?;
    linker.allow_shadowing(false);
    Ok(())
}

/// `path_open`, counted against the open-file cap, refusing what could
/// block the thread.
fn define_path_open<T: P1Guest>(linker: &mut wasmtime::Linker<T>) -> wasmtime::Result<()> {
    type PathOpen = (i32, i32, i32, i32, i32, i64, i64, i32, i32);
    linker.func_wrap_async(
        WASI_P1,
        "path_open",
        |mut caller: Caller<'_, T>, (dir, lookup, path, path_len, oflags, base, inheriting, fdflags, out): PathOpen| {
            Box::new(async move {
                if caller.data().core().files.full() {
                    return Ok(Errno::Mfile as i32);
                }
                // What is there now, as the open would find it: a file
                // that could block the thread is not opened.
                let target = GuestPtr::<str>::new((path as u32, path_len as u32));
                let flags = p1_types::Lookupflags::from_bits_truncate(lookup as u32);
                let (stat, _) = with_p1!(caller, |wasi, memory| wasi.path_filestat_get(
                    memory,
                    p1_types::Fd::from(dir as u32),
                    flags,
                    target
                ));
                // Anything but an answer (no such file, not allowed, a
                // trap) is left to the open, which meets it too.
                if let Ok(stat) = stat
                    && !matches!(stat.filetype, Filetype::RegularFile | Filetype::Directory | Filetype::SymbolicLink)
                {
                    return Ok(Errno::Acces as i32);
                }
                let (errno, memory) = with_p1!(caller, |wasi, memory| p1::path_open(
                    wasi, memory, dir, lookup, path, path_len, oflags, base, inheriting, fdflags, out
                ));
                let errno: i32 = errno?;
                if errno == Errno::Success as i32 {
                    // The new descriptor was written at `out` (checked by
                    // the call that wrote it).
                    let at = out as u32 as usize;
                    let fd = memory.data(&caller).get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                    if let Some(fd) = fd {
                        caller.data_mut().core_mut().files.opened(fd);
                    }
                }
                Ok(errno)
            })
        },
    )?;
    Ok(())
}

/// `fd_close` and `fd_renumber`, kept in the open-file count.
fn define_descriptors<T: P1Guest>(linker: &mut wasmtime::Linker<T>) -> wasmtime::Result<()> {
    linker.func_wrap_async(WASI_P1, "fd_close", |mut caller: Caller<'_, T>, (fd,): (i32,)| {
        Box::new(async move {
            let (errno, _) = with_p1!(caller, |wasi, memory| p1::fd_close(wasi, memory, fd));
            let errno: i32 = errno?;
            if errno == Errno::Success as i32 {
                caller.data_mut().core_mut().files.closed(fd as u32);
            }
            Ok(errno)
        })
    })?;
    linker.func_wrap_async(WASI_P1, "fd_renumber", |mut caller: Caller<'_, T>, (from, to): (i32, i32)| {
        Box::new(async move {
            let (errno, _) = with_p1!(caller, |wasi, memory| p1::fd_renumber(wasi, memory, from, to));
            let errno: i32 = errno?;
            if errno == Errno::Success as i32 {
                caller.data_mut().core_mut().files.renumbered(from as u32, to as u32);
            }
            Ok(errno)
        })
    })?;
    Ok(())
}

/// `poll_oneoff`: one relative timer is a nap on the runtime's ticker;
/// anything else is WASI's own.
fn define_poll<T: P1Guest>(linker: &mut wasmtime::Linker<T>) -> wasmtime::Result<()> {
    linker.func_wrap_async(
        WASI_P1,
        "poll_oneoff",
        |mut caller: Caller<'_, T>, (subscriptions, events, count, written): (i32, i32, i32, i32)| {
            Box::new(async move {
                match relative_sleep(&mut caller, subscriptions, events, written, count) {
                    // A timer, as `wasmtime-wasi` waits when blocking is
                    // not allowed: the call's deadline drops this future.
                    Nap::Sleep(nap) => {
                        let ticker = caller.data().core().env.ticker.clone();
                        wake_at(&ticker, std::time::Instant::now().checked_add(nap)).await;
                        Ok(Errno::Success as i32)
                    }
                    // `wasmtime-wasi` would sleep on the thread first, then
                    // trap on the pointer: trap at once.
                    Nap::BadPointer => Err(wasmtime::Error::new(Stop::Host(
                        "poll_oneoff: its event or count pointer is out of bounds or misaligned".to_owned(),
                    ))),
                    Nap::NotOne => {
                        let (errno, _) = with_p1!(caller, |wasi, memory| p1::poll_oneoff(
                            wasi,
                            memory,
                            subscriptions,
                            events,
                            count,
                            written
                        ));
                        errno
                    }
                }
            })
        },
    )?;
    Ok(())
}

/// Wait until `at` on the runtime's ticker, not on `tokio::time`: an
/// embedder's runtime may have no time driver, and `tokio::time` panics
/// without one. `None` (a nap too long to represent) waits until the
/// call's deadline drops the wait.
async fn wake_at(ticker: &super::ticker::Ticker, at: Option<std::time::Instant>) {
    match at {
        Some(at) => ticker.alarm(at).await,
        None => std::future::pending().await,
    }
}

/// The size of WASI 0.1's `subscription` and `event`.
const SUBSCRIPTION: usize = 48;
const EVENT: usize = 32;

/// What a `poll_oneoff` is, as far as `wasmtime-wasi`'s on-thread sleep
/// is concerned.
enum Nap {
    /// One valid relative-clock subscription: its event and the count are
    /// written (the sleep cannot fail); wait this long.
    Sleep(std::time::Duration),
    /// One valid relative-clock subscription, but nowhere valid to write
    /// its event or the count.
    BadPointer,
    /// Anything else (several subscriptions, another kind, an absolute
    /// time, a subscription `wasmtime-wasi` cannot read or refuses):
    /// `wasmtime-wasi` answers it without sleeping on the thread.
    NotOne,
}

/// Classify a `poll_oneoff` exactly where `wasmtime-wasi` would sleep on
/// the thread: one subscription, readable (in bounds, 8-aligned), a clock
/// with a known id and known flags, not an absolute time.
fn relative_sleep<T>(caller: &mut Caller<'_, T>, subscriptions: i32, events: i32, written: i32, count: i32) -> Nap {
    let Some(wasmtime::Extern::Memory(memory)) = caller.get_export("memory") else { return Nap::NotOne };
    let bytes = memory.data_mut(caller);
    let at = |pointer: i32, size: usize, align: usize| {
        let start = pointer as u32 as usize;
        start
            .is_multiple_of(align)
            .then_some(start)
            .filter(|&start| start.checked_add(size).is_some_and(|end| end <= bytes.len()))
    };
    let Some(sub) = at(subscriptions, SUBSCRIPTION, 8).filter(|_| count == 1) else { return Nap::NotOne };
    let (event, written) = (at(events, EVENT, 8), at(written, 4, 4));
    let subscription: [u8; SUBSCRIPTION] = bytes[sub..sub + SUBSCRIPTION].try_into().expect("48 bytes");
    let word = |at: usize| u64::from_le_bytes(subscription[at..at + 8].try_into().expect("8 bytes"));
    // The tag (0: clock), then the clock's id (0–3), timeout, precision,
    // flags (bit 0, the only one: the timeout is an absolute time).
    let (tag, clock, timeout) =
        (subscription[8], u32::from_le_bytes(subscription[16..20].try_into().expect("4 bytes")), word(24));
    let flags = u16::from_le_bytes([subscription[40], subscription[41]]);
    if tag != 0 || clock > 3 || flags != 0 {
        return Nap::NotOne;
    }
    let (Some(event), Some(written)) = (event, written) else { return Nap::BadPointer };
    // The event: the subscription's user data, no error, of the clock kind.
    let mut answer = [0u8; EVENT];
    answer[..8].copy_from_slice(&subscription[..8]);
    answer[16..24].copy_from_slice(&1u64.to_le_bytes());
    bytes[event..event + EVENT].copy_from_slice(&answer);
    bytes[written..written + 4].copy_from_slice(&1u32.to_le_bytes());
    Nap::Sleep(std::time::Duration::from_nanos(timeout))
}

/// Under WASI 0.2 (components).
#[cfg(feature = "component")]
mod p2 {
    use wasmtime::StoreContextMut;
    use wasmtime::component::{Resource, ResourceTable};
    use wasmtime_wasi::WasiView;
    use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemView as _};
    use wasmtime_wasi::p2::bindings::filesystem::types::{
        DescriptorFlags, DescriptorType, ErrorCode, HostDescriptor as _, OpenFlags, PathFlags,
    };

    use super::Guest;

    /// Most entries of a component's WASI resource table (descriptors,
    /// streams, pollables, HTTP fields and bodies): a backstop on the host
    /// memory they hold; a guest that fills it traps. (A WASI program uses
    /// a handful at a time; each HTTP fields may hold 16 KiB and each
    /// outgoing body 16 KiB, so 4,096 bound either kind to 64 MiB.)
    pub(crate) const MAX_RESOURCES: usize = 4 * 1024;

    /// The WASI 0.2 interface `wasmtime-wasi` defines (older 0.2 imports
    /// are matched to it by semver).
    const WASI_P2_FILESYSTEM: &str = "wasi:filesystem/types@0.2.12";

    /// A component's resource table, limited.
    pub(crate) fn resource_table() -> ResourceTable {
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_RESOURCES);
        table
    }

    /// The WASI 0.2 interface of the monotonic clock `wasmtime-wasi` defines.
    const WASI_P2_MONOTONIC_CLOCK: &str = "wasi:clocks/monotonic-clock@0.2.12";

    /// A component's clock subscription, ready at `at` (never: `None`),
    /// woken by the runtime's ticker: `wasmtime-wasi`'s own waits on
    /// `tokio::time`, which panics in a runtime without the time driver.
    struct Nap {
        ticker: crate::runtime::ticker::Ticker,
        at: Option<std::time::Instant>,
        /// A subscription already due yields once (as `wasmtime-wasi`'s
        /// does, so a guest polling in a loop lets other tasks run).
        yielded: bool,
    }

    impl wasmtime_wasi::p2::Pollable for Nap {
        // (`Pollable` is an `async_trait`; this is its signature.)
        fn ready<'life0, 'async_trait>(
            &'life0 mut self,
        ) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'async_trait>>
        where
            'life0: 'async_trait,
            Self: 'async_trait,
        {
            Box::pin(async move {
                match self.at {
                    Some(at) if at <= std::time::Instant::now() => {
                        if !self.yielded {
                            self.yielded = true;
                            tokio::task::yield_now().await;
                        }
                    }
                    at => super::wake_at(&self.ticker, at).await,
                }
            })
        }
    }

    /// A pollable of `nap` from now, in the store's resource table.
    fn subscribe<T: WasiView + Guest>(
        mut store: StoreContextMut<'_, T>,
        nap: std::time::Duration,
    ) -> wasmtime::Result<(Resource<wasmtime_wasi::p2::DynPollable>,)> {
        let state = store.data_mut();
        let ticker = state.core().env.ticker.clone();
        let at = std::time::Instant::now().checked_add(nap);
        let table = state.ctx().table;
        let nap = table.push(Nap { ticker, at, yielded: false })?;
        Ok((wasmtime_wasi::p2::subscribe(table, nap)?,))
    }

    /// Replace WASI 0.2's `subscribe-duration` and `subscribe-instant` in
    /// `linker` (defined already) with subscriptions the ticker wakes.
    pub(crate) fn clock_p2<T: WasiView + Guest>(linker: &mut wasmtime::component::Linker<T>) -> wasmtime::Result<()> {
        use wasmtime_wasi::p2::bindings::clocks::monotonic_clock::Host as _;
        linker.allow_shadowing(true);
        let mut clock = linker.instance(WASI_P2_MONOTONIC_CLOCK)?;
        clock.func_wrap("subscribe-duration", |store: StoreContextMut<'_, T>, (nanos,): (u64,)| {
            subscribe(store, std::time::Duration::from_nanos(nanos))
        })?;
        clock.func_wrap("subscribe-instant", |mut store: StoreContextMut<'_, T>, (when,): (u64,)| {
            let now = wasmtime_wasi::clocks::WasiClocksView::clocks(store.data_mut()).now()?;
            subscribe(store, std::time::Duration::from_nanos(when.saturating_sub(now)))
        })?;
        linker.allow_shadowing(false);
        Ok(())
    }

    /// Wrap WASI 0.2's `descriptor.open-at` in `linker` (defined already) with
    /// the open-file cap.
    pub(crate) fn cap_p2<T: WasiView + Guest>(linker: &mut wasmtime::component::Linker<T>) -> wasmtime::Result<()> {
        linker.allow_shadowing(true);
        type OpenAt = (Resource<Descriptor>, PathFlags, String, OpenFlags, DescriptorFlags);
        linker.instance(WASI_P2_FILESYSTEM)?.func_wrap_async(
            "[method]descriptor.open-at",
            |mut store: StoreContextMut<'_, T>, (dir, path_flags, path, oflags, flags): OpenAt| {
                Box::new(async move {
                    let state = store.data_mut();
                    // Forget the files nothing holds any more: not the
                    // descriptor (dropped), nor a stream of it, which holds
                    // the file itself and may outlive its descriptor.
                    let files = &mut state.core_mut().files;
                    files.forget_closed();
                    if files.full() {
                        return wasmtime::Result::Ok((Err(ErrorCode::Quota),));
                    }
                    let opened = {
                        let mut filesystem = state.filesystem();
                        // A file that could block the thread is not opened
                        // (see the module's documentation).
                        let target = Resource::<Descriptor>::new_borrow(dir.rep());
                        if let Ok(stat) = filesystem.stat_at(target, path_flags, path.clone()).await
                            && !matches!(
                                stat.type_,
                                DescriptorType::RegularFile | DescriptorType::Directory | DescriptorType::SymbolicLink
                            )
                        {
                            return Ok((Err(ErrorCode::Access),));
                        }
                        filesystem.open_at(dir, path_flags, path, oflags, flags).await
                    };
                    match opened {
                        Ok(file) => {
                            let os_file = match state.ctx().table.get(&file) {
                                Ok(Descriptor::File(f)) => Some(std::sync::Arc::downgrade(&f.file)),
                                Ok(Descriptor::Dir(d)) => Some(std::sync::Arc::downgrade(&d.dir)),
                                Err(_) => None,
                            };
                            if let Some(os_file) = os_file {
                                state.core_mut().files.opened_file(os_file);
                            }
                            Ok((Ok(file),))
                        }
                        Err(error) => Ok((Err(error.downcast()?),)),
                    }
                })
            },
        )?;
        linker.allow_shadowing(false);
        Ok(())
    }
}
