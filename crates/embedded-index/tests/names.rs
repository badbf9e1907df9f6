//! Names no answer may carry: the index holds such a file, verifies it, never serves its name,
//! and counts it when it matches, so that the answer says it is incomplete.

#![cfg(unix)]

use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

use embedded_index::EmbeddedIndex;
use index_contract::{SearchMode, SearchRequest, SkippedFiles};

fn write(root: &Path, name: &[u8], text: &str) {
    let path = root.join(std::ffi::OsStr::from_bytes(name));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Refreshes, then checks what `query` (in `scope`) serves and counts.
fn check(index: &EmbeddedIndex, query: &str, scope: Option<&str>, paths: &[&str], non_utf8: u64) {
    index.refresh("head", None).unwrap();
    let mut r = SearchRequest::new(query, SearchMode::IndexedLiteral);
    r.path = scope.map(str::to_owned);
    let answer = index.search_now(&r).unwrap();
    let got: Vec<&str> = answer.hits.iter().map(|h| h.path.as_str()).collect();
    assert_eq!(got, paths, "{query} in {scope:?}");
    let skipped = answer.skipped.unwrap_or_default();
    assert_eq!(
        skipped,
        SkippedFiles {
            non_utf8_path: non_utf8,
            ..SkippedFiles::default()
        },
        "{query} in {scope:?}"
    );
    assert_eq!(answer.complete, non_utf8 == 0, "{query} in {scope:?}");
}

#[test]
fn a_matching_file_whose_name_is_not_utf8_is_held_counted_and_never_served() {
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("repo");
    std::fs::create_dir_all(root.join(".git")).unwrap();
    write(&root, b"a.txt", "needle a\n");
    write(&root, b"bad\xff.txt", "needle bad\n");
    write(
        &root,
        b"sub\xe9/x.txt",
        "needle in a directory not named in UTF-8\n",
    );
    write(&root, b"src/d\xe9j\xe0.rs", "other\n");
    let store = tempfile::tempdir().unwrap();
    let index = EmbeddedIndex::open(&root, store.path()).unwrap();
    check(&index, "needle", None, &["a.txt"], 2);
    check(&index, "needle a", None, &["a.txt"], 0);
    check(&index, "other", Some("src"), &[], 1);
    check(&index, "needle", Some("src"), &[], 0);
    let committed = index.committed_files();
    assert_eq!(
        committed.files.iter().map(|f| &f.path).collect::<Vec<_>>(),
        ["a.txt"]
    );
    assert_eq!(
        committed.head.unservable.len(),
        3,
        "{:?}",
        committed.head.unservable
    );

    // Edits are seen, through a full walk and then through the directory cache (once the
    // directories are old enough to vouch for themselves).
    write(&root, b"bad\xff.txt", "no longer\n");
    check(&index, "needle", None, &["a.txt"], 1);
    std::thread::sleep(Duration::from_millis(2100));
    index.refresh("head", None).unwrap();
    assert!(store.path().join("dircache").exists());
    std::thread::sleep(Duration::from_millis(20));
    write(&root, b"sub\xe9/x.txt", "edited in place\n");
    check(&index, "needle", None, &["a.txt"], 0);
    check(&index, "edited in place", None, &[], 1);
    std::fs::remove_file(root.join(std::ffi::OsStr::from_bytes(b"sub\xe9/x.txt"))).unwrap();
    check(&index, "edited in place", None, &[], 0);
    assert_eq!(index.indexed_paths(), index.selection());
}
