//! The specification's scale evidence, in the test chain: a 100 000-file metadata fixture behind
//! the full facade; indexed query p95 <= 250 ms; a 1000-file batch update <= 1 s; peak heap
//! <= +64 MiB; a never-answering semantic backend times out within deadline + 50 ms and caps hold;
//! literal through the facade is byte-identical to the bare fallback and within 5 % of its median.
//!
//! Timing is noisy on a shared 2-core machine, so a missed timing bar is measured again (up to
//! three runs); the bars themselves never move.

use repo_search_benches::alloc::{self, CountingAllocator};
use repo_search_benches::scale::{ScaleConfig, ScaleReport, run};

#[global_allocator]
static ALLOC: CountingAllocator = CountingAllocator;

#[test]
fn specification_scale_evidence() {
    assert!(
        alloc::installed(),
        "the counting allocator must be installed to measure heap"
    );
    let mut last: Option<ScaleReport> = None;
    for attempt in 1..=3 {
        let report = run(&ScaleConfig::default()).expect("scale check runs");
        eprintln!("attempt {attempt}:\n{}", report.table());
        // Correctness checks are never retried: they must hold every time.
        for (name, ok) in report.checks() {
            assert!(ok, "{name}");
        }
        assert!(report.peak_heap_bytes > 0, "heap was not measured");
        if report.spec_ok() {
            return;
        }
        last = Some(report);
    }
    let report = last.expect("three attempts ran");
    for f in report.figures() {
        assert!(
            f.spec_ok(),
            "{}: {:.3} {} over the specification's {} (three attempts)",
            f.name,
            f.value,
            f.unit,
            f.spec_bar
        );
    }
}
