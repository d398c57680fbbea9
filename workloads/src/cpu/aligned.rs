//! A global allocator that starts every block of 1 KiB or more at a cache
//! line (64 bytes), for the programs that run the CPU engine to install
//! (the harness library does, for `referee` and everything that links it;
//! so do the benchmark examples):
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: referee_workloads::cpu::aligned::CacheLineAligned =
//!     referee_workloads::cpu::aligned::CacheLineAligned::new();
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
//! Blocks of 2 MiB or more (the activations, their gradients and the
//! packed panels of a training step) also start at a 2 MiB boundary and,
//! on Linux with glibc, are offered to the kernel as transparent huge
//! pages (`madvise(MADV_HUGEPAGE)`, before their first touch): where the
//! system's THP mode is `madvise`, as on Debian and Ubuntu, they are
//! otherwise mapped in 4 KiB pages, and a step that streams tens of MiB
//! through products and row-wise passes spends its time in page walks
//! once the TLB's few thousand entries (8–12 MiB of 4 KiB pages) are
//! spent. glibc does the same for every heap when
//! `GLIBC_TUNABLES=glibc.malloc.hugetlb=1` is set; the allocator does it
//! without the user setting anything, for large blocks only. Where the
//! mode is `never` the advice has no effect, and where the kernel refuses
//! it (no THP in its build) it is ignored. No value changes.
//!
//! Both are for the engine's buffers only: the allocator places blocks
//! so once the engine [`engage`]s it (choosing its kernels,
//! `Engine::for_device`, building a model), and until then passes every
//! call to [`System`] as asked. A process that never trains — `referee
//! check` over a round's logs, the supervision of a program — would
//! otherwise pay for them: glibc serves an aligned block by carving it out
//! of a larger free chunk, and the pieces left over fragment its heap
//! (the corpus check's peak resident memory was 3 to 4 times its plain
//! allocation's).
//!
//! It owns the layout rule and the advice, and nothing else: it wraps
//! [`System`], and knows nothing of the engine's buffers.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether the process's allocator places blocks ([`engage`]).
static ENGAGED: AtomicBool = AtomicBool::new(false);

/// From now on, the process's [`CacheLineAligned`] places blocks (once
/// engaged, it stays so). Blocks allocated before keep glibc's placement;
/// reallocated, they move to the placed layout.
pub fn engage() {
    ENGAGED.store(true, Ordering::Relaxed);
}

/// Blocks from this size up start at a cache line.
const MIN_SIZE: usize = 1024;

/// The alignment asked of [`System`].
const LINE: usize = 64;

/// A transparent huge page on x86-64 (and arm64 with 4 KiB pages): blocks
/// this large start at this boundary and are advised as huge pages, where
/// the platform can be advised ([`HUGE_ADVICE`]).
const HUGE: usize = 2 << 20;

/// Whether large blocks are advised as huge pages here.
const HUGE_ADVICE: bool = cfg!(all(target_os = "linux", target_env = "gnu"));

/// [`System`] with blocks of [`MIN_SIZE`] bytes or more at a 64-byte
/// boundary (smaller ones as asked: a string or a small vector would waste
/// up to 48 bytes a block), and blocks of [`HUGE`] or more at a huge page,
/// advised as one (see the module's documentation).
/// Until it is engaged it is [`System`].
#[derive(Debug, Clone, Copy)]
pub struct CacheLineAligned {
    engaged: &'static AtomicBool,
}

impl CacheLineAligned {
    /// The allocator [`engage`] turns on.
    pub const fn new() -> Self {
        CacheLineAligned { engaged: &ENGAGED }
    }

    /// The layout `layout` is allocated with: [`placed`] once engaged,
    /// else as asked. A block allocated before and freed or reallocated
    /// after passes [`System`] another layout than it was made with, which
    /// [`System`] tolerates on the platforms referee runs on: it frees
    /// every block with `free(3)` whatever its alignment, and reallocates
    /// one it takes as over-aligned by a new block, a copy and a `free`.
    fn layout(&self, layout: Layout) -> Layout {
        if self.engaged.load(Ordering::Relaxed) {
            placed(layout)
        } else {
            layout
        }
    }
}

impl Default for CacheLineAligned {
    fn default() -> Self {
        Self::new()
    }
}

/// The layout `layout` is allocated with once engaged (the same rule for
/// every call on a block, so that `dealloc` and `realloc` pass [`System`]
/// the layout it allocated).
fn placed(layout: Layout) -> Layout {
    let at = if HUGE_ADVICE && layout.size() >= HUGE {
        HUGE
    } else if layout.size() >= MIN_SIZE {
        LINE
    } else {
        return layout;
    };
    if layout.align() < at {
        // A power of two and the size unchanged: never an error.
        Layout::from_size_align(layout.size(), at).unwrap_or(layout)
    } else {
        layout
    }
}

/// Offers the block at `p` (`layout` as [`placed`] gave it) to the kernel
/// as transparent huge pages, where it is one of [`HUGE`]'s blocks; the
/// pages it has not touched yet are then mapped 2 MiB at a time. A refusal
/// (THP off, an old kernel) changes nothing, so it is ignored.
fn advise(p: *mut u8, layout: Layout) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if !p.is_null() && layout.align() >= HUGE {
        // SAFETY: `p` starts a live block of `layout.size()` bytes at a
        // page boundary; advice changes how its pages are mapped, never
        // their contents.
        unsafe {
            libc::madvise(p.cast(), layout.size(), libc::MADV_HUGEPAGE);
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = (p, layout);
}

// SAFETY: every block is allocated, reallocated and freed by `System` with
// the layout `placed` gives, which meets the caller's (its alignment is at
// least the one asked for and its size the same).
unsafe impl GlobalAlloc for CacheLineAligned {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let l = self.layout(layout);
        // SAFETY: `placed` keeps the size, which the caller made non-zero.
        let p = unsafe { System.alloc(l) };
        advise(p, l);
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let l = self.layout(layout);
        if l.align() < HUGE {
            // SAFETY: as for `alloc`.
            return unsafe { System.alloc_zeroed(l) };
        }
        // Advised before the zeros touch its pages (which would map them
        // 4 KiB at a time first).
        // SAFETY: as for `alloc`; the zeros fill the live block only.
        unsafe {
            let p = System.alloc(l);
            advise(p, l);
            if !p.is_null() {
                std::ptr::write_bytes(p, 0, l.size());
            }
            p
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` with `placed(layout)`.
        unsafe { System.dealloc(ptr, self.layout(layout)) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = self.layout(layout);
        // SAFETY: the caller's new size is non-zero and, with the old
        // alignment, a valid layout.
        let new =
            self.layout(unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) });
        if new.align() == old.align() && new.align() < HUGE {
            // SAFETY: `ptr` came from `System` with `old`; System keeps
            // `old`'s alignment for the new block.
            return unsafe { System.realloc(ptr, old, new_size) };
        }
        // The block crosses MIN_SIZE or HUGE, or is a huge one: a new one
        // at the new alignment (advised before the copy touches its
        // pages), the old contents copied, the old block freed.
        // SAFETY: `new` is a valid non-zero layout; both blocks are live
        // and distinct while the bytes are copied.
        unsafe {
            let p = System.alloc(new);
            advise(p, new);
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

    /// An allocator whose own switch is on (the process's stays as the
    /// other tests left it).
    fn engaged() -> CacheLineAligned {
        static ON: AtomicBool = AtomicBool::new(true);
        CacheLineAligned { engaged: &ON }
    }

    #[test]
    fn until_engaged_blocks_are_placed_as_asked_and_move_when_grown_after() {
        static SWITCH: AtomicBool = AtomicBool::new(false);
        let a = CacheLineAligned { engaged: &SWITCH };
        let l = Layout::from_size_align(5000, 4).unwrap();
        assert_eq!(a.layout(l), l);
        // SAFETY: each pointer is the live block of the layout passed with it.
        unsafe {
            // glibc places a block 16 bytes past its header: several
            // blocks, so that one not on a line is among them.
            let ps: Vec<*mut u8> = (0..8).map(|_| a.alloc(l)).collect();
            assert!(ps.iter().any(|p| !(*p as usize).is_multiple_of(LINE)));
            SWITCH.store(true, Ordering::Relaxed);
            assert_eq!(a.layout(l).align(), LINE);
            for (i, p) in ps.into_iter().enumerate() {
                for j in 0..5000 {
                    *p.add(j) = (j % 253) as u8;
                }
                if i % 2 == 0 {
                    // Made before, grown after: on a line, contents kept.
                    let q = a.realloc(p, l, 9000);
                    assert_eq!(q as usize % LINE, 0);
                    assert!((0..5000).all(|j| *q.add(j) == (j % 253) as u8));
                    a.dealloc(q, Layout::from_size_align(9000, 4).unwrap());
                } else {
                    a.dealloc(p, l);
                }
            }
        }
    }

    /// Large blocks start at a line, however they were made; small ones
    /// keep what they asked for; growing across the threshold and back
    /// keeps the contents.
    /// A block of `size` bytes (asked at 4-byte alignment) from `a`,
    /// zeroed where asked: checked to be there, to start at a multiple of
    /// `at`, and zeroed where asked. Free it with [`freed`].
    fn checked(a: &CacheLineAligned, size: usize, zeroed: bool, at: usize) -> *mut u8 {
        let l = Layout::from_size_align(size, 4).unwrap();
        // SAFETY: a non-zero layout; the caller frees the block with it.
        unsafe {
            let p = if zeroed {
                a.alloc_zeroed(l)
            } else {
                a.alloc(l)
            };
            assert!(!p.is_null());
            assert_eq!(p as usize % at, 0, "{size} bytes, zeroed {zeroed}");
            if zeroed {
                assert!(std::slice::from_raw_parts(p, size).iter().all(|&b| b == 0));
            }
            p
        }
    }

    /// Frees a block [`checked`] made of `size` bytes.
    fn freed(a: &CacheLineAligned, p: *mut u8, size: usize) {
        // SAFETY: `p` is the live block `checked` made with this layout.
        unsafe { a.dealloc(p, Layout::from_size_align(size, 4).unwrap()) }
    }

    #[test]
    fn large_blocks_start_at_a_cache_line_and_keep_their_contents() {
        let a = engaged();
        for size in [1024usize, 4096, 100_000, 1 << 21] {
            for zeroed in [false, true] {
                freed(&a, checked(&a, size, zeroed, LINE), size);
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

    /// Blocks of 2 MiB or more start at a huge page and are advised as
    /// huge pages (the kernel marks their mapping `hg`), before their first
    /// touch: zeroed ones read as zeros; growing across the threshold and
    /// within it keeps the contents and the advice. (Whether a smaller
    /// block's mapping is marked depends on what the heap held there
    /// before, so it is not asserted.)
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn large_blocks_start_at_a_huge_page_advised_as_one() {
        // The mapping's flags for the page at `p`, from /proc/self/smaps.
        fn flags_at(p: *const u8) -> String {
            let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
            let a = p as usize;
            let mut inside = false;
            for line in smaps.lines() {
                let range = line.split_whitespace().next().unwrap_or("");
                if let Some((lo, hi)) = range.split_once('-')
                    && let (Ok(lo), Ok(hi)) =
                        (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                {
                    inside = (lo..hi).contains(&a);
                } else if inside && let Some(f) = line.strip_prefix("VmFlags:") {
                    return f.to_string();
                }
            }
            panic!("no mapping holds {a:#x}");
        }
        // Whether this kernel takes the advice at all (built with THP, the
        // process not barred from it): asked of a mapping of its own.
        // SAFETY: a private anonymous mapping, advised and unmapped here.
        let thp = unsafe {
            let n = 2 * HUGE;
            let m = libc::mmap(
                std::ptr::null_mut(),
                n,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            m != libc::MAP_FAILED && {
                let ok = libc::madvise(m, n, libc::MADV_HUGEPAGE) == 0;
                libc::munmap(m, n);
                ok
            }
        };
        if !thp {
            eprintln!("this kernel refuses MADV_HUGEPAGE: the advice is not checked");
        }
        let a = engaged();
        let advised = |p: *const u8| flags_at(p).split_whitespace().any(|f| f == "hg");
        for (size, zeroed) in [(HUGE, false), (3 * HUGE + 4096, true), (HUGE + 12, false)] {
            let p = checked(&a, size, zeroed, HUGE);
            if thp {
                assert!(advised(p), "{size} bytes: {}", flags_at(p));
            }
            freed(&a, p, size);
        }
        // SAFETY: each pointer is the live block of the layout passed with it.
        unsafe {
            let l = Layout::from_size_align(100_000, 4).unwrap();
            let p = a.alloc(l);
            for i in 0..100_000 {
                *p.add(i) = (i % 251) as u8;
            }
            let q = a.realloc(p, l, HUGE + 1);
            assert_eq!(q as usize % HUGE, 0);
            assert!((0..100_000).all(|i| *q.add(i) == (i % 251) as u8));
            if thp {
                assert!(advised(q), "grown: {}", flags_at(q));
            }
            let l2 = Layout::from_size_align(HUGE + 1, 4).unwrap();
            let r = a.realloc(q, l2, 2 * HUGE);
            assert_eq!(r as usize % HUGE, 0);
            assert!((0..100_000).all(|i| *r.add(i) == (i % 251) as u8));
            if thp {
                assert!(advised(r), "grown again: {}", flags_at(r));
            }
            a.dealloc(r, Layout::from_size_align(2 * HUGE, 4).unwrap());
        }
    }
}
