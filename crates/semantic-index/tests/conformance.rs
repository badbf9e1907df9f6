//! The backend conformance suite (`index_testkit::conformance`) on the semantic backend: the
//! trigram index and the semantic store as one [`CompositeBackend`], with the installed static
//! model. It runs every check of the literal modes and every semantic check, and the checks only
//! this backend can make: what an update re-embeds.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use embedded_index::{EmbeddedIndex, EmbeddedIndexConfig};
use index_contract::{
    BoxFuture, Change, RepositoryIndexBackend, RepositoryOperations, SearchMode, SearchRequest,
    UpdateRequest,
};
use index_testkit::conformance::{self, Subject};
use repo_search_tool::{IndexedOperationsConfig, IndexedRepositoryOperations};
use semantic_index::{CompositeBackend, SemanticEngine};

/// The static model `cargo xtask tools` builds (the test fails, it does not skip, without it).
fn model_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/tools/models/all-minilm-l6-v2");
    assert!(
        dir.join(semantic_index::STATIC_FILE).is_file(),
        "no static model in {}: run `cargo xtask tools`",
        dir.display()
    );
    dir
}

/// Opens each backend in an index directory of its own, kept until the suite ends.
#[derive(Default)]
struct Semantic {
    stores: Mutex<Vec<tempfile::TempDir>>,
}

/// A composite backend over `root` in `store`, built and caught up at `revision`.
fn composite(root: &Path, store: &Path, revision: &str) -> Arc<CompositeBackend> {
    // Small segments, so that queries and updates cross several of them.
    let config = EmbeddedIndexConfig {
        pairs_per_segment: 2000,
        max_small_segments: 2,
        merged_segment_bytes: 0,
        ..EmbeddedIndexConfig::default()
    };
    let index = Arc::new(EmbeddedIndex::with_config(root, store, config).unwrap());
    index.build(revision).unwrap();
    let semantic = Arc::new(SemanticEngine::open(Some(&model_dir()), store).unwrap());
    semantic.catch_up(&index, None).unwrap();
    Arc::new(CompositeBackend { index, semantic })
}

impl Subject for Semantic {
    fn open<'a>(
        &'a self,
        root: &'a Path,
        revision: &'a str,
    ) -> BoxFuture<'a, Arc<dyn RepositoryIndexBackend>> {
        Box::pin(async move {
            let store = tempfile::tempdir().unwrap();
            let backend = composite(root, store.path(), revision);
            self.stores.lock().unwrap().push(store);
            backend as Arc<dyn RepositoryIndexBackend>
        })
    }
}

#[test]
fn the_semantic_backend_passes_the_conformance_suite_in_the_literal_modes() {
    let report =
        conformance::runtime().block_on(conformance::run_all(Arc::new(Semantic::default())));
    report.assert_passed(conformance::CHECKS);
}

#[test]
fn the_semantic_backend_passes_the_semantic_conformance_checks() {
    let report =
        conformance::runtime().block_on(conformance::run_semantic(Arc::new(Semantic::default())));
    report.assert_passed(conformance::SEMANTIC_CHECKS);
}

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A function padded past half a chunk, so that each is a chunk of its own.
fn function(name: &str, body: &str) -> String {
    let pad = "    # padding line that keeps this function in a chunk of its own\n".repeat(14);
    format!("def {name}():\n    {body}\n{pad}\n")
}

#[test]
fn an_update_through_the_facade_re_embeds_the_changed_chunks_and_nothing_else() {
    let repo = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let root = repo.path();
    for i in 0..20 {
        write(
            root,
            &format!("src/m{i}.py"),
            &function(&format!("f{i}"), &format!("return {i}")),
        );
    }
    let three = |middle: &str| {
        [
            function("alpha", "return 'a'"),
            function("beta", middle),
            function("gamma", "return 'c'"),
        ]
        .concat()
    };
    write(root, "src/big.py", &three("return 1"));
    let backend = composite(root, store.path(), "rev-1");
    let built = backend.semantic.last_catch_up();
    assert!(built.rebuilt && built.files_read == 21, "{built:?}");
    let config = IndexedOperationsConfig {
        allowed_modes: vec![
            SearchMode::Literal,
            SearchMode::IndexedLiteral,
            SearchMode::Semantic,
        ],
        ..IndexedOperationsConfig::default()
    };
    let fallback = Arc::new(literal_search::LiteralSearch::new(root).unwrap());
    let ops = IndexedRepositoryOperations::new(root, backend.clone(), fallback, config).unwrap();
    let update = |revision: &str, changes: Vec<Change>| {
        let request = UpdateRequest {
            repository_id: "conformance".into(),
            worktree_id: "main".into(),
            source_revision: revision.into(),
            changes,
        };
        let ops = &ops;
        async move { ops.index().update(request).await }
    };
    let rt = conformance::runtime();

    // One function of one file changes: that file is read, and only its changed chunk embedded.
    write(root, "src/big.py", &three("return 2"));
    let edit = Change::Edit {
        path: "src/big.py".into(),
    };
    rt.block_on(update("rev-2", vec![edit.clone()])).unwrap();
    let stats = backend.semantic.last_catch_up();
    assert_eq!(
        (
            stats.rebuilt,
            stats.files_read,
            stats.embedded,
            stats.removed
        ),
        (false, 1, 1, 0),
        "{stats:?}"
    );
    // The file is reported edited but its text is the same: nothing is embedded.
    rt.block_on(update("rev-3", vec![edit])).unwrap();
    let stats = backend.semantic.last_catch_up();
    assert_eq!((stats.rebuilt, stats.embedded), (false, 0), "{stats:?}");
    // A renamed file is read under its new name, and its chunks are embedded again (a chunk's
    // path is part of the text it is embedded from); no other file is read.
    std::fs::rename(root.join("src/m3.py"), root.join("src/moved.py")).unwrap();
    rt.block_on(update(
        "rev-4",
        vec![Change::Rename {
            old_path: "src/m3.py".into(),
            path: "src/moved.py".into(),
        }],
    ))
    .unwrap();
    let stats = backend.semantic.last_catch_up();
    assert_eq!(
        (
            stats.rebuilt,
            stats.removed,
            stats.files_read,
            stats.embedded
        ),
        (false, 1, 1, 1),
        "{stats:?}"
    );
    // And the answers follow: the moved file is served under its new name.
    let found = rt
        .block_on(ops.search(SearchRequest::new("f3", SearchMode::Semantic)))
        .unwrap();
    let paths: Vec<&str> = found.hits.iter().map(|h| h.path.as_str()).collect();
    assert!(paths.contains(&"src/moved.py"), "{paths:?}");
    assert!(!paths.contains(&"src/m3.py"), "{paths:?}");
    // A search of a current store reads nothing.
    assert_eq!(backend.semantic.last_catch_up(), stats);
}

/// A search that finds the store behind the trigram index's newest commit, while another writer
/// holds the store past the call's deadline, is refused as `STALE` by that deadline, through the
/// facade whose clock started first, instead of waiting for the writer on the runtime's thread.
#[test]
fn a_search_that_finds_the_store_held_by_another_writer_is_refused_as_stale_by_its_deadline() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.rs"), "fn parse_config() {}\n").unwrap();
    let store = tempfile::tempdir().unwrap();
    let backend = composite(root.path(), store.path(), "rev-1");
    let config = IndexedOperationsConfig {
        allowed_modes: vec![SearchMode::IndexedLiteral, SearchMode::Semantic],
        ..IndexedOperationsConfig::default()
    };
    let fallback = Arc::new(literal_search::LiteralSearch::new(root.path()).unwrap());
    let ops = Arc::new(
        IndexedRepositoryOperations::new(root.path(), backend.clone(), fallback, config).unwrap(),
    );
    // A newer commit of the trigram index, which the store has not caught up to.
    std::fs::write(root.path().join("b.rs"), "fn read_settings() {}\n").unwrap();
    backend
        .index
        .apply(&["b.rs".to_owned()], &[], Some("rev-2"))
        .unwrap();
    let semantic_dir = index_storage::IndexDir::open(store.path().join("semantic")).unwrap();
    let held = semantic_dir
        .lock(&mut index_storage::Wait::until(None))
        .unwrap();
    let mut request = SearchRequest::new("read the settings", SearchMode::Semantic);
    request.deadline = Some(std::time::Duration::from_millis(500));
    let (tx, rx) = std::sync::mpsc::channel();
    let searching = Arc::clone(&ops);
    std::thread::spawn(move || {
        let _ = tx.send(conformance::runtime().block_on(searching.search(request)));
    });
    let refused = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the search waited for the store's writer past its deadline")
        .expect_err("a lagging store answered");
    assert_eq!(
        refused.code(),
        index_contract::ErrorCode::Stale,
        "{refused}"
    );
    // Once the writer is gone, the next search catches up and answers from the newer commit.
    drop(held);
    let found = conformance::runtime()
        .block_on(ops.search(SearchRequest::new(
            "read the settings",
            SearchMode::Semantic,
        )))
        .unwrap();
    assert!(found.hits.iter().any(|h| h.path == "b.rs"), "{found:?}");
}
