//! A global allocator that starts every block of 1 KiB or more at a cache
//! line (64 bytes), for the programs that run the CPU engine to install
//! (the harness library does, for `referee` and everything that links it;
//! so do the benchmark examples):
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: referee_workloads::cpu::aligned::CacheLineAligned =
//!     referee_workloads::cpu::aligned::CacheLineAligned;
//! ```
//!
//! The engine's kernels load 64 bytes at a time (a zmm register; two ymm
//! with AVX2) from rows that are multiples of 64 bytes long, so where a
//! buffer starts decides whether every one of those loads spans two cache
//! lines. glibc's `malloc` starts a large block 16 bytes past a page (its
//! header) and a smaller one wherever its heap is, 16 bytes aligned: then
//! every AVX-512 load of the packed panels, the weights and the activations
//! in a large block (and in three of every four smaller ones) is split
//! across two lines. PyTorch's CPU allocator aligns its tensors to
//! 64 bytes for the same reason. Alignment changes no value the engine
//! computes, only where it is stored.
//!
//! It owns the layout rule and nothing else: it wraps [`System`], and knows
//! nothing of the engine's buffers.

use std::alloc::{GlobalAlloc, Layout, System};

/// Blocks from this size up start at a cache line.
const MIN_SIZE: usize = 1024;

/// The alignment asked of [`System`].
const LINE: usize = 64;

/// [`System`] with blocks of [`MIN_SIZE`] bytes or more at a 64-byte
/// boundary (smaller ones as asked: a string or a small vector would waste
/// up to 48 bytes a block).
#[derive(Debug, Clone, Copy, Default)]
pub struct CacheLineAligned;

/// The layout `layout` is allocated with (the same rule for every call on
/// a block, so that `dealloc` and `realloc` pass [`System`] the layout it
/// allocated).
fn placed(layout: Layout) -> Layout {
    if layout.size() >= MIN_SIZE && layout.align() < LINE {
        // 64 is a power of two and the size is unchanged: never an error.
        Layout::from_size_align(layout.size(), LINE).unwrap_or(layout)
    } else {
        layout
    }
}

// SAFETY: every block is allocated, reallocated and freed by `System` with
// the layout `placed` gives, which meets the caller's (its alignment is at
// least the one asked for and its size the same).
unsafe impl GlobalAlloc for CacheLineAligned {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: `placed` keeps the size, which the caller made non-zero.
        unsafe { System.alloc(placed(layout)) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(placed(layout)) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` with `placed(layout)`.
        unsafe { System.dealloc(ptr, placed(layout)) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = placed(layout);
        // SAFETY: the caller's new size is non-zero and, with the old
        // alignment, a valid layout.
        let new = placed(unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) });
        if new.align() == old.align() {
            // SAFETY: `ptr` came from `System` with `old`; System keeps
            // `old`'s alignment for the new block.
            return unsafe { System.realloc(ptr, old, new_size) };
        }
        // The block crosses MIN_SIZE: a new one at the new alignment, the
        // old contents copied, the old block freed.
        // SAFETY: `new` is a valid non-zero layout; both blocks are live
        // and distinct while the bytes are copied.
        unsafe {
            let p = System.alloc(new);
            if !p.is_null() {
                std::ptr::copy_nonoverlapping(ptr, p, layout.size().min(new_size));
                System.dealloc(ptr, old);
            }
            p
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Large blocks start at a line, however they were made; small ones
    /// keep what they asked for; growing across the threshold and back
    /// keeps the contents.
    #[test]
    fn large_blocks_start_at_a_cache_line_and_keep_their_contents() {
        let a = CacheLineAligned;
        for size in [1024usize, 4096, 100_000, 1 << 21] {
            let l = Layout::from_size_align(size, 4).unwrap();
            for zeroed in [false, true] {
                // SAFETY: a non-zero layout; the block is freed with it.
                unsafe {
                    let p = if zeroed {
                        a.alloc_zeroed(l)
                    } else {
                        a.alloc(l)
                    };
                    assert!(!p.is_null());
                    assert_eq!(p as usize % LINE, 0, "{size} bytes, zeroed {zeroed}");
                    if zeroed {
                        assert!(std::slice::from_raw_parts(p, size).iter().all(|&b| b == 0));
                    }
                    a.dealloc(p, l);
                }
            }
        }
        let small = Layout::from_size_align(24, 8).unwrap();
        assert_eq!(placed(small), small);
        let wide = Layout::from_size_align(4096, 128).unwrap();
        assert_eq!(placed(wide), wide, "a stricter alignment is kept");
        // SAFETY: each pointer is the live block of the layout passed with it.
        unsafe {
            let l = Layout::from_size_align(100, 4).unwrap();
            let p = a.alloc(l);
            for i in 0..100 {
                *p.add(i) = i as u8;
            }
            let q = a.realloc(p, l, 5000);
            assert_eq!(q as usize % LINE, 0);
            assert!((0..100).all(|i| *q.add(i) == i as u8));
            let l2 = Layout::from_size_align(5000, 4).unwrap();
            let r = a.realloc(q, l2, 50);
            assert!((0..50).all(|i| *r.add(i) == i as u8));
            a.dealloc(r, Layout::from_size_align(50, 4).unwrap());
        }
    }
}
