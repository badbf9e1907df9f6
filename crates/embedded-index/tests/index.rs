//! The embedded index: answers equal ripgrep's, updates, corruption, concurrency.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use embedded_index::{EmbeddedIndex, EmbeddedIndexConfig};
use index_contract::{IndexState, SearchMode, SearchRequest};
use index_testkit::{rg, tree};

fn query(
    index: &EmbeddedIndex,
    q: &str,
    ci: bool,
    scope: Option<&str>,
) -> BTreeMap<String, (u64, u64)> {
    let mut r = SearchRequest::new(q, SearchMode::IndexedLiteral);
    r.case_insensitive = ci;
    r.path = scope.map(str::to_owned);
    r.max_results = Some(100_000);
    let resp = index.search_now(&r).unwrap();
    assert!(resp.complete);
    for h in &resp.hits {
        assert!((0.0..=1.0).contains(&h.score));
    }
    resp.hits
        .into_iter()
        .map(|h| (h.path, (h.line, h.column)))
        .collect()
}

/// ripgrep's first match per file.
fn rg_first(root: &Path, q: &str, ci: bool, scope: Option<&str>) -> BTreeMap<String, (u64, u64)> {
    let mut m = BTreeMap::new();
    for (p, l, c) in rg::rg_hits(root, q, ci, scope) {
        m.entry(p).or_insert((l, c));
    }
    m
}

#[test]
fn hits_equal_ripgreps_first_match_per_file() {
    let mut compared = 0;
    // Tiny segments, so queries cross many of them, or the same merged into one by streaming.
    for (seed, merged_segment_bytes) in [(1, 0), (2, 0), (1, 1 << 30)] {
        let (tree, _outside) = tree::generated_tree(seed);
        let store = tempfile::tempdir().unwrap();
        let config = EmbeddedIndexConfig {
            pairs_per_segment: 500,
            merged_segment_bytes,
            ..Default::default()
        };
        let index = EmbeddedIndex::with_config(tree.path(), store.path(), config).unwrap();
        let stats = index.build("r1").unwrap();
        assert!(stats.batches > 10, "{stats:?}");
        let merged = if merged_segment_bytes == 0 {
            stats.batches
        } else {
            1
        };
        assert_eq!(stats.segments, merged, "{stats:?}");
        let mut queries: Vec<String> = [
            "fn main",
            "main",
            "café",
            "CAFÉ",
            "kelvin",
            "Straße",
            "日本語",
            "x",
            "fn",
            "->",
            "before nul",
            "utf16",
            "Index",
            "ΣΊΣΥΦΟΣ",
            "secret",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut rng = tree::Rng::new(seed);
        for _ in 0..20 {
            queries.push(format!(
                "{} {}",
                rng.pick(tree::WORDS),
                rng.pick(tree::WORDS)
            ));
        }
        for q in &queries {
            for ci in [false, true] {
                for scope in [None, Some("src"), Some("sub")] {
                    let ours = query(&index, q, ci, scope);
                    let theirs = rg_first(tree.path(), q, ci, scope);
                    assert_eq!(ours, theirs, "query {q:?} ci={ci} scope={scope:?}");
                    compared += theirs.len();
                }
            }
        }
    }
    assert!(compared > 1000, "only {compared} file hits compared");
}

#[test]
fn incremental_updates_track_the_worktree() {
    let (tree, _outside) = tree::generated_tree(4);
    let root = tree.path();
    let store = tempfile::tempdir().unwrap();
    // The build's batches merged into one segment, which the updates then build on.
    let config = EmbeddedIndexConfig {
        max_small_segments: 2,
        pairs_per_segment: 500,
        ..Default::default()
    };
    let index = EmbeddedIndex::with_config(root, store.path(), config).unwrap();
    assert_eq!(index.build("r1").unwrap().segments, 1);
    let check = |index: &EmbeddedIndex| {
        for q in ["fn main", "zebra_unique", "edited_marker", "src"] {
            assert_eq!(
                query(index, q, false, None),
                rg_first(root, q, false, None),
                "{q}"
            );
        }
    };
    check(&index);
    for round in 0..6 {
        // Edit, add, delete and rename, then tell the index exactly that.
        std::fs::write(root.join("crlf.txt"), format!("edited_marker {round}\n")).unwrap();
        std::fs::write(root.join(format!("new_{round}.rs")), "zebra_unique\n").unwrap();
        let gone = format!("new_{}.rs", round.max(1) - 1);
        let _ = std::fs::remove_file(root.join(&gone));
        index
            .apply(
                &["crlf.txt".into(), format!("new_{round}.rs")],
                &[gone],
                Some(&format!("r{}", round + 2)),
            )
            .unwrap();
        check(&index);
        assert_eq!(
            index.current_status().source_revision.as_deref(),
            Some(format!("r{}", round + 2).as_str())
        );
    }
    // Reopen: same answers, no rebuild.
    drop(index);
    let index = EmbeddedIndex::open(root, store.path()).unwrap();
    check(&index);
    // Small segments were merged: the directory holds the build's segment plus at most a few.
    let segs = std::fs::read_dir(store.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".idx")
        })
        .count();
    assert!(segs <= 4, "{segs} segment files");
}

#[test]
fn a_corrupt_file_is_reported_failed_never_served() {
    let (tree, _outside) = tree::generated_tree(5);
    let store = tempfile::tempdir().unwrap();
    let index = EmbeddedIndex::open(tree.path(), store.path()).unwrap();
    index.build("r1").unwrap();
    drop(index);
    let seg = std::fs::read_dir(store.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "idx"))
        .unwrap();
    let mut bytes = std::fs::read(&seg).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&seg, &bytes).unwrap();
    let index = EmbeddedIndex::open(tree.path(), store.path()).unwrap();
    assert_eq!(index.current_status().state, IndexState::Failed);
    let resp = index
        .search_now(&SearchRequest::new("fn main", SearchMode::IndexedLiteral))
        .unwrap();
    assert!(resp.hits.is_empty());
    assert_eq!(resp.status.state, IndexState::Failed);
    // A damaged manifest too.
    std::fs::write(
        store.path().join("MANIFEST"),
        b"{\"crc32\":1,\"body\":\"{}\"}",
    )
    .unwrap();
    assert_eq!(
        EmbeddedIndex::open(tree.path(), store.path())
            .unwrap()
            .current_status()
            .state,
        IndexState::Failed
    );
    // A rebuild repairs it.
    index.build("r2").unwrap();
    assert_eq!(index.current_status().state, IndexState::Ready);
}

#[test]
fn each_query_sees_exactly_one_committed_version() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // Every version K holds exactly the files v{K}_0..v{K}_9, each containing "marker".
    let write_version = |k: usize| {
        for i in 0..10 {
            std::fs::write(root.join(format!("v{k}_{i}.txt")), "marker\n").unwrap();
        }
    };
    write_version(0);
    let store = tempfile::tempdir().unwrap();
    let index = EmbeddedIndex::open(root, store.path()).unwrap();
    index.build("v0").unwrap();
    std::thread::scope(|s| {
        let index = &index;
        s.spawn(move || {
            for k in 1..30 {
                write_version(k);
                let up: Vec<String> = (0..10).map(|i| format!("v{k}_{i}.txt")).collect();
                let rm: Vec<String> = (0..10).map(|i| format!("v{}_{i}.txt", k - 1)).collect();
                index.apply(&up, &rm, Some(&format!("v{k}"))).unwrap();
            }
        });
        for _ in 0..300 {
            let resp = index
                .search_now(&SearchRequest::new("marker", SearchMode::IndexedLiteral))
                .unwrap();
            let rev = resp.status.source_revision.clone().unwrap();
            let k: usize = rev[1..].parse().unwrap();
            let paths: BTreeSet<String> = resp.hits.iter().map(|h| h.path.clone()).collect();
            let expected: BTreeSet<String> = (0..10).map(|i| format!("v{k}_{i}.txt")).collect();
            // Old files are left on disk by the writer, so verification cannot hide a mix.
            assert_eq!(paths, expected, "a query mixed versions (attested {rev})");
        }
    });
}
