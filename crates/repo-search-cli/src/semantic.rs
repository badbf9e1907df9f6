//! The semantic backend: the trigram index and the semantic store behind one
//! [`RepositoryIndexBackend`] that declares `capabilities.semantic`.
//!
//! `semantic` requests go to the store (`semantic_index::Store`), every other request to the
//! embedded index. The store keeps pace with the embedded index: after each of the index's
//! commits (a host refresh, an `update` or a `remove`), [`SemanticEngine::catch_up`] brings the
//! store to the index's committed snapshot, reading only the files whose version changed and
//! embedding only chunks whose content hash is new, and commits the same revision. A store that
//! lags (a process killed between the two commits) answers with a `stale` status, which the
//! facade's freshness gate refuses, until the next refresh catches it up.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Instant;

use embedded_index::EmbeddedIndex;
use index_contract::{
    BackendCapabilities, BackendError, BackendHit, BackendSearchResponse, BoxFuture, IndexState,
    IndexStatus, RemoveRequest, RepositoryIndexBackend, SearchMode, SearchRequest, SkippedFiles,
    UpdateRequest, limits::DEFAULT_MAX_RESULTS,
};
use index_guard::Scope;
use search_profile::{PathFilter, RootDir};
use semantic_index::{
    Appended, HASH_BYTES, MiniLm, SourceFile, StaticModel, Store, StoreHit, VectorLog,
    rank::Weights,
};

/// The environment variable naming the model directory when `--model-dir` is not given.
pub(crate) const MODEL_DIR_ENV: &str = "REPO_SEARCH_MODEL_DIR";

/// The model directory's name under the per-user cache directory.
const MODEL_NAME: &str = "all-minilm-l6-v2";

/// The files a model directory must hold for the semantic backend: the static model, its
/// checksum and the tokenizer.
fn holds_model(dir: &Path) -> bool {
    [
        semantic_index::STATIC_FILE.to_owned(),
        format!("{}.sha256", semantic_index::STATIC_FILE),
        "tokenizer.json".to_owned(),
    ]
    .iter()
    .all(|f| dir.join(f).is_file())
}

/// Where the model is: `--model-dir` when given (and nowhere else then), else the
/// [`MODEL_DIR_ENV`] directory, else `$XDG_CACHE_HOME/repo-search/models/all-minilm-l6-v2` (or
/// `~/.cache/...`). `None` when the chosen directory does not hold the static model.
pub(crate) fn find_model(flag: Option<&Path>) -> Option<PathBuf> {
    let chosen = match flag {
        Some(d) => d.to_path_buf(),
        None => match std::env::var_os(MODEL_DIR_ENV).filter(|v| !v.is_empty()) {
            Some(d) => PathBuf::from(d),
            None => std::env::var_os("XDG_CACHE_HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?
                .join("repo-search/models")
                .join(MODEL_NAME),
        },
    };
    holds_model(&chosen).then_some(chosen)
}

/// When MiniLM re-ranks the head of a `semantic` answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RerankPolicy {
    /// Never: the hybrid ranking is served.
    Never,
    /// When the index keeps MiniLM's vector of nearly every chunk (at least [`KEPT_COVERAGE`] of
    /// them), which `repo-search index` computes for a repository of at most
    /// [`KEPT_CHUNKS_LIMIT`] chunks ([`SemanticEngine::keep_rerank_vectors`]). A query then
    /// embeds only the head chunks that changed since, so the re-rank costs about one MiniLM
    /// pass over the query. The default when MiniLM is installed.
    Kept,
    /// Every answer, embedding the head's chunks that have no kept vector (`--rerank`): about
    /// half a second a query on Linux while the head's chunks are new.
    Always,
}

/// The most live chunks for which the index keeps a MiniLM vector of every chunk: about four
/// minutes of MiniLM on 2 cores for a whole repository, and 16 MB of kept vectors.
pub(crate) const KEPT_CHUNKS_LIMIT: usize = if cfg!(test) { 60 } else { 20_000 };

/// The share of the live chunks whose vectors must be kept for [`RerankPolicy::Kept`] to
/// re-rank: the rest (chunks edited since the vectors were computed) are embedded when a query's
/// head holds them, a few at most.
pub(crate) const KEPT_COVERAGE: f64 = 0.9;

/// The static model and the store it keeps in `<index-dir>/semantic`.
pub(crate) struct SemanticEngine {
    statics: StaticModel,
    model_id: String,
    model_dir: PathBuf,
    dir: PathBuf,
    /// The version last loaded or committed by this process.
    store: RwLock<Option<Arc<Store>>>,
    weights: Weights,
    policy: RerankPolicy,
    /// MiniLM and the kept vectors, loaded on first need: `None` when MiniLM cannot be loaded,
    /// and the hybrid ranking is then served.
    reranker: OnceLock<Option<Reranker>>,
    /// Whether the kept vectors cover the store version named (revision, generation), as
    /// [`RerankPolicy::Kept`] last judged it.
    covered: Mutex<Option<((String, u64), bool)>>,
    /// A long-lived host's background pass (`host::keep_rerank_vectors_in_background`), told
    /// when a query finds too few vectors kept: another process may have changed the store.
    wake_keeper: OnceLock<SyncSender<()>>,
}

/// What [`SemanticEngine::keep_rerank_vectors`] did.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum KeptVectors {
    /// The store is larger than [`KEPT_CHUNKS_LIMIT`]: nothing was computed.
    TooManyChunks { live: usize },
    /// MiniLM is not installed beside the static model: nothing was computed.
    NoMiniLm,
    /// Another process (a server's background pass, another `index`) is keeping them now.
    Busy,
    /// Every live chunk's vector is kept, but those of `skipped` chunks whose files changed on
    /// disk since the store read them (the next refresh catches them up) and of `unkept` ones
    /// computed but not written (the log stayed locked or full: they are computed again).
    Kept {
        live: usize,
        computed: usize,
        skipped: usize,
        unkept: usize,
        seconds: f64,
    },
}

/// The MiniLM re-rank of a `semantic` answer's head: the first [`Weights::rerank_depth`] files
/// by the hybrid score, re-scored with MiniLM's cosine of the query and each file's best chunk
/// (`semantic_index::rank::rerank_scores`, the rule the evaluation measures). A chunk's text is
/// found by its content hash among the chunks of its file as it reads now; MiniLM reads it under
/// its file's path (`semantic_index::rank::rerank_text`), which the hash covers too, up to
/// [`Weights::rerank_tokens`] word pieces, so its vector is cached by that hash and a chunk is
/// embedded once per process.
struct Reranker {
    minilm: MiniLm,
    cache: Mutex<HashMap<[u8; HASH_BYTES], Vec<f32>>>,
    /// The vectors kept for the next process (`<index-dir>/semantic-rerank.vectors`): read into
    /// `cache` when the re-rank starts, appended to as chunks are embedded.
    log: VectorLog,
    /// The lock one pass over the log holds at a time (`<index-dir>/semantic-rerank.lock`).
    lock_path: PathBuf,
    /// A query found the log full: a pass should make room.
    log_full: std::sync::atomic::AtomicBool,
}

/// Chunk vectors a re-ranking process keeps (384 f32 each: about 38 MB), emptied when full
/// (one in unit tests that do not fill the index, so that they empty it). Above
/// [`KEPT_CHUNKS_LIMIT`], so that a whole repository's vectors fit.
const RERANK_CACHE_VECTORS: usize = if cfg!(test) { 1 } else { 25_000 };

/// Chunk vectors the kept file holds (half floats: about 20 MB, read in milliseconds when a
/// re-ranking process starts). Past it a query keeps nothing more for a store a pass keeps
/// vectors for (the pass rewrites the file with the live chunks' vectors), and starts the file
/// over for a larger store.
const RERANK_LOG_VECTORS: usize = if cfg!(test) { 70 } else { 25_000 };

// A pass leaves a tenth of the log free for the vectors queries compute until the next one,
// and a process's cache holds a whole store's.
const _: () = assert!(KEPT_CHUNKS_LIMIT + RERANK_LOG_VECTORS / 10 <= RERANK_LOG_VECTORS);
const _: () = assert!(cfg!(test) || KEPT_CHUNKS_LIMIT <= RERANK_CACHE_VECTORS);

/// Chunks MiniLM embeds per call while it fills the index, so that progress is kept (and
/// reported) as it goes.
const FILL_BATCH: usize = 256;

impl Reranker {
    /// MiniLM from `model_dir` and the vectors kept in `index_dir`'s log, read into the cache.
    fn load(
        model_dir: &Path,
        store_dir: &Path,
        weights: &Weights,
    ) -> Result<Reranker, semantic_index::Error> {
        let minilm = MiniLm::load(model_dir)?;
        let log = VectorLog::new(
            &rerank_log_path(store_dir),
            semantic_index::rank::rerank_key(&minilm, weights),
            minilm.dim(),
            RERANK_LOG_VECTORS,
        );
        // At most RERANK_LOG_VECTORS, so the cache's bound holds until its next insert.
        let cache: HashMap<[u8; HASH_BYTES], Vec<f32>> = log.read();
        Ok(Reranker {
            minilm,
            cache: Mutex::new(cache),
            log,
            lock_path: keeper_lock_path(store_dir),
            log_full: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Appends `entries` to the log, waiting up to a second for a writer that holds it: the
    /// vectors of a fill are worth a wait that a search's are not. `Busy` after that second.
    fn append_waiting(
        &self,
        entries: &[([u8; HASH_BYTES], Vec<f32>)],
    ) -> std::io::Result<Appended> {
        for _ in 0..200 {
            match self.log.append(entries)? {
                Appended::Busy => std::thread::sleep(std::time::Duration::from_millis(5)),
                done => return Ok(done),
            }
        }
        Ok(Appended::Busy)
    }

    /// MiniLM's kept vectors of `texts` (chunks' `rerank_text`, cut at the weights' word
    /// pieces), on at most `threads` threads.
    fn embed_chunks(
        &self,
        weights: &Weights,
        texts: &[&str],
        threads: usize,
    ) -> Option<Vec<Vec<f32>>> {
        let ids: Result<Vec<Vec<u32>>, _> = texts
            .iter()
            .map(|t| self.minilm.tokenize(t, weights.rerank_tokens))
            .collect();
        Some(
            self.minilm
                .embed_ids_on(&ids.ok()?, threads)
                .iter()
                .map(|v| semantic_index::kept(v))
                .collect(),
        )
    }

    /// Re-scores and re-orders the head of `hits` (best first). `false`, with `hits` untouched,
    /// when a head chunk is no longer in its file as it reads now (it changed since the store
    /// read it: the next refresh catches up) or MiniLM fails: the hybrid ranking is served.
    fn rerank(
        &self,
        weights: &Weights,
        store: &Store,
        root: &RootDir,
        query: &str,
        hits: &mut [StoreHit],
    ) -> bool {
        let depth = weights.rerank_depth.min(hits.len());
        if depth == 0 {
            return true;
        }
        // The head's cached vectors; the lock is not held while files are read and MiniLM runs.
        let mut vectors: Vec<Option<Vec<f32>>> = {
            let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            hits[..depth]
                .iter()
                .map(|h| cache.get(&h.chunk_hash).cloned())
                .collect()
        };
        let mut missing: Vec<([u8; HASH_BYTES], String)> = Vec::new();
        for (hit, cached) in hits[..depth].iter().zip(&vectors) {
            if cached.is_some() || missing.iter().any(|(h, _)| *h == hit.chunk_hash) {
                continue;
            }
            let chunk = read_text(root, &hit.path).and_then(|text| {
                semantic_index::chunk_file(&hit.path, &text)
                    .into_iter()
                    .find(|c| c.hash[..HASH_BYTES] == hit.chunk_hash)
            });
            let Some(chunk) = chunk else {
                return false;
            };
            missing.push((
                hit.chunk_hash,
                semantic_index::rank::rerank_text(&hit.path, &chunk.text),
            ));
        }
        // The query is read whole; each chunk only as far as the weights say (its path and
        // first lines), which bounds MiniLM's work per missing chunk. One call, so that the
        // query and the chunks share the threads.
        let tokenized: Result<Vec<Vec<u32>>, _> = std::iter::once(
            self.minilm
                .tokenize(&semantic_index::for_embedding(query), usize::MAX),
        )
        .chain(
            missing
                .iter()
                .map(|(_, t)| self.minilm.tokenize(t, weights.rerank_tokens)),
        )
        .collect();
        let Ok(tokenized) = tokenized else {
            return false;
        };
        let mut embedded = self.minilm.embed_ids(&tokenized);
        let query = embedded.remove(0);
        // Rounded as kept, so that this answer is the one a later process gives from the log.
        let new: HashMap<[u8; HASH_BYTES], Vec<f32>> = missing
            .into_iter()
            .map(|(hash, _)| hash)
            .zip(embedded.iter().map(|v| semantic_index::kept(v)))
            .collect();
        for (hit, vector) in hits[..depth].iter().zip(vectors.iter_mut()) {
            if vector.is_none() {
                *vector = new.get(&hit.chunk_hash).cloned();
            }
        }
        if !new.is_empty() {
            let kept: Vec<([u8; HASH_BYTES], Vec<f32>)> =
                new.iter().map(|(h, v)| (*h, v.clone())).collect();
            // A cache: a log that cannot be written (a full disk, a read-only index directory)
            // costs the next process these vectors, never this answer. A full log of a store
            // that a pass keeps vectors for is made room in by that pass, which knows the live
            // chunks (it is told); nothing compacts one of a larger store, so it starts over,
            // unless a pass holds the log.
            if let Ok(Appended::Full) = self.log.append(&kept) {
                if store.live_chunks() <= KEPT_CHUNKS_LIMIT {
                    self.log_full
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                } else if let Ok(lock) = search_profile::open_or_create_regular(&self.lock_path)
                    && lock.try_lock().is_ok()
                {
                    let _ = self.log.rewrite(&kept);
                }
            }
        }
        if !new.is_empty() {
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            // The live set is built only when the cache is full: not on every query.
            make_room(&mut cache, new.len(), RERANK_CACHE_VECTORS, || {
                (store.live_chunks() <= KEPT_CHUNKS_LIMIT).then(|| live_hashes(store))
            });
            cache.extend(new);
        }
        let cosines: Vec<f32> = vectors
            .iter()
            .map(|v| {
                v.as_ref()
                    .map_or(0.0, |v| semantic_index::rank::unit_cosine(v, &query))
            })
            .collect();
        let hybrid: Vec<f32> = hits.iter().map(|h| h.score).collect();
        let scores = semantic_index::rank::rerank_scores(weights, &cosines, &hybrid);
        for (hit, score) in hits.iter_mut().zip(scores) {
            hit.score = score;
        }
        // The head in its new order, equal scores in path order as everywhere else.
        hits[..depth].sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.path.split('/').cmp(b.path.split('/')))
        });
        true
    }
}

impl SemanticEngine {
    /// Loads the static model in `model_dir` (checked against its sha256) for a store in
    /// `index_dir`. `None` when the model cannot be loaded.
    pub(crate) fn open(
        model_dir: &Path,
        index_dir: &Path,
    ) -> Result<SemanticEngine, semantic_index::Error> {
        // The tuned model when it is installed. Loading checks the file against its `.sha256`,
        // which is the model's identity: a damaged model is told from a missing one.
        let statics = StaticModel::load_file(model_dir, semantic_index::preferred_file(model_dir))?;
        let model_id = statics.sha256().to_owned();
        Ok(SemanticEngine {
            statics,
            model_id,
            model_dir: model_dir.to_path_buf(),
            dir: index_dir.join("semantic"),
            store: RwLock::new(None),
            weights: Weights::default(),
            policy: RerankPolicy::Never,
            reranker: OnceLock::new(),
            covered: Mutex::new(None),
            wake_keeper: OnceLock::new(),
        })
    }

    /// This engine, re-ranking each answer's head with MiniLM as `policy` says. MiniLM is read
    /// from the model directory (its `model.safetensors`, `config.json` and `tokenizer.json`,
    /// which `cargo xtask tools` installs beside the static model): now for
    /// [`RerankPolicy::Always`], which fails when it cannot be loaded, and on first need for
    /// [`RerankPolicy::Kept`], which serves the hybrid ranking when it cannot.
    pub(crate) fn with_policy(
        mut self,
        policy: RerankPolicy,
    ) -> Result<Self, semantic_index::Error> {
        if policy == RerankPolicy::Always {
            let reranker = Reranker::load(&self.model_dir, &self.dir, &self.weights)?;
            self.reranker = OnceLock::from(Some(reranker));
        }
        self.policy = policy;
        Ok(self)
    }

    /// MiniLM and the kept vectors, loaded on the first call.
    fn reranker(&self) -> Option<&Reranker> {
        self.reranker
            .get_or_init(|| Reranker::load(&self.model_dir, &self.dir, &self.weights).ok())
            .as_ref()
    }

    /// Whether [`RerankPolicy::Kept`] re-ranks answers from `store`: it has at most
    /// [`KEPT_CHUNKS_LIMIT`] live chunks, and the kept vectors cover [`KEPT_COVERAGE`] of them.
    /// MiniLM is not loaded unless the log is long enough for that; the answer is remembered
    /// for the store's version.
    fn kept_vectors_cover(&self, store: &Store) -> bool {
        let live = store.live_chunks();
        if live == 0 || live > KEPT_CHUNKS_LIMIT {
            return false;
        }
        let needed = (live as f64 * KEPT_COVERAGE).ceil() as usize;
        // No MiniLM, or too short a log: nothing is loaded.
        let Some(dim) = MiniLm::dim_in(&self.model_dir) else {
            return false;
        };
        if !VectorLog::may_hold(&rerank_log_path(&self.dir), needed, dim) {
            return false;
        }
        let version = (store.revision().to_owned(), store.generation());
        let mut covered = self.covered.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((v, answer)) = covered.as_ref()
            && *v == version
        {
            return *answer;
        }
        let answer = self.reranker().is_some_and(|r| {
            let cache = r.cache.lock().unwrap_or_else(|p| p.into_inner());
            let held = store
                .live_chunk_hashes()
                .iter()
                .flat_map(|(_, hashes)| hashes)
                .filter(|h| cache.contains_key(*h))
                .count();
            held >= needed
        });
        *covered = Some((version, answer));
        answer
    }

    /// Whether [`RerankPolicy::Kept`] serves the hybrid ranking only because the index keeps too
    /// few of MiniLM's vectors: MiniLM is installed, and the store has at most
    /// [`KEPT_CHUNKS_LIMIT`] live chunks, too few of which have a kept vector.
    pub(crate) fn rerank_awaits_vectors(&self) -> bool {
        self.policy == RerankPolicy::Kept
            && MiniLm::dim_in(&self.model_dir).is_some()
            && self.store().is_some_and(|s| {
                (1..=KEPT_CHUNKS_LIMIT).contains(&s.live_chunks()) && !self.kept_vectors_cover(&s)
            })
    }

    /// Computes and keeps MiniLM's vector of every live chunk of the committed store that has
    /// none, for [`RerankPolicy::Kept`], on at most `threads` threads: when the store has at most
    /// [`KEPT_CHUNKS_LIMIT`] live chunks and MiniLM is installed. One process at a time (a lock
    /// file beside the log): another's pass answers [`KeptVectors::Busy`]. It catches nothing up
    /// (a background pass must never hold the store's writer lock against a query): the caller
    /// refreshes first. It starts from the log as it is (vectors another process kept count),
    /// and rewrites it with only the live chunks' vectors when the dead ones would crowd the
    /// new. The vectors are appended a batch at a time, so a process killed meanwhile loses one
    /// batch. `progress` is told (computed so far, to compute) after each batch.
    pub(crate) fn keep_rerank_vectors(
        &self,
        index: &EmbeddedIndex,
        threads: usize,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<KeptVectors, semantic_index::StoreError> {
        let kept = self.keep_rerank_vectors_now(index, threads, progress);
        // Whatever the pass did, coverage is judged again.
        *self.covered.lock().unwrap_or_else(|p| p.into_inner()) = None;
        kept
    }

    fn keep_rerank_vectors_now(
        &self,
        index: &EmbeddedIndex,
        threads: usize,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<KeptVectors, semantic_index::StoreError> {
        let started = Instant::now();
        let io = |path: PathBuf| move |source| semantic_index::StoreError::Io { path, source };
        let Some(store) = self.store() else {
            return Ok(KeptVectors::Kept {
                live: 0,
                computed: 0,
                skipped: 0,
                unkept: 0,
                seconds: 0.0,
            });
        };
        let live = store.live_chunks();
        if live > KEPT_CHUNKS_LIMIT {
            return Ok(KeptVectors::TooManyChunks { live });
        }
        let Some(reranker) = self.reranker() else {
            return Ok(KeptVectors::NoMiniLm);
        };
        let lock_path = keeper_lock_path(&self.dir);
        let lock =
            search_profile::open_or_create_regular(&lock_path).map_err(io(lock_path.clone()))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Ok(KeptVectors::Busy),
            Err(std::fs::TryLockError::Error(e)) => return Err(io(lock_path)(e)),
        }
        let log_path = rerank_log_path(&self.dir);
        let files = store.live_chunk_hashes();
        let live_set: std::collections::HashSet<[u8; HASH_BYTES]> =
            files.iter().flat_map(|(_, h)| h.iter().copied()).collect();
        // The log as it is now: what other processes kept since this one read it counts. Read
        // before the cache is locked, so that this process's queries do not wait for it.
        let on_disk = reranker.log.read();
        let missing_files: Vec<&(String, Vec<[u8; HASH_BYTES]>)> = {
            let mut cache = reranker.cache.lock().unwrap_or_else(|p| p.into_inner());
            for (hash, vector) in on_disk {
                if live_set.contains(&hash) {
                    cache.insert(hash, vector);
                }
            }
            files
                .iter()
                .filter(|(_, hashes)| hashes.iter().any(|h| !cache.contains_key(h)))
                .collect()
        };
        let root = RootDir::open(index.root()).map_err(io(index.root().to_path_buf()))?;
        // What MiniLM reads of each missing chunk, found by its hash in its file as it reads
        // now: a file changed since the store read it holds none of them, and is skipped.
        let mut todo: Vec<([u8; HASH_BYTES], String)> = Vec::new();
        let mut queued = std::collections::HashSet::new();
        let mut skipped = 0;
        for (path, hashes) in missing_files {
            let chunks = read_text(&root, path)
                .map(|text| semantic_index::chunk_file(path, &text))
                .unwrap_or_default();
            let cache = reranker.cache.lock().unwrap_or_else(|p| p.into_inner());
            for hash in hashes {
                if cache.contains_key(hash) || !queued.insert(*hash) {
                    continue;
                }
                match chunks.iter().find(|c| c.hash[..HASH_BYTES] == *hash) {
                    Some(c) => todo.push((*hash, semantic_index::rank::rerank_text(path, &c.text))),
                    None => skipped += 1,
                }
            }
        }
        // The log holds every vector any process kept, for chunks long gone too: keep only the
        // live ones when the dead would crowd the new (a tenth of the log's room is left free
        // for the vectors queries compute between passes).
        // The live chunks' vectors this process holds (the log's among them).
        let live_kept = || -> Vec<([u8; HASH_BYTES], Vec<f32>)> {
            let cache = reranker.cache.lock().unwrap_or_else(|p| p.into_inner());
            live_set
                .iter()
                .filter_map(|h| Some((*h, cache.get(h)?.clone())))
                .collect()
        };
        if reranker.log.records_on_disk() + todo.len() > live + RERANK_LOG_VECTORS / 10 {
            reranker
                .log
                .rewrite(&live_kept())
                .map_err(io(log_path.clone()))?;
        }
        reranker
            .log_full
            .store(false, std::sync::atomic::Ordering::Relaxed);
        let (mut computed, mut unkept) = (0, 0);
        progress(0, todo.len());
        for batch in todo.chunks(FILL_BATCH) {
            let texts: Vec<&str> = batch.iter().map(|(_, t)| t.as_str()).collect();
            let Some(vectors) = reranker.embed_chunks(&self.weights, &texts, threads) else {
                return Ok(KeptVectors::NoMiniLm);
            };
            let entries: Vec<([u8; HASH_BYTES], Vec<f32>)> =
                batch.iter().map(|(h, _)| *h).zip(vectors).collect();
            // In memory first: a reader of this process that sees the log grown sees these.
            reranker
                .cache
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(entries.iter().cloned());
            match reranker
                .append_waiting(&entries)
                .map_err(io(log_path.clone()))?
            {
                Appended::Kept => {}
                // Other processes filled the log meanwhile: room is made as above, and these
                // are written with the rest, being in the cache already.
                Appended::Full => reranker
                    .log
                    .rewrite(&live_kept())
                    .map_err(io(log_path.clone()))?,
                Appended::Busy => unkept += entries.len(),
            }
            computed += batch.len();
            progress(computed, todo.len());
        }
        // The chunks edited away go, unless the store moved on meanwhile (queries may have
        // cached the new version's).
        let unchanged = self.store().is_some_and(|now| {
            (now.revision(), now.generation()) == (store.revision(), store.generation())
        });
        if unchanged {
            reranker
                .cache
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .retain(|h, _| live_set.contains(h));
        }
        Ok(KeptVectors::Kept {
            live,
            computed,
            skipped,
            unkept,
            seconds: started.elapsed().as_secs_f64(),
        })
    }

    /// What a background pass would start from: the store's version and the log's length.
    /// Unchanged since the last pass, a new one would find nothing to do.
    pub(crate) fn kept_vectors_state(&self) -> Option<(String, u64, u64)> {
        let store = self.store()?;
        let log = std::fs::symlink_metadata(rerank_log_path(&self.dir)).map_or(0, |m| m.len());
        Some((store.revision().to_owned(), store.generation(), log))
    }

    /// Tells the background pass, when there is one, that a query found too few vectors kept.
    pub(crate) fn wake_keeper_with(&self, wake: SyncSender<()>) {
        let _ = self.wake_keeper.set(wake);
    }

    /// The committed store, reloaded when another process committed since.
    fn store(&self) -> Option<Arc<Store>> {
        let held = self.store.read().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(s) = held.filter(|s| s.is_current() && s.model() == self.model_id) {
            return Some(s);
        }
        // A store whose vectors another model made is no answer for this one's queries: it
        // counts as absent until this host's catch-up rebuilds it.
        let loaded = Store::open(&self.dir)
            .ok()
            .flatten()
            .filter(|s| s.model() == self.model_id)
            .map(Arc::new);
        *self.store.write().unwrap_or_else(|p| p.into_inner()) = loaded.clone();
        loaded
    }

    /// Brings the store to the embedded index's committed snapshot. Nothing is read when the
    /// store already attests the index's revision; a snapshot in the middle of an update (no
    /// revision) is left for the update's second half.
    pub(crate) fn catch_up(
        &self,
        index: &EmbeddedIndex,
        deadline: Option<Instant>,
    ) -> Result<semantic_index::CatchUp, semantic_index::StoreError> {
        self.catch_up_pinned(index, deadline)
            .map(|(_, stats)| stats)
    }

    /// [`SemanticEngine::catch_up`], returning too the store version that attests the snapshot
    /// it read, with that snapshot's status and digest: an answer from that version with that
    /// status is consistent whatever other processes commit meanwhile (a version's segments stay
    /// mapped after a later commit deletes their files).
    fn catch_up_pinned(
        &self,
        index: &EmbeddedIndex,
        deadline: Option<Instant>,
    ) -> Result<(Option<Pinned>, semantic_index::CatchUp), semantic_index::StoreError> {
        let committed = index.committed_files();
        let Some(revision) = committed.revision.filter(|r| !r.is_empty()) else {
            return Ok((None, semantic_index::CatchUp::default()));
        };
        // The store names what it caught up to by the revision and the digest of the committed
        // files: one revision can be committed twice with different files (a removal that sets
        // no revision, a rebuild after damage), and the name alone would then lie.
        let key = commit_key(&revision, committed.digest);
        let pin = |store: Arc<Store>| Pinned {
            store,
            status: committed.status.clone(),
            digest: committed.digest,
            unservable: committed.unservable.clone(),
        };
        if let Some(s) = self.store().filter(|s| s.revision() == key) {
            return Ok((Some(pin(s)), semantic_index::CatchUp::default()));
        }
        let files: Vec<SourceFile> = committed
            .files
            .iter()
            .map(|f| SourceFile {
                path: f.path.clone(),
                version: f.version,
                prior: f.prior,
            })
            .collect();
        let root =
            RootDir::open(index.root()).map_err(|source| semantic_index::StoreError::Io {
                path: index.root().to_path_buf(),
                source,
            })?;
        let read = |path: &str| read_text(&root, path);
        let (store, stats) = Store::catch_up(
            &self.dir,
            &self.statics,
            &self.model_id,
            &key,
            &files,
            &read,
            deadline,
        )?;
        let store = Arc::new(store);
        *self.store.write().unwrap_or_else(|p| p.into_inner()) = Some(store.clone());
        Ok((Some(pin(store)), stats))
    }

    /// Answers a `semantic` request from the committed store, with the index's `status` when
    /// the store attests the same revision, and as `stale` otherwise. `unservable` are the
    /// files of that commit that the store does not hold because no answer may name them.
    fn search(
        &self,
        request: &SearchRequest,
        status: IndexStatus,
        digest: u64,
        unservable: &[String],
        pinned: Option<Arc<Store>>,
        root: &Path,
    ) -> Result<BackendSearchResponse, BackendError> {
        let Some(store) = pinned.or_else(|| self.store()) else {
            return Ok(response(IndexStatus::new(IndexState::Empty), Vec::new()));
        };
        let current = status
            .source_revision
            .as_deref()
            .map(|r| commit_key(r, digest));
        if status.state == IndexState::Ready && current.as_deref() != Some(store.revision()) {
            let attested = store.revision().split('#').next().unwrap_or_default();
            let lagging = IndexStatus {
                state: IndexState::Stale,
                source_revision: Some(attested.to_owned()),
                updated_at: status.updated_at,
            };
            return Ok(response(lagging, Vec::new()));
        }
        if status.state != IndexState::Ready {
            return Ok(response(status, Vec::new()));
        }
        let scope = Scope::parse(request.path.as_deref())?;
        let filter = if request.files.narrows() {
            Some(PathFilter::new(&request.files)?)
        } else {
            None
        };
        let keep =
            |path: &str| scope.contains(path) && filter.as_ref().is_none_or(|f| f.matches(path));
        let limit = request.max_results.unwrap_or(DEFAULT_MAX_RESULTS);
        let reranker = match self.policy {
            RerankPolicy::Never => None,
            RerankPolicy::Always => self.reranker(),
            RerankPolicy::Kept => {
                let covered = self.kept_vectors_cover(&store);
                if !covered
                    && (1..=KEPT_CHUNKS_LIMIT).contains(&store.live_chunks())
                    && let Some(wake) = self.wake_keeper.get()
                {
                    let _ = wake.try_send(());
                }
                covered.then(|| self.reranker()).flatten()
            }
        };
        let mut hits = match reranker {
            None => store.search(&self.statics, &request.query, &self.weights, &keep, limit),
            Some(reranker) => {
                // The head the re-rank sees is the hybrid ranking's, however few hits are asked.
                let depth = self.weights.rerank_depth;
                let mut hits = store.search(
                    &self.statics,
                    &request.query,
                    &self.weights,
                    &keep,
                    limit.max(depth),
                );
                if let Ok(root) = RootDir::open(root) {
                    reranker.rerank(&self.weights, &store, &root, &request.query, &mut hits);
                }
                if reranker
                    .log_full
                    .swap(false, std::sync::atomic::Ordering::Relaxed)
                    && let Some(wake) = self.wake_keeper.get()
                {
                    let _ = wake.try_send(());
                }
                hits
            }
        };
        hits.truncate(limit);
        let hits = hits
            .into_iter()
            .map(|h| BackendHit::new(h.path, h.line, 1, h.snippet, f64::from(h.score)))
            .collect();
        // The store holds the default selection. An include glob, a type, hidden or ignored
        // files can select files beyond it (as ripgrep's do), which this answer cannot rank:
        // it says it may be incomplete rather than claim the whole.
        let f = &request.files;
        let widened = f.include_hidden
            || f.include_ignored
            || !f.types.is_empty()
            || f.globs.iter().any(|g| !g.starts_with('!'));
        // Every file in scope is a candidate for a ranking, and these could not be ranked: each
        // is counted, and the answer says it is incomplete.
        let mut skipped = SkippedFiles::default();
        for name in unservable.iter().filter(|n| keep(n)) {
            search_profile::count_unserved(&mut skipped, name);
        }
        let mut answer = response(status, hits);
        answer.complete = !widened && skipped.unserved() == 0;
        answer.skipped = (skipped.unserved() > 0).then_some(skipped);
        Ok(answer)
    }
}

/// Where the kept re-rank vectors of the store in `store_dir` live: beside it, in the index
/// directory.
fn rerank_log_path(store_dir: &Path) -> PathBuf {
    store_dir.with_file_name("semantic-rerank.vectors")
}

/// Makes room in a full `cache` for `incoming` vectors, at most `cap` in all: the vectors of
/// chunks that are not `live` (edited away) go first, so that a store whose vectors are kept
/// stays covered; all go when that is not enough, or no live set is known (a store too large
/// for one).
fn make_room<V>(
    cache: &mut HashMap<[u8; HASH_BYTES], V>,
    incoming: usize,
    cap: usize,
    live: impl FnOnce() -> Option<std::collections::HashSet<[u8; HASH_BYTES]>>,
) {
    if cache.len() + incoming <= cap {
        return;
    }
    if let Some(live) = live() {
        cache.retain(|h, _| live.contains(h));
    }
    if cache.len() + incoming > cap {
        cache.clear();
    }
}

/// The lock one pass over the kept vectors of the store in `store_dir` holds at a time.
fn keeper_lock_path(store_dir: &Path) -> PathBuf {
    store_dir.with_file_name("semantic-rerank.lock")
}

/// The content hashes of the store's live chunks.
fn live_hashes(store: &Store) -> std::collections::HashSet<[u8; HASH_BYTES]> {
    store
        .live_chunk_hashes()
        .into_iter()
        .flat_map(|(_, hashes)| hashes)
        .collect()
}

/// A store version and the trigram index's status and digest of the snapshot it attests.
struct Pinned {
    store: Arc<Store>,
    status: IndexStatus,
    digest: u64,
    unservable: Arc<[String]>,
}

fn response(status: IndexStatus, hits: Vec<BackendHit>) -> BackendSearchResponse {
    BackendSearchResponse {
        status,
        hits,
        complete: true,
        skipped: None,
        full_scan: false,
    }
}

/// A file's text for chunking: read beneath the worktree without following symlinks; `None`
/// for a file that is gone, unreadable, over the store's size cap, or binary (a NUL byte, as
/// ripgrep decides). Other bytes that are not UTF-8 are replaced.
fn read_text(root: &RootDir, path: &str) -> Option<String> {
    use std::io::Read as _;
    let file = root.open_file(path).ok()?;
    let mut bytes = Vec::new();
    file.take(semantic_index::MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    if bytes.len() > semantic_index::MAX_FILE_BYTES || bytes.contains(&0) {
        return None;
    }
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// What a store caught up to: the trigram index's revision and the digest of its committed
/// files (`#` never appears in a revision the host commits, and is only compared here).
fn commit_key(revision: &str, digest: u64) -> String {
    format!("{revision}#{digest:016x}")
}

/// The embedded index and the semantic store as one backend.
pub(crate) struct CompositeBackend {
    pub(crate) index: Arc<EmbeddedIndex>,
    pub(crate) semantic: Arc<SemanticEngine>,
}

impl CompositeBackend {
    fn catch_up(&self) -> Result<(), BackendError> {
        self.semantic.catch_up(&self.index, None)?;
        Ok(())
    }
}

impl RepositoryIndexBackend for CompositeBackend {
    fn capabilities(&self) -> BackendCapabilities {
        BackendCapabilities {
            semantic: true,
            ..self.index.capabilities()
        }
    }

    /// One update covers both: the embedded index commits, then the store catches up to it.
    fn update(&self, request: UpdateRequest) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            self.index.update(request).await?;
            self.catch_up()
        })
    }

    fn remove(&self, request: RemoveRequest) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            self.index.remove(request).await?;
            self.catch_up()
        })
    }

    fn search(
        &self,
        request: SearchRequest,
    ) -> BoxFuture<'_, Result<BackendSearchResponse, BackendError>> {
        if request.mode != SearchMode::Semantic {
            return self.index.search(request);
        }
        Box::pin(async move {
            let (status, digest, unservable) = self.index.committed_status();
            let ready = status.state == IndexState::Ready;
            let root = self.index.root();
            let answer = self
                .semantic
                .search(&request, status, digest, &unservable, None, root)?;
            if !(ready && answer.status.state == IndexState::Stale) {
                return Ok(answer);
            }
            // The store lags the index's newest commit: this process died before it caught up,
            // or (agents call tools in parallel) another process committed a newer view of the
            // worktree after this host caught the store up, or caught the store up to its own
            // older view. Catch up to the newest commit and answer from exactly the store
            // version and index status of that commit. A stale store is never served. (On this
            // thread, as `update` catches up: usually a few files, and `block_in_place` would
            // panic on a current-thread runtime.)
            let pinned = self.semantic.catch_up_pinned(&self.index, None);
            match pinned {
                Ok((Some(p), _)) => self.semantic.search(
                    &request,
                    p.status,
                    p.digest,
                    &p.unservable,
                    Some(p.store),
                    root,
                ),
                Ok((None, _)) => Ok(answer),
                Err(e) => Err(e.into()),
            }
        })
    }

    fn status(&self) -> BoxFuture<'_, Result<IndexStatus, BackendError>> {
        self.index.status()
    }

    fn dispose(&self) -> BoxFuture<'_, Result<(), BackendError>> {
        self.index.dispose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use index_contract::RepositoryOperations;
    use repo_search_tool::{IndexedOperationsConfig, IndexedRepositoryOperations};

    /// The model `cargo xtask tools` and `cargo xtask model static` install for the tests.
    fn model_dir() -> PathBuf {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/tools/models/all-minilm-l6-v2");
        assert!(
            holds_model(&dir),
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
        let engine = SemanticEngine::open(&model_dir(), store).unwrap();
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
        let engine = Arc::new(SemanticEngine::open(&model_dir(), store.path()).unwrap());
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
            semantic_index::CatchUp::default()
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
        let engine = Arc::new(SemanticEngine::open(&model_dir(), store.path()).unwrap());
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
            let engine = SemanticEngine::open(&model_dir(), store.path()).unwrap();
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
        let plain = Arc::new(SemanticEngine::open(&model_dir(), store.path()).unwrap());
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
        let code = "def middle(values):\n    values = sorted(values)\n    return values[len(values) // 2]\n";
        write(repo.path(), "network/pick.py", code);
        write(repo.path(), "statistics/pick.py", code);
        let store = tempfile::tempdir().unwrap();
        let index = Arc::new(EmbeddedIndex::open(repo.path(), store.path()).unwrap());
        index.refresh("head", None).unwrap();
        let engine = SemanticEngine::open(&model_dir(), store.path()).unwrap();
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
    fn engine_with(
        index: &EmbeddedIndex,
        store: &Path,
        policy: RerankPolicy,
    ) -> Arc<SemanticEngine> {
        let engine = SemanticEngine::open(&model_dir(), store).unwrap();
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
            semantic: Arc::new(SemanticEngine::open(&model_dir(), store.path()).unwrap()),
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
}
