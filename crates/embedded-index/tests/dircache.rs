//! The directory cache: a refresh that only `stat`s the files the last walk selected, while no
//! directory and no ignore rule changed, answers exactly as a full walk would.

use std::path::Path;
use std::time::Duration;

use embedded_index::EmbeddedIndex;
use index_contract::{SearchMode, SearchRequest};

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn cache_mtime(store: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(store.join("dircache"))
        .ok()
        .and_then(|m| m.modified().ok())
}

/// After a refresh, the index holds exactly the selection a fresh walk sees, and `query` finds
/// exactly `expected`.
fn check(index: &EmbeddedIndex, query: &str, expected: &[&str]) {
    index.refresh("head", None).unwrap();
    assert_eq!(index.indexed_paths(), index.selection(), "after {query}");
    let mut r = SearchRequest::new(query, SearchMode::IndexedLiteral);
    r.max_results = Some(1000);
    let mut got: Vec<String> = index
        .search_now(&r)
        .unwrap()
        .hits
        .into_iter()
        .map(|h| h.path)
        .collect();
    got.sort();
    assert_eq!(got, expected, "{query}");
}

#[test]
fn a_cached_refresh_answers_as_a_full_walk_would() {
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("repo");
    std::fs::create_dir(&root).unwrap();
    std::fs::create_dir(root.join(".git")).unwrap();
    std::fs::write(root.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    write(&root, ".gitignore", "ignored/\n");
    write(&root, "a.txt", "alpha v1\n");
    write(&root, "src/b.rs", "beta v1\n");
    write(&root, "ignored/c.txt", "alpha hidden\n");
    let store = tempfile::tempdir().unwrap();
    let index = EmbeddedIndex::open(&root, store.path()).unwrap();
    // Directories younger than the racy window are not cached: let them age.
    std::thread::sleep(Duration::from_millis(2100));
    check(&index, "alpha", &["a.txt"]);
    let recorded = cache_mtime(store.path()).expect("a complete, settled walk is cached");

    // In-place edits change no directory: the cache is used (not rewritten) and the edits seen.
    for round in 0..5 {
        std::thread::sleep(Duration::from_millis(20));
        write(&root, "a.txt", &format!("alpha v{round} edited\n"));
        write(&root, "src/b.rs", &format!("beta v{round} edited\n"));
        check(&index, "edited", &["a.txt", "src/b.rs"]);
        assert_eq!(cache_mtime(store.path()), Some(recorded), "round {round}");
    }
    // An ignore file edited in place: the rules changed, so the tree is walked.
    write(&root, ".gitignore", "\n");
    check(&index, "alpha", &["a.txt", "ignored/c.txt"]);
    // A new file changes its directory's stamp.
    write(&root, "src/new.rs", "alpha new\n");
    check(&index, "alpha", &["a.txt", "ignored/c.txt", "src/new.rs"]);
    // An `.ignore` in a parent of the root.
    write(outer.path(), ".ignore", "src/\n");
    check(&index, "alpha", &["a.txt", "ignored/c.txt"]);
    // `info/exclude`.
    write(&root, ".git/info/exclude", "a.txt\n");
    check(&index, "alpha", &["ignored/c.txt"]);
    // A removed file.
    std::fs::remove_file(root.join("ignored/c.txt")).unwrap();
    check(&index, "alpha", &[]);
}

#[test]
fn a_damaged_cache_file_means_a_walk() {
    let root = tempfile::tempdir().unwrap();
    write(root.path(), "a.txt", "alpha\n");
    let store = tempfile::tempdir().unwrap();
    let index = EmbeddedIndex::open(root.path(), store.path()).unwrap();
    std::thread::sleep(Duration::from_millis(2100));
    check(&index, "alpha", &["a.txt"]);
    let cache = store.path().join("dircache");
    assert!(cache.exists());
    let mut bytes = std::fs::read(&cache).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    std::fs::write(&cache, bytes).unwrap();
    write(root.path(), "b.txt", "alpha too\n");
    check(&index, "alpha", &["a.txt", "b.txt"]);
}

#[test]
fn a_cached_refresh_sees_deep_edits_and_subdirectory_rules() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    write(root, "top.txt", "gamma top\n");
    write(root, "a/b/c/deep.txt", "gamma deep\n");
    write(root, "a/b/c/.ignore", "skipped.txt\n");
    write(root, "a/b/c/skipped.txt", "gamma skipped\n");
    write(root, "a/b-c/side.txt", "gamma side\n");
    let store = tempfile::tempdir().unwrap();
    let index = EmbeddedIndex::open(root, store.path()).unwrap();
    std::thread::sleep(Duration::from_millis(2100));
    check(
        &index,
        "gamma",
        &["a/b-c/side.txt", "a/b/c/deep.txt", "top.txt"],
    );
    let recorded = cache_mtime(store.path()).expect("a complete, settled walk is cached");
    // Edits in place, in several directories at several depths: seen through the cache.
    std::thread::sleep(Duration::from_millis(20));
    write(root, "a/b/c/deep.txt", "delta deep\n");
    write(root, "a/b-c/side.txt", "delta side\n");
    check(&index, "delta", &["a/b-c/side.txt", "a/b/c/deep.txt"]);
    assert_eq!(cache_mtime(store.path()), Some(recorded));
    // The ignore file of a subdirectory, edited in place: the tree is walked.
    write(root, "a/b/c/.ignore", "deep.txt\n");
    check(&index, "gamma", &["a/b/c/skipped.txt", "top.txt"]);
    // A file replaced by a symlink to a regular file: no longer selected.
    #[cfg(unix)]
    {
        std::fs::remove_file(root.join("top.txt")).unwrap();
        std::os::unix::fs::symlink("a/b/c/skipped.txt", root.join("top.txt")).unwrap();
        check(&index, "gamma", &["a/b/c/skipped.txt"]);
    }
}
