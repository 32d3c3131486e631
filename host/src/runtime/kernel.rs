//! The Extism kernel, native: the memory a plugin and its host exchange data
//! through.
//!
//! Extism plugins do not share their linear memory with the host. They
//! import `extism:host/env` functions that manage a separate memory (the
//! "kernel" memory): `alloc`/`free`/`length` for blocks in it,
//! `load_*`/`store_*` to copy bytes in and out, `input_*` for the call's
//! input, `output_set` and `error_set` for its answer. Extism implements that
//! memory as a Wasm module linked into every plugin; toolhost implements it
//! here, in host memory, so a copy is a bounds-checked slice access instead
//! of a call into a second Wasm instance.
//!
//! The meaning of every function follows Extism's kernel: `0` is the null
//! handle (an allocation of zero bytes, a failed lookup), `length` of
//! anything that is not the start of a live block is `0`, loads outside the
//! memory read `0` and stores outside it do nothing, freed blocks are reused,
//! and `reset` (before every call) frees everything. Handles are opaque to
//! guests: no published plugin kit computes with them.

/// The handle of the first byte of the arena. Any non-zero value works: `0`
/// must stay the null handle.
const BASE: u64 = 16;

/// Book-keeping charged per block, so that a guest making millions of tiny
/// allocations pays for the metadata too.
const BLOCK_OVERHEAD: usize = std::mem::size_of::<Block>();

/// An arena larger than this is released at `reset`, so an idle pooled
/// instance does not keep a large input's or output's memory.
const KEEP_CAPACITY: usize = 1 << 20;

/// The most kernel memory an instance may have, whatever its memory limit:
/// Extism's kernel is a wasm32 memory, 4 GiB at most.
const MAX_ARENA: usize = 4 << 30;

/// One allocation.
#[derive(Debug, Clone, Copy)]
struct Block {
    /// Offset of the data in the arena.
    start: usize,
    /// Bytes reserved.
    capacity: usize,
    /// Bytes in use (what `length` reports).
    used: usize,
    /// Not freed.
    active: bool,
}

/// Refusal to grow: the instance's memory budget is spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OutOfBudget;

/// Where the bytes a kernel may hold are counted: the same budget as the
/// instance's linear memories.
pub(crate) trait Budget {
    /// Take `bytes` more from the budget, or refuse.
    fn charge(&mut self, bytes: usize) -> Result<(), OutOfBudget>;
    /// Give `bytes` back.
    fn refund(&mut self, bytes: usize);
}

/// The kernel memory of one instance.
#[derive(Debug, Default)]
pub(crate) struct Kernel {
    arena: Vec<u8>,
    /// Sorted by `start` (allocation only ever appends).
    blocks: Vec<Block>,
    /// Indices into `blocks` of freed blocks, reused first-fit.
    free: Vec<usize>,
    /// Bytes charged to the budget (arena capacity plus block metadata).
    charged: usize,
    input: u64,
    input_length: u64,
    output: u64,
    output_length: u64,
    error: u64,
}

impl Kernel {
    fn handle(start: usize) -> u64 {
        start as u64 + BASE
    }

    /// The arena offset of a handle, if it is inside the arena.
    fn offset(&self, handle: u64, len: u64) -> Option<usize> {
        let start = handle.checked_sub(BASE)?;
        let end = start.checked_add(len)?;
        (end <= self.arena.len() as u64).then_some(start as usize)
    }

    /// The index of the live block that starts at `handle`.
    fn block_at(&self, handle: u64) -> Option<usize> {
        let start = usize::try_from(handle.checked_sub(BASE)?).ok()?;
        let index = self.blocks.binary_search_by_key(&start, |b| b.start).ok()?;
        self.blocks[index].active.then_some(index)
    }

    /// Keep the charge equal to what the kernel holds.
    fn recharge(&mut self, budget: &mut dyn Budget) -> Result<(), OutOfBudget> {
        let holding = self.arena.capacity() + self.blocks.capacity() * BLOCK_OVERHEAD;
        if holding > self.charged {
            budget.charge(holding - self.charged)?;
        } else {
            budget.refund(self.charged - holding);
        }
        self.charged = holding;
        Ok(())
    }

    /// `alloc`: a block of `n` bytes, or `0` for `n == 0`. Refuses (the
    /// caller traps) when the budget cannot cover it.
    pub(crate) fn alloc(&mut self, n: u64, budget: &mut dyn Budget) -> Result<u64, OutOfBudget> {
        if n == 0 {
            return Ok(0);
        }
        let n = usize::try_from(n).map_err(|_| OutOfBudget)?;
        if let Some(position) = self.free.iter().position(|&i| self.blocks[i].capacity >= n) {
            let index = self.free.swap_remove(position);
            let block = &mut self.blocks[index];
            block.used = n;
            block.active = true;
            return Ok(Self::handle(block.start));
        }
        let start = self.arena.len();
        let end = start.checked_add(n).filter(|&end| end <= MAX_ARENA).ok_or(OutOfBudget)?;
        // Charge first, then reserve (never more than the host can give: a
        // refused reservation is a refused allocation, not an abort), before
        // touching the arena: a refused allocation leaves the kernel as it was.
        let needed_capacity =
            if end > self.arena.capacity() { end.max(self.arena.capacity() * 2).min(MAX_ARENA) } else { 0 };
        let needed_blocks =
            if self.blocks.len() == self.blocks.capacity() { (self.blocks.capacity() * 2).max(8) } else { 0 };
        let extra = needed_capacity.saturating_sub(self.arena.capacity())
            + needed_blocks.saturating_sub(self.blocks.capacity()) * BLOCK_OVERHEAD;
        if extra > 0 {
            budget.charge(extra)?;
            self.charged += extra;
            let reserved = (needed_capacity == 0
                || self.arena.try_reserve_exact(needed_capacity - self.arena.len()).is_ok())
                && (needed_blocks == 0 || self.blocks.try_reserve_exact(needed_blocks - self.blocks.len()).is_ok());
            // The allocator may give more, or (refused) nothing: count what
            // is held.
            let recharged = self.recharge(budget);
            if !reserved {
                return Err(OutOfBudget);
            }
            recharged?;
        }
        self.arena.resize(end, 0);
        self.blocks.push(Block { start, capacity: n, used: n, active: true });
        Ok(Self::handle(start))
    }

    /// `free`: release a live block (anything else is ignored).
    pub(crate) fn free(&mut self, handle: u64) {
        if let Some(index) = self.block_at(handle) {
            self.blocks[index].active = false;
            self.free.push(index);
            if handle == self.input {
                self.input_length = 0;
            }
        }
    }

    /// `length` (and `length_unsafe`): the size of the live block starting
    /// at `handle`, else `0`.
    pub(crate) fn length(&self, handle: u64) -> u64 {
        self.block_at(handle).map_or(0, |i| self.blocks[i].used as u64)
    }

    /// `load_u8`.
    pub(crate) fn load_u8(&self, handle: u64) -> u32 {
        self.offset(handle, 1).map_or(0, |i| u32::from(self.arena[i]))
    }

    /// `load_u64`.
    pub(crate) fn load_u64(&self, handle: u64) -> u64 {
        self.offset(handle, 8).map_or(0, |i| read_u64(&self.arena[i..i + 8]))
    }

    /// `store_u8`.
    pub(crate) fn store_u8(&mut self, handle: u64, value: u32) {
        if let Some(i) = self.offset(handle, 1) {
            self.arena[i] = value as u8;
        }
    }

    /// `store_u64`.
    pub(crate) fn store_u64(&mut self, handle: u64, value: u64) {
        if let Some(i) = self.offset(handle, 8) {
            self.arena[i..i + 8].copy_from_slice(&value.to_le_bytes());
        }
    }

    /// `input_load_u8`: a byte of the input, `0` past its end.
    pub(crate) fn input_load_u8(&self, offset: u64) -> u32 {
        if offset >= self.input_length {
            return 0;
        }
        self.load_u8(self.input.saturating_add(offset))
    }

    /// `input_load_u64`: eight bytes of the input, `0` past its end.
    pub(crate) fn input_load_u64(&self, offset: u64) -> u64 {
        match offset.checked_add(8) {
            Some(end) if end <= self.input_length => self.load_u64(self.input.saturating_add(offset)),
            _ => 0,
        }
    }

    /// `input_set`: mark a range as the input (ignored if it is not inside
    /// the memory).
    pub(crate) fn input_set(&mut self, handle: u64, len: u64) {
        if self.offset(handle, len).is_some() {
            self.input = handle;
            self.input_length = len;
        }
    }

    /// `input_length`.
    pub(crate) fn input_length(&self) -> u64 {
        self.input_length
    }

    /// `input_offset`.
    pub(crate) fn input_offset(&self) -> u64 {
        self.input
    }

    /// `output_set`: mark a range as the output (ignored if it is not
    /// inside the memory).
    pub(crate) fn output_set(&mut self, handle: u64, len: u64) {
        if self.offset(handle, len).is_some() {
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
        if handle == 0 || self.offset(handle, 1).is_some() {
            self.error = handle;
        }
    }

    /// `error_get`.
    pub(crate) fn error_get(&self) -> u64 {
        self.error
    }

    /// `memory_bytes`: bytes of kernel memory in use.
    pub(crate) fn memory_bytes(&self) -> u64 {
        self.arena.len() as u64
    }

    /// `reset`: free everything, clear input, output and error. Called by
    /// the host before every call.
    pub(crate) fn reset(&mut self, budget: &mut dyn Budget) {
        self.arena.clear();
        self.blocks.clear();
        self.free.clear();
        if self.arena.capacity() > KEEP_CAPACITY {
            self.arena = Vec::new();
            self.blocks = Vec::new();
        }
        self.input = 0;
        self.input_length = 0;
        self.output = 0;
        self.output_length = 0;
        self.error = 0;
        // Shrinking never needs budget.
        let _ = self.recharge(budget);
    }

    /// Copy `bytes` into a new block (the null handle for none).
    pub(crate) fn write_new(&mut self, bytes: &[u8], budget: &mut dyn Budget) -> Result<u64, OutOfBudget> {
        let handle = self.alloc(bytes.len() as u64, budget)?;
        if let Some(i) = self.offset(handle, bytes.len() as u64).filter(|_| handle != 0) {
            self.arena[i..i + bytes.len()].copy_from_slice(bytes);
        }
        Ok(handle)
    }

    /// Set the call's input: a new block holding `bytes`.
    pub(crate) fn set_input(&mut self, bytes: &[u8], budget: &mut dyn Budget) -> Result<(), OutOfBudget> {
        let handle = self.write_new(bytes, budget)?;
        self.input = handle;
        self.input_length = bytes.len() as u64;
        Ok(())
    }

    /// The bytes of the live block at `handle` (what a host function reads
    /// for a key or a message), or `None` if there is no such block.
    pub(crate) fn block_bytes(&self, handle: u64) -> Option<&[u8]> {
        let block = self.blocks[self.block_at(handle)?];
        Some(&self.arena[block.start..block.start + block.used])
    }

    /// The output range the guest set (empty if none).
    pub(crate) fn output(&self) -> &[u8] {
        match self.offset(self.output, self.output_length) {
            Some(i) if self.output != 0 => &self.arena[i..i + self.output_length as usize],
            _ => &[],
        }
    }

    /// The error message the guest set, if any: the block's bytes, or the
    /// bytes to the end of the memory if the handle is not a block start.
    pub(crate) fn error_message(&self) -> Option<&[u8]> {
        if self.error == 0 {
            return None;
        }
        if let Some(bytes) = self.block_bytes(self.error) {
            return Some(bytes);
        }
        self.offset(self.error, 0).map(|i| &self.arena[i..])
    }
}

fn read_u64(bytes: &[u8]) -> u64 {
    let mut word = [0; 8];
    word.copy_from_slice(bytes);
    u64::from_le_bytes(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A budget with a cap, recording what is charged.
    #[derive(Default)]
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

    fn budget() -> Capped {
        Capped { cap: 1 << 30, used: 0 }
    }

    #[test]
    fn blocks_round_trip_bytes_and_lengths() {
        let mut budget = budget();
        let mut k = Kernel::default();
        assert_eq!(k.alloc(0, &mut budget), Ok(0));
        let a = k.alloc(11, &mut budget).unwrap();
        let b = k.alloc(3, &mut budget).unwrap();
        assert_ne!(a, 0);
        assert_ne!(a, b);
        assert_eq!(k.length(a), 11);
        assert_eq!(k.length(b), 3);
        assert_eq!(k.length(a + 1), 0, "not a block start");
        assert_eq!(k.length(0), 0);
        k.store_u64(a, 0x0807_0605_0403_0201);
        k.store_u8(a + 8, 9);
        assert_eq!(k.load_u64(a), 0x0807_0605_0403_0201);
        assert_eq!(k.load_u8(a + 8), 9);
        assert_eq!(k.block_bytes(a).unwrap()[..9], [1, 2, 3, 4, 5, 6, 7, 8, 9]);
    }

    #[test]
    fn out_of_bounds_reads_are_zero_and_writes_are_ignored() {
        let mut budget = budget();
        let mut k = Kernel::default();
        let a = k.alloc(4, &mut budget).unwrap();
        assert_eq!(k.load_u64(a), 0, "8 bytes past a 4-byte arena");
        assert_eq!(k.load_u8(u64::MAX), 0);
        assert_eq!(k.load_u64(u64::MAX - 3), 0);
        k.store_u64(a, 7);
        k.store_u8(1 << 40, 1);
        assert_eq!(k.block_bytes(a), Some(&[0, 0, 0, 0][..]));
    }

    #[test]
    fn freed_blocks_are_reused_and_lose_their_length() {
        let mut budget = budget();
        let mut k = Kernel::default();
        let a = k.alloc(100, &mut budget).unwrap();
        let _b = k.alloc(10, &mut budget).unwrap();
        k.free(a);
        assert_eq!(k.length(a), 0);
        k.free(a); // twice is harmless
        let c = k.alloc(40, &mut budget).unwrap();
        assert_eq!(c, a, "first fit reuses the freed block");
        assert_eq!(k.length(c), 40);
    }

    #[test]
    fn input_reads_stop_at_its_end() {
        let mut budget = budget();
        let mut k = Kernel::default();
        k.set_input(b"0123456789", &mut budget).unwrap();
        assert_eq!(k.input_length(), 10);
        assert_eq!(k.input_load_u64(0), u64::from_le_bytes(*b"01234567"));
        assert_eq!(k.input_load_u64(2), u64::from_le_bytes(*b"23456789"));
        assert_eq!(k.input_load_u64(3), 0, "would read past the end");
        assert_eq!(k.input_load_u64(8), 0, "only two bytes left");
        assert_eq!(k.input_load_u8(9), u32::from(b'9'));
        assert_eq!(k.input_load_u8(10), 0);
        let input = k.input_offset();
        assert_eq!(k.load_u8(input), u32::from(b'0'));
        k.free(input);
        assert_eq!(k.input_length(), 0, "freeing the input empties it");
    }

    #[test]
    fn output_and_error_are_ranges_of_the_memory() {
        let mut budget = budget();
        let mut k = Kernel::default();
        let out = k.write_new(b"{\"ok\":true}", &mut budget).unwrap();
        k.output_set(out, 11);
        assert_eq!(k.output(), b"{\"ok\":true}");
        k.output_set(out, 1 << 20); // outside: ignored
        assert_eq!(k.output_length(), 11);
        let err = k.write_new(b"boom", &mut budget).unwrap();
        k.error_set(err);
        assert_eq!(k.error_message(), Some(&b"boom"[..]));
        k.error_set(0);
        assert_eq!(k.error_message(), None);
    }

    #[test]
    fn reset_frees_everything_and_refunds_large_arenas() {
        let mut budget = budget();
        let mut k = Kernel::default();
        let big = k.alloc(4 << 20, &mut budget).unwrap();
        k.output_set(big, 4);
        assert!(budget.used >= 4 << 20);
        k.reset(&mut budget);
        assert_eq!(k.length(big), 0);
        assert_eq!(k.output(), b"");
        assert_eq!(k.memory_bytes(), 0);
        assert_eq!(budget.used, 0, "the large arena was released");
    }

    #[test]
    fn allocations_past_the_budget_are_refused_without_damage() {
        let mut budget = Capped { cap: 4096, used: 0 };
        let mut k = Kernel::default();
        let a = k.alloc(1000, &mut budget).unwrap();
        assert_eq!(k.alloc(1 << 20, &mut budget), Err(OutOfBudget));
        assert_eq!(k.length(a), 1000, "the earlier block is intact");
        assert!(budget.used <= 4096);
        assert_eq!(k.alloc(u64::MAX, &mut budget), Err(OutOfBudget));
    }

    #[test]
    fn without_a_limit_the_kernel_still_stops_at_4_gib() {
        let mut unlimited = Capped { cap: usize::MAX, used: 0 };
        let mut k = Kernel::default();
        assert_eq!(k.alloc(5 << 30, &mut unlimited), Err(OutOfBudget));
        assert_eq!(k.alloc(1 << 62, &mut unlimited), Err(OutOfBudget));
        assert_eq!(unlimited.used, 0, "nothing charged for refused allocations");
        assert_ne!(k.alloc(64, &mut unlimited).unwrap(), 0);
    }
}
