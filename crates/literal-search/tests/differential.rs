//! The literal search agrees with the real `rg --fixed-strings` hit for hit, on generated trees.

mod support;

use std::collections::BTreeSet;

use index_contract::{SearchMode, SearchRequest};
use literal_search::{LiteralSearch, LiteralSearchConfig};
use support::{Rng, WORDS, generated_tree, rg_hits};

fn ours(
    search: &LiteralSearch,
    query: &str,
    ci: bool,
    scope: Option<&str>,
) -> BTreeSet<(String, u64, u64)> {
    let mut req = SearchRequest::new(query, SearchMode::Literal);
    req.case_insensitive = ci;
    req.path = scope.map(str::to_owned);
    req.max_results = Some(10_000);
    let result = search.search_blocking(&req).expect("search");
    assert!(
        result.complete,
        "query {query:?} did not complete: {:?}",
        result.stopped
    );
    result
        .hits
        .into_iter()
        .map(|h| (h.path, h.line, h.column))
        .collect()
}

/// Returns how many hits both agreed on, so callers can prove the comparison was not vacuous.
fn check(
    search: &LiteralSearch,
    root: &std::path::Path,
    query: &str,
    ci: bool,
    scope: Option<&str>,
) -> usize {
    let expected = rg_hits(root, query, ci, scope);
    let actual = ours(search, query, ci, scope);
    if actual != expected {
        let missing: Vec<_> = expected.difference(&actual).take(5).collect();
        let extra: Vec<_> = actual.difference(&expected).take(5).collect();
        panic!("query {query:?} ci={ci} scope={scope:?}: missing {missing:?}, extra {extra:?}");
    }
    expected.len()
}

#[test]
fn literal_hits_equal_ripgrep_on_generated_trees() {
    let mut queries_run = 0;
    let mut hits_compared = 0;
    for seed in 1..=3u64 {
        let (tree, _outside) = generated_tree(seed);
        let root = tree.path();
        let search = LiteralSearch::with_config(
            root,
            LiteralSearchConfig {
                limits: index_contract::limits::SearchLimits::new(
                    10_000,
                    4096,
                    std::time::Duration::from_secs(60),
                )
                .unwrap(),
                ..Default::default()
            },
        )
        .unwrap();
        let mut rng = Rng::new(seed * 31);
        let mut queries: Vec<String> = [
            "fn main",
            "main",
            "secret",
            "excluded",
            "generated",
            "utf16",
            "negated",
            "kept",
            "before nul",
            "after nul",
            "café",
            "日本語",
            "invalid",
            "\u{FFFD}",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for _ in 0..25 {
            let a = *rng.pick(WORDS);
            let q = if rng.below(2) == 0 {
                a.to_owned()
            } else {
                format!("{a} {}", rng.pick(WORDS))
            };
            queries.push(q);
        }
        for q in &queries {
            for ci in [false, true] {
                for scope in [
                    None,
                    Some("src"),
                    Some("sub"),
                    Some("ünï"),
                    Some("name with space"),
                ] {
                    hits_compared += check(&search, root, q, ci, scope);
                    queries_run += 1;
                }
            }
        }
    }
    assert!(queries_run > 300);
    assert!(hits_compared > 10_000, "only {hits_compared} hits compared");
}

#[test]
fn long_line_stream_path_agrees_with_ripgrep() {
    // A heap limit far below the line length forces the bounded streaming path.
    let (tree, _outside) = generated_tree(7);
    let root = tree.path();
    let mut big = Vec::new();
    for i in 0..3 {
        big.extend(std::iter::repeat_n(b'q', 3_000_000 + i * 1_000_001));
        big.extend_from_slice(" fn main CAFÉ needle ".as_bytes());
        big.extend(std::iter::repeat_n(b'r', 1_500_000));
        big.extend_from_slice(b" needle again\nshort needle line\n");
    }
    support::write(root, "huge/one.txt", &big);
    let search = LiteralSearch::with_config(
        root,
        LiteralSearchConfig {
            heap_limit_bytes: 1 << 20,
            ..Default::default()
        },
    )
    .unwrap();
    let mut in_huge = 0;
    for (q, ci) in [
        ("needle", false),
        ("café", true),
        ("fn main", false),
        ("qqqr", false),
    ] {
        in_huge += check(&search, root, q, ci, Some("huge"));
        check(&search, root, q, ci, None);
    }
    // needle: 3 long lines + 3 short lines; café: 3; fn main: 3; qqqr: none (q and r never touch).
    assert_eq!(in_huge, 6 + 3 + 3);
}
