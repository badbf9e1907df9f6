//! The grep options in the index: regexes, file globs and types, `files` and `count` output and
//! context lines agree with the real `rg` (its first match per file) on generated trees.

use std::collections::BTreeMap;

use embedded_index::{EmbeddedIndex, EmbeddedIndexConfig};
use index_contract::{OutputMode, SearchMode, SearchRequest};
use index_testkit::rg::{RgLine, rg_lines, rg_per_file};
use index_testkit::tree;

/// The index cuts context lines to this many bytes (its snippet window); the facade cuts further.
const LINE_BYTES: usize = 16 * 1024;

/// What a hit says about a file: its first match, its context and its count.
type PerFile = BTreeMap<String, (RgLine, Option<u64>)>;

fn ours(index: &EmbeddedIndex, request: &SearchRequest) -> (PerFile, bool) {
    let resp = index.search_now(request).unwrap();
    assert!(resp.complete, "{request:?}");
    let mut out = PerFile::new();
    for h in resp.hits {
        let line = RgLine {
            path: h.path.clone(),
            line: h.line,
            column: h.column,
            before: h.before,
            after: h.after,
        };
        assert!(
            out.insert(h.path, (line, h.count)).is_none(),
            "a file twice"
        );
    }
    (out, resp.full_scan)
}

/// ripgrep's answer for `request`, one entry per file: its first matching line, with the count of
/// `rg -c` for count output.
fn theirs(root: &std::path::Path, request: &SearchRequest) -> PerFile {
    let in_git = |p: &str| p.split('/').any(index_guard::is_git_internal_segment);
    let mut first = PerFile::new();
    for l in rg_lines(root, request, LINE_BYTES) {
        if !in_git(&l.path) {
            first.entry(l.path.clone()).or_insert((l, None));
        }
    }
    if request.output == OutputMode::Count {
        let counts = rg_per_file(root, request, true);
        first.retain(|path, _| counts.contains_key(path));
        for (path, (_, count)) in first.iter_mut() {
            *count = Some(counts[path]);
        }
    }
    first
}

fn request(query: &str, regex: bool, ci: bool, edit: impl Fn(&mut SearchRequest)) -> SearchRequest {
    let mut r = SearchRequest::new(query, SearchMode::IndexedLiteral);
    r.regex = regex;
    r.case_insensitive = ci;
    r.max_results = Some(100_000);
    edit(&mut r);
    r
}

/// A generated tree, its index, and the directories that must outlive the searches: the index
/// store and the tree's outside directory, which its symlinks point into (were it dropped, a
/// followed symlink would find nothing and the test could not see it being followed).
fn index_of(
    seed: u64,
) -> (
    tempfile::TempDir,
    (tempfile::TempDir, tempfile::TempDir),
    EmbeddedIndex,
) {
    let (tree, outside) = tree::generated_tree(seed);
    let store = tempfile::tempdir().unwrap();
    // Tiny segments, so that plans are evaluated across many of them.
    let config = EmbeddedIndexConfig {
        pairs_per_segment: 500,
        merged_segment_bytes: 0,
        ..Default::default()
    };
    let index = EmbeddedIndex::with_config(tree.path(), store.path(), config).unwrap();
    index.build("r1").unwrap();
    (tree, (store, outside), index)
}

/// `word` as a regex matching it literally.
fn escape(word: &str) -> String {
    word.chars()
        .flat_map(|c| {
            let meta = r"\.+*?()|[]{}^$#&-~".contains(c);
            meta.then_some('\\').into_iter().chain([c])
        })
        .collect()
}

const REGEXES: &[&str] = &[
    r"fn\s+main",
    r"ma[a-z]n",
    r"(café|Straße)",
    r"\bmain\b",
    r"^fn",
    r"main$",
    r"[0-9]+",
    r"utf1[0-9]",
    r"日本.",
    r"ke?lvin",
    r"(?i)INDEX",
    r"x|y",
    r"before\s+nul",
    r"fn.*again",
    r"\w+_\w+",
    r"(|fn )main",
    r"(ma){1}in",
    r"[A-Z]{2,}",
    r"\p{Greek}+",
    r"(?-u:caf\xe9)",
    r"fn ma.n",
    r"K[a-z]lvin",
];

#[test]
fn regex_hits_equal_ripgreps_first_match_per_file() {
    let mut compared = 0;
    for seed in [1, 2] {
        let (tree, _store, index) = index_of(seed);
        let mut queries: Vec<String> = REGEXES.iter().map(|s| s.to_string()).collect();
        let mut rng = tree::Rng::new(seed);
        for _ in 0..10 {
            let (a, b): (&&str, &&str) = (rng.pick(tree::WORDS), rng.pick(tree::WORDS));
            let (a, b) = (escape(a), escape(b));
            queries.push(format!(r"{a}\s+{b}"));
            queries.push(format!("{a}|{b}"));
            queries.push(format!("{a}.*{b}"));
        }
        for q in &queries {
            for ci in [false, true] {
                for scope in [None, Some("src")] {
                    let r = request(q, true, ci, |r| r.path = scope.map(str::to_owned));
                    let expected = theirs(tree.path(), &r);
                    assert_eq!(ours(&index, &r).0, expected, "{r:?}");
                    compared += expected.len();
                }
            }
        }
    }
    assert!(compared > 1000, "only {compared} file hits compared");
}

/// One option or a pair of them, as it edits a request.
type Edit = Box<dyn Fn(&mut SearchRequest)>;

#[test]
fn file_filters_count_and_context_equal_ripgrep() {
    let (tree, _store, index) = index_of(3);
    // Hidden files of a type (`-t` selects them), which the index holds, and an ignored one an
    // include glob selects, which it does not.
    tree::write(tree.path(), ".notes.txt", b"fn main hidden text\n");
    tree::write(tree.path(), "src/.hidden.rs", b"fn  main() {}\n");
    tree::write(tree.path(), "ignored.log", b"fn main ignored\n");
    // Each edit is one option or a pair of them; the include globs pull in files the ignore rules
    // skip (`*.log`), which the index does not hold, and types hidden files, which it does.
    // A hidden directory and a file in the tree's ignored `build/`, which `--hidden` and
    // `--no-ignore` add.
    tree::write(
        tree.path(),
        ".config/tool.rs",
        b"fn main() { hidden_dir(); }\n",
    );
    tree::write(tree.path(), "build/out.rs", b"fn main() { built(); }\n");
    // Each query of a host refreshes first: the hidden files join the index, the ignored ones
    // stay out of it.
    index.refresh("r2", None).unwrap();
    let edits: Vec<(&str, Edit)> = vec![
        ("hidden", Box::new(|r| r.files.include_hidden = true)),
        ("no ignore", Box::new(|r| r.files.include_ignored = true)),
        (
            "hidden and no ignore",
            Box::new(|r| {
                r.files.include_hidden = true;
                r.files.include_ignored = true;
            }),
        ),
        (
            "hidden and exclude globs",
            Box::new(|r| {
                r.files.include_hidden = true;
                r.files.globs = vec!["!*.txt".into()];
            }),
        ),
        (
            "no ignore and types and count",
            Box::new(|r| {
                r.files.include_ignored = true;
                r.files.types = vec!["rust".into()];
                r.output = OutputMode::Count;
            }),
        ),
        (
            "hidden and context",
            Box::new(|r| {
                r.files.include_hidden = true;
                r.context.before = 1;
                r.context.after = 1;
            }),
        ),
        (
            "include globs",
            Box::new(|r| r.files.globs = vec!["*.log".into(), "src/**".into()]),
        ),
        (
            "exclude globs",
            Box::new(|r| r.files.globs = vec!["!*.md".into(), "!sub/**".into()]),
        ),
        (
            "types",
            Box::new(|r| r.files.types = vec!["rust".into(), "txt".into()]),
        ),
        ("count", Box::new(|r| r.output = OutputMode::Count)),
        ("files", Box::new(|r| r.output = OutputMode::Files)),
        (
            "context",
            Box::new(|r| {
                r.context.before = 2;
                r.context.after = 3;
            }),
        ),
        (
            "types and count",
            Box::new(|r| {
                r.files.types = vec!["txt".into()];
                r.output = OutputMode::Count;
            }),
        ),
        (
            "globs and context",
            Box::new(|r| {
                r.files.globs = vec!["*.log".into(), "!sub/**".into()];
                r.context.after = 1;
            }),
        ),
    ];
    let mut compared = 0;
    for (name, edit) in &edits {
        for (q, regex) in [
            ("fn main", false),
            ("main", false),
            (r"fn\s+ma[a-z]n", true),
            (r"\w+ \w+", true),
        ] {
            for ci in [false, true] {
                let r = request(q, regex, ci, edit);
                let expected = theirs(tree.path(), &r);
                assert_eq!(ours(&index, &r).0, expected, "{name}: {r:?}");
                compared += expected.len();
            }
        }
    }
    assert!(compared > 500, "only {compared} file hits compared");
}

#[test]
fn a_regex_without_a_trigram_scans_every_file_and_says_so() {
    let (tree, _store, index) = index_of(4);
    for (q, full_scan) in [(r"\w+", true), ("x|yz", true), (r"fn\s+main", false)] {
        let r = request(q, true, false, |_| {});
        let (got, scanned) = ours(&index, &r);
        assert_eq!(scanned, full_scan, "{q}");
        assert_eq!(got, theirs(tree.path(), &r), "{q}");
    }
}

#[test]
fn multiline_hits_equal_ripgreps_first_match_per_file() {
    let mut compared = 0;
    for seed in [5] {
        let (tree, _store, index) = index_of(seed);
        // Definitions spread over lines, in files the index holds, a hidden one a type selects
        // and an ignored one an include glob selects; then a refresh, as a query would do.
        let body = b"fn main() {\n    index_all();\n}\nstruct Config {\n    name: String,\n}\n";
        for rel in ["src/multi.rs", "lib/multi.rs", ".multi.rs", "multi.log"] {
            tree::write(tree.path(), rel, body);
        }
        tree::write(
            tree.path(),
            "docs/crlf.rs",
            b"fn main() {\r\n    index_all();\r\n}\r\n",
        );
        index.refresh("r2", None).unwrap();
        let mut queries: Vec<(String, bool)> = [
            (r"fn main\(\) \{\r?\n\s+index", true),
            (r"\{\n\s*name", true),
            (r"index_all\(\);\s+\}", true),
            (r"struct\s+Config\s*\{[^}]*String", true),
            (r"\w+\n\w+", true),
            (r"main", true),
            ("{\n    index_all", false),
            ("Config {\n", false),
        ]
        .iter()
        .map(|(q, regex)| (q.to_string(), *regex))
        .collect();
        let mut rng = tree::Rng::new(seed);
        for _ in 0..3 {
            let (a, b): (&&str, &&str) = (rng.pick(tree::WORDS), rng.pick(tree::WORDS));
            queries.push((format!(r"{}\r?\n{}", escape(a), escape(b)), true));
        }
        let edits: Vec<(&str, Edit)> = vec![
            ("alone", Box::new(|_| {})),
            ("count", Box::new(|r| r.output = OutputMode::Count)),
            (
                "context",
                Box::new(|r| {
                    r.context.before = 1;
                    r.context.after = 2;
                }),
            ),
            ("types", Box::new(|r| r.files.types = vec!["rust".into()])),
            (
                "include glob",
                Box::new(|r| r.files.globs = vec!["*.log".into()]),
            ),
            ("hidden", Box::new(|r| r.files.include_hidden = true)),
            ("scope", Box::new(|r| r.path = Some("src".into()))),
        ];
        for (i, (q, regex)) in queries.iter().enumerate() {
            for (j, (name, edit)) in edits.iter().enumerate() {
                // Case folding alternates, so that each query and each option meet both.
                let ci = (i + j) % 2 == 1;
                let r = request(q, *regex, ci, |r| {
                    r.multiline = true;
                    edit(r)
                });
                let expected = theirs(tree.path(), &r);
                assert_eq!(ours(&index, &r).0, expected, "{name}: {r:?}");
                compared += expected.len();
            }
        }
        // A query whose parts between line breaks hold trigrams is planned, not a full scan.
        let r = request(r"fn main\(\) \{\n\s+index", true, false, |r| {
            r.multiline = true
        });
        let (got, full_scan) = ours(&index, &r);
        assert!(!full_scan);
        assert!(got.contains_key("src/multi.rs"), "{got:?}");
    }
    assert!(compared > 100, "only {compared} file hits compared");
}

#[test]
fn types_and_hidden_files_are_answered_from_the_index_without_a_walk() {
    let (tree, _store, index) = index_of(7);
    let root = tree.path();
    // Written after the build, with no refresh: only a walk could find them. A host refreshes
    // before every query, so a query never meets this state; here it shows what a query reads.
    tree::write(root, "src/.late.rs", b"fn main() { late(); }\n");
    tree::write(root, "late.log", b"fn main() { late(); }\n");
    let typed = request("late()", false, false, |r| {
        r.files.types = vec!["rust".into()]
    });
    let hidden = request("late()", false, false, |r| r.files.include_hidden = true);
    let globbed = request("late()", false, false, |r| {
        r.files.globs = vec!["*.log".into()]
    });
    assert!(ours(&index, &typed).0.is_empty(), "a type walked");
    assert!(ours(&index, &hidden).0.is_empty(), "--hidden walked");
    // An include glob can select ignored files, which the index does not hold. The tree is too
    // young for the directory cache to vouch for it (its directories changed within the racy
    // window), so the glob walks.
    assert_eq!(ours(&index, &globbed).0, theirs(root, &globbed));
    assert!(ours(&index, &globbed).0.contains_key("late.log"));
    index.refresh("r2", None).unwrap();
    for r in [&typed, &hidden] {
        let found = ours(&index, r).0;
        assert!(found.contains_key("src/.late.rs"), "{r:?}");
        assert_eq!(found, theirs(root, r), "{r:?}");
    }
    // A rule that whitelists the hidden file puts it in the default selection without changing
    // the file: the commit of the new rule asks the walker again.
    let plain = request("late()", false, false, |_| {});
    assert!(!ours(&index, &plain).0.contains_key("src/.late.rs"));
    tree::write(root, "src/.gitignore", b"!.late.rs\n");
    index.refresh("r3", None).unwrap();
    let found = ours(&index, &plain).0;
    assert!(found.contains_key("src/.late.rs"), "{found:?}");
    assert_eq!(found, theirs(root, &plain));
    // And a rule that drops the whitelist takes it out again.
    tree::write(root, "src/.gitignore", b"# nothing\n");
    index.refresh("r4", None).unwrap();
    let found = ours(&index, &plain).0;
    assert!(!found.contains_key("src/.late.rs"), "{found:?}");
    assert_eq!(found, theirs(root, &plain));
}

#[test]
fn include_globs_are_answered_from_the_directory_cache_as_rg_answers_them() {
    let (tree, _store, index) = index_of(11);
    let root = tree.path();
    // Ignored files and directories that include globs reach, or do not: plain, hidden, in an
    // ignored directory, in a hidden one that holds a held file (whose entry the hidden rules
    // know) and in a hidden one that holds none (which only a walk can answer).
    tree::write(root, "globbed/.gitignore", b"*.log\n*.tmp\ngen/\n.env\n");
    for rel in [
        "globbed/a.log",
        "globbed/keep.rs",
        "globbed/.env",
        "globbed/sub/d.log",
        "globbed/gen/b.log",
        "globbed/gen/b.rs",
        "globbed/.hid/c.log",
        "globbed/.hid/held.rs",
        "globbed/.bare/e.tmp",
    ] {
        tree::write(root, rel, b"needle_glob\n");
    }
    // The directory cache records a walk only once its directories are older than the racy
    // window.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    index.refresh("r2", None).unwrap();
    let globbed = |globs: &[&str], hidden: bool| {
        request("needle_glob", false, false, |r| {
            r.files.globs = globs.iter().map(|g| g.to_string()).collect();
            r.files.include_hidden = hidden;
        })
    };
    let scoped = |mut r: SearchRequest, path: &str| {
        r.path = Some(path.into());
        r
    };
    let cases = [
        (globbed(&["*.log"], false), "globbed/a.log"),
        (
            globbed(&["*.log", "!globbed/sub/**"], false),
            "globbed/a.log",
        ),
        (globbed(&[".env"], false), "globbed/.env"),
        (globbed(&["*.rs"], false), "globbed/keep.rs"),
        (globbed(&["*.log"], true), "globbed/.hid/c.log"),
        (globbed(&["*.tmp"], false), ""),
        (globbed(&["*.tmp"], true), "globbed/.bare/e.tmp"),
        // A glob that includes an ignored directory (`gen`) or a hidden one makes ripgrep
        // enter it: these walk.
        (globbed(&["gen"], false), ""),
        (globbed(&["globbed/**"], false), "globbed/gen/b.rs"),
        (globbed(&["**/.hid"], false), ""),
        // The same globs again within a scope: the selection worked out for the glob is kept
        // with the commit and the cache, and only the scope differs. A file under a hidden
        // directory that holds no held file needs a walk only when the scope holds it.
        (
            scoped(globbed(&["*.log"], false), "globbed/sub"),
            "globbed/sub/d.log",
        ),
        (
            scoped(globbed(&["*.tmp"], true), "globbed/.bare"),
            "globbed/.bare/e.tmp",
        ),
        (scoped(globbed(&["*.tmp"], false), "globbed/sub"), ""),
        (scoped(globbed(&["*.tmp"], false), "globbed"), ""),
    ];
    for (r, expected) in &cases {
        let found = ours(&index, r).0;
        assert_eq!(found, theirs(root, r), "{:?}", r.files);
        assert!(
            expected.is_empty() || found.contains_key(*expected),
            "{:?}: {found:?}",
            r.files
        );
    }
    // Without a walk: a file created since the refresh that recorded the cache is not seen,
    // as the index itself does not see it until a refresh (a host refreshes before a query).
    let plain_glob = globbed(&["*.log"], false);
    tree::write(root, "globbed/late.log", b"needle_glob\n");
    let found = ours(&index, &plain_glob).0;
    assert!(!found.contains_key("globbed/late.log"), "the glob walked");
    // The refresh sees the directory change: the cache no longer vouches for it, the glob walks
    // and finds the new file.
    index.refresh("r3", None).unwrap();
    let found = ours(&index, &plain_glob).0;
    assert!(found.contains_key("globbed/late.log"), "{found:?}");
    assert_eq!(found, theirs(root, &plain_glob));
    // Once the directories settle, a whole refresh records the cache again; then a watching
    // host's refresh of the paths it saw change makes the next glob check the directories,
    // which no longer hold, so it walks and finds the ignored file the host named.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    index.refresh("r4", None).unwrap();
    tree::write(root, "globbed/later.log", b"needle_glob\n");
    assert!(
        !ours(&index, &plain_glob)
            .0
            .contains_key("globbed/later.log")
    );
    index
        .refresh_paths("r5", &["globbed/later.log".into()], None)
        .unwrap();
    let found = ours(&index, &plain_glob).0;
    assert!(found.contains_key("globbed/later.log"), "{found:?}");
    assert_eq!(found, theirs(root, &plain_glob));
}
