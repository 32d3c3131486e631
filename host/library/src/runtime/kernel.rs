//! The Extism kernel: the memory a plugin and its host exchange data
//! through.
//!
//! Extism plugins do not share their linear memory with the host. They
//! import `extism:host/env` functions that manage a separate memory (the
//! "kernel" memory): `alloc`/`free`/`length` for blocks in it,
//! `load_*`/`store_*` to copy bytes in and out, `input_*` for the call's
//! input, `output_set` and `error_set` for its answer.
//!
//! The kernel has two halves:
//! - **A Wasm half** ([`wat`]): a tiny module instantiated in each plugin's
//!   store, whose memory *is* the kernel memory. It exports the functions a
//!   guest calls for every few bytes it copies (`load_u8`, `load_u64`,
//!   `store_u8`, `store_u64`, `input_load_u8`, `input_load_u64`,
//!   `input_length`, `input_offset`), so such a call is a Wasm-to-Wasm call
//!   (a few nanoseconds), not a trip into the host (15–20 ns each, which a
//!   plugin kit that copies 8 bytes per call pays 25,000 times for 100 KB in
//!   and out). Each checks its bounds against a header the host keeps in
//!   the memory's first bytes.
//! - **A host half** ([`Kernel`]): the blocks (`alloc`, `free`, `length`),
//!   the input, output and error, and the header. A host function reads or
//!   writes the memory's bytes directly.
//!
//! The meaning of every function follows Extism's kernel: `0` is the null
//! handle (an allocation of zero bytes, a failed lookup), `length` of
//! anything that is not the start of a live block is `0`, loads outside the
//! blocks in use read `0` and stores outside them do nothing, freed blocks
//! are reused, and `reset` (before every call) frees everything. Handles are
//! opaque to guests (no published plugin kit computes with them); here a
//! handle is the address of its first byte in the kernel memory.
//!
//! The kernel memory is a Wasm memory of the plugin's store, so it counts
//! against the instance's memory limit with its linear memories (the
//! store's limiter is asked before it grows), and, like them, keeps its
//! size between calls. Bytes a new block takes that an earlier call used
//! are zeroed, so nothing of an earlier call can be read back through the
//! kernel.

use wasmtime::{AsContextMut, Memory, StoreContextMut};

/// The header, at the start of the kernel memory: the end of the blocks in
/// use (the handle just past the last byte), the input's handle and the
/// input's length, each a little-endian u64. The Wasm half reads it; only
/// the host writes it.
const END: usize = 0;
const INPUT: usize = 8;
const INPUT_LENGTH: usize = 16;

/// The handle of the first byte of the blocks: past the header. Loads and
/// stores below it are outside.
const BASE: u64 = 32;

/// The most kernel memory an instance may have, whatever its memory limit:
/// a wasm32 memory, 4 GiB at most (as Extism's kernel).
const MAX_MEMORY: u64 = 4 << 30;

/// Bytes of a Wasm page.
const PAGE: u64 = 64 * 1024;

/// Book-keeping charged per block, so that a guest making millions of tiny
/// allocations pays for the metadata too.
const BLOCK_OVERHEAD: usize = std::mem::size_of::<Block>();

/// A block list longer than this is released at `reset`.
const KEEP_BLOCKS: usize = 1 << 14;

/// The Wasm half of the kernel, in the text format (wasmtime compiles it
/// once per engine, through the compiled-module cache like a plugin). The
/// header's offsets, [`BASE`] and the memory's size come from the
/// constants the host half uses.
///
/// Every bound is checked in 64 bits before the address is narrowed to 32:
/// the host keeps `end ≤` the memory's size and the input inside
/// `[BASE, end)`, so an access the checks let through is in bounds (and,
/// were the host ever wrong, the access would trap: a fault of this call,
/// not of the host).
pub(crate) fn wat() -> String {
    // The initial header: `end = BASE`, no blocks yet.
    let initial_end: String = BASE.to_le_bytes().iter().map(|b| format!("\\{b:02x}")).collect();
    format!(
        r#"(module
  (memory (export "memory") 1 {max_pages})
  (data (i32.const {END}) "{initial_end}")
  (func (export "load_u8") (param $h i64) (result i32)
    (if (result i32)
      (i32.and (i64.ge_u (local.get $h) (i64.const {BASE}))
               (i64.lt_u (local.get $h) (i64.load (i32.const {END}))))
      (then (i32.load8_u (i32.wrap_i64 (local.get $h))))
      (else (i32.const 0))))
  (func (export "load_u64") (param $h i64) (result i64)
    (if (result i64)
      (i32.and (i64.ge_u (local.get $h) (i64.const {BASE}))
               (i64.le_u (local.get $h) (i64.sub (i64.load (i32.const {END})) (i64.const 8))))
      (then (i64.load (i32.wrap_i64 (local.get $h))))
      (else (i64.const 0))))
  (func (export "store_u8") (param $h i64) (param $v i32)
    (if (i32.and (i64.ge_u (local.get $h) (i64.const {BASE}))
                 (i64.lt_u (local.get $h) (i64.load (i32.const {END}))))
      (then (i32.store8 (i32.wrap_i64 (local.get $h)) (local.get $v)))))
  (func (export "store_u64") (param $h i64) (param $v i64)
    (if (i32.and (i64.ge_u (local.get $h) (i64.const {BASE}))
                 (i64.le_u (local.get $h) (i64.sub (i64.load (i32.const {END})) (i64.const 8))))
      (then (i64.store (i32.wrap_i64 (local.get $h)) (local.get $v)))))
  (func (export "input_load_u8") (param $o i64) (result i32)
    (if (result i32)
      (i64.lt_u (local.get $o) (i64.load (i32.const {INPUT_LENGTH})))
      (then (i32.load8_u (i32.wrap_i64 (i64.add (i64.load (i32.const {INPUT})) (local.get $o)))))
      (else (i32.const 0))))
  (func (export "input_load_u64") (param $o i64) (result i64)
    (local $n i64)
    (local.set $n (i64.load (i32.const {INPUT_LENGTH})))
    (if (result i64)
      (i32.and (i64.ge_u (local.get $n) (i64.const 8))
               (i64.le_u (local.get $o) (i64.sub (local.get $n) (i64.const 8))))
      (then (i64.load (i32.wrap_i64 (i64.add (i64.load (i32.const {INPUT})) (local.get $o)))))
      (else (i64.const 0))))
  (func (export "input_length") (result i64) (i64.load (i32.const {INPUT_LENGTH})))
  (func (export "input_offset") (result i64) (i64.load (i32.const {INPUT})))
)"#,
        max_pages = MAX_MEMORY / PAGE,
    )
}

/// The functions of `extism:host/env` the Wasm half exports.
pub(crate) const WASM_FUNCTIONS: &[&str] = &[
    "load_u8",
    "load_u64",
    "store_u8",
    "store_u64",
    "input_load_u8",
    "input_load_u64",
    "input_length",
    "input_offset",
];

/// One allocation.
#[derive(Debug, Clone, Copy)]
struct Block {
    /// Handle of its first byte.
    start: u64,
    /// Bytes reserved.
    capacity: u64,
    /// Bytes in use (what `length` reports).
    used: u64,
    /// Not freed.
    active: bool,
}

/// Refusal to grow: the instance's memory budget is spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OutOfBudget;

/// Why an allocation did not happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The kernel memory must first grow to this many bytes (then ask
    /// again).
    Grow(u64),
    /// The budget is spent.
    OutOfBudget,
}

/// Where the bytes of the blocks' book-keeping are counted: the same budget
/// as the instance's memories.
pub(crate) trait Budget {
    /// Take `bytes` more from the budget, or refuse.
    fn charge(&mut self, bytes: usize) -> Result<(), OutOfBudget>;
    /// Give `bytes` back.
    fn refund(&mut self, bytes: usize);
}

/// The host half of one instance's kernel. Its methods are given the kernel
/// memory's bytes (`mem`, all of them) by the caller, which holds the store.
#[derive(Debug, Default)]
pub(crate) struct Kernel {
    /// The Wasm half's memory, once the store has it.
    memory: Option<Memory>,
    /// Sorted by `start` (allocation only ever appends).
    blocks: Vec<Block>,
    /// Indices into `blocks` of freed blocks, reused first-fit.
    free: Vec<usize>,
    /// Bytes of blocks in use: they end at handle `BASE + used`.
    used: u64,
    /// The most bytes of blocks ever in use: past them the memory has never
    /// been written.
    written: u64,
    /// Bytes of book-keeping charged to the budget.
    charged: usize,
    input: u64,
    input_length: u64,
    output: u64,
    output_length: u64,
    error: u64,
}

impl Kernel {
    /// Attach the Wasm half's memory (once, when the instance is made).
    pub(crate) fn attach(&mut self, memory: Memory) {
        self.memory = Some(memory);
    }

    /// The kernel memory, if attached.
    pub(crate) fn memory(&self) -> Option<Memory> {
        self.memory
    }

    /// The handle just past the blocks in use.
    fn end(&self) -> u64 {
        BASE + self.used
    }

    /// The memory range of `len` bytes at `handle`, if it lies within the
    /// blocks in use.
    fn range(&self, handle: u64, len: u64) -> Option<std::ops::Range<usize>> {
        let end = handle.checked_add(len)?;
        (handle >= BASE && end <= self.end()).then_some(handle as usize..end as usize)
    }

    /// The index of the live block that starts at `handle`.
    fn block_at(&self, handle: u64) -> Option<usize> {
        let index = self.blocks.binary_search_by_key(&handle, |b| b.start).ok()?;
        self.blocks[index].active.then_some(index)
    }

    /// Write the header the Wasm half checks its bounds against.
    fn write_header(&self, mem: &mut [u8]) {
        for (at, value) in [(END, self.end()), (INPUT, self.input), (INPUT_LENGTH, self.input_length)] {
            if let Some(field) = mem.get_mut(at..at + 8) {
                field.copy_from_slice(&value.to_le_bytes());
            }
        }
    }

    /// `alloc`: a block of `n` bytes, or `0` for `n == 0`. `zero`: clear
    /// what an earlier call left in its bytes (a block the host fills at
    /// once need not be). Refuses, changing nothing, when the memory must
    /// grow first or the budget cannot cover the book-keeping.
    pub(crate) fn alloc(
        &mut self,
        mem: &mut [u8],
        n: u64,
        zero: bool,
        budget: &mut dyn Budget,
    ) -> Result<u64, Refused> {
        if n == 0 {
            return Ok(0);
        }
        if let Some(position) = self.free.iter().position(|&i| self.blocks[i].capacity >= n) {
            let index = self.free.swap_remove(position);
            let block = &mut self.blocks[index];
            block.used = n;
            block.active = true;
            return Ok(block.start);
        }
        let start = self.end();
        let end = start.checked_add(n).filter(|&end| end <= MAX_MEMORY).ok_or(Refused::OutOfBudget)?;
        if end > mem.len() as u64 {
            return Err(Refused::Grow(end));
        }
        if self.blocks.len() == self.blocks.capacity() {
            // Charge first, then reserve (a refused reservation is a refused
            // allocation, not an abort).
            let wanted = (self.blocks.capacity() * 2).max(8);
            let extra = (wanted - self.blocks.capacity()) * BLOCK_OVERHEAD;
            budget.charge(extra).map_err(|_| Refused::OutOfBudget)?;
            self.charged += extra;
            let reserved = self.blocks.try_reserve_exact(wanted - self.blocks.len()).is_ok();
            // The allocator may give more: count what is held.
            self.recharge(budget);
            if !reserved {
                return Err(Refused::OutOfBudget);
            }
        }
        if zero && start < BASE + self.written {
            let dirty_end = end.min(BASE + self.written);
            mem[start as usize..dirty_end as usize].fill(0);
        }
        self.used += n;
        self.written = self.written.max(self.used);
        self.blocks.push(Block { start, capacity: n, used: n, active: true });
        self.write_header(mem);
        Ok(start)
    }

    /// Keep the charge equal to the book-keeping held (more than charged is
    /// taken even past the budget: the allocator gave it; the next charge
    /// is refused).
    fn recharge(&mut self, budget: &mut dyn Budget) {
        let holding = self.blocks.capacity() * BLOCK_OVERHEAD + self.free.capacity() * std::mem::size_of::<usize>();
        if holding > self.charged {
            if budget.charge(holding - self.charged).is_ok() {
                self.charged = holding;
            }
        } else {
            budget.refund(self.charged - holding);
            self.charged = holding;
        }
    }

    /// `free`: release a live block (anything else is ignored).
    pub(crate) fn free(&mut self, mem: &mut [u8], handle: u64) {
        if let Some(index) = self.block_at(handle) {
            self.blocks[index].active = false;
            self.free.push(index);
            if handle == self.input {
                self.input_length = 0;
                self.write_header(mem);
            }
        }
    }

    /// `length` (and `length_unsafe`): the size of the live block starting
    /// at `handle`, else `0`.
    pub(crate) fn length(&self, handle: u64) -> u64 {
        self.block_at(handle).map_or(0, |i| self.blocks[i].used)
    }

    /// Copy `bytes` into the block at `handle` (which the caller just
    /// allocated for them).
    fn fill(&self, mem: &mut [u8], handle: u64, bytes: &[u8]) {
        if let Some(range) = self.range(handle, bytes.len() as u64).filter(|_| handle != 0) {
            mem[range].copy_from_slice(bytes);
        }
    }

    /// Make the block at `handle` (of `len` bytes) the call's input.
    fn set_input(&mut self, mem: &mut [u8], handle: u64, len: u64) {
        self.input = handle;
        self.input_length = len;
        self.write_header(mem);
    }

    /// `input_set`: mark a range as the input (ignored if it is not inside
    /// the blocks in use).
    pub(crate) fn input_set(&mut self, mem: &mut [u8], handle: u64, len: u64) {
        if self.range(handle, len).is_some() {
            self.set_input(mem, handle, len);
        }
    }

    /// `output_set`: mark a range as the output (ignored if it is not
    /// inside the blocks in use).
    pub(crate) fn output_set(&mut self, handle: u64, len: u64) {
        if self.range(handle, len).is_some() {
            self.output = handle;
            self.output_length = len;
        }
    }

    /// `output_offset`.
    pub(crate) fn output_offset(&self) -> u64 {
        self.output
    }

    /// `output_length`.
    pub(crate) fn output_length(&self) -> u64 {
        self.output_length
    }

    /// `error_set`: mark a block as the error message; `0` clears it.
    pub(crate) fn error_set(&mut self, handle: u64) {
        if handle == 0 || self.range(handle, 1).is_some() {
            self.error = handle;
        }
    }

    /// `error_get`.
    pub(crate) fn error_get(&self) -> u64 {
        self.error
    }

    /// `memory_bytes`: bytes of blocks in use.
    pub(crate) fn memory_bytes(&self) -> u64 {
        self.used
    }

    /// `reset`: free everything, clear input, output and error. Called by
    /// the host before every call.
    pub(crate) fn reset(&mut self, mem: &mut [u8], budget: &mut dyn Budget) {
        self.blocks.clear();
        self.free.clear();
        if self.blocks.capacity() > KEEP_BLOCKS {
            self.blocks = Vec::new();
            self.free = Vec::new();
        }
        self.used = 0;
        self.input = 0;
        self.input_length = 0;
        self.output = 0;
        self.output_length = 0;
        self.error = 0;
        self.write_header(mem);
        self.recharge(budget);
    }

    /// The bytes of the live block at `handle` (what a host function reads
    /// for a key or a message), or `None` if there is no such block.
    pub(crate) fn block<'m>(&self, mem: &'m [u8], handle: u64) -> Option<&'m [u8]> {
        let block = self.blocks[self.block_at(handle)?];
        mem.get(self.range(block.start, block.used)?)
    }

    /// The output range the guest set (empty if none).
    pub(crate) fn output<'m>(&self, mem: &'m [u8]) -> &'m [u8] {
        match self.range(self.output, self.output_length) {
            Some(range) if self.output != 0 => mem.get(range).unwrap_or_default(),
            _ => &[],
        }
    }

    /// The error message the guest set, if any: the block's bytes, or the
    /// bytes to the end of the blocks in use if the handle is not a block
    /// start.
    pub(crate) fn error_message<'m>(&self, mem: &'m [u8]) -> Option<&'m [u8]> {
        if self.error == 0 {
            return None;
        }
        if let Some(bytes) = self.block(mem, self.error) {
            return Some(bytes);
        }
        mem.get(self.range(self.error, 0)?.start..self.end() as usize)
    }
}

/// Checks of the book-keeping for the fuzz targets.
#[cfg(feature = "fuzzing")]
impl Kernel {
    /// Panic unless the blocks are in order and apart, lie in `mem` and end
    /// where the blocks in use end, the free list names freed blocks once
    /// each, the output lies in the blocks in use, and the header the Wasm
    /// half reads says what the host holds.
    pub(crate) fn assert_consistent(&self, mem: &[u8]) {
        let mut end = BASE;
        for block in &self.blocks {
            assert_eq!(block.start, end, "blocks follow one another");
            assert!(block.used <= block.capacity, "a block uses no more than it holds");
            end = block.start + block.capacity;
        }
        assert_eq!(end, self.end(), "the blocks end where the blocks in use end");
        assert!(self.blocks.is_empty() || end <= mem.len() as u64, "the blocks lie in the memory");
        let mut free = self.free.clone();
        free.sort_unstable();
        free.dedup();
        assert_eq!(free.len(), self.free.len(), "a block is freed once");
        assert!(self.free.iter().all(|&i| !self.blocks[i].active), "the free list holds freed blocks");
        if self.output != 0 {
            assert!(self.range(self.output, self.output_length).is_some(), "the output lies in the blocks");
        }
        let field = |at: usize| mem.get(at..at + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
        if let Some(written) = field(END) {
            assert_eq!(written, self.end(), "the header says where the blocks end");
        }
    }

    /// Whether the Wasm half lets the guest store a byte at `offset`
    /// (within the blocks in use; never the header).
    pub(crate) fn guest_may_store(&self, offset: u64) -> bool {
        offset >= BASE && offset < self.end()
    }

    /// Bytes of book-keeping charged to the budget.
    pub(crate) fn charged(&self) -> usize {
        self.charged
    }
}

/// A store's data that holds a kernel.
pub(crate) trait HasKernel: 'static {
    /// The kernel.
    fn kernel(&self) -> &Kernel;
    /// The kernel, and the budget its book-keeping is charged to.
    fn kernel_mut(&mut self) -> (&mut Kernel, &mut dyn Budget);
}

/// The kernel memory's bytes and the store's data, borrowed together;
/// `None` before the kernel is attached (only while the instance is made).
pub(crate) fn parts<'a, T: HasKernel>(store: impl Into<StoreContextMut<'a, T>>) -> Option<(&'a mut [u8], &'a mut T)> {
    let store = store.into();
    let memory = store.data().kernel().memory()?;
    Some(memory.data_and_store_mut(store))
}

/// `alloc` in the kernel of `store`: the memory grows first if it must (the
/// store's limiter deciding), then the block is taken.
pub(crate) fn alloc<T: HasKernel>(
    store: &mut impl AsContextMut<Data = T>,
    n: u64,
    zero: bool,
) -> Result<u64, OutOfBudget> {
    // Once to learn the size, once more after growing.
    for _ in 0..2 {
        let (mem, data) = parts(store.as_context_mut()).ok_or(OutOfBudget)?;
        let (kernel, budget) = data.kernel_mut();
        match kernel.alloc(mem, n, zero, budget) {
            Ok(handle) => return Ok(handle),
            Err(Refused::OutOfBudget) => return Err(OutOfBudget),
            Err(Refused::Grow(bytes)) => {
                let memory = kernel.memory().ok_or(OutOfBudget)?;
                let pages = bytes.saturating_sub(mem.len() as u64).div_ceil(PAGE);
                memory.grow(store.as_context_mut(), pages).map_err(|_| OutOfBudget)?;
            }
        }
    }
    Err(OutOfBudget)
}

/// Copy `bytes` into a new block of the kernel of `store` (the null handle
/// for none).
pub(crate) fn write_new<T: HasKernel>(
    store: &mut impl AsContextMut<Data = T>,
    bytes: &[u8],
) -> Result<u64, OutOfBudget> {
    let handle = alloc(store, bytes.len() as u64, false)?;
    let (mem, data) = parts(store.as_context_mut()).ok_or(OutOfBudget)?;
    data.kernel().fill(mem, handle, bytes);
    Ok(handle)
}

/// Start a call: `reset`, then the input in a new block.
pub(crate) fn start<T: HasKernel>(store: &mut impl AsContextMut<Data = T>, input: &[u8]) -> Result<(), OutOfBudget> {
    {
        let (mem, data) = parts(store.as_context_mut()).ok_or(OutOfBudget)?;
        let (kernel, budget) = data.kernel_mut();
        kernel.reset(mem, budget);
    }
    let handle = write_new(store, input)?;
    let (mem, data) = parts(store.as_context_mut()).ok_or(OutOfBudget)?;
    data.kernel_mut().0.set_input(mem, handle, input.len() as u64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use wasmtime::{Engine, Instance, Module, ResourceLimiter, Store, WasmParams, WasmResults};

    use super::*;

    /// A budget with a cap, recording what is charged: the book-keeping
    /// (as [`Budget`]) and the memory (as the store's limiter), as an
    /// instance's `MemoryBudget` does.
    struct Capped {
        cap: usize,
        used: usize,
    }

    impl Budget for Capped {
        fn charge(&mut self, bytes: usize) -> Result<(), OutOfBudget> {
            if self.used + bytes > self.cap {
                return Err(OutOfBudget);
            }
            self.used += bytes;
            Ok(())
        }
        fn refund(&mut self, bytes: usize) {
            self.used -= bytes;
        }
    }

    impl ResourceLimiter for Capped {
        fn memory_growing(&mut self, current: usize, desired: usize, _: Option<usize>) -> wasmtime::Result<bool> {
            Ok(self.charge(desired - current).is_ok())
        }
        fn table_growing(&mut self, _: usize, _: usize, _: Option<usize>) -> wasmtime::Result<bool> {
            Ok(false)
        }
    }

    struct Data {
        kernel: Kernel,
        budget: Capped,
    }

    impl HasKernel for Data {
        fn kernel(&self) -> &Kernel {
            &self.kernel
        }
        fn kernel_mut(&mut self) -> (&mut Kernel, &mut dyn Budget) {
            (&mut self.kernel, &mut self.budget)
        }
    }

    /// Both halves of a kernel, in a store of their own.
    struct Both {
        store: Store<Data>,
        wasm: Instance,
    }

    impl Both {
        fn new(cap: usize) -> Both {
            let engine = Engine::default();
            let module = Module::new(&engine, wat()).expect("the Wasm half compiles");
            let mut store = Store::new(&engine, Data { kernel: Kernel::default(), budget: Capped { cap, used: 0 } });
            store.limiter(|data| &mut data.budget);
            let wasm = Instance::new(&mut store, &module, &[]).expect("instantiate");
            let memory = wasm.get_memory(&mut store, "memory").expect("memory");
            store.data_mut().kernel.attach(memory);
            Both { store, wasm }
        }

        fn call<P: WasmParams, R: WasmResults>(&mut self, name: &str, params: P) -> R {
            let f = self.wasm.get_typed_func::<P, R>(&mut self.store, name).expect(name);
            f.call(&mut self.store, params).expect("the kernel's functions never trap")
        }
        fn load_u8(&mut self, h: u64) -> i32 {
            self.call("load_u8", h as i64)
        }
        fn load_u64(&mut self, h: u64) -> u64 {
            self.call::<i64, i64>("load_u64", h as i64) as u64
        }
        fn store_u8(&mut self, h: u64, v: i32) {
            self.call::<(i64, i32), ()>("store_u8", (h as i64, v))
        }
        fn store_u64(&mut self, h: u64, v: u64) {
            self.call::<(i64, i64), ()>("store_u64", (h as i64, v as i64))
        }
        fn input_load_u8(&mut self, o: u64) -> i32 {
            self.call("input_load_u8", o as i64)
        }
        fn input_load_u64(&mut self, o: u64) -> u64 {
            self.call::<i64, i64>("input_load_u64", o as i64) as u64
        }
        fn alloc(&mut self, n: u64) -> Result<u64, OutOfBudget> {
            alloc(&mut self.store, n, true)
        }
        fn kernel(&mut self) -> (&mut [u8], &mut Kernel) {
            let (mem, data) = parts(&mut self.store).expect("attached");
            (mem, &mut data.kernel)
        }
        fn block(&mut self, h: u64) -> Option<Vec<u8>> {
            let (mem, kernel) = self.kernel();
            kernel.block(mem, h).map(<[u8]>::to_vec)
        }
    }

    fn both() -> Both {
        Both::new(1 << 30)
    }

    #[test]
    fn blocks_round_trip_bytes_and_lengths() {
        let mut k = both();
        assert_eq!(k.alloc(0), Ok(0));
        let a = k.alloc(11).unwrap();
        let b = k.alloc(3).unwrap();
        assert_ne!(a, 0);
        assert_ne!(a, b);
        let (_, kernel) = k.kernel();
        assert_eq!(kernel.length(a), 11);
        assert_eq!(kernel.length(b), 3);
        assert_eq!(kernel.length(a + 1), 0, "not a block start");
        assert_eq!(kernel.length(0), 0);
        k.store_u64(a, 0x0807_0605_0403_0201);
        k.store_u8(a + 8, 9);
        assert_eq!(k.load_u64(a), 0x0807_0605_0403_0201);
        assert_eq!(k.load_u8(a + 8), 9);
        assert_eq!(k.block(a).unwrap()[..9], [1, 2, 3, 4, 5, 6, 7, 8, 9]);
    }

    #[test]
    fn out_of_bounds_reads_are_zero_and_writes_are_ignored() {
        let mut k = both();
        // Before the host has written the header (a guest's start-up code
        // runs before any call): the data segment's header, no blocks.
        assert_eq!(k.load_u64(BASE), 0);
        assert_eq!(k.load_u8(1 << 16), 0);
        assert_eq!(k.input_load_u64(0), 0);
        let a = k.alloc(4).unwrap();
        assert_eq!(k.load_u64(a), 0, "8 bytes past 4 bytes of blocks");
        for outside in [0, 1, BASE - 1, a + 4, 1 << 20, 1 << 40, u64::MAX, u64::MAX - 3] {
            assert_eq!(k.load_u8(outside), 0, "load_u8 at {outside}");
            assert_eq!(k.load_u64(outside), 0, "load_u64 at {outside}");
            k.store_u8(outside, 0xff);
            k.store_u64(outside, u64::MAX);
        }
        k.store_u64(a, 7);
        assert_eq!(k.block(a), Some(vec![0, 0, 0, 0]));
        // The header below the blocks is the host's: stores cannot reach it.
        let (mem, kernel) = k.kernel();
        assert_eq!(mem[..8], (BASE + 4).to_le_bytes());
        assert_eq!(kernel.memory_bytes(), 4);
    }

    #[test]
    fn freed_blocks_are_reused_and_lose_their_length() {
        let mut k = both();
        let a = k.alloc(100).unwrap();
        let _b = k.alloc(10).unwrap();
        let (mem, kernel) = k.kernel();
        kernel.free(mem, a);
        assert_eq!(kernel.length(a), 0);
        kernel.free(mem, a); // twice is harmless
        let c = k.alloc(40).unwrap();
        assert_eq!(c, a, "first fit reuses the freed block");
        assert_eq!(k.kernel().1.length(c), 40);
    }

    #[test]
    fn input_reads_stop_at_its_end() {
        let mut k = both();
        start(&mut k.store, b"0123456789").unwrap();
        assert_eq!(k.call::<(), i64>("input_length", ()), 10);
        assert_eq!(k.input_load_u64(0), u64::from_le_bytes(*b"01234567"));
        assert_eq!(k.input_load_u64(2), u64::from_le_bytes(*b"23456789"));
        assert_eq!(k.input_load_u64(3), 0, "would read past the end");
        assert_eq!(k.input_load_u64(8), 0, "only two bytes left");
        assert_eq!(k.input_load_u64(u64::MAX - 3), 0);
        assert_eq!(k.input_load_u8(9), i32::from(b'9'));
        assert_eq!(k.input_load_u8(10), 0);
        assert_eq!(k.input_load_u8(u64::MAX), 0);
        let input = k.call::<(), i64>("input_offset", ()) as u64;
        assert_eq!(k.load_u8(input), i32::from(b'0'));
        let (mem, kernel) = k.kernel();
        kernel.free(mem, input);
        assert_eq!(k.call::<(), i64>("input_length", ()), 0, "freeing the input empties it");
        assert_eq!(k.input_load_u8(0), 0);
    }

    #[test]
    fn output_and_error_are_ranges_of_the_blocks() {
        let mut k = both();
        let out = write_new(&mut k.store, b"{\"ok\":true}").unwrap();
        let err = write_new(&mut k.store, b"boom").unwrap();
        let (mem, kernel) = k.kernel();
        kernel.output_set(out, 11);
        assert_eq!(kernel.output(mem), b"{\"ok\":true}");
        kernel.output_set(out, 1 << 20); // outside: ignored
        assert_eq!(kernel.output_length(), 11);
        kernel.error_set(err);
        assert_eq!(kernel.error_message(mem), Some(&b"boom"[..]));
        kernel.error_set(0);
        assert_eq!(kernel.error_message(mem), None);
    }

    #[test]
    fn a_call_cannot_read_what_an_earlier_call_left() {
        let mut k = both();
        start(&mut k.store, b"the earlier call's secret").unwrap();
        let scratch = k.alloc(64).unwrap();
        k.store_u64(scratch, u64::from_le_bytes(*b"scratch!"));
        start(&mut k.store, b"{}").unwrap();
        // Past the new input: outside, so zero.
        assert_eq!(k.load_u64(BASE + 2), 0);
        // A new block over the old bytes: cleared.
        let fresh = k.alloc(128).unwrap();
        assert!(k.block(fresh).unwrap().iter().all(|&b| b == 0), "the new block holds old bytes");
        let mut seen = Vec::new();
        for h in BASE..BASE + 130 {
            seen.push(k.load_u8(h) as u8);
        }
        assert!(!seen.windows(6).any(|w| w == b"secret"));
        assert!(!seen.windows(8).any(|w| w == b"scratch!"));
    }

    #[test]
    fn the_memory_grows_for_large_blocks_within_the_budget() {
        let mut k = Both::new(1 << 20);
        let big = k.alloc(600 * 1024).unwrap();
        k.store_u8(big + 600 * 1024 - 1, 7);
        assert_eq!(k.load_u8(big + 600 * 1024 - 1), 7);
        let used_before = k.store.data().budget.used;
        assert!(used_before >= 600 * 1024, "the memory's growth was charged: {used_before}");
        assert_eq!(k.alloc(1 << 20), Err(OutOfBudget), "past the budget");
        assert_eq!(k.kernel().1.length(big), 600 * 1024, "the earlier block is intact");
        assert_eq!(k.alloc(1 << 62), Err(OutOfBudget));
        assert_eq!(k.alloc(u64::MAX), Err(OutOfBudget));
        assert_eq!(k.store.data().budget.used, used_before, "nothing charged for refused allocations");
    }

    #[test]
    fn without_a_limit_the_kernel_still_stops_at_4_gib() {
        let mut k = Both::new(usize::MAX);
        assert_eq!(k.alloc(5 << 30), Err(OutOfBudget));
        assert_ne!(k.alloc(64).unwrap(), 0);
    }

    #[test]
    fn reset_frees_everything() {
        let mut k = both();
        let block = write_new(&mut k.store, b"data").unwrap();
        let (mem, data) = parts(&mut k.store).unwrap();
        data.kernel.output_set(block, 4);
        data.kernel.error_set(block);
        data.kernel.reset(mem, &mut data.budget);
        assert_eq!(data.kernel.length(block), 0);
        assert_eq!(data.kernel.output(mem), b"");
        assert_eq!(data.kernel.error_message(mem), None);
        assert_eq!(data.kernel.memory_bytes(), 0);
        assert_eq!(k.load_u8(block), 0);
    }
}
