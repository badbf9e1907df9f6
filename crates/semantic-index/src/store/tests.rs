//! The store's catch-up end to end, in the crate (it reads the store's private layout).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use super::build::{CHUNKS_PER_SEGMENT, FILES_PER_BATCH};
use super::manifest::SegmentEntry;
use super::*;
use crate::chunk::chunk_file;
use crate::rank::Weights;
use crate::segment::{HASH_BYTES, stored_hash};
use crate::statics::StaticModel;

/// A static model over the installed MiniLM's first 300 tokens (`cargo xtask tools` installs
/// it; the tests fail, they do not skip, without it), built once per test binary.
pub(super) fn statics() -> &'static StaticModel {
    static MODEL: std::sync::OnceLock<StaticModel> = std::sync::OnceLock::new();
    MODEL.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/tools/models/all-minilm-l6-v2");
        let minilm = crate::MiniLm::load(&dir)
            .unwrap_or_else(|e| panic!("{e}: run `cargo xtask tools` to install the model"));
        StaticModel::build_limited(&minilm, &dir, 300).expect("builds")
    })
}

/// A small deterministic generator, so that a failure repeats.
pub(super) fn lcg(state: &mut u64) -> u64 {
    *state = state
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    *state >> 33
}

/// A store built from `contents` (path → text, every file of prior 1), in a directory that lives
/// as long as the returned guard.
fn built_store(contents: &HashMap<String, String>) -> (tempfile::TempDir, Store) {
    let mut paths: Vec<&String> = contents.keys().collect();
    paths.sort();
    let files: Vec<SourceFile> = paths
        .into_iter()
        .map(|p| SourceFile {
            path: p.clone(),
            version: 1,
            prior: 1.0,
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = Store::catch_up(
        dir.path(),
        statics(),
        "m",
        "r1",
        &files,
        &|p: &str| contents.get(p).cloned(),
        None,
    )
    .unwrap();
    (dir, store)
}

/// A repository of fewer chunks than a large segment is one small segment after its build.
/// One-file updates merge their own segments once there are too many, and never read the
/// build's files again.
#[test]
fn merging_small_segments_never_reads_the_builds_files_again() {
    let statics = statics();
    // Words without digits, so that each file's and each version's are its own sub-tokens.
    let word = |n: usize| -> String {
        n.to_string()
            .bytes()
            .map(|d| (d - b'0' + b'a') as char)
            .collect()
    };
    let text = |i: usize, v: usize| {
        format!(
            "def step_file{}_version{}(x):\n    return x\n",
            word(i),
            word(v)
        )
    };
    let contents = std::sync::Mutex::new(
        (0..20)
            .map(|i| (format!("f{i}.py"), text(i, 0)))
            .collect::<HashMap<_, _>>(),
    );
    // The files read, each counted once.
    let reads = std::sync::Mutex::new(HashSet::new());
    let read = |p: &str| {
        reads.lock().unwrap().insert(p.to_owned());
        contents.lock().unwrap().get(p).cloned()
    };
    let versions = std::sync::Mutex::new(vec![0u64; 20]);
    let files = || -> Vec<SourceFile> {
        let v = versions.lock().unwrap();
        (0..20)
            .map(|i| SourceFile {
                path: format!("f{i}.py"),
                version: v[i],
                prior: 1.0,
            })
            .collect()
    };
    let store_dir = tempfile::tempdir().unwrap();
    let catch_up = |revision: &str| {
        reads.lock().unwrap().clear();
        let (store, _) = Store::catch_up(
            store_dir.path(),
            statics,
            "m",
            revision,
            &files(),
            &read,
            None,
        )
        .unwrap();
        let read_now = reads.lock().unwrap().len();
        (store, read_now)
    };
    let (built, _) = catch_up("r0");
    assert_eq!(built.manifest.segments.len(), 1);
    let base = built.manifest.segments[0].file.clone();
    for round in 1..=3 * MAX_SMALL_SEGMENTS {
        let i = round % 4;
        contents
            .lock()
            .unwrap()
            .insert(format!("f{i}.py"), text(i, round));
        versions.lock().unwrap()[i] = round as u64;
        let (store, read_now) = catch_up(&format!("r{round}"));
        // The edited file, and at most the files of the updates' own segments.
        assert!(
            read_now <= MAX_SMALL_SEGMENTS + 1,
            "round {round}: {read_now} files read"
        );
        assert_eq!(store.manifest.segments[0].file, base, "round {round}");
        assert!(store.manifest.segments.len() <= MAX_SMALL_SEGMENTS + 1);
        let hits = store.search(
            statics,
            &format!("step_file{}_version{}", word(i), word(round)),
            &Weights::default(),
            &|_| true,
            1,
        );
        assert_eq!(hits[0].path, format!("f{i}.py"), "round {round}");
    }
}

#[test]
fn a_large_build_or_update_is_written_as_bounded_segments() {
    let statics = statics();
    // Plain text is chunked by lines, about 1 500 bytes a chunk: four or five per file.
    let text = |i: usize, v: u32| {
        (0..120)
            .map(|l| format!("file {i} line {l} version {v} word{i}x{v} some more words\n"))
            .collect::<String>()
    };
    let contents = std::sync::Mutex::new(
        (0..30)
            .map(|i| (format!("doc{i}.txt"), text(i, 1)))
            .collect::<HashMap<_, _>>(),
    );
    let read = |p: &str| contents.lock().unwrap().get(p).cloned();
    let files = |v: &dyn Fn(usize) -> u64| -> Vec<SourceFile> {
        (0..30)
            .map(|i| SourceFile {
                path: format!("doc{i}.txt"),
                version: v(i),
                prior: 1.0,
            })
            .collect()
    };
    let store_dir = tempfile::tempdir().unwrap();
    let check = |store: &Store, generation: u64| {
        let fresh: Vec<&SegmentEntry> = store
            .manifest
            .segments
            .iter()
            .filter(|e| e.file.starts_with(&format!("seg-{generation}-")))
            .collect();
        // The bound is checked after each batch: one batch's chunks past it at most, a batch of
        // the files with the most chunks (two-digit names make longer lines).
        let per_file = (0..30)
            .flat_map(|i| [1, 2].map(|v| chunk_file("doc.txt", &text(i, v)).len()))
            .max()
            .unwrap();
        assert!(fresh.len() >= 2, "{:?}", store.manifest.segments);
        assert!(
            fresh
                .iter()
                .all(|e| e.chunks as usize <= CHUNKS_PER_SEGMENT + FILES_PER_BATCH * per_file),
            "{:?}",
            store.manifest.segments
        );
    };
    let (built, stats) = Store::catch_up(
        store_dir.path(),
        statics,
        "m",
        "r1",
        &files(&|_| 1),
        &read,
        None,
    )
    .unwrap();
    assert!(stats.rebuilt && stats.files_read == 30, "{stats:?}");
    assert!(stats.chunks > 3 * CHUNKS_PER_SEGMENT, "{stats:?}");
    assert_eq!(built.live_chunks, stats.chunks);
    check(&built, 1);
    // An update of 25 files is written in bounded segments too.
    for i in 0..25 {
        contents
            .lock()
            .unwrap()
            .insert(format!("doc{i}.txt"), text(i, 2));
    }
    let (updated, stats) = Store::catch_up(
        store_dir.path(),
        statics,
        "m",
        "r2",
        &files(&|i| if i < 25 { 2 } else { 1 }),
        &read,
        None,
    )
    .unwrap();
    assert!(!stats.rebuilt && stats.files_read == 25, "{stats:?}");
    check(&updated, 2);
    assert_eq!(updated.revision(), "r2");
    let hits = updated.search(statics, "word7x2", &Weights::default(), &|_| true, 5);
    assert_eq!(hits[0].path, "doc7.txt");
    // Exactly the chunks of the files as they read now are live.
    let expected: usize = contents
        .lock()
        .unwrap()
        .iter()
        .map(|(p, t)| chunk_file(p, t).len())
        .sum();
    assert_eq!(updated.live_chunks, expected);
    // And they are what `live_chunk_hashes` lists, file by file, in chunk order.
    let mut listed = updated.live_chunk_hashes();
    listed.sort();
    let mut read_now: Vec<(String, Vec<[u8; HASH_BYTES]>)> = contents
        .lock()
        .unwrap()
        .iter()
        .map(|(p, t)| {
            let hashes = chunk_file(p, t)
                .iter()
                .map(|c| stored_hash(&c.hash))
                .collect();
            (p.clone(), hashes)
        })
        .collect();
    read_now.sort();
    assert_eq!(listed, read_now);
}

/// Twenty lines of `words`: one chunk of text.
fn paragraph(words: &str) -> String {
    (0..20)
        .map(|l| format!("{words} line {l:02} of this paragraph here\n"))
        .collect()
}

/// Builds a store of `files` (a path, its text and how many chunks it is cut into, which is
/// checked) and checks which file ranks first for the words of [`paragraph`]'s matching text
/// under each of `cases` (the weights, the path expected first).
fn check_first(files: &[(&str, String, usize)], cases: &[(Weights, &str)]) {
    let query = "zebra harness quantum";
    for (path, text, chunks) in files {
        assert_eq!(chunk_file(path, text).len(), *chunks, "{path}");
    }
    let contents: HashMap<String, String> = files
        .iter()
        .map(|(p, t, _)| ((*p).to_owned(), t.clone()))
        .collect();
    let (_dir, store) = built_store(&contents);
    for (weights, expected) in cases {
        let hits = store.search(statics(), query, weights, &|_| true, 2);
        assert_eq!(hits[0].path, *expected, "{weights:?}");
    }
}

/// A file scores its two best chunks: of two files whose best chunks are the same, the one that
/// matches the question in a second place ranks first; scored by the best chunk alone
/// (`second_chunk` 0), they tie and path order puts the other first.
#[test]
fn a_file_matching_in_two_places_outranks_one_matching_once() {
    let matching = paragraph("zebra harness quantum");
    let filler = paragraph("plain ordinary padding");
    let best_alone = Weights {
        second_chunk: 0.0,
        ..Weights::default()
    };
    check_first(
        &[
            ("a.txt", format!("{matching}\n{filler}"), 2),
            ("b.txt", format!("{matching}\n{matching}"), 2),
        ],
        &[(Weights::default(), "b.txt"), (best_alone, "a.txt")],
    );
}

/// A file of one chunk counts half its chunk as its second: a short file that is all about the
/// question ranks above a longer one that is about it in one place; without that share
/// (`lone_chunk` 0) its missing second counts as nothing and the longer file ranks first.
#[test]
fn a_short_file_all_about_the_question_outranks_a_long_one_about_it_once() {
    let matching = paragraph("zebra harness quantum");
    let filler = paragraph("plain ordinary padding");
    let no_share = Weights {
        lone_chunk: 0.0,
        ..Weights::default()
    };
    check_first(
        &[
            ("long.txt", format!("{matching}\n{filler}"), 2),
            ("short.txt", matching, 1),
        ],
        &[(Weights::default(), "short.txt"), (no_share, "long.txt")],
    );
}

/// Of a source file and a Markdown guide with the same text, the source ranks first, unless the
/// question asks for a document; nothing is hidden.
#[test]
fn a_prose_document_ranks_after_code_unless_the_question_asks_for_one() {
    let statics = statics();
    let text = "fn read_file(path: &Path) -> Vec<u8> {\n    std::fs::read(path).unwrap()\n}\n";
    let contents: HashMap<String, String> = ["src/fs.rs", "guide/fs.md"]
        .iter()
        .map(|p| ((*p).to_owned(), text.to_owned()))
        .collect();
    let (_dir, store) = built_store(&contents);
    let scores = |query: &str| {
        let hits = store.search(statics, query, &Weights::default(), &|_| true, 2);
        assert_eq!(hits.len(), 2, "{query}: both files are in the answer");
        let score = |p: &str| hits.iter().find(|h| h.path == p).unwrap().score;
        (score("src/fs.rs"), score("guide/fs.md"))
    };
    let (code, prose) = scores("read a file");
    assert!(code > prose, "{code} > {prose}");
    let (code, prose) = scores("where reading a file is documented");
    assert_eq!(code, prose);
}

/// A question's word meets the file named after its subject in another form (`quantize` and
/// `quantization.py`): the file-name boost adds its share to that file alone.
#[test]
fn a_question_meets_the_file_named_after_its_subject_in_another_form() {
    let statics = statics();
    let text = "def run(values, scale):\n    return [v * scale for v in values]\n";
    let paths = ["lib/quantization.py", "lib/tokenizer.py"];
    let contents: HashMap<String, String> = paths
        .iter()
        .map(|p| ((*p).to_owned(), text.to_owned()))
        .collect();
    let (_dir, store) = built_store(&contents);
    // The score of `named` minus the other file's, with the name boost's weight moved to the
    // definition boost (which neither file earns) so that every weight sums the same.
    let gap = |query: &str, named: &str, boost: bool| {
        let defaults = Weights::default();
        let weights = if boost {
            defaults
        } else {
            Weights {
                file_name: 0.0,
                definition: defaults.definition + defaults.file_name,
                ..defaults
            }
        };
        let hits = store.search(statics, query, &weights, &|_| true, 2);
        let score = |p: &str| hits.iter().find(|h| h.path == p).map_or(0.0, |h| h.score);
        let other = paths.iter().find(|p| **p != named).unwrap();
        score(named) - score(other)
    };
    for (query, named) in [
        ("how the weights are quantized", "lib/quantization.py"),
        ("tokenization of the input", "lib/tokenizer.py"),
    ] {
        let (with, without) = (gap(query, named, true), gap(query, named, false));
        assert!(with > 0.0, "{query}: {named} is not first ({with})");
        assert!(
            with - without > 0.03,
            "{query}: the name adds {}",
            with - without
        );
    }
}

/// Of two files with the same text, another platform's and a superseded version's rank after
/// their main line, unless the question names them; nothing is hidden.
#[test]
fn a_variant_ranks_after_its_main_line_unless_the_question_names_it() {
    let statics = statics();
    let text = "fn read_file(path: &Path) -> Vec<u8> {\n    std::fs::read(path).unwrap()\n}\n";
    let paths = ["src/unix/fs.rs", "src/win/fs.rs", "v3/fs.rs", "v4/fs.rs"];
    let contents: HashMap<String, String> = paths
        .iter()
        .map(|p| ((*p).to_owned(), text.to_owned()))
        .collect();
    let (_dir, store) = built_store(&contents);
    let scores = |query: &str| {
        let hits = store.search(statics, query, &Weights::default(), &|_| true, 4);
        assert_eq!(hits.len(), 4, "{query}: every file is in the answer");
        let score = |p: &str| hits.iter().find(|h| h.path == p).unwrap().score;
        (
            score("src/unix/fs.rs"),
            score("src/win/fs.rs"),
            score("v3/fs.rs"),
            score("v4/fs.rs"),
        )
    };
    let (unix, win, v3, v4) = scores("read a file");
    // The host's platform is the main line: Windows' code on Windows, the others' elsewhere.
    if std::env::consts::OS == "windows" {
        assert!(win > unix, "{win} > {unix}");
    } else {
        assert!(unix > win, "{unix} > {win}");
    }
    assert!(v4 > v3, "{v4} > {v3}");
    // `windows` is not a word of the path (`win`): only the rule tells the two apart. (A
    // version is named by its directory's own word, which BM25 already favours; the unit tests
    // in `variants` cover that case.)
    let (unix, win, v3, v4) = scores("read a file on windows");
    assert_eq!(unix, win);
    assert!(v4 > v3, "{v4} > {v3}");
}

/// Variants and prose documents are lowered lazily, only as deep as the answer reaches: an answer
/// of a few files is the head of a longer answer to the same question, whatever the depth the
/// pass stopped at.
#[test]
fn a_short_answer_is_the_head_of_a_long_one_with_variants_and_prose_lowered() {
    let statics = statics();
    let dirs = ["src/unix", "src/win", "v3", "v4", "lib", "docs"];
    let contents: HashMap<String, String> = (0..150)
        .map(|i| {
            let dir = dirs[i % dirs.len()];
            let ext = if dir == "docs" { "md" } else { "rs" };
            let path = format!("{dir}/file{i}.{ext}");
            // Scores spread by how often the question's words appear.
            let body =
                "fn read_file(path: &Path) -> Vec<u8> { std::fs::read(path) }\n".repeat(1 + i % 7);
            (path, format!("fn other{i}() {{}}\n{body}"))
        })
        .collect();
    let (_dir, store) = built_store(&contents);
    let answer = |keep: &dyn Fn(&str) -> bool, limit: usize| -> Vec<String> {
        store
            .search(statics, "read a file", &Weights::default(), keep, limit)
            .into_iter()
            .map(|h| h.path)
            .collect()
    };
    let everything = |_: &str| true;
    // Scoped: the pass counts only the files the scope keeps.
    let scope = |p: &str| p.starts_with("v3/") || p.starts_with("src/win/");
    for (keep, heads, least) in [
        (
            &everything as &dyn Fn(&str) -> bool,
            &[1, 2, 5, 10, 20][..],
            20,
        ),
        (&scope, &[1, 3, 10][..], 10),
    ] {
        let long = answer(keep, 100);
        assert!(long.len() > least, "{}", long.len());
        for &k in heads {
            assert_eq!(answer(keep, k), long[..k], "the first {k}");
        }
    }
}

/// Source files of prior 1 at the given versions.
fn source_files(versions: &[(&str, u64)]) -> Vec<SourceFile> {
    versions
        .iter()
        .map(|&(path, version)| SourceFile {
            path: path.to_owned(),
            version,
            prior: 1.0,
        })
        .collect()
}

/// A process that holds a version of the store catches up from it, and reloads it after another
/// process's commit, reusing the segments it mapped: the result is the store on disk, as a fresh
/// open reads it, and only the segments a commit wrote are mapped again.
#[test]
fn a_catch_up_or_reload_from_a_held_version_reads_the_store_on_disk_and_maps_only_what_is_new() {
    let statics = statics();
    let contents = std::sync::Mutex::new(HashMap::from([
        (
            "a.py".to_owned(),
            "def open_archive(path):\n    return path\n".to_owned(),
        ),
        (
            "b.py".to_owned(),
            "def parse_header(block):\n    return block\n".to_owned(),
        ),
    ]));
    let read = |p: &str| contents.lock().unwrap().get(p).cloned();
    let dir = tempfile::tempdir().unwrap();
    let r1 = source_files(&[("a.py", 1), ("b.py", 1)]);
    let (held, _) = Store::catch_up(dir.path(), statics, "m", "r1", &r1, &read, None).unwrap();
    // What a fresh open reads, to compare a held version's view with.
    let on_disk = || Store::open(dir.path()).unwrap().unwrap();
    let same = |got: &Store, what: &str| {
        let disk = on_disk();
        assert_eq!(got.revision(), disk.revision(), "{what}");
        assert_eq!(got.live_chunk_hashes(), disk.live_chunk_hashes(), "{what}");
        let ask = |s: &Store| {
            s.search(
                statics,
                "open an archive",
                &Weights::default(),
                &|_| true,
                10,
            )
        };
        assert_eq!(ask(got), ask(&disk), "{what}");
    };
    // The segments `later` shares with `earlier` by name are the very mappings `earlier` held.
    let reused = |earlier: &Store, later: &Store| -> usize {
        later
            .manifest
            .segments
            .iter()
            .zip(&later.segments)
            .filter(|(entry, seg)| {
                earlier
                    .manifest
                    .segments
                    .iter()
                    .zip(&earlier.segments)
                    .any(|(e, s)| e.file == entry.file && Arc::ptr_eq(s, seg))
            })
            .count()
    };

    // Another process commits r2 (b.py changed) from disk; the held version reloads.
    contents.lock().unwrap().insert(
        "b.py".to_owned(),
        "def parse_trailer(block):\n    return block\n".to_owned(),
    );
    let r2 = source_files(&[("a.py", 1), ("b.py", 2)]);
    Store::catch_up(dir.path(), statics, "m", "r2", &r2, &read, None).unwrap();
    assert!(!held.is_current());
    let reloaded = held.reopen().unwrap().unwrap();
    same(&reloaded, "reloaded after another process's commit");
    assert_eq!(
        reused(&held, &reloaded),
        1,
        "the build's segment is not mapped again"
    );

    // The held r1 catches up to r3 (c.py added), over r2, which it never saw.
    contents.lock().unwrap().insert(
        "c.py".to_owned(),
        "def open_archive_member(name):\n    return name\n".to_owned(),
    );
    let r3 = source_files(&[("a.py", 1), ("b.py", 2), ("c.py", 1)]);
    let (caught_up, stats) =
        Store::catch_up_from(Base::Held(&held), statics, "m", "r3", &r3, &read, None).unwrap();
    assert_eq!(stats.files_read, 1, "only c.py is new to the store on disk");
    same(&caught_up, "caught up from an older held version");
    assert!(reused(&held, &caught_up) >= 1);
    let paths: Vec<String> = caught_up
        .live_chunk_hashes()
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    assert_eq!(paths, ["a.py", "b.py", "c.py"]);
}

/// A catch-up holds each wanted file once, whatever the order of the list it is given, and
/// drops the files the list no longer names.
#[test]
fn a_catch_up_holds_each_listed_file_once_in_any_order() {
    let statics = statics();
    let read = |p: &str| {
        Some(format!(
            "def handle_{}(x):\n    return x\n",
            p.replace('.', "_")
        ))
    };
    let paths =
        |s: &Store| -> Vec<String> { s.live_chunk_hashes().into_iter().map(|(p, _)| p).collect() };
    let dir = tempfile::tempdir().unwrap();
    let r1 = source_files(&[("a.py", 1), ("b.py", 1), ("c.py", 1)]);
    let (held, _) = Store::catch_up(dir.path(), statics, "m", "r1", &r1, &read, None).unwrap();
    // Reversed, c.py changed, b.py listed twice.
    let r2 = source_files(&[("c.py", 2), ("b.py", 1), ("b.py", 1), ("a.py", 1)]);
    let (held, stats) =
        Store::catch_up_from(Base::Held(&held), statics, "m", "r2", &r2, &read, None).unwrap();
    assert_eq!((stats.files_read, stats.removed), (1, 0));
    assert_eq!(paths(&held), ["a.py", "b.py", "c.py"]);
    let r3 = source_files(&[("d.py", 1), ("a.py", 1)]);
    let (held, stats) =
        Store::catch_up_from(Base::Held(&held), statics, "m", "r3", &r3, &read, None).unwrap();
    assert_eq!((stats.files_read, stats.removed), (1, 2));
    assert_eq!(paths(&held), ["a.py", "d.py"]);
    assert_eq!(
        paths(&held),
        paths(&Store::open(dir.path()).unwrap().unwrap())
    );
}
