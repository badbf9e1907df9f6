//! The memory bound, measured with a counting allocator. It is alone in its test binary so that
//! no other test's allocations count towards the peak.

// The counting allocator is the one place unsafe is needed: it forwards to `System`.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use index_contract::{SearchMode, SearchRequest};
use literal_search::LiteralSearch;

/// Counts live heap bytes and their peak, so the memory bound is measured rather than assumed.
struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

#[test]
fn a_1_gib_single_line_file_does_not_cost_1_gib() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let mut f = std::fs::File::create(dir.path().join("one-line.txt")).unwrap();
    let block = vec![b'a'; 1 << 20];
    for _ in 0..1024 {
        f.write_all(&block).unwrap();
    }
    f.write_all(b"needle\n").unwrap();
    drop(f);
    drop(block);
    let search = LiteralSearch::new(dir.path()).unwrap();
    let base = LIVE.load(Ordering::SeqCst);
    PEAK.store(base, Ordering::SeqCst);
    let mut r = SearchRequest::new("needle", SearchMode::Literal);
    r.deadline = Some(Duration::from_secs(120));
    let result = search.search_blocking(&r).unwrap();
    let peak = PEAK.load(Ordering::SeqCst) - base;
    assert!(result.complete, "{:?}", result.stopped);
    assert_eq!(result.hits.len(), 1);
    let hit = &result.hits[0];
    assert_eq!((hit.line, hit.column), (1, (1u64 << 30) + 1));
    assert!(hit.snippet_truncated);
    assert!(hit.snippet.ends_with("needle"), "{}", hit.snippet);
    eprintln!("peak heap over baseline: {} KiB", peak >> 10);
    // The line buffer grows to the 4 MiB line limit before the stream path takes over; the stream
    // then holds one 1 MiB chunk. Measured: about 6 MiB.
    assert!(peak < 16 << 20, "peak heap {} MiB", peak >> 20);
}
