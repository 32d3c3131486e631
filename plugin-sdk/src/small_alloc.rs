//! A cache of small freed blocks in front of the system allocator: the
//! plugin's global allocator on Wasm (feature `small-alloc`, on by
//! default).
//!
//! A small tool call allocates a handful of short-lived blocks: the name
//! and arguments the host writes into the guest, the text item, the
//! structured JSON, the content list and the list it is lowered into. On
//! wasi-libc every one of them goes through Rust's allocator shims,
//! `malloc` and dlmalloc, each a Wasm call with its own prologue, and is
//! freed the same way: about 2,900 of a component call's 21,700
//! instructions. Blocks of up to [`LARGEST`] bytes are kept here on a free
//! list per power-of-two size when freed, and handed out again from it: a
//! pop or a push, with no call further down. Everything else, and the
//! first block of each size, comes from the system allocator.
//!
//! What it costs: at most [`KEEP`] freed blocks of each size stay cached
//! (about 64 KiB in all at worst; past that, frees go to the system
//! allocator), and a block takes the whole of its size class (a 17-byte
//! string holds 32). A plugin that brings its own `#[global_allocator]`
//! turns the feature off (`default-features = false`).
//!
//! Only single-threaded Wasm uses it (no `atomics` target feature): the
//! lists are plain memory, touched by the one thread a guest has.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::ptr;

/// The smallest size class, in bytes: room for a free list's link.
const SMALLEST: usize = 16;

/// The number of size classes (16, 32, … 1024 bytes).
const CLASSES: usize = 7;

/// The largest block kept, in bytes; larger ones go to the system
/// allocator each time.
pub const LARGEST: usize = SMALLEST << (CLASSES - 1);

/// The alignment every cached block has: what the system allocator gives
/// `malloc` on wasm32. A layout that asks for more is not cached.
const ALIGN: usize = 8;

/// The most freed blocks kept of one size.
pub const KEEP: u32 = 32;

/// A freed block, linked into its class's list through its first bytes.
struct Block {
    next: *mut Block,
}

/// The freed blocks of one size class.
#[derive(Clone, Copy)]
struct List {
    head: *mut Block,
    len: u32,
}

/// The allocator: [`System`] behind per-size free lists.
pub struct SmallAlloc {
    lists: UnsafeCell<[List; CLASSES]>,
}

// SAFETY: only where there is one thread (see the module's documentation):
// elsewhere the allocator is not `Sync`, so it cannot be a global
// allocator or be shared between threads (the unit tests use their own
// instances, each from one thread).
#[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
unsafe impl Sync for SmallAlloc {}

impl SmallAlloc {
    /// An allocator with empty lists.
    pub const fn new() -> Self {
        SmallAlloc { lists: UnsafeCell::new([List { head: ptr::null_mut(), len: 0 }; CLASSES]) }
    }

    /// The class a layout's blocks belong to, if it is cached.
    fn class(layout: Layout) -> Option<usize> {
        if layout.size() > LARGEST || layout.align() > ALIGN {
            return None;
        }
        let size = layout.size().max(SMALLEST).next_power_of_two();
        Some((size.trailing_zeros() - SMALLEST.trailing_zeros()) as usize)
    }

    /// The layout a block of `class` has towards the system allocator.
    fn block_layout(class: usize) -> Layout {
        // SAFETY: a power of two up to `LARGEST`, aligned to a power of two.
        unsafe { Layout::from_size_align_unchecked(SMALLEST << class, ALIGN) }
    }

    /// A block of `class`: a cached one, or a new one from the system.
    ///
    /// # Safety
    /// No other call into this allocator may run at the same time.
    unsafe fn take(&self, class: usize) -> *mut u8 {
        // SAFETY: one thread (the caller's promise); `class < CLASSES`.
        let list = unsafe { &mut (*self.lists.get())[class] };
        let head = list.head;
        if head.is_null() {
            // SAFETY: a non-zero size.
            return unsafe { System.alloc(Self::block_layout(class)) };
        }
        // SAFETY: `head` is a block this allocator linked in `give`.
        list.head = unsafe { (*head).next };
        list.len -= 1;
        head.cast()
    }

    /// Take back a block of `class`: cached, or given to the system if
    /// its list is full.
    ///
    /// # Safety
    /// `block` came from `take(class)`; no other call runs at the same time.
    unsafe fn give(&self, block: *mut u8, class: usize) {
        // SAFETY: as `take`.
        let list = unsafe { &mut (*self.lists.get())[class] };
        if list.len >= KEEP {
            // SAFETY: the system allocated it with this layout.
            return unsafe { System.dealloc(block, Self::block_layout(class)) };
        }
        let block = block.cast::<Block>();
        // SAFETY: at least `SMALLEST` bytes, aligned for a pointer.
        unsafe { block.write(Block { next: list.head }) };
        list.head = block;
        list.len += 1;
    }
}

impl Default for SmallAlloc {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: every block handed out is at least the layout's size, aligned
// to at least its alignment (the class's size and `ALIGN`, or the
// system's own), and owned by one caller until it is given back.
unsafe impl GlobalAlloc for SmallAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match Self::class(layout) {
            // SAFETY: the caller of a global allocator is the one thread.
            Some(class) => unsafe { self.take(class) },
            // SAFETY: forwarded as given.
            None => unsafe { System.alloc(layout) },
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match Self::class(layout) {
            Some(class) => {
                // SAFETY: as `alloc`; a cached block is zeroed here.
                let block = unsafe { self.take(class) };
                if !block.is_null() {
                    // SAFETY: the block holds at least `layout.size()` bytes.
                    unsafe { ptr::write_bytes(block, 0, layout.size()) };
                }
                block
            }
            // SAFETY: forwarded as given.
            None => unsafe { System.alloc_zeroed(layout) },
        }
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        match Self::class(layout) {
            // SAFETY: a layout of this class was allocated from it.
            Some(class) => unsafe { self.give(block, class) },
            // SAFETY: the system allocated it with this layout.
            None => unsafe { System.dealloc(block, layout) },
        }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `GlobalAlloc::realloc`'s contract: `new_size` rounded up
        // to the alignment does not overflow.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (Self::class(layout), Self::class(new_layout)) {
            // The block already has room (or is the same size shrunk).
            (Some(old), Some(new)) if old == new => block,
            // Both large: the system's own `realloc`, which may grow in place.
            // SAFETY: the system allocated it with `layout`.
            (None, None) => unsafe { System.realloc(block, layout, new_size) },
            _ => {
                // SAFETY: a non-zero size (the contract's).
                let moved = unsafe { self.alloc(new_layout) };
                if !moved.is_null() {
                    // SAFETY: both hold at least the smaller size; they
                    // are distinct blocks.
                    unsafe { ptr::copy_nonoverlapping(block, moved, layout.size().min(new_size)) };
                    // SAFETY: allocated here with `layout`.
                    unsafe { self.dealloc(block, layout) };
                }
                moved
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    fn sizes_fall_into_power_of_two_classes_up_to_the_largest() {
        assert_eq!(SmallAlloc::class(layout(1, 1)), Some(0));
        assert_eq!(SmallAlloc::class(layout(16, 8)), Some(0));
        assert_eq!(SmallAlloc::class(layout(17, 1)), Some(1));
        assert_eq!(SmallAlloc::class(layout(1024, 8)), Some(CLASSES - 1));
        assert_eq!(SmallAlloc::class(layout(1025, 1)), None);
        // More alignment than a cached block has: the system's.
        assert_eq!(SmallAlloc::class(layout(32, 16)), None);
    }

    #[test]
    fn a_freed_block_is_handed_out_again_for_any_size_of_its_class() {
        let alloc = SmallAlloc::new();
        unsafe {
            let first = alloc.alloc(layout(20, 4));
            first.write_bytes(7, 20);
            alloc.dealloc(first, layout(20, 4));
            let again = alloc.alloc(layout(32, 8));
            assert_eq!(again, first);
            let other = alloc.alloc(layout(30, 1));
            assert_ne!(other, first, "a block is handed out once");
            alloc.dealloc(again, layout(32, 8));
            alloc.dealloc(other, layout(30, 1));
        }
    }

    #[test]
    fn zeroed_blocks_are_zero_even_when_reused() {
        let alloc = SmallAlloc::new();
        unsafe {
            let dirty = alloc.alloc(layout(64, 8));
            dirty.write_bytes(0xAB, 64);
            alloc.dealloc(dirty, layout(64, 8));
            let zeroed = alloc.alloc_zeroed(layout(60, 8));
            assert_eq!(zeroed, dirty);
            assert!(std::slice::from_raw_parts(zeroed, 60).iter().all(|&b| b == 0));
            alloc.dealloc(zeroed, layout(60, 8));
        }
    }

    #[test]
    fn growing_keeps_the_bytes_and_stays_in_place_within_a_class() {
        let alloc = SmallAlloc::new();
        unsafe {
            let block = alloc.alloc(layout(10, 1));
            for i in 0..10 {
                block.add(i).write(i as u8);
            }
            let same = alloc.realloc(block, layout(10, 1), 16);
            assert_eq!(same, block);
            let bigger = alloc.realloc(same, layout(16, 1), 600);
            assert_eq!(std::slice::from_raw_parts(bigger, 10), &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
            let large = alloc.realloc(bigger, layout(600, 1), 5000);
            assert_eq!(std::slice::from_raw_parts(large, 10), &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
            let small = alloc.realloc(large, layout(5000, 1), 3);
            assert_eq!(std::slice::from_raw_parts(small, 3), &[0, 1, 2]);
            alloc.dealloc(small, layout(3, 1));
        }
    }

    #[test]
    fn no_more_than_keep_blocks_of_a_size_stay_cached() {
        let alloc = SmallAlloc::new();
        unsafe {
            let blocks: Vec<_> = (0..KEEP + 10).map(|_| alloc.alloc(layout(100, 8))).collect();
            for &block in &blocks {
                alloc.dealloc(block, layout(100, 8));
            }
            let class = SmallAlloc::class(layout(100, 8)).unwrap();
            assert_eq!((*alloc.lists.get())[class].len, KEEP);
            // The first `KEEP` freed stayed, handed out last in, first out.
            let kept = &blocks[..KEEP as usize];
            for &block in kept.iter().rev() {
                assert_eq!(alloc.alloc(layout(100, 8)), block);
            }
            for &block in kept {
                alloc.dealloc(block, layout(100, 8));
            }
        }
    }
}
