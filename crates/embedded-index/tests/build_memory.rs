//! Build memory is bounded by the segment, not the corpus: doubling the corpus leaves the peak
//! flat. Alone in its test binary so that no other test's allocations count towards the peak.

use embedded_index::{EmbeddedIndex, EmbeddedIndexConfig};
use index_testkit::alloc::{self, CountingAllocator};

#[global_allocator]
static ALLOC: CountingAllocator = CountingAllocator;

/// Writes `files` files of about 6 KiB of varied text each.
fn corpus(files: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for f in 0..files {
        let mut text = String::new();
        while text.len() < 6 * 1024 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            text.push_str(&format!("ident_{:x} ", x % 1_000_003));
            if x.is_multiple_of(9) {
                text.push('\n');
            }
        }
        let path = dir.path().join(format!("d{}/f{f}.txt", f % 37));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

fn build_peak(files: usize) -> usize {
    let tree = corpus(files);
    let store = tempfile::tempdir().unwrap();
    let config = EmbeddedIndexConfig {
        threads: Some(2),
        pairs_per_segment: 400_000,
        ..Default::default()
    };
    let index = EmbeddedIndex::with_config(tree.path(), store.path(), config).unwrap();
    let base = alloc::start();
    let stats = index.build("r1").unwrap();
    assert_eq!(stats.files, files);
    // Written in batches, then merged into one segment by streaming: both within the bound.
    assert!(stats.batches > 2, "{stats:?}");
    assert_eq!(stats.segments, 1, "{stats:?}");
    alloc::peak_over(base)
}

#[test]
fn build_peak_heap_is_flat_when_the_corpus_doubles() {
    let one = build_peak(1500);
    let two = build_peak(3000);
    eprintln!(
        "build peak heap: {} KiB for 1500 files, {} KiB for 3000",
        one >> 10,
        two >> 10
    );
    // Twice the files, twice the batches, the same peak (within noise): what a batch holds
    // bounds it, plus the encoder's fixed table; the merge holds a round of blocks of lists.
    assert!(two < one + one / 5, "{one} -> {two}");
}
