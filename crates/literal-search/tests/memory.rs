//! The memory bound, measured with a counting allocator. It is alone in its test binary so that
//! no other test's allocations count towards the peak.

mod support;

use std::time::Duration;

use index_contract::{SearchMode, SearchRequest};
use index_testkit::alloc::{self, CountingAllocator};
use literal_search::LiteralSearch;

#[global_allocator]
static ALLOC: CountingAllocator = CountingAllocator;

#[test]
fn a_1_gib_single_line_file_does_not_cost_1_gib() {
    let dir = tempfile::tempdir().unwrap();
    support::write_gib_line(dir.path());
    let search = LiteralSearch::new(dir.path()).unwrap();
    let base = alloc::start();
    let mut r = SearchRequest::new("needle", SearchMode::Literal);
    r.deadline = Some(Duration::from_secs(120));
    let result = search.search_blocking(&r).unwrap();
    let peak = alloc::peak_over(base);
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
