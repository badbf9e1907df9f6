//! The index follows the one profile: it selects the files the literal search and ripgrep select,
//! and its verification detects binary files as a fresh searcher does, whatever it verified
//! before.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use embedded_index::{EmbeddedIndex, EmbeddedIndexConfig};
use index_contract::limits::SearchLimits;
use index_contract::{SearchMode, SearchRequest};
use index_testkit::{rg, tree};
use literal_search::{LiteralSearch, LiteralSearchConfig};

/// Each file's first match: path → (line, column).
type FirstMatches = BTreeMap<String, (u64, u64)>;

fn request(mode: SearchMode, query: &str, scope: Option<&str>) -> SearchRequest {
    let mut r = SearchRequest::new(query, mode);
    r.max_results = Some(10_000);
    r.path = scope.map(str::to_owned);
    r
}

/// The index's answer on one verifying thread.
fn index_hits(index: &EmbeddedIndex, query: &str, scope: Option<&str>) -> FirstMatches {
    let resp = index
        .search_now(&request(SearchMode::IndexedLiteral, query, scope))
        .unwrap();
    assert!(resp.complete);
    resp.hits
        .into_iter()
        .map(|h| (h.path, (h.line, h.column)))
        .collect()
}

/// The literal search's first hit per file, on one thread.
fn literal_hits(literal: &LiteralSearch, query: &str, scope: Option<&str>) -> FirstMatches {
    let result = literal
        .search_blocking(&request(SearchMode::Literal, query, scope))
        .unwrap();
    assert!(result.complete);
    let mut first = BTreeMap::new();
    for h in result.hits {
        first.entry(h.path).or_insert((h.line, h.column));
    }
    first
}

/// How the long-line files and the late-NUL binaries are named, and so in which order one
/// thread verifies them (equal priors: path order).
#[derive(Debug, Clone, Copy)]
enum Layout {
    LongLinesFirst,
    BinariesFirst,
    Interleaved,
}

/// Five files with a 300 kB line (which grows a searcher's line buffer) and five binary files
/// whose first NUL lies at about 133 kB, past the first 64 KiB read, with hits before it. All are
/// `.rs` files at the root, so their path priors are equal.
fn binary_tree(layout: Layout) -> (tempfile::TempDir, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let mut late_names = Vec::new();
    for i in 0..5 {
        let (long, late) = match layout {
            Layout::LongLinesFirst => (format!("a_long{i}.rs"), format!("b_late{i}.rs")),
            Layout::BinariesFirst => (format!("b_long{i}.rs"), format!("a_late{i}.rs")),
            Layout::Interleaved => (
                format!("f{}_long.rs", 2 * i),
                format!("f{}_late.rs", 2 * i + 1),
            ),
        };
        let mut long_line = vec![b'x'; 300_000];
        long_line.extend_from_slice(b" hit\n");
        tree::write(dir.path(), &long, &long_line);
        let mut bytes = Vec::new();
        for n in 0..3_000 {
            bytes.extend_from_slice(if n % 10 == 3 {
                b"a hit on a short line of text\n"
            } else {
                b"filler on a short line of text\n"
            });
        }
        bytes.extend(std::iter::repeat_n(b'y', 40_000));
        bytes.extend_from_slice(b"\n\x00hit after the nul\n");
        tree::write(dir.path(), &late, &bytes);
        late_names.push(late);
    }
    (dir, late_names)
}

#[test]
fn binary_detection_in_verification_does_not_depend_on_what_a_thread_verified_before() {
    // The index-side twin of the literal search's
    // `binary_detection_does_not_depend_on_what_a_thread_searched_before`: one verifying thread
    // meets the long lines before (or around) the binaries; each binary's first hit must be the
    // one a fresh searcher finds, which is what the literal search reports for it.
    let limits = SearchLimits::new(10_000, 4096, Duration::from_secs(60)).unwrap();
    for layout in [
        Layout::LongLinesFirst,
        Layout::BinariesFirst,
        Layout::Interleaved,
    ] {
        let (dir, late_names) = binary_tree(layout);
        let store = tempfile::tempdir().unwrap();
        let one_thread = EmbeddedIndexConfig {
            threads: Some(1),
            ..Default::default()
        };
        let index = EmbeddedIndex::with_config(dir.path(), store.path(), one_thread).unwrap();
        index.build("r1").unwrap();
        let literal = LiteralSearch::with_config(
            dir.path(),
            LiteralSearchConfig {
                threads: Some(1),
                limits,
                ..Default::default()
            },
        )
        .unwrap();
        // Each binary searched alone, by a fresh searcher: the answer every order must give.
        let mut alone = FirstMatches::new();
        for name in &late_names {
            let by_literal = literal_hits(&literal, "hit", Some(name));
            assert_eq!(
                by_literal.get(name),
                Some(&(4, 3)),
                "{layout:?}: a fresh searcher keeps the hits before the NUL's read"
            );
            assert_eq!(
                index_hits(&index, "hit", Some(name)),
                by_literal,
                "{layout:?}"
            );
            alone.extend(by_literal);
        }
        for run in 0..5 {
            let by_index = index_hits(&index, "hit", None);
            let by_literal = literal_hits(&literal, "hit", None);
            assert_eq!(by_index.len(), 10, "{layout:?}, run {run}: {by_index:?}");
            for (name, first) in &alone {
                assert_eq!(
                    by_index.get(name),
                    Some(first),
                    "{layout:?}, run {run}: the index's first hit in {name}"
                );
            }
            assert_eq!(by_index, by_literal, "{layout:?}, run {run}");
        }
    }
}

fn set(paths: impl IntoIterator<Item = String>) -> BTreeSet<String> {
    paths.into_iter().collect()
}

/// The differences between two selections, for a failure message.
fn diff(left: &BTreeSet<String>, right: &BTreeSet<String>) -> String {
    let only_left: Vec<&String> = left.difference(right).collect();
    let only_right: Vec<&String> = right.difference(left).collect();
    format!("only in the first: {only_left:?}; only in the second: {only_right:?}")
}

fn check_selection(root: &Path, what: &str, at_least: usize) {
    let store = tempfile::tempdir().unwrap();
    let index = EmbeddedIndex::open(root, store.path()).unwrap();
    index.build("r1").unwrap();
    let indexed = set(index.indexed_paths());
    let profile = set(search_profile::Selection::held(root).files());
    // The index holds `rg --hidden`'s selection (never git's internals, which rg lists with
    // `--hidden`), and the default selection is the part of it that `HiddenRules` keeps.
    let in_git = |p: &String| p.split('/').any(index_guard::is_git_internal_segment);
    let ripgrep: BTreeSet<String> = rg::rg_files_with(root, &["--hidden"])
        .into_iter()
        .filter(|p| !in_git(p))
        .collect();
    let rules = search_profile::HiddenRules::walk(
        root,
        1,
        indexed
            .iter()
            .map(String::as_str)
            .filter(|p| search_profile::has_hidden_component(p)),
    );
    let default: BTreeSet<String> = indexed
        .iter()
        .filter(|p| rules.selects(&Default::default(), p))
        .cloned()
        .collect();
    assert!(
        default == rg::rg_files(root),
        "{what}: the index's default selection vs rg --files: {}",
        diff(&default, &rg::rg_files(root))
    );
    assert!(
        indexed.len() >= at_least,
        "{what}: only {} files indexed",
        indexed.len()
    );
    assert!(
        indexed == profile,
        "{what}: index vs profile: {}",
        diff(&indexed, &profile)
    );
    assert!(
        profile == ripgrep,
        "{what}: profile vs rg --files --hidden: {}",
        diff(&profile, &ripgrep)
    );
    assert_eq!(
        index.selection(),
        search_profile::Selection::held(root).files()
    );
}

#[test]
fn indexed_paths_equal_the_profiles_selection_and_rg_files() {
    for seed in [1, 2, 3] {
        let (tree, _outside) = tree::generated_tree(seed);
        check_selection(tree.path(), &format!("generated tree {seed}"), 30);
        // A root below the git root: the parents' ignore files still apply, for rg as for us.
        check_selection(
            &tree.path().join("sub"),
            &format!("generated tree {seed}, rooted at sub/"),
            1,
        );
    }
}
