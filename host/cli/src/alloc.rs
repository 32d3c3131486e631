//! The CLI's global allocator: mimalloc, through its plain entry points
//! wherever a layout needs no more alignment than every mimalloc block has.
//!
//! The `mimalloc` crate's allocator asks `mi_malloc_aligned` for every
//! block. For a block over 1 KiB, or when the size's page has no free
//! block at hand, that takes mimalloc's generic aligned path, which
//! over-allocates and aligns by hand: a small in-process call made 15
//! allocations and spent about 1,170 instructions in them. A layout
//! aligned to a machine word or less (nearly all of them) needs none of
//! that, since mimalloc's blocks are all word-aligned, so it goes to
//! `mi_malloc`; only wider alignments take the aligned entry points.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as mi;

/// The alignment every block mimalloc hands out has.
const WORD: usize = std::mem::size_of::<usize>();

/// mimalloc as the global allocator (see the module's documentation).
pub(crate) struct MiMalloc;

// SAFETY: mimalloc's functions return blocks of at least the size asked,
// aligned to a word or to the alignment asked, or null; `mi_free` and
// `mi_realloc` take any block they handed out, and a block keeps the
// layout's alignment through `realloc` (the same entry point family is
// chosen for it each time, by the same alignment).
unsafe impl GlobalAlloc for MiMalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if layout.align() <= WORD {
                mi::mi_malloc(layout.size()).cast()
            } else {
                mi::mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if layout.align() <= WORD {
                mi::mi_zalloc(layout.size()).cast()
            } else {
                mi::mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, block: *mut u8, _layout: Layout) {
        // SAFETY: see the impl.
        unsafe { mi::mi_free(block.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if layout.align() <= WORD {
                mi::mi_realloc(block.cast::<c_void>(), new_size).cast()
            } else {
                mi::mi_realloc_aligned(block.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_have_the_alignment_and_keep_their_bytes_through_realloc() {
        let alloc = MiMalloc;
        for align in [1, 2, 4, 8, 16, 64, 4096] {
            for size in [1, 7, 24, 1000, 1576, 70_000] {
                let layout = Layout::from_size_align(size, align).unwrap();
                unsafe {
                    let block = alloc.alloc(layout);
                    assert_eq!(block as usize % align, 0, "{size} bytes aligned to {align}");
                    block.write_bytes(0x5A, size);
                    let grown = alloc.realloc(block, layout, size * 3);
                    assert_eq!(grown as usize % align, 0, "{size} bytes aligned to {align}, grown");
                    assert!(std::slice::from_raw_parts(grown, size).iter().all(|&b| b == 0x5A));
                    alloc.dealloc(grown, Layout::from_size_align(size * 3, align).unwrap());
                    let zeroed = alloc.alloc_zeroed(layout);
                    assert_eq!(zeroed as usize % align, 0);
                    assert!(std::slice::from_raw_parts(zeroed, size).iter().all(|&b| b == 0));
                    alloc.dealloc(zeroed, layout);
                }
            }
        }
    }
}
