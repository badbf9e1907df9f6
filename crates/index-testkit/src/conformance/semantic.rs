//! The checks a backend that declares `capabilities.semantic` runs in `semantic` mode, through
//! the facade, beside [`super::CHECKS`] in the literal modes. They hold a semantic answer to the
//! same gates as a literal one (freshness, trust, routing, racing readers, paging) and to what a
//! ranking promises: one hit per file, scores in `[0, 1]`, best first.
//!
//! A semantic answer has no reference to compare with (no `rg` for meaning), so the checks
//! assert what any honest ranking must give on trees whose files each talk about one topic: the
//! file about the query's topic comes first, and no answer names a file its revision does not
//! hold.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use index_contract::{
    Change, RemoveRequest, RepositoryIndexBackend, SearchMode, SearchRequest, SearchResult,
    StopReason, limits::StalePolicy,
};
use repo_search_tool::IndexedOperationsConfig;

use super::{Check, Harness, Readers, Subject, config};
use crate::tree::write;

/// Every semantic check, in the order [`super::run_semantic`] runs them.
pub const SEMANTIC_CHECKS: &[Check] = &[
    check!(semantic_hits_are_one_per_file_scored_in_the_unit_range_best_first),
    check!(semantic_answers_attest_the_last_commit_and_the_freshness_gate_holds),
    check!(semantic_never_serves_a_name_the_gate_refuses),
    check!(semantic_renames_and_deletes_show_in_hits),
    check!(semantic_queries_racing_updates_see_one_revision_never_a_mix),
    check!(semantic_pages_concatenate_to_the_whole_answer),
];

/// Files that each talk about one topic, and a question about each topic.
const TOPICS: &[(&str, &str, &str)] = &[
    (
        "net/socket.py",
        "def open_connection(host, port):\n    \"\"\"Connect to the remote server over a TCP socket.\"\"\"\n    return socket.create_connection((host, port))\n",
        "connect to a remote server over the network",
    ),
    (
        "util/sorting.py",
        "def sort_numbers(items):\n    \"\"\"Order the numbers from the smallest to the largest.\"\"\"\n    return sorted(items)\n",
        "order numbers from small to large",
    ),
    (
        "config/settings.py",
        "def load_settings(path):\n    \"\"\"Read the configuration file into a dictionary of settings.\"\"\"\n    return parse_ini(open(path).read())\n",
        "read the configuration settings file",
    ),
    (
        "auth/password.py",
        "def hash_password(password, salt):\n    \"\"\"Hash a user's password with a salt before it is stored.\"\"\"\n    return pbkdf2(password, salt)\n",
        "hash the user password",
    ),
    (
        "image/resize.py",
        "def resize_image(picture, width, height):\n    \"\"\"Scale a picture to a new width and height.\"\"\"\n    return picture.scaled(width, height)\n",
        "scale a picture to another size",
    ),
];

/// The facade configuration of the semantic checks: every mode allowed.
fn semantic_config() -> IndexedOperationsConfig {
    IndexedOperationsConfig {
        allowed_modes: vec![
            SearchMode::Literal,
            SearchMode::IndexedLiteral,
            SearchMode::Semantic,
        ],
        ..config()
    }
}

/// A `semantic` request for `query`, up to 100 hits.
fn semantic(query: &str) -> SearchRequest {
    let mut r = SearchRequest::new(query, SearchMode::Semantic);
    r.max_results = Some(100);
    r.deadline = Some(Duration::from_secs(60));
    r
}

/// Writes the topic files into `root`.
fn topic_tree(root: &std::path::Path) {
    for (path, text, _) in TOPICS {
        write(root, path, text.as_bytes());
    }
}

/// The paths of an answer's hits, after checking what every semantic answer must hold: one hit
/// per file, each score in `[0, 1]`, best first, every name one the gate serves.
fn ranked(check: &str, found: &SearchResult) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut last = f64::INFINITY;
    for hit in &found.hits {
        assert!(
            seen.insert(hit.path.clone()),
            "{check}: {} answered twice",
            hit.path
        );
        let score = hit
            .score
            .unwrap_or_else(|| panic!("{check}: {} has no score", hit.path));
        assert!(
            (0.0..=1.0).contains(&score),
            "{check}: {} scored {score}, outside [0, 1]",
            hit.path
        );
        assert!(
            score <= last,
            "{check}: {} scored {score} after a hit scored {last}: not best first",
            hit.path
        );
        last = score;
        assert!(
            index_guard::check_path(&hit.path).is_ok(),
            "{check}: {:?} was served",
            hit.path
        );
    }
    found.hits.iter().map(|h| h.path.clone()).collect()
}

/// The revision a semantic answer attests.
fn attested(check: &str, found: &SearchResult) -> String {
    super::checks::attested(check, found).0
}

async fn semantic_hits_are_one_per_file_scored_in_the_unit_range_best_first(
    subject: Arc<dyn Subject>,
) {
    const CHECK: &str = "semantic_hits_are_one_per_file_scored_in_the_unit_range_best_first";
    let tree = tempfile::tempdir().expect("tempdir");
    let root = tree.path();
    topic_tree(root);
    // A file of many chunks about one topic: its chunks must add up to one hit.
    let mut long = String::new();
    for i in 0..40 {
        long.push_str(&format!(
            "def send_packet_{i}(sock, data):\n    \"\"\"Send a packet of data over the network socket.\"\"\"\n{}\n",
            "    sock.sendall(data)  # keep this function in a chunk of its own\n".repeat(8)
        ));
    }
    write(root, "net/packets.py", long.as_bytes());
    let h = Harness::with_config(CHECK, &*subject, root, "rev-1", semantic_config()).await;
    for (path, _, question) in TOPICS {
        let found = h.search(semantic(question)).await;
        assert_eq!(attested(CHECK, &found), "rev-1", "{CHECK}: {question:?}");
        let paths = ranked(CHECK, &found);
        let near: Vec<&str> = paths.iter().take(2).map(String::as_str).collect();
        assert!(
            near.contains(path),
            "{CHECK}: {question:?} ranked {paths:?}; {path} is not among the first two"
        );
    }
    let found = h.search(semantic("send data over the network")).await;
    let paths = ranked(CHECK, &found);
    assert!(
        paths.iter().any(|p| p == "net/packets.py"),
        "{CHECK}: the file of many chunks is missing from {paths:?}"
    );
}

async fn semantic_answers_attest_the_last_commit_and_the_freshness_gate_holds(
    subject: Arc<dyn Subject>,
) {
    const CHECK: &str = "semantic_answers_attest_the_last_commit_and_the_freshness_gate_holds";
    const MAX_AGE_MS: u64 = 1500;
    let tree = tempfile::tempdir().expect("tempdir");
    let root = tree.path();
    topic_tree(root);
    let stale = StalePolicy::new(Duration::from_millis(MAX_AGE_MS), true).expect("policy");
    let config = IndexedOperationsConfig {
        stale,
        ..semantic_config()
    };
    let h = Harness::with_config(CHECK, &*subject, root, "rev-1", config).await;
    // The sorting file now talks about compression: the answer follows the commit.
    write(
        root,
        "util/sorting.py",
        b"def compress_archive(files):\n    \"\"\"Pack the files into a zip archive to save disk space.\"\"\"\n    return zipfile.pack(files)\n",
    );
    h.update(
        "rev-2",
        vec![Change::Edit {
            path: "util/sorting.py".into(),
        }],
    )
    .await;
    let found = h.search(semantic("pack files into a zip archive")).await;
    assert_eq!(attested(CHECK, &found), "rev-2", "{CHECK}: fresh");
    assert_eq!(
        ranked(CHECK, &found).first().map(String::as_str),
        Some("util/sorting.py"),
        "{CHECK}: the edit is not what answers"
    );
    h.wait_until_older_than(MAX_AGE_MS).await;
    h.assert_refused_as_stale(semantic("pack files into a zip archive"))
        .await;
    h.update(
        "rev-3",
        vec![Change::Edit {
            path: "util/sorting.py".into(),
        }],
    )
    .await;
    let found = h.search(semantic("pack files into a zip archive")).await;
    assert_eq!(attested(CHECK, &found), "rev-3", "{CHECK}: fresh again");
}

async fn semantic_never_serves_a_name_the_gate_refuses(subject: Arc<dyn Subject>) {
    const CHECK: &str = "semantic_never_serves_a_name_the_gate_refuses";
    let tree = tempfile::tempdir().expect("tempdir");
    let root = tree.path();
    topic_tree(root);
    let (_, text, question) = TOPICS[0];
    // The same text under names no answer may carry: an override that reverses the extension,
    // and a control character.
    write(root, "evil\u{202E}yp.exe", text.as_bytes());
    write(root, "net/bell\u{7}.py", text.as_bytes());
    let h = Harness::with_config(CHECK, &*subject, root, "rev-1", semantic_config()).await;
    for scope in [None, Some("net")] {
        let mut r = semantic(question);
        r.path = scope.map(str::to_owned);
        let found = h.search(r).await;
        let paths = ranked(CHECK, &found);
        assert_eq!(
            paths.first().map(String::as_str),
            Some("net/socket.py"),
            "{CHECK}: scope {scope:?}"
        );
        assert_eq!(
            (found.complete, found.stopped),
            (false, Some(StopReason::UnservedFiles)),
            "{CHECK}: scope {scope:?}: an answer that left out a file claims to be complete"
        );
        let refused = found.stats.files_skipped.map_or(0, |s| s.refused_path);
        assert!(
            refused >= 1,
            "{CHECK}: scope {scope:?}: refused files not counted"
        );
    }
}

async fn semantic_renames_and_deletes_show_in_hits(subject: Arc<dyn Subject>) {
    const CHECK: &str = "semantic_renames_and_deletes_show_in_hits";
    let tree = tempfile::tempdir().expect("tempdir");
    let root = tree.path();
    topic_tree(root);
    let h = Harness::with_config(CHECK, &*subject, root, "rev-1", semantic_config()).await;
    let top = |found: &SearchResult| ranked(CHECK, found).first().cloned();
    // Move the sorting file, delete the password file.
    std::fs::create_dir_all(root.join("algo")).expect("mkdir");
    std::fs::rename(root.join("util/sorting.py"), root.join("algo/order.py")).expect("rename");
    std::fs::remove_file(root.join("auth/password.py")).expect("remove");
    h.update(
        "rev-2",
        vec![
            Change::Rename {
                old_path: "util/sorting.py".into(),
                path: "algo/order.py".into(),
            },
            Change::Delete {
                path: "auth/password.py".into(),
            },
        ],
    )
    .await;
    let alive: BTreeSet<String> = [
        "net/socket.py",
        "algo/order.py",
        "config/settings.py",
        "image/resize.py",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    for (_, _, question) in TOPICS {
        let found = h.search(semantic(question)).await;
        assert_eq!(attested(CHECK, &found), "rev-2", "{CHECK}: {question:?}");
        for path in ranked(CHECK, &found) {
            assert!(
                alive.contains(&path),
                "{CHECK}: {question:?} named {path}, which rev-2 does not hold"
            );
        }
    }
    let found = h.search(semantic(TOPICS[1].2)).await;
    assert_eq!(
        top(&found).as_deref(),
        Some("algo/order.py"),
        "{CHECK}: the renamed file"
    );
    let mut r = semantic(TOPICS[3].2);
    r.path = Some("auth".into());
    let found = h.search(r).await;
    assert_eq!(top(&found), None, "{CHECK}: the deleted file's directory");
    // A removal through the facade on its own.
    std::fs::remove_file(root.join("algo/order.py")).expect("remove");
    h.ops
        .index()
        .remove(RemoveRequest::new(vec!["algo/order.py".into()]))
        .await
        .unwrap_or_else(|e| panic!("{CHECK}: remove failed: {e}"));
    let found = h.search(semantic(TOPICS[1].2)).await;
    assert!(
        !ranked(CHECK, &found).iter().any(|p| p == "algo/order.py"),
        "{CHECK}: a removed file was served"
    );
}

async fn semantic_queries_racing_updates_see_one_revision_never_a_mix(subject: Arc<dyn Subject>) {
    const CHECK: &str = "semantic_queries_racing_updates_see_one_revision_never_a_mix";
    const VERSIONS: usize = 8;
    const READERS: usize = 2;
    // Version k adds `v{k}/socket.py` and deletes `v{k-1}/socket.py`, all about one topic; a
    // deleted file stays on disk, so a backend that reads text at query time cannot hide a mix.
    // An answer that attests k may name only files of version k.
    let (_, text, question) = TOPICS[0];
    let name = |k: usize| format!("v{k}/socket.py");
    let tree = tempfile::tempdir().expect("tempdir");
    let root = tree.path().to_path_buf();
    topic_tree(&root);
    write(&root, &name(0), text.as_bytes());
    let h = Arc::new(Harness::with_config(CHECK, &*subject, &root, "0", semantic_config()).await);
    let readers = Readers::start(&h, READERS, semantic(question), move |k, found| {
        let versioned: Vec<String> = ranked(CHECK, &found)
            .into_iter()
            .filter(|p| p.starts_with('v'))
            .collect();
        assert_eq!(
            versioned,
            [name(k)],
            "{CHECK}: an answer attesting revision {k} holds another version's files"
        );
    })
    .await;
    for k in 1..=VERSIONS {
        write(&root, &name(k), text.as_bytes());
        h.update(
            &k.to_string(),
            vec![
                Change::Add { path: name(k) },
                Change::Delete { path: name(k - 1) },
            ],
        )
        .await;
    }
    readers.finish(VERSIONS).await;
}

async fn semantic_pages_concatenate_to_the_whole_answer(subject: Arc<dyn Subject>) {
    const CHECK: &str = "semantic_pages_concatenate_to_the_whole_answer";
    let tree = tempfile::tempdir().expect("tempdir");
    let root = tree.path();
    topic_tree(root);
    // Many files near one topic, so that the ranking is long and has ties (a ranking may leave
    // out files with nothing in common with the question, so not every file is in it).
    for i in 0..120 {
        let (_, text, _) = TOPICS[i % TOPICS.len()];
        write(
            root,
            &format!("copies/d{}/f{i}.py", i % 7),
            format!("{text}# copy {i}\n").as_bytes(),
        );
    }
    let h = Harness::with_config(CHECK, &*subject, root, "rev-1", semantic_config()).await;
    if !h.backend.capabilities().paging {
        return;
    }
    let question = TOPICS[2].2;
    let mut all = semantic(question);
    all.max_results = Some(1000);
    let whole = h.search(all).await;
    ranked(CHECK, &whole);
    assert!(
        whole.hits.len() >= 20 && whole.next_offset.is_none(),
        "{CHECK}: the whole answer has {} hits, next offset {:?}",
        whole.hits.len(),
        whole.next_offset
    );
    for page in [3, 7] {
        let joined = h.pages(semantic(question), page).await;
        assert_eq!(joined, whole.hits, "{CHECK}: pages of {page}");
    }
}
