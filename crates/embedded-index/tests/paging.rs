//! Paging: the index's hits are always the first hits of one deterministic order, so pages cut
//! from bigger and bigger windows concatenate to the uncapped answer.

use embedded_index::{EmbeddedIndex, EmbeddedIndexConfig};
use index_contract::{BackendHit, SearchMode, SearchRequest};
use index_testkit::tree;

/// A tree of `n` files, most of them matching `marker` in one of several shapes, spread over
/// directories of different priors.
fn many_matches(n: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = tree::Rng::new(7);
    let dirs = ["src", "src/a/b", "tests", "docs", "vendor/x", "lib"];
    let lines: [&str; 4] = [
        "fn marker() {}\n",
        "    marker();\n",
        "let x = marker_y;\n",
        "nothing here\n",
    ];
    for i in 0..n {
        let d = *rng.pick(&dirs);
        let mut body = String::new();
        for _ in 0..1 + rng.below(3) {
            let line: &&str = rng.pick(&lines);
            body.push_str(line);
        }
        tree::write(dir.path(), &format!("{d}/f{i}.rs"), body.as_bytes());
    }
    dir
}

fn search(index: &EmbeddedIndex, max_results: usize) -> (Vec<BackendHit>, bool) {
    let mut r = SearchRequest::new("marker", SearchMode::IndexedLiteral);
    r.max_results = Some(max_results);
    let resp = index.search_now(&r).unwrap();
    (resp.hits, resp.complete)
}

#[test]
fn pages_concatenate_to_the_uncapped_answer() {
    let tree = many_matches(2600);
    let store = tempfile::tempdir().unwrap();
    // Small segments, so that candidates of one prior come from many segments.
    let config = EmbeddedIndexConfig {
        pairs_per_segment: 2000,
        merged_segment_bytes: 0,
        ..Default::default()
    };
    let index = EmbeddedIndex::with_config(tree.path(), store.path(), config).unwrap();
    index.build("r1").unwrap();
    let (all, complete) = search(&index, 100_000);
    assert!(complete);
    assert!(all.len() > 2 * 1000, "only {} hits", all.len());
    for page in [1, 7, 333, 1000, 1500] {
        let mut joined: Vec<BackendHit> = Vec::new();
        while joined.len() < all.len() {
            let offset = joined.len();
            let (window, _) = search(&index, offset + page);
            assert_eq!(
                window[..offset],
                all[..offset],
                "page size {page} at {offset}"
            );
            joined.extend(window.into_iter().skip(offset));
            if page == 1 && offset > 40 {
                // Single-hit pages over the whole answer would take too long in a debug build:
                // the first ones cross the early stop within the first block.
                break;
            }
        }
        assert_eq!(joined[..], all[..joined.len()], "page size {page}");
    }
}

#[test]
fn an_answer_within_one_block_is_ranked_as_a_whole() {
    let tree = many_matches(600);
    let store = tempfile::tempdir().unwrap();
    let index = EmbeddedIndex::open(tree.path(), store.path()).unwrap();
    index.build("r1").unwrap();
    let (all, complete) = search(&index, 1000);
    assert!(complete);
    assert!(all.len() > 300, "only {} hits", all.len());
    for pair in all.windows(2) {
        assert!(
            pair[0].score > pair[1].score
                || pair[0].score == pair[1].score && pair[0].path < pair[1].path,
            "{} ({}) before {} ({})",
            pair[0].path,
            pair[0].score,
            pair[1].path,
            pair[1].score
        );
    }
    // Definitions come first, whatever their directory's prior.
    assert!(all[0].snippet.starts_with("fn marker"));
}
