//! Damaged index files of any size cost bounded memory: each is refused by its size before it is
//! read, mapped or checksummed (or, within its size limit, checksummed through a small buffer);
//! the index reports the damage, never serves it, and a refresh rebuilds it and answers correctly.
//!
//! The files are grown sparse (`File::set_len`), so 8 GiB costs no disk. Memory is the peak
//! resident set the kernel counts, heap and mapped pages alike (`index_testkit::rss`, which checks
//! first that it sees 96 MiB touched), one test at a time.

use std::path::PathBuf;
use std::time::Duration;

use embedded_index::EmbeddedIndex;
use index_contract::{IndexState, SearchMode, SearchRequest};
use index_testkit::rss;

/// What a damaged file of any size may cost.
const BOUND: u64 = 64 << 20;
/// The size damage grows a file to.
const HUGE: u64 = 8 << 30;

/// A worktree of a few files, and an index of it built in a directory of its own.
struct Fixture {
    _outer: tempfile::TempDir,
    root: PathBuf,
    store: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let outer = tempfile::tempdir().unwrap();
        let root = outer.path().join("repo");
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("a.txt"), "alpha needle\n").unwrap();
        std::fs::write(root.join("src/b.rs"), "fn needle() {}\n").unwrap();
        std::fs::write(root.join("src/c.rs"), "fn other() {}\n").unwrap();
        let store = tempfile::tempdir().unwrap();
        EmbeddedIndex::open(&root, store.path())
            .unwrap()
            .build("r1")
            .unwrap();
        Fixture {
            _outer: outer,
            root,
            store,
        }
    }

    fn open(&self) -> EmbeddedIndex {
        EmbeddedIndex::open(&self.root, self.store.path()).unwrap()
    }

    /// The index file whose name ends with `suffix`.
    fn file(&self, suffix: &str) -> PathBuf {
        std::fs::read_dir(self.store.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with(suffix))
            .unwrap_or_else(|| panic!("no index file ending in {suffix}"))
    }
}

/// The paths `needle` is found in, sorted.
fn needles(index: &EmbeddedIndex) -> Vec<String> {
    let found = index
        .search_now(&SearchRequest::new("needle", SearchMode::IndexedLiteral))
        .unwrap();
    assert_eq!(
        found.status.state,
        IndexState::Ready,
        "served from a sound index"
    );
    let mut paths: Vec<String> = found.hits.into_iter().map(|h| h.path).collect();
    paths.sort();
    paths
}

/// Opens the damaged index, measuring what it costs: it must open as `failed`, serve nothing,
/// and cost at most [`BOUND`]; then a refresh rebuilds it and it answers correctly.
fn check_refused_then_rebuilt(f: &Fixture, what: &str) {
    let (index, peak) = rss::peak_during(|| {
        let index = f.open();
        let found = index
            .search_now(&SearchRequest::new("needle", SearchMode::IndexedLiteral))
            .unwrap();
        assert!(found.hits.is_empty(), "{what}: a damaged index served hits");
        assert_eq!(found.status.state, IndexState::Failed, "{what}");
        index
    });
    assert!(
        peak < BOUND,
        "{what}: opening cost {} MiB resident",
        peak >> 20
    );
    index.refresh("r2", None).unwrap();
    assert_eq!(needles(&index), ["a.txt", "src/b.rs"], "{what}: rebuilt");
}

#[test]
fn an_8_gib_dircache_is_refused_before_it_is_read() {
    let _serial = rss::serial();
    let f = Fixture::new();
    let index = f.open();
    // Directories younger than the racy window are not cached: let them age.
    std::thread::sleep(Duration::from_millis(2100));
    index.refresh("r1", None).unwrap();
    let cache = f.store.path().join("dircache");
    let recorded = std::fs::metadata(&cache)
        .expect("a settled walk is cached")
        .len();
    rss::set_len(&cache, HUGE);
    let (refreshed, peak) = rss::peak_during(|| index.refresh("r1", None));
    refreshed.unwrap();
    assert!(
        peak < BOUND,
        "a refresh over an 8 GiB cache cost {} MiB resident",
        peak >> 20
    );
    assert_eq!(needles(&index), ["a.txt", "src/b.rs"]);
    // The walk that replaced the refused cache recorded a new one.
    assert_eq!(std::fs::metadata(&cache).unwrap().len(), recorded);
}

#[test]
fn an_8_gib_manifest_is_refused_before_it_is_read() {
    let _serial = rss::serial();
    let f = Fixture::new();
    rss::set_len(&f.store.path().join("MANIFEST"), HUGE);
    check_refused_then_rebuilt(&f, "an 8 GiB manifest");
}

#[test]
fn an_8_gib_segment_is_refused_before_it_is_mapped() {
    let _serial = rss::serial();
    let f = Fixture::new();
    rss::set_len(&f.file(".idx"), HUGE);
    check_refused_then_rebuilt(&f, "an 8 GiB segment");
}

/// A segment within the size limit whose header, length and trailer all agree with the manifest,
/// so only the checksum of its whole body finds the damage: that checksum reads it through a
/// small buffer, not through the map (which would make the whole file resident).
#[test]
fn a_large_damaged_segment_is_checksummed_in_bounded_memory() {
    let _serial = rss::serial();
    let f = Fixture::new();
    let seg = f.file(".idx");
    let bytes = std::fs::read(&seg).unwrap();
    let crc = bytes[bytes.len() - 4..].to_vec();
    let len: u64 = 3 << 30;
    let mut file = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    file.set_len(len).unwrap();
    use std::io::{Seek, SeekFrom, Write};
    file.seek(SeekFrom::Start(40)).unwrap();
    file.write_all(&(len - 4).to_le_bytes()).unwrap();
    file.seek(SeekFrom::Start(len - 4)).unwrap();
    file.write_all(&crc).unwrap();
    drop(file);
    check_refused_then_rebuilt(&f, "a 3 GiB segment that only its checksum refuses");
}

/// The manifest or a segment replaced by a symlink to an intact copy of itself, where only the
/// rule that index files are never opened through a symlink can refuse it: refused, never read
/// through, and rebuilt by the next refresh, which leaves the link's target alone.
#[test]
fn a_symlinked_segment_or_manifest_is_refused_and_rebuilt_never_read_through() {
    let _serial = rss::serial();
    for suffix in ["MANIFEST", ".idx"] {
        let f = Fixture::new();
        let elsewhere = tempfile::tempdir().unwrap();
        let copy = elsewhere.path().join("copy");
        let file = f.file(suffix);
        std::fs::rename(&file, &copy).unwrap();
        std::os::unix::fs::symlink(&copy, &file).unwrap();
        let intact = std::fs::read(&copy).unwrap();
        check_refused_then_rebuilt(&f, &format!("a symlinked {suffix}"));
        assert_eq!(
            std::fs::read(&copy).unwrap(),
            intact,
            "{suffix}: target changed"
        );
        let link_left = std::fs::symlink_metadata(&file).is_ok_and(|m| m.file_type().is_symlink());
        assert!(!link_left, "{suffix}: the link is still in the index");
    }
}
