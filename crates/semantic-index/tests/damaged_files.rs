//! Damaged store files and model files of any size cost bounded memory: each is refused by its
//! size before it is read, mapped or checksummed (or, within its size limit, checksummed through
//! a small buffer). A damaged store is never served and the next catch-up rebuilds it; a damaged
//! model is an error naming the file and what is wrong with it.
//!
//! Files are grown sparse (`File::set_len`), so 8 GiB costs no disk. Memory is the peak resident
//! set the kernel counts, heap and mapped pages alike (`index_testkit::rss`, which checks first
//! that it sees 96 MiB touched), one test at a time.

mod support;

use support::{model_dir, statics};

use std::path::{Path, PathBuf};

use index_testkit::rss;
use semantic_index::{
    Defect, Error, MiniLm, STATIC_FILE, SourceFile, StaticModel, Store, StoreError, VectorLog,
    rank::Weights, version_of,
};

/// What a damaged file of any size may cost.
const BOUND: u64 = 64 << 20;
/// The size damage grows a file to.
const HUGE: u64 = 8 << 30;

const FILES: [(&str, &str); 2] = [
    (
        "src/network.py",
        "def open_socket(items):\n    connect to the server over the network\n",
    ),
    (
        "src/sorting.py",
        "def sort_numbers(items):\n    items.sort()  # order the numbers\n",
    ),
];

/// Brings the store in `dir` to `revision` over [`FILES`].
fn catch_up(dir: &Path, revision: &str) -> (Store, semantic_index::CatchUp) {
    let files: Vec<SourceFile> = FILES
        .iter()
        .map(|(p, _)| SourceFile {
            path: (*p).to_owned(),
            version: version_of(&[1]),
            prior: 1.0,
        })
        .collect();
    let read = |p: &str| {
        FILES
            .iter()
            .find(|(q, _)| *q == p)
            .map(|(_, t)| (*t).to_owned())
    };
    Store::catch_up(dir, statics(), "test-model", revision, &files, &read, None)
        .expect("catches up")
}

fn best(store: &Store) -> String {
    let hits = store.search(
        statics(),
        "connect to the server",
        &Weights::default(),
        &|_| true,
        10,
    );
    hits[0].path.clone()
}

/// The store file whose name ends with `suffix`.
fn file(dir: &Path, suffix: &str) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(suffix))
        .unwrap_or_else(|| panic!("no store file ending in {suffix}"))
}

/// Damages a committed store with `damage`; opening it must be `Corrupt` and cost at most
/// [`BOUND`]; the next catch-up rebuilds it and it answers as before.
fn check_store(what: &str, damage: impl FnOnce(&Path)) {
    let _serial = rss::serial();
    statics();
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = catch_up(dir.path(), "r1");
    let answer = best(&store);
    assert_eq!(answer, "src/network.py");
    drop(store);
    damage(dir.path());
    let (opened, peak) = rss::peak_during(|| Store::open(dir.path()));
    assert!(
        matches!(opened, Err(StoreError::Corrupt)),
        "{what}: {:?}",
        opened.map(|s| s.map(|s| s.revision().to_owned()))
    );
    assert!(
        peak < BOUND,
        "{what}: opening cost {} MiB resident",
        peak >> 20
    );
    let (repaired, stats) = catch_up(dir.path(), "r2");
    assert!(stats.rebuilt, "{what}: {stats:?}");
    assert_eq!(best(&repaired), answer, "{what}");
}

#[test]
fn an_8_gib_store_manifest_is_refused_before_it_is_read() {
    check_store("an 8 GiB manifest", |dir| {
        rss::set_len(&dir.join("MANIFEST"), HUGE)
    });
}

#[test]
fn an_8_gib_semantic_segment_is_refused_before_it_is_mapped() {
    check_store("an 8 GiB segment", |dir| {
        rss::set_len(&file(dir, ".sem"), HUGE)
    });
}

#[test]
fn an_8_gib_idf_table_is_refused_before_it_is_read() {
    check_store("an 8 GiB IDF table", |dir| {
        rss::set_len(&file(dir, ".bin"), HUGE)
    });
}

/// A segment within the size limit whose header agrees with its length, so that only the
/// manifest's checksum finds the damage: that checksum reads it through a small buffer, after its
/// length was checked, not through the map (which made the whole file resident).
#[test]
fn a_large_damaged_semantic_segment_is_checksummed_in_bounded_memory() {
    check_store("a 3 GiB segment that only its checksum refuses", |dir| {
        let seg = file(dir, ".sem");
        let len: u64 = 3 << 30;
        let mut f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
        f.set_len(len).unwrap();
        // The last section offset (the end) is the eighth u64 after the magic and four counts.
        use std::io::{Seek, SeekFrom, Write};
        f.seek(SeekFrom::Start(8 + 16 + 7 * 8)).unwrap();
        f.write_all(&len.to_le_bytes()).unwrap();
    });
}

/// The manifest, a segment or the IDF table replaced by a symlink to an intact copy of itself,
/// where only the rule that index files are never opened through a symlink can refuse it:
/// refused, never read through, and rebuilt by the next catch-up, which leaves the link's target
/// alone.
#[test]
fn a_symlinked_semantic_segment_or_manifest_is_refused_and_rebuilt_never_read_through() {
    for suffix in ["MANIFEST", ".sem", ".bin"] {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = catch_up(dir.path(), "r1");
        let answer = best(&store);
        drop(store);
        let elsewhere = tempfile::tempdir().unwrap();
        let copy = elsewhere.path().join("copy");
        let linked = file(dir.path(), suffix);
        std::fs::rename(&linked, &copy).unwrap();
        std::os::unix::fs::symlink(&copy, &linked).unwrap();
        let intact = std::fs::read(&copy).unwrap();
        let opened = Store::open(dir.path());
        assert!(
            matches!(opened, Err(StoreError::Corrupt)),
            "{suffix}: {:?}",
            opened.map(|s| s.map(|s| s.revision().to_owned()))
        );
        let (repaired, stats) = catch_up(dir.path(), "r2");
        assert!(stats.rebuilt, "{suffix}: {stats:?}");
        assert_eq!(best(&repaired), answer, "{suffix}");
        assert_eq!(
            std::fs::read(&copy).unwrap(),
            intact,
            "{suffix}: target changed"
        );
        let link_left =
            std::fs::symlink_metadata(&linked).is_ok_and(|m| m.file_type().is_symlink());
        assert!(!link_left, "{suffix}: the link is still in the store");
    }
}

/// A store directory that is a symlink is neither read nor written through: the store counts as
/// unusable (an error, which a host answers without the store), and nothing lands in the target.
#[test]
fn a_symlinked_store_directory_is_refused_never_written_through() {
    let outer = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let real = outer.path().join("real");
    catch_up(&real, "r1");
    let link = outer.path().join("semantic");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    assert!(matches!(Store::open(&link), Err(StoreError::Io { .. })));
    let empty = outer.path().join("empty");
    std::os::unix::fs::symlink(elsewhere.path(), &empty).unwrap();
    let files: Vec<SourceFile> = Vec::new();
    let caught_up = Store::catch_up(&empty, statics(), "m", "r1", &files, &|_| None, None);
    assert!(matches!(caught_up, Err(StoreError::Io { .. })));
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
}

#[test]
fn an_8_gib_vector_log_costs_no_more_than_the_records_it_holds() {
    let _serial = rss::serial();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vectors");
    let log = VectorLog::new(&path, [7; 32], 384, 25_000);
    let kept: Vec<([u8; 16], Vec<f32>)> = (0..4u8).map(|i| ([i; 16], vec![0.5; 384])).collect();
    log.append(&kept).unwrap();
    rss::set_len(&path, HUGE);
    let (read, peak) = rss::peak_during(|| log.read());
    assert_eq!(read.len(), kept.len(), "the intact records are kept");
    // Records are read one at a time: the 20 MB of a full log's worth of zeros is never held.
    assert!(
        peak < 8 << 20,
        "reading an 8 GiB log cost {} MiB resident",
        peak >> 20
    );
}

/// A directory holding `tokenizer.json` (a link to the installed one) and a static model file of
/// `bytes` with its true sha256 beside it: only the header can refuse it.
fn static_model_dir(bytes: &[u8]) -> tempfile::TempDir {
    use sha2::Digest;
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        model_dir().join("tokenizer.json"),
        dir.path().join("tokenizer.json"),
    )
    .unwrap();
    std::fs::write(dir.path().join(STATIC_FILE), bytes).unwrap();
    let digest: String = sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    std::fs::write(
        dir.path().join(format!("{STATIC_FILE}.sha256")),
        format!("{digest}\n"),
    )
    .unwrap();
    dir
}

fn static_header(vocab: u32, dim: u32) -> Vec<u8> {
    let mut b = b"RSSTATIC".to_vec();
    for v in [1, vocab, dim] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b
}

/// The static model files that crashed a host (a width of 2^32 − 1 made every query allocate
/// 16 GiB and abort): each is now an error naming the file, found before anything is allocated.
#[test]
fn a_corrupt_static_model_header_is_an_error_not_an_abort() {
    let _serial = rss::serial();
    let check = |bytes: Vec<u8>, expected: Defect| {
        let dir = static_model_dir(&bytes);
        let (loaded, peak) = rss::peak_during(|| StaticModel::load(dir.path()));
        match loaded {
            Err(Error::Invalid { path, defect }) => {
                assert_eq!(path, dir.path().join(STATIC_FILE));
                assert_eq!(defect, expected);
            }
            other => panic!("expected {expected:?}, got {:?}", other.map(|m| m.dim())),
        }
        assert!(peak < BOUND, "{expected:?}: cost {} MiB", peak >> 20);
    };
    check(static_header(0, u32::MAX), Defect::UnsupportedWidth);
    // `vocab × dim × 4` overflows u64.
    check(static_header(u32::MAX, u32::MAX), Defect::UnsupportedWidth);
    check(static_header(u32::MAX, 256), Defect::VocabularyOutOfRange);
    check(static_header(1 << 17, 256), Defect::LengthMismatch);
    check(b"RSSTATIC".to_vec(), Defect::Truncated);
    let mut other_version = static_header(1, 256);
    other_version[8] = 9;
    check(other_version, Defect::WrongFormat);
    // A whole header with a bad checksum.
    let mut whole = static_header(1, 256);
    whole.resize(20 + 1024, 0);
    let dir = static_model_dir(&whole);
    std::fs::write(
        dir.path().join(format!("{STATIC_FILE}.sha256")),
        "0".repeat(64),
    )
    .unwrap();
    assert!(matches!(
        StaticModel::load(dir.path()),
        Err(Error::Invalid {
            defect: Defect::ChecksumMismatch,
            ..
        })
    ));
    std::fs::write(
        dir.path().join(format!("{STATIC_FILE}.sha256")),
        "not a sha",
    )
    .unwrap();
    assert!(matches!(
        StaticModel::load(dir.path()),
        Err(Error::Invalid {
            defect: Defect::NotAChecksum,
            ..
        })
    ));
}

#[test]
fn an_8_gib_model_file_is_refused_before_it_is_read() {
    let _serial = rss::serial();
    let dir = static_model_dir(&static_header(1, 256));
    rss::set_len(&dir.path().join(STATIC_FILE), HUGE);
    let (loaded, peak) = rss::peak_during(|| StaticModel::load(dir.path()));
    assert!(
        matches!(
            loaded,
            Err(Error::Invalid {
                defect: Defect::TooLarge,
                ..
            })
        ),
        "{:?}",
        loaded.map(|m| m.dim())
    );
    assert!(peak < BOUND, "cost {} MiB", peak >> 20);
    // MiniLM's weights, beside an installed configuration and tokenizer.
    for name in ["config.json", "tokenizer.json"] {
        std::fs::remove_file(dir.path().join(name)).ok();
        std::os::unix::fs::symlink(model_dir().join(name), dir.path().join(name)).unwrap();
    }
    let weights = dir.path().join("model.safetensors");
    std::fs::write(&weights, b"").unwrap();
    rss::set_len(&weights, HUGE);
    let (loaded, peak) = rss::peak_during(|| MiniLm::load(dir.path()));
    assert!(
        matches!(loaded, Err(Error::Invalid { ref path, defect: Defect::TooLarge }) if *path == weights),
        "{:?}",
        loaded.map(|m| m.dim())
    );
    assert!(peak < BOUND, "cost {} MiB", peak >> 20);
}

#[test]
fn a_missing_model_is_told_from_a_damaged_one() {
    let _serial = rss::serial();
    let dir = tempfile::tempdir().unwrap();
    let missing = StaticModel::load(dir.path())
        .err()
        .expect("nothing to load");
    assert!(missing.is_missing(), "{missing}");
    let missing = MiniLm::load(dir.path()).err().expect("nothing to load");
    assert!(missing.is_missing(), "{missing}");
    let damaged = static_model_dir(&static_header(0, u32::MAX));
    let err = StaticModel::load(damaged.path()).err().expect("refused");
    assert!(!err.is_missing(), "{err}");
    assert!(err.to_string().contains(STATIC_FILE), "{err}");
}
