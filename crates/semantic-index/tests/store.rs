//! The persistent store: round trip, damage, incremental embedding by content hash, and a writer
//! killed before its commit. A static model over the vocabulary's first 3 000 tokens keeps this
//! fast.

mod support;

use support::statics;

use std::collections::BTreeMap;
use std::path::Path;

use semantic_index::{CatchUp, SourceFile, Store, StoreError, rank::Weights, version_of};

const MODEL_ID: &str = "test-model";

/// A worktree in memory: path → (text, version).
#[derive(Default)]
struct Tree(BTreeMap<String, (String, u64)>);

impl Tree {
    fn put(&mut self, path: &str, text: &str) {
        let version = self.0.get(path).map_or(1, |(_, v)| v + 1);
        self.0.insert(path.to_owned(), (text.to_owned(), version));
    }

    fn files(&self) -> Vec<SourceFile> {
        self.0
            .iter()
            .map(|(p, (_, v))| SourceFile {
                path: p.clone(),
                version: version_of(&[*v]),
                prior: 1.0,
            })
            .collect()
    }

    fn catch_up(&self, dir: &Path, revision: &str) -> (Store, CatchUp) {
        let read = |p: &str| self.0.get(p).map(|(t, _)| t.clone());
        Store::catch_up(
            dir,
            statics(),
            MODEL_ID,
            revision,
            &self.files(),
            &read,
            None,
        )
        .expect("catches up")
    }
}

fn function(name: &str, body: &str) -> String {
    format!("def {name}(items):\n    {body}\n    return items\n\n")
}

fn sample() -> Tree {
    let mut t = Tree::default();
    t.put(
        "src/sorting.py",
        &function(
            "sort_numbers",
            "items.sort()  # order the numbers from small to large",
        ),
    );
    t.put(
        "src/network.py",
        &function("open_socket", "connect to the server over the network"),
    );
    t.put(
        "src/files.py",
        &function(
            "read_file",
            "read the file from the disk and return its lines",
        ),
    );
    t
}

fn paths(hits: &[semantic_index::StoreHit]) -> Vec<&str> {
    hits.iter().map(|h| h.path.as_str()).collect()
}

#[test]
fn store_round_trips_and_refuses_a_changed_byte() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tree = sample();
    let (built, stats) = tree.catch_up(dir.path(), "r1");
    assert!(stats.rebuilt && stats.files_read == 3, "{stats:?}");
    let ask = |s: &Store| {
        s.search(
            statics(),
            "connect to the server",
            &Weights::default(),
            &|_| true,
            10,
        )
    };
    let first = ask(&built);
    assert_eq!(first[0].path, "src/network.py", "{first:?}");
    assert!(first.iter().all(|h| (0.0..=1.0).contains(&h.score)));
    assert_eq!(
        (first[0].line, first[0].snippet.as_str()),
        (1, "def open_socket(items):")
    );

    let reopened = Store::open(dir.path()).expect("opens").expect("committed");
    assert_eq!(reopened.revision(), "r1");
    assert_eq!(ask(&reopened), first);

    // One changed byte in a segment: refused, never served, then rebuilt by the next catch-up.
    let seg = std::fs::read_dir(dir.path())
        .expect("lists")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "sem"))
        .expect("a segment");
    let mut bytes = std::fs::read(&seg).expect("reads");
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&seg, bytes).expect("writes");
    assert!(matches!(Store::open(dir.path()), Err(StoreError::Corrupt)));
    let (repaired, stats) = tree.catch_up(dir.path(), "r2");
    assert!(stats.rebuilt, "{stats:?}");
    assert_eq!(ask(&repaired), first);
}

#[test]
fn an_edit_re_embeds_only_its_changed_chunks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut tree = sample();
    // A file of three chunks: each function is padded past half the chunk target, so that no
    // two merge.
    let pad = "    # padding line that keeps this function in a chunk of its own\n".repeat(14);
    let big = |middle: &str| {
        format!("def alpha():\n{pad}\ndef beta():\n    {middle}\n{pad}\ndef gamma():\n{pad}")
    };
    tree.put("src/big.py", &big("return 1"));
    let (store, stats) = tree.catch_up(dir.path(), "r1");
    assert!(stats.chunks >= 6, "{stats:?}");
    assert_eq!(store.live_chunks(), stats.chunks);

    tree.put("src/big.py", &big("return 2"));
    let (store, stats) = tree.catch_up(dir.path(), "r2");
    assert_eq!(
        (
            stats.rebuilt,
            stats.files_read,
            stats.chunks,
            stats.embedded,
            stats.removed
        ),
        (false, 1, 3, 1, 0),
        "only the edited function's chunk is embedded again"
    );
    assert_eq!(store.revision(), "r2");

    // Nothing changed but the revision: nothing is read.
    let (store, stats) = tree.catch_up(dir.path(), "r3");
    assert_eq!((stats.files_read, stats.embedded), (0, 0));
    assert_eq!(store.revision(), "r3");

    // A removed file is dropped from the answers.
    tree.0.remove("src/network.py");
    let (store, stats) = tree.catch_up(dir.path(), "r4");
    assert_eq!((stats.removed, stats.files_read), (1, 0));
    let hits = store.search(statics(), "open socket", &Weights::default(), &|_| true, 10);
    assert!(!paths(&hits).contains(&"src/network.py"), "{hits:?}");
}

#[test]
fn a_writer_killed_before_its_commit_loses_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tree = sample();
    let (store, _) = tree.catch_up(dir.path(), "r1");
    let before = store.search(
        statics(),
        "read the file",
        &Weights::default(),
        &|_| true,
        10,
    );
    // What a writer killed between its segment and its manifest leaves behind.
    std::fs::write(dir.path().join("seg-9-0.sem"), b"half a segment").expect("writes");
    std::fs::write(dir.path().join(".MANIFEST.tmp"), b"{\"crc32\":").expect("writes");
    let again = Store::open(dir.path()).expect("opens").expect("committed");
    assert_eq!(again.revision(), "r1");
    assert_eq!(
        again.search(
            statics(),
            "read the file",
            &Weights::default(),
            &|_| true,
            10
        ),
        before
    );
    // The next commit collects the leftovers.
    tree.catch_up(dir.path(), "r2");
    assert!(!dir.path().join("seg-9-0.sem").exists());
    assert!(!dir.path().join(".MANIFEST.tmp").exists());
}

#[test]
fn scope_and_filters_narrow_the_answer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut tree = sample();
    tree.put(
        "tests/test_network.py",
        &function("test_open_socket", "connect to the server over the network"),
    );
    let (store, _) = tree.catch_up(dir.path(), "r1");
    let only_tests = |p: &str| p.starts_with("tests/");
    let hits = store.search(
        statics(),
        "connect to the server",
        &Weights::default(),
        &only_tests,
        10,
    );
    assert_eq!(paths(&hits), ["tests/test_network.py"]);
}
