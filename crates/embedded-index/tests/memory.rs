//! The memory bound of indexing and verifying, measured with a counting allocator. Alone in its
//! test binary so that no other test's allocations count towards the peak.

use std::time::Duration;

use embedded_index::{EmbeddedIndex, EmbeddedIndexConfig};
use index_contract::{SearchMode, SearchRequest};
use index_testkit::alloc::{self, CountingAllocator};

#[global_allocator]
static ALLOC: CountingAllocator = CountingAllocator;

#[test]
fn a_1_gib_single_line_file_is_indexed_and_found_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    index_testkit::tree::write_gib_line(dir.path());
    std::fs::write(dir.path().join("small.txt"), "no match here\n").unwrap();
    let store = tempfile::tempdir().unwrap();
    let config = EmbeddedIndexConfig {
        threads: Some(2),
        ..Default::default()
    };
    let index = EmbeddedIndex::with_config(dir.path(), store.path(), config).unwrap();

    let base = alloc::start();
    index.build("r1").unwrap();
    let build_peak = alloc::peak_over(base);

    let base = alloc::start();
    let mut r = SearchRequest::new("needle", SearchMode::IndexedLiteral);
    r.deadline = Some(Duration::from_secs(120));
    let found = index.search_now(&r).unwrap();
    let search_peak = alloc::peak_over(base);

    assert!(found.complete);
    assert_eq!(found.hits.len(), 1, "{:?}", found.hits);
    let hit = &found.hits[0];
    assert_eq!(hit.path, "one-line.txt");
    assert_eq!((hit.line, hit.column), (1, (1u64 << 30) + 1));
    eprintln!(
        "peak heap over baseline: build {} KiB, search {} KiB",
        build_peak >> 10,
        search_peak >> 10
    );
    // The build streams each file in 256 KiB chunks through a 2 MiB trigram set per thread; the
    // segment encoder's fixed 64 MiB count table is the rest. Reading the file whole would cost
    // 1 GiB.
    assert!(
        build_peak < 96 << 20,
        "build peak heap {} MiB",
        build_peak >> 20
    );
    // Verification takes the literal search's bounded stream past the 4 MiB line limit.
    assert!(
        search_peak < 24 << 20,
        "search peak heap {} MiB",
        search_peak >> 20
    );
}
