//! A counting global allocator, so heap figures are measured rather than estimated.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Forwards to [`System`] and counts live bytes and their peak. Install it with
/// `#[global_allocator] static A: CountingAllocator = CountingAllocator;` in a binary of its own.
#[derive(Debug, Default)]
pub struct CountingAllocator;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// Counts `size` newly live bytes and raises the peak to the new total.
fn added(size: usize) {
    let now = LIVE.fetch_add(size, Ordering::Relaxed) + size;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call forwards to `System` with the caller's own arguments; the counters are
// plain atomics and never affect what is allocated.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            added(layout.size());
        }
        p
    }

    /// Forwarded to the system's own zeroed allocation, so that a large zeroed buffer (the
    /// trigram bitsets, the encoder's 64 MiB cursor) costs what it costs without this allocator:
    /// pages the kernel zeroes when first touched, not a `memset` of every byte up front, which
    /// made every measured apply about 40 ms slower.
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `alloc_zeroed`'s contract.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            added(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged; the caller upholds `dealloc`'s contract.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `realloc`'s contract.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            added(new_size);
        }
        p
    }
}

/// Live heap bytes now. Zero unless [`CountingAllocator`] is the global allocator.
pub fn live() -> usize {
    LIVE.load(Ordering::SeqCst)
}

/// Starts a measurement: resets the peak to the current live bytes and returns them.
pub fn start() -> usize {
    let now = live();
    PEAK.store(now, Ordering::SeqCst);
    now
}

/// Peak bytes above `baseline` since [`start`].
pub fn peak_over(baseline: usize) -> usize {
    PEAK.load(Ordering::SeqCst).saturating_sub(baseline)
}

/// Whether the counting allocator is installed (it has seen an allocation).
pub fn installed() -> bool {
    let probe = vec![0u8; 64];
    let seen = live() >= probe.len();
    drop(probe);
    seen
}
