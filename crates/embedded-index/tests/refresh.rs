//! A refresh that finds nothing changed writes nothing: it reports the commit current as of the
//! check, in its own process, and only a new HEAD makes it commit.

#![cfg(unix)]

use std::path::Path;
use std::time::Duration;

use embedded_index::{EmbeddedIndex, RefreshKind};

/// The manifest file's identity: any commit replaces it.
fn manifest_id(store: &Path) -> (u64, std::time::SystemTime) {
    let m = std::fs::metadata(store.join("MANIFEST")).unwrap();
    (
        std::os::unix::fs::MetadataExt::ino(&m),
        m.modified().unwrap(),
    )
}

fn updated_at(index: &EmbeddedIndex) -> u64 {
    index.current_status().updated_at.unwrap().0
}

#[test]
fn a_refresh_that_finds_nothing_changed_writes_nothing_and_reports_the_check_time() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "alpha\n").unwrap();
    // A file younger than the racy window is read again by every refresh: let it age.
    std::thread::sleep(Duration::from_millis(2100));
    let store = tempfile::tempdir().unwrap();
    let index = EmbeddedIndex::open(root.path(), store.path()).unwrap();
    let built = index.refresh("h1", None).unwrap();
    assert_eq!(built.kind, RefreshKind::Build);
    let committed = manifest_id(store.path());
    let committed_at = updated_at(&index);

    std::thread::sleep(Duration::from_millis(30));
    let fresh = index.refresh("h1", None).unwrap();
    assert_eq!(fresh.kind, RefreshKind::Fresh);
    assert_eq!(fresh.revision, built.revision);
    assert_eq!(manifest_id(store.path()), committed, "nothing was written");
    assert!(
        updated_at(&index) >= committed_at + 30,
        "the check time is reported"
    );
    // Another process has not checked: it reports the commit's own time.
    let other = EmbeddedIndex::open(root.path(), store.path()).unwrap();
    assert_eq!(updated_at(&other), committed_at);

    // A new HEAD with the same files is a commit: the revision must name it.
    let moved = index.refresh("h2", None).unwrap();
    assert_eq!(moved.kind, RefreshKind::Touch);
    assert!(moved.revision.starts_with("h2+g"), "{}", moved.revision);
    assert_ne!(manifest_id(store.path()), committed);

    // A changed file is a commit too, and its time is the commit's.
    std::fs::write(root.path().join("a.txt"), "alpha edited\n").unwrap();
    assert_eq!(index.refresh("h2", None).unwrap().kind, RefreshKind::Update);
}

#[test]
fn the_committed_head_is_what_the_committed_files_attest_commit_after_commit() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "alpha\n").unwrap();
    let store = tempfile::tempdir().unwrap();
    let index = EmbeddedIndex::open(root.path(), store.path()).unwrap();
    // Before any commit: no revision, and no status an engine could answer with.
    assert_eq!(index.committed_head(), index.committed_files().head);
    assert_eq!(index.committed_head().revision, None);
    let mut digests = Vec::new();
    for (head, file, text) in [
        ("h1", "a.txt", "alpha\n"),
        ("h1", "b.txt", "beta\n"),
        ("h2", "b.txt", "beta, again and longer\n"),
    ] {
        std::fs::write(root.path().join(file), text).unwrap();
        index.refresh(head, None).unwrap();
        // Asked for alone first, then with the files: the same snapshot, the same head.
        let alone = index.committed_head();
        let committed = index.committed_files();
        assert_eq!(alone, committed.head, "after writing {file} at {head}");
        assert_eq!(index.committed_revision(), alone.revision);
        assert!(alone.revision.is_some_and(|r| r.starts_with(head)));
        digests.push(alone.digest);
    }
    // Another file, or another read of one, is another digest even at one revision.
    assert!(digests.windows(2).all(|w| w[0] != w[1]), "{digests:?}");
}
