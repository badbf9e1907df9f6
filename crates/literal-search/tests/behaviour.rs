//! Bounds, ordering, completeness and refusals of the literal search.

mod support;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use index_contract::{
    ErrorCode, OutputMode, RepositoryOperations, SearchMode, SearchRequest, SearchResult,
    StopReason,
};
use literal_search::{LiteralSearch, LiteralSearchConfig};
use support::write;

fn req(query: &str) -> SearchRequest {
    SearchRequest::new(query, SearchMode::Literal)
}

fn run(search: &LiteralSearch, r: SearchRequest) -> SearchResult {
    search.search_blocking(&r).expect("search")
}

/// A tree holding one file with a single line of 1 GiB, the match at its very end: made once, in
/// cargo's temporary directory for this target, and kept for the next run. (A static `TempDir`
/// is never dropped: it left a GiB in the system's temporary directory on every run, until the
/// disk was full.)
fn gib_tree() -> &'static std::path::Path {
    static TREE: OnceLock<std::path::PathBuf> = OnceLock::new();
    TREE.get_or_init(|| {
        let scratch = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
        let dir = scratch.join("literal-search-gib-tree");
        let file = dir.join("one-line.txt");
        let whole = (1u64 << 30) + "needle\n".len() as u64;
        if std::fs::metadata(&file).ok().map(|m| m.len()) != Some(whole) {
            std::fs::create_dir_all(&dir).unwrap();
            // Written beside and renamed, so that a run beside this one never reads half of it.
            let staging = tempfile::tempdir_in(scratch).unwrap();
            support::write_gib_line(staging.path());
            std::fs::rename(staging.path().join("one-line.txt"), &file).unwrap();
        }
        dir
    })
}

#[test]
fn deadline_is_honoured_within_50_ms() {
    let search = LiteralSearch::new(gib_tree()).unwrap();
    let mut r = req("not present anywhere");
    r.deadline = Some(Duration::from_millis(30));
    let started = Instant::now();
    let result = run(&search, r);
    let took = started.elapsed();
    assert_eq!(result.stopped, Some(StopReason::Deadline));
    assert!(!result.complete);
    assert!(took < Duration::from_millis(30 + 50), "took {took:?}");
}

#[test]
fn cancellation_is_honoured_within_50_ms() {
    let search = LiteralSearch::new(gib_tree()).unwrap();
    let r = req("not present anywhere");
    let signal = r.signal.clone();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(40));
        let at = Instant::now();
        signal.cancel();
        at
    });
    let result = run(&search, r);
    let returned = Instant::now();
    let cancelled_at = canceller.join().unwrap();
    assert_eq!(result.stopped, Some(StopReason::Cancelled));
    assert!(returned.duration_since(cancelled_at) < Duration::from_millis(50));
}

/// Names of this process's threads (Linux: `/proc/self/task/*/comm`).
#[cfg(target_os = "linux")]
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_owned())
        .collect()
}

#[cfg(target_os = "linux")]
#[test]
fn dropping_the_async_search_abandons_it() {
    // The async entry point runs the search on a thread named `literal-search` (this is the only
    // test in this binary that uses it). A search for absent text through the 1 GiB file takes
    // hundreds of milliseconds; once its future is dropped, the thread must be gone within
    // 100 ms (cancellation is honoured within 50 ms; the rest is slack for a loaded machine).
    let search = LiteralSearch::new(gib_tree()).unwrap();
    let future = RepositoryOperations::search(&search, req("absent text"));
    // A new thread names itself once it runs: wait for it to appear.
    let spawned = Instant::now();
    while !thread_names().iter().any(|n| n == "literal-search") {
        assert!(
            spawned.elapsed() < Duration::from_secs(2),
            "the search thread did not start"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(future);
    let dropped = Instant::now();
    while thread_names().iter().any(|n| n == "literal-search") {
        assert!(
            dropped.elapsed() < Duration::from_millis(100),
            "the dropped search kept running"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn numbered_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    // Names chosen so component order differs from byte order: `a/x` sorts before `a-b`.
    for name in ["b.txt", "a-b.txt", "a/x.txt", "a/y/z.txt", "c.txt"] {
        write(dir.path(), name, b"hit one\nmiss\nhit two\nhit three\n");
    }
    dir
}

#[test]
fn hits_are_ordered_by_path_components_then_line() {
    let dir = numbered_tree();
    let search = LiteralSearch::new(dir.path()).unwrap();
    let result = run(&search, req("hit"));
    let order: Vec<_> = result
        .hits
        .iter()
        .map(|h| (h.path.as_str(), h.line))
        .collect();
    let mut expected = Vec::new();
    for p in ["a/x.txt", "a/y/z.txt", "a-b.txt", "b.txt", "c.txt"] {
        for l in [1, 3, 4] {
            expected.push((p, l));
        }
    }
    assert_eq!(order, expected);
    assert!(result.complete);
}

#[test]
fn cap_keeps_the_first_n_hits_in_order_and_says_so() {
    let dir = numbered_tree();
    let search = LiteralSearch::new(dir.path()).unwrap();
    for _ in 0..20 {
        let mut r = req("hit");
        r.max_results = Some(4);
        let result = run(&search, r);
        let got: Vec<_> = result
            .hits
            .iter()
            .map(|h| (h.path.as_str(), h.line))
            .collect();
        assert_eq!(
            got,
            [
                ("a/x.txt", 1),
                ("a/x.txt", 3),
                ("a/x.txt", 4),
                ("a/y/z.txt", 1)
            ]
        );
        assert!(!result.complete);
        assert_eq!(result.stopped, Some(StopReason::MaxResults));
    }
}

#[test]
fn exactly_cap_hits_is_complete() {
    let dir = numbered_tree();
    let search = LiteralSearch::new(dir.path()).unwrap();
    let mut r = req("hit");
    r.max_results = Some(15);
    let result = run(&search, r);
    assert_eq!(result.hits.len(), 15);
    assert!(result.complete);
    assert_eq!(result.stopped, None);
}

#[test]
fn same_tree_and_query_give_identical_bytes() {
    let (tree, _outside) = support::generated_tree(11);
    let search = LiteralSearch::new(tree.path()).unwrap();
    let first = serde_json::to_vec(&run(&search, req("main"))).unwrap();
    for threads in [1, 2, 8] {
        let s = LiteralSearch::with_config(
            tree.path(),
            LiteralSearchConfig {
                threads: Some(threads),
                ..Default::default()
            },
        )
        .unwrap();
        for max in [None, Some(3)] {
            let mut r = req("main");
            r.max_results = max;
            let a = serde_json::to_vec(&run(&s, r.clone())).unwrap();
            let b = serde_json::to_vec(&run(&s, r)).unwrap();
            assert_eq!(a, b);
            if max.is_none() {
                assert_eq!(a, first);
            }
        }
    }
}

#[test]
fn escaping_scope_is_refused_not_searched() {
    let dir = numbered_tree();
    let search = LiteralSearch::new(dir.path()).unwrap();
    for scope in ["..", "../x", "/etc", "a/../..", "a\\b"] {
        let mut r = req("hit");
        r.path = Some(scope.into());
        let err = search.search_blocking(&r).unwrap_err();
        assert_eq!(err.code(), ErrorCode::Untrusted, "{scope}");
    }
    let mut r = req("hit");
    r.path = Some("no/such/dir".into());
    let err = search.search_blocking(&r).unwrap_err();
    assert!(err.to_string().contains("`path`"), "{err}");
}

#[cfg(unix)]
#[test]
fn symlink_scope_and_symlinked_files_never_escape_the_root() {
    let (tree, outside) = support::generated_tree(3);
    let search = LiteralSearch::new(tree.path()).unwrap();
    // The secret outside the root is reachable only through symlinks.
    let result = run(&search, req("secret outside"));
    assert!(result.hits.is_empty(), "{:?}", result.hits);
    for scope in ["link_out_dir", "link_out.txt", "link_in_dir"] {
        let mut r = req("secret");
        r.path = Some(scope.into());
        let err = search.search_blocking(&r).unwrap_err();
        assert_eq!(err.code(), ErrorCode::Untrusted, "{scope}");
    }
    drop(outside);
}

#[test]
fn skipped_files_are_counted_by_reason() {
    let (tree, _outside) = support::generated_tree(5);
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let name = std::ffi::OsStr::from_bytes(b"bad\xffname.txt");
        std::fs::write(tree.path().join(name), "fn main\n").unwrap();
    }
    let search = LiteralSearch::new(tree.path()).unwrap();
    let result = run(&search, req("fn main"));
    let skipped = result.stats.files_skipped.unwrap();
    assert!(skipped.binary >= 2, "{skipped:?}"); // bin/early.bin and bin/late.dat
    #[cfg(unix)]
    assert_eq!(skipped.non_utf8_path, 1);
    assert!(result.stats.files_searched.unwrap() > 20);
    // The hit before the late NUL is kept, as ripgrep keeps it.
    assert!(
        result
            .hits
            .iter()
            .any(|h| h.path == "bin/late.dat" && h.snippet.contains("before nul"))
    );
    assert!(!result.hits.iter().any(|h| h.snippet.contains("after nul")));
}

#[test]
fn bad_queries_get_clear_errors_that_name_the_argument() {
    let dir = numbered_tree();
    let search = LiteralSearch::new(dir.path()).unwrap();
    for (q, code) in [
        ("", ErrorCode::Unsupported),
        ("a\nb", ErrorCode::Unsupported),
        ("a\0", ErrorCode::Unsupported),
    ] {
        let err = search.search_blocking(&req(q)).unwrap_err();
        assert_eq!(err.code(), code);
        assert!(err.to_string().starts_with("argument `query`"), "{err}");
    }
    let err = search.search_blocking(&req(&"x".repeat(4097))).unwrap_err();
    assert_eq!(err.code(), ErrorCode::Limit);
    let err = search
        .search_blocking(&SearchRequest::new("hit", SearchMode::IndexedLiteral))
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::Unsupported);
}

#[test]
fn long_line_snippet_is_a_window_around_the_match() {
    let dir = tempfile::tempdir().unwrap();
    let mut line = "x".repeat(50_000);
    line.push_str("NEEDLE");
    line.push_str(&"y".repeat(50_000));
    line.push('\n');
    write(dir.path(), "long.txt", line.as_bytes());
    let search = LiteralSearch::new(dir.path()).unwrap();
    let result = run(&search, req("NEEDLE"));
    let hit = &result.hits[0];
    assert_eq!(hit.column, 50_001);
    assert!(hit.snippet_truncated);
    assert!(hit.snippet.len() <= 4096);
    assert!(hit.snippet.contains("NEEDLE"));
}

#[test]
fn case_insensitive_uses_unicode_simple_folding() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "f.txt",
        "ΣΊΣΥΦΟΣ\nσίσυφος\nKELVIN\n\u{212A}elvin\n".as_bytes(),
    );
    let search = LiteralSearch::new(dir.path()).unwrap();
    let mut r = req("kelvin");
    r.case_insensitive = true;
    let lines: Vec<_> = run(&search, r).hits.iter().map(|h| h.line).collect();
    assert_eq!(lines, [3, 4]);
    let lines: Vec<_> = run(&search, req("kelvin"))
        .hits
        .iter()
        .map(|h| h.line)
        .collect();
    assert!(lines.is_empty());
}

#[test]
fn binary_detection_does_not_depend_on_what_a_thread_searched_before() {
    // Files with 300 kB lines grow a searcher's line buffer; binary files whose NUL lies at about
    // 100 kB then stop at different places depending on that buffer. Searched alone (a fresh
    // searcher) each binary file keeps the hits before its NUL's chunk; the whole-tree search on one
    // thread must give each of them exactly the same hits, whatever it searched before.
    let dir = tempfile::tempdir().unwrap();
    for i in 0..10 {
        let mut long = vec![b'x'; 300_000];
        long.extend_from_slice(b" hit\n");
        write(dir.path(), &format!("long{i}.txt"), &long);
    }
    for i in 0..5 {
        let mut late = Vec::new();
        for n in 0..3_000 {
            let line: &[u8] = if n % 10 == 0 {
                b"hit on a short line of text here\n"
            } else {
                b"filler on a short line of text\n"
            };
            late.extend_from_slice(line);
        }
        late.extend(std::iter::repeat_n(b'y', 40_000));
        late.extend_from_slice(b"\n\x00hit after the nul\n");
        write(dir.path(), &format!("late{i}.bin"), &late);
    }
    let limits =
        index_contract::limits::SearchLimits::new(10_000, 4096, Duration::from_secs(60)).unwrap();
    let one_thread = LiteralSearch::with_config(
        dir.path(),
        LiteralSearchConfig {
            threads: Some(1),
            limits,
            ..Default::default()
        },
    )
    .unwrap();
    let mut r = req("hit");
    r.max_results = Some(10_000);
    let whole = run(&one_thread, r.clone());
    for i in 0..5 {
        let path = format!("late{i}.bin");
        let mut alone = r.clone();
        alone.path = Some(path.clone());
        let alone: Vec<u64> = run(&one_thread, alone)
            .hits
            .iter()
            .map(|h| h.line)
            .collect();
        let within: Vec<u64> = whole
            .hits
            .iter()
            .filter(|h| h.path == path)
            .map(|h| h.line)
            .collect();
        assert!(
            !alone.is_empty(),
            "a fresh searcher keeps the hits before the NUL's chunk"
        );
        assert_eq!(within, alone, "{path}");
    }
}

/// Writes `text` at the repo-relative `name`, given as bytes: a name need not be UTF-8.
#[cfg(unix)]
fn write_name(root: &std::path::Path, name: &[u8], text: &str) {
    use std::os::unix::ffi::OsStrExt;
    let path = root.join(std::ffi::OsStr::from_bytes(name));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A file that matches but whose name no answer may carry (not UTF-8, or a bidi override that
/// the trust gate refuses as a look-alike) is searched, counted and makes the answer
/// incomplete, in every output; one that does not match changes nothing. A name with a control
/// character is served: JSON carries it exactly, and the CLI quotes it.
#[cfg(unix)]
#[test]
fn a_matching_file_whose_name_cannot_be_served_is_counted_and_the_answer_is_incomplete() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir(root.join(".git")).unwrap();
    write_name(root, b"a.txt", "needle a\n");
    write_name(root, b"bad\xff.txt", "needle bad\nsecond needle\n");
    write_name(root, b"sub/d\xe9j\xe0.txt", "other\n");
    write_name(root, "evil\u{202E}txt.exe".as_bytes(), "needle evil\n");
    write_name(root, b"x\nforged.rs:1:1:needle", "needle forged\n");
    let search = LiteralSearch::new(root).unwrap();
    let check = |r: SearchRequest, paths: &[&str], non_utf8: u64, refused: u64| {
        let result = run(&search, r.clone());
        let got: Vec<&str> = result.hits.iter().map(|h| h.path.as_str()).collect();
        let skipped = result.stats.files_skipped.unwrap();
        assert_eq!(got, paths, "{r:?}");
        assert_eq!(
            (skipped.non_utf8_path, skipped.refused_path),
            (non_utf8, refused),
            "{r:?}"
        );
        let unserved = non_utf8 + refused > 0;
        assert_eq!(result.complete, !unserved, "{r:?}");
        assert_eq!(
            result.stopped,
            unserved.then_some(StopReason::UnservedFiles),
            "{r:?}"
        );
    };
    let both = ["a.txt", "x\nforged.rs:1:1:needle"];
    check(req("needle"), &both, 1, 1);
    for output in [OutputMode::Files, OutputMode::Count] {
        let mut r = req("needle");
        r.output = output;
        check(r, &both, 1, 1);
    }
    check(req("needle a"), &["a.txt"], 0, 0);
    // A scope holds the file whose directory is named in UTF-8, and no other.
    let mut r = req("other");
    r.path = Some("sub".into());
    check(r, &[], 1, 0);
    let mut r = req("needle");
    r.path = Some("sub".into());
    check(r, &[], 0, 0);
    // A glob is matched on the name the file really has.
    let mut r = req("needle");
    r.files.globs = vec!["bad?.txt".into()];
    check(r, &[], 1, 0);
    // Under a cap, the cap is why; the last page says what no page can bring.
    let mut r = req("needle");
    r.max_results = Some(1);
    let first = run(&search, r.clone());
    assert_eq!(first.stopped, Some(StopReason::MaxResults));
    assert_eq!(first.stats.files_skipped.unwrap().unserved(), 2);
    r.offset = first.next_offset.unwrap() as usize;
    r.page_token = first.page_token;
    let last = run(&search, r);
    assert_eq!(last.hits[0].path, "x\nforged.rs:1:1:needle");
    assert_eq!(last.stopped, Some(StopReason::UnservedFiles));
}
