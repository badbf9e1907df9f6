//! Paging: pages taken at successive `next_offset`s concatenate to the uncapped answer, and a
//! change to the worktree before the page fails the page as stale.

mod support;

use index_contract::{
    ErrorCode, OutputMode, SearchHit, SearchMode, SearchRequest, StopReason, limits::SearchLimits,
};
use literal_search::{LiteralSearch, LiteralSearchConfig};
use support::generated_tree;

/// Pages through `request` at `size` hits a page; returns the concatenation and the page count.
fn page_through(
    search: &LiteralSearch,
    request: &SearchRequest,
    size: usize,
) -> (Vec<SearchHit>, usize) {
    let mut r = request.clone();
    r.max_results = Some(size);
    let mut all = Vec::new();
    let mut pages = 0;
    loop {
        let page = search.search_blocking(&r).expect("page");
        pages += 1;
        assert!(page.hits.len() <= size);
        all.extend(page.hits);
        match page.next_offset {
            Some(next) => {
                assert_eq!(page.stopped, Some(StopReason::MaxResults));
                assert!(page.page_token.is_some());
                r.offset = next as usize;
                r.page_token = page.page_token;
            }
            None => {
                assert!(page.complete, "{:?}", page.stopped);
                assert!(page.page_token.is_none());
                return (all, pages);
            }
        }
    }
}

#[test]
fn pages_concatenate_to_the_uncapped_answer() {
    let (tree, _outside) = generated_tree(21);
    let search = LiteralSearch::with_config(
        tree.path(),
        LiteralSearchConfig {
            limits: SearchLimits::new(10_000, 4096, std::time::Duration::from_secs(60)).unwrap(),
            ..Default::default()
        },
    )
    .unwrap();
    let mut cases = Vec::new();
    let mut content = SearchRequest::new("main", SearchMode::Literal);
    content.context.before = 1;
    content.context.after = 2;
    cases.push(content);
    let mut regex = SearchRequest::new(r"\b(index|search)\b", SearchMode::Literal);
    regex.regex = true;
    regex.case_insensitive = true;
    cases.push(regex);
    for output in [OutputMode::Files, OutputMode::Count] {
        let mut r = SearchRequest::new("x", SearchMode::Literal);
        r.output = output;
        cases.push(r);
    }
    for request in &cases {
        let mut whole = request.clone();
        whole.max_results = Some(10_000);
        let uncapped = search.search_blocking(&whole).unwrap();
        assert!(uncapped.complete);
        assert!(
            uncapped.hits.len() > 20,
            "{:?}: too few hits to page",
            request.query
        );
        for size in [9, uncapped.hits.len() - 1, uncapped.hits.len()] {
            let (paged, pages) = page_through(&search, request, size);
            assert_eq!(paged, uncapped.hits, "{:?} by {size}", request.query);
            assert_eq!(pages, uncapped.hits.len().div_ceil(size).max(1));
        }
    }
}

#[test]
fn a_change_before_the_page_makes_it_stale_and_one_after_it_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for name in ["a.txt", "b.txt", "c.txt", "d.txt"] {
        support::write(root, name, b"needle\n");
    }
    let search = LiteralSearch::new(root).unwrap();
    let mut r = SearchRequest::new("needle", SearchMode::Literal);
    r.max_results = Some(2);
    let first = search.search_blocking(&r).unwrap();
    assert_eq!(first.next_offset, Some(2));
    r.offset = 2;
    r.page_token = first.page_token.clone();
    // A file after the first page changed: the next page still follows the first.
    support::write(root, "d.txt", b"needle\nneedle\n");
    let second = search.search_blocking(&r).unwrap();
    let paths: Vec<&str> = second.hits.iter().map(|h| h.path.as_str()).collect();
    assert_eq!(paths, ["c.txt", "d.txt"]);
    // A file of the first page changed: the hits would shift.
    support::write(root, "a.txt", b"no longer\n");
    let err = search.search_blocking(&r).unwrap_err();
    assert_eq!(err.code(), ErrorCode::Stale);
    // Another query with the first query's token is refused too.
    support::write(root, "a.txt", b"needle\n");
    assert!(search.search_blocking(&r).is_ok());
    r.case_insensitive = true;
    assert_eq!(
        search.search_blocking(&r).unwrap_err().code(),
        ErrorCode::Stale
    );
}

/// A generated tree padded with thousands of files that hold no match, so that a search of it
/// takes far longer than finding its first hits: a cancel sent a few milliseconds in then lands
/// between the first hit and the end of the walk whatever the machine's speed or load.
fn padded_tree(seed: u64) -> (tempfile::TempDir, tempfile::TempDir) {
    let (tree, outside) = generated_tree(seed);
    let filler = "nothing to find on this line, only words\n".repeat(100);
    for i in 0..4000 {
        let dir = tree.path().join(format!("zz_filler/d{}", i % 40));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("f{i}.txt")), &filler).unwrap();
    }
    (tree, outside)
}

/// Cancel delays from nothing up to about 100 ms, doubling.
fn cancel_delays() -> impl Iterator<Item = u64> {
    std::iter::once(0).chain((0..12).map(|k| 25u64 << k))
}

/// Searches `main` at `offset` with a `page`-hit page, cancelled after `delay_us`.
fn cancelled_after(
    search: &LiteralSearch,
    offset: usize,
    page: usize,
    delay_us: u64,
) -> index_contract::SearchResult {
    let mut r = SearchRequest::new("main", SearchMode::Literal);
    r.max_results = Some(page);
    r.offset = offset;
    let signal = r.signal.clone();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_micros(delay_us));
        signal.cancel();
    });
    let result = search.search_blocking(&r).unwrap();
    canceller.join().unwrap();
    result
}

#[test]
fn an_answer_stopped_by_a_cancel_is_no_page() {
    let (tree, _outside) = padded_tree(22);
    let search = LiteralSearch::new(tree.path()).unwrap();
    // Cancel later and later until the search has filled its one-hit page and is still walking:
    // the answer then holds a hit and more exist, which would earn a `next_offset` were it not
    // cut short.
    for delay_us in cancel_delays() {
        let result = cancelled_after(&search, 0, 1, delay_us);
        if result.stopped == Some(StopReason::Cancelled) && !result.hits.is_empty() {
            assert_eq!((result.next_offset, result.page_token), (None, None));
            return;
        }
    }
    panic!("no cancel landed after the first hit and before the end of the search");
}

#[test]
fn a_later_page_cut_short_holds_no_hit() {
    let (tree, _outside) = padded_tree(23);
    let search = LiteralSearch::new(tree.path()).unwrap();
    // A first page cut short after two hits proves the timing lets two hits be found before a
    // cancel; the second page, cut at the same moment, must then hold none of them, since hits
    // found in time are not the first of the order and no offset can be counted over them.
    let mut two_found = false;
    for delay_us in cancel_delays() {
        let first = cancelled_after(&search, 0, 2, delay_us);
        two_found |= first.stopped == Some(StopReason::Cancelled) && first.hits.len() == 2;
        let second = cancelled_after(&search, 1, 1, delay_us);
        if second.stopped == Some(StopReason::Cancelled) {
            assert!(second.hits.is_empty(), "{:?}", second.hits);
            assert!(!second.complete);
            assert_eq!((second.next_offset, second.page_token), (None, None));
        }
    }
    assert!(
        two_found,
        "no cancel landed after two hits and before the end of the search"
    );
}
