//! The engine's tests: catch-up, the re-rank and the kept vectors, on the installed model.

use std::collections::HashMap;

use index_contract::SearchMode;

use super::*;
use crate::backend::CompositeBackend;
use index_contract::RepositoryOperations;
use repo_search_tool::{IndexedOperationsConfig, IndexedRepositoryOperations};

/// The model `cargo xtask tools` and `cargo xtask model static` install for the tests.
fn model_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/tools/models/all-minilm-l6-v2");
    assert!(
        dir.join(crate::STATIC_FILE).is_file(),
        "no static model in {}: run `cargo xtask tools` then `cargo xtask model static`",
        dir.display()
    );
    dir
}

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A host's semantic engine over the index directory `store`, re-ranking with MiniLM.
fn reranking_engine(store: &Path) -> Arc<SemanticEngine> {
    let engine = SemanticEngine::open(Some(&model_dir()), store).unwrap();
    Arc::new(engine.with_policy(RerankPolicy::Always).unwrap())
}

/// A worktree of two documented Python functions, and an index directory for it.
fn two_functions() -> (tempfile::TempDir, tempfile::TempDir) {
    let repo = tempfile::tempdir().unwrap();
    write(
        repo.path(),
        "src/net.py",
        "def open_socket(host):\n    \"\"\"Connect to the server over the network.\"\"\"\n",
    );
    write(
        repo.path(),
        "src/sort.py",
        "def sort_numbers(items):\n    \"\"\"Order the numbers from small to large.\"\"\"\n",
    );
    (repo, tempfile::tempdir().unwrap())
}

/// A `semantic` search of `query` (at most 10 hits) through the composite backend of `index`
/// and `engine`: the hits' paths and scores, the answer being `ready`.
async fn ready_hits(
    index: &Arc<EmbeddedIndex>,
    engine: Arc<SemanticEngine>,
    query: &str,
) -> Vec<(String, f64)> {
    use index_contract::RepositoryIndexBackend;
    let backend = CompositeBackend {
        index: index.clone(),
        semantic: engine,
    };
    let mut request = SearchRequest::new(query, SearchMode::Semantic);
    request.max_results = Some(10);
    let answer = backend.search(request).await.unwrap();
    assert_eq!(answer.status.state, IndexState::Ready);
    answer.hits.into_iter().map(|h| (h.path, h.score)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_behind_the_trigram_index_is_caught_up_before_it_answers() {
    let (repo, store) = two_functions();
    let index = Arc::new(EmbeddedIndex::open(repo.path(), store.path()).unwrap());
    index.refresh("head", None).unwrap();
    let engine = Arc::new(SemanticEngine::open(Some(&model_dir()), store.path()).unwrap());
    engine.catch_up(&index, None).unwrap();
    let backend = Arc::new(CompositeBackend {
        index: index.clone(),
        semantic: engine.clone(),
    });
    let config = IndexedOperationsConfig {
        allowed_modes: vec![
            SearchMode::Literal,
            SearchMode::IndexedLiteral,
            SearchMode::Semantic,
        ],
        ..IndexedOperationsConfig::default()
    };
    let fallback = Arc::new(literal_search::LiteralSearch::new(repo.path()).unwrap());
    let ops = IndexedRepositoryOperations::new(repo.path(), backend, fallback, config).unwrap();
    let ask = |q: &str| ops.search(SearchRequest::new(q, SearchMode::Semantic));
    let found = ask("connect to a remote server").await.unwrap();
    assert_eq!(found.hits[0].path, "src/net.py");

    // The trigram index commits an edit; the process dies before the store catches up.
    write(
        repo.path(),
        "src/sort.py",
        "def parse_config(text):\n    \"\"\"Read the settings file into a dictionary.\"\"\"\n",
    );
    let r = index.refresh("head", None).unwrap();
    let before = found
        .indexed
        .as_ref()
        .and_then(|p| p.source_revision.clone());
    assert_ne!(Some(r.revision.clone()), before);
    // The query finds the store behind the index's commit and catches it up before it
    // answers: the lagging version is never served.
    let served = ask("read the settings").await.unwrap();
    assert_eq!(served.hits[0].path, "src/sort.py");
    assert_eq!(
        served.indexed.and_then(|p| p.source_revision),
        Some(r.revision)
    );
    // The store now attests that commit: nothing is left to catch up.
    assert_eq!(
        engine.catch_up(&index, None).unwrap(),
        crate::CatchUp::default()
    );
    // The trigram index itself serves on.
    let literal = ops
        .search(SearchRequest::new(
            "parse_config",
            SearchMode::IndexedLiteral,
        ))
        .await
        .unwrap();
    assert_eq!(literal.hits[0].path, "src/sort.py");
}

/// One revision committed twice with different files (here a removal that sets no revision)
/// must not pass for the commit the store caught up to: the store names a commit by its
/// revision and the digest of its files, so the query sees it lag and catches it up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_is_behind_when_the_same_revision_holds_other_files() {
    use index_contract::{RemoveRequest, RepositoryIndexBackend};
    let (repo, store) = two_functions();
    let index = Arc::new(EmbeddedIndex::open(repo.path(), store.path()).unwrap());
    let r = index.refresh("head", None).unwrap();
    let engine = Arc::new(SemanticEngine::open(Some(&model_dir()), store.path()).unwrap());
    engine.catch_up(&index, None).unwrap();
    let backend = CompositeBackend {
        index: index.clone(),
        semantic: engine.clone(),
    };
    let ask = || {
        backend.search(SearchRequest::new(
            "connect to a remote server",
            SearchMode::Semantic,
        ))
    };
    let found = ask().await.unwrap();
    assert_eq!(found.status.state, IndexState::Ready);
    assert!(found.hits.iter().any(|h| h.path == "src/net.py"));

    // The trigram index drops a file and keeps attesting the same revision.
    index
        .remove(RemoveRequest::new(vec!["src/net.py".into()]))
        .await
        .unwrap();
    assert_eq!(
        index.current_status().source_revision.as_deref(),
        Some(r.revision.as_str())
    );
    // The same revision, other files: the query catches the store up first, and the store
    // no longer holds the removed file.
    let served = ask().await.unwrap();
    assert_eq!(served.status.state, IndexState::Ready);
    assert!(served.hits.iter().all(|h| h.path != "src/net.py"));
}

/// The re-rank embeds a head chunk it has not cached from its file as it reads now, found by
/// its content hash. When the file changed since the store read it, that text is gone: the
/// hybrid ranking is served, never a score for text the store does not hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rerank_serves_the_hybrid_ranking_when_a_head_chunk_changed_on_disk() {
    let (repo, store) = two_functions();
    let index = Arc::new(EmbeddedIndex::open(repo.path(), store.path()).unwrap());
    index.refresh("head", None).unwrap();
    let open = |rerank: bool| {
        let engine = SemanticEngine::open(Some(&model_dir()), store.path()).unwrap();
        Arc::new(if rerank {
            engine.with_policy(RerankPolicy::Always).unwrap()
        } else {
            engine
        })
    };
    let plain = open(false);
    plain.catch_up(&index, None).unwrap();
    let ask = |engine| ready_hits(&index, engine, "connect to a remote server");
    let hybrid = ask(plain.clone()).await;
    assert_eq!(hybrid[0].0, "src/net.py");
    let reranked = ask(open(true)).await;
    assert_eq!(reranked[0].0, "src/net.py");
    assert_ne!(reranked, hybrid, "the re-rank changed no score");
    // The file changes on disk; the index has not looked yet, so the store still answers.
    // The vectors kept for the next process are dropped, so that the chunk is not cached.
    write(
        repo.path(),
        "src/net.py",
        "def open_socket(host):\n    \"\"\"Dial the server.\"\"\"\n",
    );
    std::fs::remove_file(store.path().join("semantic-rerank.vectors")).unwrap();
    assert_eq!(ask(open(true)).await, hybrid);
}

/// A re-ranking process keeps the chunk vectors it computed in the index directory, and the
/// next one starts with them: the same answer, nothing embedded again. A damaged record
/// costs only its vector, computed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_process_reranks_with_the_vectors_an_earlier_one_kept() {
    let (repo, store) = two_functions();
    let index = Arc::new(EmbeddedIndex::open(repo.path(), store.path()).unwrap());
    index.refresh("head", None).unwrap();
    let open = || reranking_engine(store.path());
    let query = "open a socket to the server and sort the numbers";
    let first_engine = open();
    first_engine.catch_up(&index, None).unwrap();
    let first = ready_hits(&index, first_engine, query).await;
    assert_eq!(first.len(), 2, "both files in the head: {first:?}");
    let plain = Arc::new(SemanticEngine::open(Some(&model_dir()), store.path()).unwrap());
    assert_ne!(
        ready_hits(&index, plain, query).await,
        first,
        "the re-rank changed nothing"
    );
    let kept = store.path().join("semantic-rerank.vectors");
    let size = std::fs::metadata(&kept).unwrap().len();
    assert!(size > 2 * 384 * 2, "two vectors kept: {size} bytes");
    // A new process, and a head file changed on disk (the index has not looked yet): the
    // kept vector of the chunk the store holds is used, so the file is not read again and
    // the answer is the first one, not the hybrid ranking.
    let original = std::fs::read_to_string(repo.path().join("src/net.py")).unwrap();
    write(
        repo.path(),
        "src/net.py",
        "def open_socket(host):\n    pass\n",
    );
    let second = ready_hits(&index, open(), query).await;
    assert_eq!(second, first);
    write(repo.path(), "src/net.py", &original);
    assert_eq!(
        std::fs::metadata(&kept).unwrap().len(),
        size,
        "nothing embedded again"
    );
    // A flipped byte in the last record: that vector alone is computed again and kept again.
    let mut bytes = std::fs::read(&kept).unwrap();
    bytes[size as usize - 10] ^= 1;
    std::fs::write(&kept, &bytes).unwrap();
    let third = ready_hits(&index, open(), query).await;
    assert_eq!(third, first);
    // A record: a marker, the chunk hash, 384 half floats and a CRC-32.
    let record = 4 + HASH_BYTES as u64 + 2 * 384 + 4;
    assert_eq!(
        std::fs::metadata(&kept).unwrap().len(),
        size + record,
        "only the lost vector was kept again"
    );
}

/// The host re-ranks by the evaluation's rule: MiniLM reads a chunk under its file's path,
/// so the same function in two files gets two vectors (cached apart), and the path decides
/// between them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rerank_reads_each_chunk_under_its_file_path() {
    let repo = tempfile::tempdir().unwrap();
    let code =
        "def middle(values):\n    values = sorted(values)\n    return values[len(values) // 2]\n";
    write(repo.path(), "network/pick.py", code);
    write(repo.path(), "statistics/pick.py", code);
    let store = tempfile::tempdir().unwrap();
    let index = Arc::new(EmbeddedIndex::open(repo.path(), store.path()).unwrap());
    index.refresh("head", None).unwrap();
    let engine = SemanticEngine::open(Some(&model_dir()), store.path()).unwrap();
    let engine = Arc::new(engine.with_policy(RerankPolicy::Always).unwrap());
    engine.catch_up(&index, None).unwrap();
    let reranked = ready_hits(&index, engine, "the median of a sample of numbers").await;
    assert_eq!(reranked.len(), 2, "{reranked:?}");
    assert_eq!(reranked[0].0, "statistics/pick.py", "{reranked:?}");
    assert!(reranked[0].1 > reranked[1].1, "{reranked:?}");
}

/// Emptying a full cache must not cost a head chunk that was cached its score: the re-rank
/// of a head with cached and new chunks equals a fresh process's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_rerank_cache_never_costs_a_cached_chunk_its_score() {
    let (repo, store) = two_functions();
    let index = Arc::new(EmbeddedIndex::open(repo.path(), store.path()).unwrap());
    index.refresh("head", None).unwrap();
    let open = || reranking_engine(store.path());
    // A query for both functions, so that both are in the answer whichever static model
    // (tuned or not) ranks them.
    let query = "open a socket to the server and sort the numbers";
    let ask = |engine| ready_hits(&index, engine, query);
    let long_lived = open();
    long_lived.catch_up(&index, None).unwrap();
    let first = ask(long_lived.clone()).await;
    assert_eq!(first.len(), 2, "both files in the head: {first:?}");
    // One file changes: its chunk is new, the other's is cached, and the cache is full.
    write(
        repo.path(),
        "src/sort.py",
        "def sort_numbers(items):\n    \"\"\"Order the numbers from large to small.\"\"\"\n",
    );
    index.refresh("head", None).unwrap();
    let again = ask(long_lived).await;
    let fresh = ask(open()).await;
    assert_eq!(again, fresh);
}

/// `n` small Python files, one function (one chunk) each.
fn small_functions(n: usize) -> (tempfile::TempDir, tempfile::TempDir) {
    let repo = tempfile::tempdir().unwrap();
    for i in 0..n {
        write(
            repo.path(),
            &format!("src/f{i}.py"),
            &format!(
                "def step_{i}(values):\n    \"\"\"Add {i} to every value.\"\"\"\n    return [v + {i} for v in values]\n"
            ),
        );
    }
    (repo, tempfile::tempdir().unwrap())
}

/// An engine with `policy` on the index's store, caught up to the index.
fn engine_with(index: &EmbeddedIndex, store: &Path, policy: RerankPolicy) -> Arc<SemanticEngine> {
    let engine = SemanticEngine::open(Some(&model_dir()), store).unwrap();
    let engine = engine.with_policy(policy).unwrap();
    engine.catch_up(index, None).unwrap();
    Arc::new(engine)
}

/// The default policy serves the hybrid ranking until the index keeps MiniLM's vector of
/// every chunk; from then on it serves exactly the `--rerank` answer, embedding nothing. The
/// pass's vectors (one thread, its own batches) are the ones a query computes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_vectors_turn_the_rerank_on_by_default() {
    let (repo, store) = two_functions();
    let index = Arc::new(EmbeddedIndex::open(repo.path(), store.path()).unwrap());
    index.refresh("head", None).unwrap();
    let query = "open a socket to the server and sort the numbers";
    let ask = |engine| ready_hits(&index, engine, query);
    let hybrid = ask(engine_with(&index, store.path(), RerankPolicy::Never)).await;
    assert_eq!(
        ask(engine_with(&index, store.path(), RerankPolicy::Kept)).await,
        hybrid,
        "re-ranked with no vector kept"
    );
    // Embedded by a query, then forgotten.
    let at_query_time = ask(engine_with(&index, store.path(), RerankPolicy::Always)).await;
    let log = store.path().join("semantic-rerank.vectors");
    std::fs::remove_file(&log).unwrap();
    let filler = engine_with(&index, store.path(), RerankPolicy::Kept);
    let mut reported = Vec::new();
    let kept = filler
        .keep_rerank_vectors(&index, 1, &mut |done, total| reported.push((done, total)))
        .unwrap();
    let KeptVectors::Kept {
        live,
        computed,
        skipped,
        ..
    } = kept
    else {
        panic!("nothing kept: {kept:?}");
    };
    assert_eq!((computed, skipped), (live, 0), "{kept:?}");
    assert_eq!(reported.last(), Some(&(live, live)));
    let size = std::fs::metadata(&log).unwrap().len();
    // A new process re-ranks by default, as `--rerank` did.
    let reranked = ask(engine_with(&index, store.path(), RerankPolicy::Kept)).await;
    assert_ne!(reranked, hybrid, "not re-ranked with every vector kept");
    assert_eq!(reranked, at_query_time);
    assert_eq!(
        std::fs::metadata(&log).unwrap().len(),
        size,
        "embedded again"
    );
    // Filling again computes nothing.
    let again = filler
        .keep_rerank_vectors(&index, usize::MAX, &mut |_, _| {})
        .unwrap();
    assert!(
        matches!(again, KeptVectors::Kept { computed: 0, .. }),
        "{again:?}"
    );
}

#[test]
fn a_full_cache_drops_the_vectors_of_gone_chunks_first() {
    let hash = |b: u8| [b; HASH_BYTES];
    let check = |held: &[u8], incoming: usize, live: Option<&[u8]>, expected: &[u8]| {
        let mut cache: HashMap<[u8; HASH_BYTES], ()> =
            held.iter().map(|&b| (hash(b), ())).collect();
        let live: Option<std::collections::HashSet<_>> =
            live.map(|l| l.iter().map(|&b| hash(b)).collect());
        make_room(&mut cache, incoming, 4, || live.clone());
        let mut kept: Vec<u8> = cache.keys().map(|k| k[0]).collect();
        kept.sort_unstable();
        assert_eq!(
            kept, expected,
            "held {held:?}, {incoming} incoming, live {live:?}"
        );
    };
    // Room enough: nothing goes.
    check(&[1, 2, 3], 1, Some(&[1]), &[1, 2, 3]);
    // Full: the chunks edited away go, the live ones stay.
    check(&[1, 2, 3, 4], 1, Some(&[1, 2]), &[1, 2]);
    // No live set (a store too large for one): all go.
    check(&[1, 2, 3, 4], 1, None, &[]);
    // The live ones alone leave no room: all go.
    check(&[1, 2, 3, 4], 3, Some(&[1, 2]), &[]);
}

/// One pass at a time: a pass that finds another process's lock computes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_pass_at_once_is_busy_and_computes_nothing() {
    let (repo, store) = two_functions();
    let index = Arc::new(EmbeddedIndex::open(repo.path(), store.path()).unwrap());
    index.refresh("head", None).unwrap();
    let held = std::fs::File::create(store.path().join("semantic-rerank.lock")).unwrap();
    held.lock().unwrap();
    let engine = engine_with(&index, store.path(), RerankPolicy::Kept);
    let kept = engine
        .keep_rerank_vectors(&index, 1, &mut |_, _| {})
        .unwrap();
    assert_eq!(kept, KeptVectors::Busy);
    assert!(!store.path().join("semantic-rerank.vectors").exists());
    held.unlock().unwrap();
    let kept = engine
        .keep_rerank_vectors(&index, 1, &mut |_, _| {})
        .unwrap();
    assert!(
        matches!(kept, KeptVectors::Kept { computed: 2, .. }),
        "{kept:?}"
    );
}

/// A store of more chunks than the index keeps vectors for is not filled, and the default
/// policy serves its hybrid ranking, whatever vectors a `--rerank` process kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_over_the_kept_chunk_limit_is_neither_filled_nor_reranked_by_default() {
    let (repo, store) = small_functions(KEPT_CHUNKS_LIMIT + 5);
    let index = Arc::new(EmbeddedIndex::open(repo.path(), store.path()).unwrap());
    index.refresh("head", None).unwrap();
    let kept = engine_with(&index, store.path(), RerankPolicy::Kept)
        .keep_rerank_vectors(&index, usize::MAX, &mut |_, _| {})
        .unwrap();
    assert_eq!(
        kept,
        KeptVectors::TooManyChunks {
            live: KEPT_CHUNKS_LIMIT + 5
        }
    );
    assert!(!store.path().join("semantic-rerank.vectors").exists());
    let query = "add a number to every value";
    let ask = |engine| ready_hits(&index, engine, query);
    let hybrid = ask(engine_with(&index, store.path(), RerankPolicy::Never)).await;
    assert_ne!(
        ask(engine_with(&index, store.path(), RerankPolicy::Always)).await,
        hybrid
    );
    assert_eq!(
        ask(engine_with(&index, store.path(), RerankPolicy::Kept)).await,
        hybrid
    );
}

/// Filling again after most chunks changed makes room by dropping the vectors of the chunks
/// that are gone: the log holds the live chunks' vectors, not every vector ever computed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filling_again_drops_the_vectors_of_gone_chunks() {
    let (repo, store) = small_functions(40);
    let index = Arc::new(EmbeddedIndex::open(repo.path(), store.path()).unwrap());
    index.refresh("head", None).unwrap();
    let filler = engine_with(&index, store.path(), RerankPolicy::Kept);
    filler
        .keep_rerank_vectors(&index, usize::MAX, &mut |_, _| {})
        .unwrap();
    let log_path = store.path().join("semantic-rerank.vectors");
    let records = |path: &Path| {
        let record = 4 + HASH_BYTES as u64 + 2 * 384 + 4;
        (std::fs::metadata(path).unwrap().len() - 40) / record
    };
    assert_eq!(records(&log_path), 40);
    for i in 0..30 {
        write(
            repo.path(),
            &format!("src/f{i}.py"),
            &format!("def scale_{i}(values):\n    return [v * {i} for v in values]\n"),
        );
    }
    index.refresh("head", None).unwrap();
    filler.catch_up(&index, None).unwrap();
    let kept = filler
        .keep_rerank_vectors(&index, usize::MAX, &mut |_, _| {})
        .unwrap();
    assert!(
        matches!(
            kept,
            KeptVectors::Kept {
                live: 40,
                computed: 30,
                skipped: 0,
                ..
            }
        ),
        "{kept:?}"
    );
    assert_eq!(records(&log_path), 40, "the gone chunks' vectors were kept");
    let hybrid = ready_hits(
        &index,
        engine_with(&index, store.path(), RerankPolicy::Never),
        "scale",
    )
    .await;
    assert_ne!(
        ready_hits(
            &index,
            engine_with(&index, store.path(), RerankPolicy::Kept),
            "scale"
        )
        .await,
        hybrid,
        "not re-ranked after the second fill"
    );
}

/// A ranking considers every file in scope: one the store cannot hold because no answer may
/// name it (not UTF-8, a bidi override) is counted, and the answer says it is incomplete.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_in_scope_whose_names_cannot_be_served_are_counted_by_a_ranking() {
    use index_contract::RepositoryIndexBackend;
    use std::os::unix::ffi::OsStrExt;
    let (repo, store) = two_functions();
    let bad = repo
        .path()
        .join(std::ffi::OsStr::from_bytes(b"src/bad\xff.py"));
    std::fs::write(bad, "def connect():\n    pass\n").unwrap();
    write(
        repo.path(),
        "src/evil\u{202E}yp.py",
        "def server():\n    pass\n",
    );
    let index = Arc::new(EmbeddedIndex::open(repo.path(), store.path()).unwrap());
    index.refresh("head", None).unwrap();
    let backend = CompositeBackend {
        index: index.clone(),
        semantic: Arc::new(SemanticEngine::open(Some(&model_dir()), store.path()).unwrap()),
    };
    backend.catch_up().unwrap();
    for (scope, unserved) in [
        (None, (1, 1)),
        (Some("src"), (1, 1)),
        (Some("src/net.py"), (0, 0)),
    ] {
        let mut request = SearchRequest::new("connect to a server", SearchMode::Semantic);
        request.path = scope.map(str::to_owned);
        let answer = backend.search(request).await.unwrap();
        assert_eq!(answer.status.state, IndexState::Ready);
        assert!(
            answer
                .hits
                .iter()
                .all(|h| index_guard::check_path(&h.path).is_ok())
        );
        let skipped = answer.skipped.unwrap_or_default();
        assert_eq!(
            (skipped.non_utf8_path, skipped.refused_path),
            unserved,
            "{scope:?}"
        );
        assert_eq!(answer.complete, unserved == (0, 0), "{scope:?}");
    }
}

#[test]
fn a_store_key_attests_the_revision_it_was_made_from() {
    for revision in ["", "unborn+g1", "0123abcd+g42", "head+rebuilt"] {
        assert_eq!(attested_revision(&commit_key(revision, 7)), revision);
        assert_ne!(commit_key(revision, 7), commit_key(revision, 8));
    }
}
