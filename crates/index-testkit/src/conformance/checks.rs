//! The checks of the conformance suite, each a function named after what it guards. Every
//! assertion message starts with the check's name.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use index_contract::{
    BackendCapabilities, Change, ErrorCode, IndexState, OutputMode, RemoveRequest,
    RepositoryIndexBackend, RepositoryOperations, SearchMode, SearchRequest, SearchResult,
    StopReason, UnixMillis, UpdateRequest,
    limits::{StalePolicy, UpdateLimits},
};
use repo_search_tool::{IndexedOperationsConfig, IndexedRepositoryOperations};

use super::{Call, Check, Harness, Readers, Subject, config, indexed};
use crate::tree::{Rng, generated_tree, write};

/// Every check, in the order [`super::run_all`] runs them.
pub const CHECKS: &[Check] = &[
    check!(hits_equal_rg_first_match_per_file),
    check!(status_and_answers_attest_the_last_committed_revision),
    check!(the_freshness_gate_refuses_an_index_older_than_its_policy),
    check!(a_file_whose_name_the_gate_refuses_is_never_served),
    check!(a_matching_file_whose_name_is_not_utf8_is_counted_never_served),
    check!(updates_over_the_caps_are_refused_before_the_backend),
    check!(renames_and_deletes_are_routed_as_removals_and_show_in_hits),
    check!(queries_racing_updates_see_one_revision_never_a_mix),
    check!(declared_options_agree_with_the_literal_search),
    check!(undeclared_options_are_refused_before_the_backend),
    check!(pages_concatenate_to_the_whole_answer),
];

/// How far the backend's clock (a database server's, say) may be from this process's.
const CLOCK_SLACK_MS: u64 = 1000;

/// Each file's first hit: path → (line, column).
type FirstMatches = BTreeMap<String, (u64, u64)>;

/// The hits of a complete answer, one per file (a file twice fails the check).
fn first_matches(check: &str, found: SearchResult) -> FirstMatches {
    assert!(
        found.complete,
        "{check}: an answer was cut short ({:?})",
        found.stopped
    );
    let mut out = FirstMatches::new();
    for hit in found.hits {
        let path = hit.path.clone();
        assert!(
            out.insert(hit.path, (hit.line, hit.column)).is_none(),
            "{check}: {path} answered twice"
        );
    }
    out
}

fn expect(pairs: &[(&str, u64, u64)]) -> FirstMatches {
    pairs
        .iter()
        .map(|&(p, l, c)| (p.to_owned(), (l, c)))
        .collect()
}

fn scoped(query: &str, scope: &str) -> SearchRequest {
    let mut r = indexed(query);
    r.path = Some(scope.to_owned());
    r
}

/// The revision an index answer attests, after checking its provenance is `ready`.
pub(super) fn attested(check: &str, found: &SearchResult) -> (String, Option<UnixMillis>) {
    let provenance = found
        .indexed
        .as_ref()
        .unwrap_or_else(|| panic!("{check}: an index answer without provenance"));
    assert_eq!(provenance.state, IndexState::Ready, "{check}: provenance");
    let revision = provenance
        .source_revision
        .clone()
        .unwrap_or_else(|| panic!("{check}: an answer attesting no revision"));
    (revision, provenance.updated_at)
}

/// ripgrep's first match in each file that the trust gate would serve.
fn rg_first_matches(root: &Path, query: &str, ci: bool, scope: Option<&str>) -> FirstMatches {
    let mut first = FirstMatches::new();
    // `rg_hits` is ordered by (path, line, column), so the first entry of a path is its first match.
    for (path, line, column) in crate::rg::rg_hits(root, query, ci, scope) {
        first.entry(path).or_insert((line, column));
    }
    first.retain(|path, _| index_guard::check_path(path).is_ok());
    first
}

/// Queries over the generated trees: keywords, case-folding traps, non-ASCII, punctuation that
/// SQL or a trigram plan might treat specially, a match before and after a late NUL, a UTF-16
/// file and a target outside the root that only a followed symlink reaches.
const QUERIES: &[&str] = &[
    "fn main",
    "main",
    "Kelvin",
    "kelvin",
    "café",
    "CAFÉ",
    "straße",
    "ΣΊΣΥΦΟΣ",
    "σίσυφος",
    "日本語",
    "foo_bar",
    "->",
    "x",
    "TODO",
    "before nul",
    "after nul",
    "utf16",
    "caf",
    "secret",
    "%",
];

async fn hits_equal_rg_first_match_per_file(subject: Arc<dyn Subject>) {
    const CHECK: &str = "hits_equal_rg_first_match_per_file";
    let mut compared = 0;
    for seed in [1u64, 2] {
        let (tree, _outside) = generated_tree(seed);
        let h = Harness::open(CHECK, &*subject, tree.path(), "rev-1").await;
        for &query in QUERIES {
            for ci in [false, true] {
                for scope in [None, Some("src"), Some("sub"), Some("bin/late.dat")] {
                    let mut r = indexed(query);
                    r.case_insensitive = ci;
                    r.path = scope.map(str::to_owned);
                    let got = first_matches(CHECK, h.search(r).await);
                    let expected = rg_first_matches(tree.path(), query, ci, scope);
                    assert_eq!(
                        got, expected,
                        "{CHECK}: seed {seed}, {query:?}, case-insensitive {ci}, scope {scope:?}"
                    );
                    compared += expected.len();
                }
            }
        }
    }
    assert!(
        compared > 1000,
        "{CHECK}: only {compared} file hits compared"
    );
}

async fn status_and_answers_attest_the_last_committed_revision(subject: Arc<dyn Subject>) {
    const CHECK: &str = "status_and_answers_attest_the_last_committed_revision";
    let tree = tempfile::tempdir().expect("tempdir");
    let root = tree.path();
    write(root, "a.txt", b"needle one\n");
    write(root, "b.txt", b"needle two\n");
    let before = UnixMillis::now();
    let h = Harness::open(CHECK, &*subject, root, "rev-1").await;
    let first = h.status().await;
    assert_eq!(
        (first.state, first.source_revision.as_deref()),
        (IndexState::Ready, Some("rev-1")),
        "{CHECK}: the status once opened"
    );
    let at = first
        .updated_at
        .unwrap_or_else(|| panic!("{CHECK}: a ready index without updated_at"));
    let now = UnixMillis::now();
    assert!(
        at.0 + CLOCK_SLACK_MS >= before.0 && at.0 <= now.0 + CLOCK_SLACK_MS,
        "{CHECK}: updated_at {} is not the time of the commit ({}..{})",
        at.0,
        before.0,
        now.0
    );
    let found = h.search(indexed("needle")).await;
    assert_eq!(
        attested(CHECK, &found),
        ("rev-1".to_owned(), Some(at)),
        "{CHECK}: the first answer's provenance"
    );

    // An update commits its revision, later than the one before.
    tokio::time::sleep(Duration::from_millis(20)).await;
    write(root, "a.txt", b"needle three\n");
    h.update(
        "rev-2",
        vec![Change::Edit {
            path: "a.txt".into(),
        }],
    )
    .await;
    let second = h.status().await;
    assert_eq!(
        (second.state, second.source_revision.as_deref()),
        (IndexState::Ready, Some("rev-2")),
        "{CHECK}: the status after an update"
    );
    assert!(
        second.updated_at > first.updated_at,
        "{CHECK}: updated_at did not move forward with the update ({:?} then {:?})",
        first.updated_at,
        second.updated_at
    );
    let found = h.search(indexed("needle")).await;
    assert_eq!(
        attested(CHECK, &found),
        ("rev-2".to_owned(), second.updated_at),
        "{CHECK}: the answer after an update"
    );
    let a = found.hits.iter().find(|hit| hit.path == "a.txt");
    assert_eq!(
        a.map(|hit| hit.snippet.as_str()),
        Some("needle three"),
        "{CHECK}: the edited file's hit"
    );

    // A removal commits no revision: the index still attests the last update's.
    std::fs::remove_file(root.join("b.txt")).expect("remove b.txt");
    h.ops
        .index()
        .remove(RemoveRequest::new(vec!["b.txt".into()]))
        .await
        .unwrap_or_else(|e| panic!("{CHECK}: remove failed: {e}"));
    let third = h.status().await;
    assert_eq!(
        third.source_revision.as_deref(),
        Some("rev-2"),
        "{CHECK}: the revision after a removal"
    );
    let found = h.search(indexed("needle")).await;
    assert_eq!(
        attested(CHECK, &found).0,
        "rev-2",
        "{CHECK}: after a removal"
    );
    assert_eq!(
        first_matches(CHECK, found),
        expect(&[("a.txt", 1, 1)]),
        "{CHECK}: the hits after a removal"
    );
}

async fn the_freshness_gate_refuses_an_index_older_than_its_policy(subject: Arc<dyn Subject>) {
    const CHECK: &str = "the_freshness_gate_refuses_an_index_older_than_its_policy";
    const MAX_AGE_MS: u64 = 1500;
    let tree = tempfile::tempdir().expect("tempdir");
    let root = tree.path();
    write(root, "a.txt", b"needle\n");
    let stale = StalePolicy::new(Duration::from_millis(MAX_AGE_MS), true).expect("policy");
    let config = IndexedOperationsConfig { stale, ..config() };
    let h = Harness::with_config(CHECK, &*subject, root, "rev-1", config).await;
    h.update(
        "rev-2",
        vec![Change::Edit {
            path: "a.txt".into(),
        }],
    )
    .await;
    let found = h.search(indexed("needle")).await;
    assert_eq!(attested(CHECK, &found).0, "rev-2", "{CHECK}: fresh");
    h.wait_until_older_than(MAX_AGE_MS).await;
    h.assert_refused_as_stale(indexed("needle")).await;
    // The next update makes it servable again.
    h.update(
        "rev-3",
        vec![Change::Edit {
            path: "a.txt".into(),
        }],
    )
    .await;
    let found = h.search(indexed("needle")).await;
    assert_eq!(attested(CHECK, &found).0, "rev-3", "{CHECK}: fresh again");
}

async fn a_file_whose_name_the_gate_refuses_is_never_served(subject: Arc<dyn Subject>) {
    const CHECK: &str = "a_file_whose_name_the_gate_refuses_is_never_served";
    let tree = tempfile::tempdir().expect("tempdir");
    let root = tree.path();
    write(root, "ok.txt", b"needle\n");
    // A right-to-left override that makes `exe.txt` read as `txt.exe`, and a control character.
    write(root, "evil\u{202E}txt.exe", b"needle\n");
    write(root, "src/bell\u{7}.txt", b"needle\n");
    write(root, "quiet.txt", b"nothing here\n");
    let h = Harness::open(CHECK, &*subject, root, "rev-1").await;
    for scope in [None, Some("src")] {
        let mut r = indexed("needle");
        r.path = scope.map(str::to_owned);
        // Served at all: a backend that returned such a name would fail the whole query closed.
        let found = h.search(r).await;
        let paths: Vec<&str> = found.hits.iter().map(|hit| hit.path.as_str()).collect();
        let expected: &[&str] = if scope.is_none() { &["ok.txt"] } else { &[] };
        assert_eq!(paths, expected, "{CHECK}: scope {scope:?}");
        // A matching file was left out, so the answer is not all there is, and says why.
        assert!(
            !found.complete,
            "{CHECK}: scope {scope:?}: an answer missing a refused file's match claims to be complete"
        );
        assert_eq!(
            found.stopped,
            Some(StopReason::UnservedFiles),
            "{CHECK}: scope {scope:?}"
        );
        let refused = found.stats.files_skipped.map_or(0, |s| s.refused_path);
        assert!(
            refused >= 1,
            "{CHECK}: scope {scope:?}: refused files not counted ({:?})",
            found.stats.files_skipped
        );
    }
    // Every hit of an ordinary query passes the gate too (a failure would be an error here).
    let found = h.search(indexed("nothing")).await;
    assert_eq!(
        first_matches(CHECK, found),
        expect(&[("quiet.txt", 1, 1)]),
        "{CHECK}: a query no refused file matches"
    );
}

async fn a_matching_file_whose_name_is_not_utf8_is_counted_never_served(subject: Arc<dyn Subject>) {
    const CHECK: &str = "a_matching_file_whose_name_is_not_utf8_is_counted_never_served";
    let tree = tempfile::tempdir().expect("tempdir");
    let root = tree.path();
    write(root, "ok.txt", b"needle\n");
    write(root, "quiet.txt", b"nothing here\n");
    // ripgrep searches these and prints their names lossily; no JSON string can carry them.
    write_bytes_name(root, b"bad\xff.txt", b"needle\n");
    write_bytes_name(root, b"src/d\xe9j\xe0.txt", b"needle\n");
    let h = Harness::open(CHECK, &*subject, root, "rev-1").await;
    for (scope, served, counted) in [(None, &["ok.txt"][..], 2), (Some("src"), &[][..], 1)] {
        let mut r = indexed("needle");
        r.path = scope.map(str::to_owned);
        let found = h.search(r).await;
        let paths: Vec<&str> = found.hits.iter().map(|hit| hit.path.as_str()).collect();
        assert_eq!(paths, served, "{CHECK}: scope {scope:?}");
        assert_eq!(
            (found.complete, found.stopped),
            (false, Some(StopReason::UnservedFiles)),
            "{CHECK}: scope {scope:?}: a match in a file whose name is not UTF-8 was lost"
        );
        let skipped = found.stats.files_skipped.unwrap_or_default();
        assert_eq!(
            (skipped.non_utf8_path, skipped.refused_path),
            (counted, 0),
            "{CHECK}: scope {scope:?}"
        );
    }
    // A query no such file matches is complete.
    let found = h.search(indexed("nothing")).await;
    assert_eq!(
        first_matches(CHECK, found),
        expect(&[("quiet.txt", 1, 1)]),
        "{CHECK}: a query no file with such a name matches"
    );
}

/// Writes `bytes` at the repo-relative `name`, which need not be UTF-8.
fn write_bytes_name(root: &Path, name: &[u8], bytes: &[u8]) {
    #[cfg(unix)]
    let path = root.join(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(name));
    // Elsewhere a name is UTF-16, and one that is not UTF-8 cannot be spelled this way.
    #[cfg(not(unix))]
    let path = root.join(String::from_utf8_lossy(name).as_ref());
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).expect("create the file's directory");
    }
    std::fs::write(path, bytes).expect("write the file");
}

/// A write through the facade, for the caps check.
enum Write {
    Update(&'static str, Vec<Change>),
    Remove(Vec<String>),
}

async fn updates_over_the_caps_are_refused_before_the_backend(subject: Arc<dyn Subject>) {
    const CHECK: &str = "updates_over_the_caps_are_refused_before_the_backend";
    let tree = tempfile::tempdir().expect("tempdir");
    let root = tree.path();
    for p in ["a.txt", "b.txt", "c.txt", "d.txt"] {
        write(root, p, b"needle\n");
    }
    let update_limits = UpdateLimits::new(3, 256).expect("update limits");
    let config = IndexedOperationsConfig {
        update_limits,
        ..config()
    };
    let h = Harness::with_config(CHECK, &*subject, root, "rev-1", config).await;
    let edit = |p: &str| Change::Edit { path: p.into() };
    let long = format!("{}x.txt", "d/".repeat(130));
    let cases: Vec<(&str, Write, ErrorCode)> = vec![
        (
            "four changes over a cap of three",
            Write::Update(
                "rev-2",
                vec![edit("a.txt"), edit("b.txt"), edit("c.txt"), edit("d.txt")],
            ),
            ErrorCode::Limit,
        ),
        (
            "a path over the byte cap",
            Write::Update("rev-2", vec![edit(&long)]),
            ErrorCode::Limit,
        ),
        (
            "a path that climbs out",
            Write::Update("rev-2", vec![edit("a.txt"), edit("../outside.txt")]),
            ErrorCode::Untrusted,
        ),
        (
            "a rename from an absolute path",
            Write::Update(
                "rev-2",
                vec![Change::Rename {
                    old_path: "/etc/passwd".into(),
                    path: "a.txt".into(),
                }],
            ),
            ErrorCode::Untrusted,
        ),
        (
            "a path into git's own data",
            Write::Update("rev-2", vec![edit(".git/config")]),
            ErrorCode::Untrusted,
        ),
        (
            "a revision with a control character",
            Write::Update("rev\n2", vec![edit("a.txt")]),
            ErrorCode::Untrusted,
        ),
        (
            "four removals over a cap of three",
            Write::Remove(vec![
                "a.txt".into(),
                "b.txt".into(),
                "c.txt".into(),
                "d.txt".into(),
            ]),
            ErrorCode::Limit,
        ),
        (
            "a removal that climbs out",
            Write::Remove(vec!["a/../../x".into()]),
            ErrorCode::Untrusted,
        ),
    ];
    for (name, write, code) in cases {
        let result = match write {
            Write::Update(revision, changes) => {
                h.ops
                    .index()
                    .update(UpdateRequest {
                        repository_id: "conformance".into(),
                        worktree_id: "main".into(),
                        source_revision: revision.into(),
                        changes,
                    })
                    .await
            }
            Write::Remove(paths) => h.ops.index().remove(RemoveRequest::new(paths)).await,
        };
        let err = result.expect_err(name);
        assert_eq!(err.code(), code, "{CHECK}: {name}: {err}");
        assert_eq!(
            h.backend.writes(),
            [],
            "{CHECK}: {name} reached the backend"
        );
    }
    // Nothing changed: the first revision, every file.
    assert_eq!(
        h.status().await.source_revision.as_deref(),
        Some("rev-1"),
        "{CHECK}: the revision after refusals"
    );
    let found = first_matches(CHECK, h.search(indexed("needle")).await);
    assert_eq!(
        found.len(),
        4,
        "{CHECK}: the hits after refusals: {found:?}"
    );
}

async fn renames_and_deletes_are_routed_as_removals_and_show_in_hits(subject: Arc<dyn Subject>) {
    const CHECK: &str = "renames_and_deletes_are_routed_as_removals_and_show_in_hits";
    let tree = tempfile::tempdir().expect("tempdir");
    let root = tree.path();
    write(root, "a.txt", b"needle one\n");
    write(root, "b.txt", b"needle two\n");
    write(root, "d/e.txt", b"other\nneedle three\n");
    write(root, "f.txt", b"needle four\n");
    let h = Harness::open(CHECK, &*subject, root, "rev-1").await;
    assert_eq!(
        needles(CHECK, &h, indexed("needle")).await,
        expect(&[
            ("a.txt", 1, 1),
            ("b.txt", 1, 1),
            ("d/e.txt", 2, 1),
            ("f.txt", 1, 1)
        ]),
        "{CHECK}: before"
    );
    // Edit a, move b into a new directory, delete d/e, and report an edit of f, which is gone by
    // the time the update runs (a host's report can lag the worktree): it is dropped.
    write(root, "a.txt", b"first\nsecond needle\n");
    std::fs::create_dir_all(root.join("new")).expect("mkdir");
    std::fs::rename(root.join("b.txt"), root.join("new/c.txt")).expect("rename");
    std::fs::remove_file(root.join("d/e.txt")).expect("remove");
    std::fs::remove_file(root.join("f.txt")).expect("remove");
    h.update(
        "rev-2",
        vec![
            Change::Edit {
                path: "a.txt".into(),
            },
            Change::Rename {
                old_path: "b.txt".into(),
                path: "new/c.txt".into(),
            },
            Change::Delete {
                path: "d/e.txt".into(),
            },
            Change::Edit {
                path: "f.txt".into(),
            },
        ],
    )
    .await;
    assert_eq!(
        h.backend.writes(),
        [
            Call::Remove(RemoveRequest {
                paths: vec!["b.txt".into(), "d/e.txt".into()],
                update_follows: true,
            }),
            Call::Update(UpdateRequest {
                repository_id: "conformance".into(),
                worktree_id: "main".into(),
                source_revision: "rev-2".into(),
                changes: vec![
                    Change::Edit {
                        path: "a.txt".into()
                    },
                    Change::Add {
                        path: "new/c.txt".into()
                    },
                    Change::Edit {
                        path: "f.txt".into()
                    },
                ],
            }),
        ],
        "{CHECK}: what reached the backend"
    );
    assert_eq!(
        h.status().await.source_revision.as_deref(),
        Some("rev-2"),
        "{CHECK}: the revision"
    );
    assert_eq!(
        needles(CHECK, &h, indexed("needle")).await,
        expect(&[("a.txt", 2, 8), ("new/c.txt", 1, 1)]),
        "{CHECK}: after the rename and delete"
    );
    assert_eq!(
        needles(CHECK, &h, indexed("two")).await,
        expect(&[("new/c.txt", 1, 8)]),
        "{CHECK}: the renamed file's text"
    );
    for (query, scope) in [("three", None), ("needle", Some("d")), ("four", None)] {
        let mut r = indexed(query);
        r.path = scope.map(str::to_owned);
        assert_eq!(
            needles(CHECK, &h, r).await,
            FirstMatches::new(),
            "{CHECK}: {query:?} in {scope:?} after the delete"
        );
    }
    assert_eq!(
        needles(CHECK, &h, scoped("needle", "new")).await,
        expect(&[("new/c.txt", 1, 1)]),
        "{CHECK}: the new directory"
    );
    // A removal through the facade on its own.
    std::fs::remove_file(root.join("a.txt")).expect("remove");
    h.ops
        .index()
        .remove(RemoveRequest::new(vec!["a.txt".into()]))
        .await
        .unwrap_or_else(|e| panic!("{CHECK}: remove failed: {e}"));
    assert_eq!(
        needles(CHECK, &h, indexed("needle")).await,
        expect(&[("new/c.txt", 1, 1)]),
        "{CHECK}: after a removal"
    );
}

/// The first matches of a complete answer through the facade.
async fn needles(check: &str, h: &Harness, r: SearchRequest) -> FirstMatches {
    first_matches(check, h.search(r).await)
}

async fn queries_racing_updates_see_one_revision_never_a_mix(subject: Arc<dyn Subject>) {
    const CHECK: &str = "queries_racing_updates_see_one_revision_never_a_mix";
    const VERSIONS: usize = 12;
    const FILES: usize = 4;
    const READERS: usize = 2;
    // Version k adds the files `v{k}/f*.txt` and deletes `v{k-1}/f0.txt`; files are never edited
    // in place and a deleted file stays on disk, so a backend that reads file contents at query
    // time cannot hide a mix by reading the newer text. The delete makes the facade route a
    // removal before the update: in between, the index matches no revision, and must say so
    // (`building`, refused as stale) rather than answer under the old revision's name.
    let names = |k: usize| (0..FILES).map(move |i| format!("v{k}/f{i}.txt"));
    let at = move |k: usize| -> BTreeSet<String> {
        (0..=k)
            .flat_map(names)
            .filter(|p| !(0..k).any(|j| *p == format!("v{j}/f0.txt")))
            .collect()
    };
    let tree = tempfile::tempdir().expect("tempdir");
    let root = tree.path().to_path_buf();
    for p in names(0) {
        write(&root, &p, b"marker\n");
    }
    let h = Arc::new(Harness::open(CHECK, &*subject, &root, "0").await);
    let readers = Readers::start(&h, READERS, indexed("marker"), move |k, found| {
        let paths: BTreeSet<String> = first_matches(CHECK, found).into_keys().collect();
        assert_eq!(
            paths,
            at(k),
            "{CHECK}: an answer attesting revision {k} holds another version's files"
        );
    })
    .await;
    for k in 1..=VERSIONS {
        for p in names(k) {
            write(&root, &p, b"marker\n");
        }
        let mut changes: Vec<Change> = names(k).map(|path| Change::Add { path }).collect();
        changes.push(Change::Delete {
            path: format!("v{}/f0.txt", k - 1),
        });
        h.update(&k.to_string(), changes).await;
    }
    readers.finish(VERSIONS).await;
}

/// How a variant changes a request.
type Edit = fn(&mut SearchRequest);

/// One grep option (or a pair), as the declared-options checks apply it.
struct Variant {
    name: &'static str,
    declared: fn(&BackendCapabilities) -> bool,
    edit: Edit,
}

fn variants() -> Vec<Variant> {
    vec![
        Variant {
            name: "no option",
            declared: |_| true,
            edit: |_| {},
        },
        Variant {
            name: "files output",
            declared: |_| true,
            edit: |r| r.output = OutputMode::Files,
        },
        Variant {
            name: "regex",
            declared: |c| c.regex,
            edit: regex,
        },
        Variant {
            name: "include globs",
            declared: |c| c.file_filters,
            edit: |r| r.files.globs = vec!["*.log".into(), "src/**".into()],
        },
        Variant {
            name: "exclude globs",
            declared: |c| c.file_filters || c.exclude_globs,
            edit: |r| r.files.globs = vec!["!*.md".into(), "!sub/**".into()],
        },
        Variant {
            name: "types",
            declared: |c| c.file_filters,
            edit: |r| r.files.types = vec!["rust".into(), "txt".into()],
        },
        Variant {
            name: "count",
            declared: |c| c.count,
            edit: |r| r.output = OutputMode::Count,
        },
        Variant {
            name: "context",
            declared: |c| c.context,
            edit: |r| {
                r.context.before = 2;
                r.context.after = 3;
            },
        },
        Variant {
            name: "hidden files",
            declared: |c| c.hidden_files,
            edit: |r| r.files.include_hidden = true,
        },
        Variant {
            name: "ignored files",
            declared: |c| c.ignored_files,
            edit: |r| r.files.include_ignored = true,
        },
        Variant {
            name: "multiline",
            declared: |c| c.multiline,
            edit: |r| r.multiline = true,
        },
        Variant {
            name: "multiline regex and count",
            declared: |c| c.multiline && c.regex && c.count,
            edit: |r| {
                // `\s+` may now cross a line break: `fn\n  main` matches.
                regex(r);
                r.multiline = true;
                r.output = OutputMode::Count;
            },
        },
        Variant {
            name: "multiline regex and context",
            declared: |c| c.multiline && c.regex && c.context,
            edit: |r| {
                regex(r);
                r.multiline = true;
                r.context.before = 1;
                r.context.after = 2;
            },
        },
        Variant {
            name: "regex and count",
            declared: |c| c.regex && c.count,
            edit: |r| {
                regex(r);
                r.output = OutputMode::Count;
            },
        },
        Variant {
            name: "types and context",
            declared: |c| c.file_filters && c.context,
            edit: |r| {
                r.files.types = vec!["txt".into()];
                r.context.after = 1;
            },
        },
    ]
}

/// Turns a fixed-string query into a regex that still needs a word's trigrams: `fn main` becomes
/// `fn\s+m[a-z]in`.
fn regex(r: &mut SearchRequest) {
    r.query = r.query.replace(' ', r"\s+").replace("ai", "[a-z]i");
    r.regex = true;
}

/// What an answer says about each file: its first hit, its count, and its context.
type PerFile = BTreeMap<String, (u64, u64, Option<u64>, Vec<String>, Vec<String>)>;

fn per_file(check: &str, what: &str, found: SearchResult) -> PerFile {
    assert!(
        found.complete,
        "{check}: {what} was cut short ({:?})",
        found.stopped
    );
    let mut out = PerFile::new();
    // Literal hits are every matching line in (path, line, column) order; index hits are one per
    // file. Either way the first hit of a path is its first match.
    for hit in found.hits {
        out.entry(hit.path).or_insert((
            hit.line,
            hit.column,
            hit.count,
            hit.before.unwrap_or_default(),
            hit.after.unwrap_or_default(),
        ));
    }
    out
}

/// The tree of the options checks: a generated tree, plus hidden files a type selects, an
/// ignored file an include glob selects, and a definition split over lines, which only a
/// multi-line regex finds.
fn options_tree() -> (tempfile::TempDir, tempfile::TempDir) {
    let (tree, outside) = generated_tree(3);
    write(tree.path(), "src/split.rs", b"pub fn\n    main() {}\n");
    write(tree.path(), ".notes.txt", b"fn main hidden text\n");
    write(tree.path(), "src/.hidden.rs", b"fn  main() {}\n");
    write(tree.path(), "ignored.log", b"fn main ignored\n");
    (tree, outside)
}

async fn declared_options_agree_with_the_literal_search(subject: Arc<dyn Subject>) {
    const CHECK: &str = "declared_options_agree_with_the_literal_search";
    let (tree, _outside) = options_tree();
    let h = Harness::open(CHECK, &*subject, tree.path(), "rev-1").await;
    let capabilities = h.backend.capabilities();
    let mut compared = 0;
    for variant in variants() {
        if !(variant.declared)(&capabilities) {
            continue;
        }
        for query in ["fn main", "main", "café"] {
            for ci in [false, true] {
                let mut r = indexed(query);
                r.case_insensitive = ci;
                (variant.edit)(&mut r);
                let what = format!("{}: {r:?}", variant.name);
                let ours = per_file(CHECK, &what, h.search(r.clone()).await);
                r.mode = SearchMode::Literal;
                let literal = per_file(CHECK, &what, h.search(r).await);
                assert_eq!(ours, literal, "{CHECK}: {what}");
                compared += literal.len();
            }
        }
    }
    assert!(
        compared > 100,
        "{CHECK}: only {compared} file hits compared"
    );
}

async fn undeclared_options_are_refused_before_the_backend(subject: Arc<dyn Subject>) {
    const CHECK: &str = "undeclared_options_are_refused_before_the_backend";
    let tree = tempfile::tempdir().expect("tempdir");
    write(tree.path(), "a.txt", b"fn main\n");
    let h = Harness::open(CHECK, &*subject, tree.path(), "rev-1").await;
    let capabilities = h.backend.capabilities();
    let mut refused = Vec::new();
    let mut undeclared: Vec<(&str, Edit)> = variants()
        .into_iter()
        .filter(|v| !(v.declared)(&capabilities))
        .map(|v| (v.name, v.edit))
        .collect();
    if !capabilities.paging {
        undeclared.push(("paging", |r| r.offset = 1));
    }
    if !capabilities.semantic {
        undeclared.push(("semantic mode", |r| r.mode = SearchMode::Semantic));
    }
    for (name, edit) in undeclared {
        let mut r = indexed("fn main");
        edit(&mut r);
        let searches = h.backend.searches();
        let err = h
            .ops
            .search(r)
            .await
            .expect_err("an undeclared option was served");
        assert_eq!(err.code(), ErrorCode::Unsupported, "{CHECK}: {name}: {err}");
        assert_eq!(
            h.backend.searches(),
            searches,
            "{CHECK}: {name} reached the backend"
        );
        refused.push(name);
    }
    if !capabilities.semantic {
        // Nor can a facade be built that offers the mode.
        let config = IndexedOperationsConfig {
            allowed_modes: vec![SearchMode::IndexedLiteral, SearchMode::Semantic],
            ..config()
        };
        let built = IndexedRepositoryOperations::new(
            tree.path(),
            h.backend.clone(),
            Arc::new(literal_search::LiteralSearch::new(tree.path()).expect("literal search")),
            config,
        );
        let err = built.expect_err("a facade offered semantic mode without the capability");
        assert_eq!(err.code(), ErrorCode::Unsupported, "{CHECK}: semantic");
    }
    // The options it declares are served on the same index.
    for v in variants()
        .into_iter()
        .filter(|v| (v.declared)(&capabilities))
    {
        let mut r = indexed("fn main");
        (v.edit)(&mut r);
        h.search(r).await;
    }
}

async fn pages_concatenate_to_the_whole_answer(subject: Arc<dyn Subject>) {
    const CHECK: &str = "pages_concatenate_to_the_whole_answer";
    let tree = tempfile::tempdir().expect("tempdir");
    let mut rng = Rng::new(7);
    let dirs = ["src", "src/a/b", "tests", "docs", "vendor/x", "lib"];
    let lines = [
        "fn marker() {}\n",
        "    marker();\n",
        "let x = marker_y;\n",
        "nothing here\n",
    ];
    // More than two thousand matching files: an answer longer than one ranking block of an
    // index (the embedded one ranks in blocks of 1000) must still page exactly.
    for i in 0..2600 {
        let d = rng.pick(&dirs);
        let mut body = String::new();
        for _ in 0..1 + rng.below(3) {
            let line: &&str = rng.pick(&lines);
            body.push_str(line);
        }
        write(tree.path(), &format!("{d}/f{i}.rs"), body.as_bytes());
    }
    let h = Harness::open(CHECK, &*subject, tree.path(), "rev-1").await;
    if !h.backend.capabilities().paging {
        // Refused instead: `undeclared_options_are_refused_before_the_backend` checks that.
        return;
    }
    let mut all = indexed("marker");
    all.max_results = Some(index_contract::limits::HARD_MAX_RESULTS);
    let whole = h.search(all).await;
    assert!(
        whole.complete && whole.next_offset.is_none(),
        "{CHECK}: whole"
    );
    assert!(
        whole.hits.len() > 2000,
        "{CHECK}: only {} hits",
        whole.hits.len()
    );
    for page in [37, 999] {
        let joined = h.pages(indexed("marker"), page).await;
        assert_eq!(joined, whole.hits, "{CHECK}: pages of {page}");
    }
}
