//! The MiniLM re-rank of a `semantic` answer's head, and the vectors it keeps across
//! processes: when it runs ([`RerankPolicy`]), the per-process cache and the kept log
//! ([`VectorLog`]), and the pass that fills the log ([`KeptVectors`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use search_profile::RootDir;

use crate::engine::read_text;
use crate::rank::Weights;
use crate::{Appended, HASH_BYTES, MiniLm, Store, StoreHit, VectorLog};

/// When MiniLM re-ranks the head of a `semantic` answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RerankPolicy {
    /// Never: the hybrid ranking is served.
    Never,
    /// When the index keeps MiniLM's vector of nearly every chunk (at least [`KEPT_COVERAGE`] of
    /// them), which `repo-search index` computes for a repository of at most
    /// [`KEPT_CHUNKS_LIMIT`] chunks ([`SemanticEngine::keep_rerank_vectors`](crate::SemanticEngine::keep_rerank_vectors)). A query then
    /// embeds only the head chunks that changed since, so the re-rank costs about one MiniLM
    /// pass over the query. The default when MiniLM is installed.
    Kept,
    /// Every answer, embedding the head's chunks that have no kept vector (`--rerank`): about
    /// half a second a query on Linux while the head's chunks are new.
    Always,
}

/// The most live chunks for which the index keeps a MiniLM vector of every chunk: about four
/// minutes of MiniLM on 2 cores for a whole repository, and 16 MB of kept vectors.
pub const KEPT_CHUNKS_LIMIT: usize = if cfg!(test) { 60 } else { 20_000 };

/// The share of the live chunks whose vectors must be kept for [`RerankPolicy::Kept`] to
/// re-rank: the rest (chunks edited since the vectors were computed) are embedded when a query's
/// head holds them, a few at most.
pub const KEPT_COVERAGE: f64 = 0.9;

/// What [`SemanticEngine::keep_rerank_vectors`](crate::SemanticEngine::keep_rerank_vectors) did.
#[derive(Debug, Clone, PartialEq)]
pub enum KeptVectors {
    /// The store is larger than [`KEPT_CHUNKS_LIMIT`]: nothing was computed.
    TooManyChunks {
        /// The store's live chunks.
        live: usize,
    },
    /// MiniLM is not installed beside the static model: nothing was computed.
    NoMiniLm,
    /// Another process (a server's background pass, another `index`) is keeping them now.
    Busy,
    /// Every live chunk's vector is kept, but those of `skipped` chunks whose files changed on
    /// disk since the store read them (the next refresh catches them up) and of `unkept` ones
    /// computed but not written (the log stayed locked or full: they are computed again).
    Kept {
        /// The store's live chunks.
        live: usize,
        /// The vectors computed by this pass.
        computed: usize,
        /// Chunks whose files changed on disk since the store read them.
        skipped: usize,
        /// Vectors computed but not written.
        unkept: usize,
        /// How long the pass took.
        seconds: f64,
    },
}

/// The MiniLM re-rank of a `semantic` answer's head: the first [`Weights::rerank_depth`] files
/// by the hybrid score, re-scored with MiniLM's cosine of the query and each file's best chunk
/// (`crate::rank::rerank_scores`, the rule the evaluation measures). A chunk's text is
/// found by its content hash among the chunks of its file as it reads now; MiniLM reads it under
/// its file's path (`crate::rank::rerank_text`), which the hash covers too, up to
/// [`Weights::rerank_tokens`] word pieces, so its vector is cached by that hash and a chunk is
/// embedded once per process.
pub(crate) struct Reranker {
    pub(crate) minilm: MiniLm,
    pub(crate) cache: Mutex<HashMap<[u8; HASH_BYTES], Vec<f32>>>,
    /// The vectors kept for the next process (`<index-dir>/semantic-rerank.vectors`): read into
    /// `cache` when the re-rank starts, appended to as chunks are embedded.
    pub(crate) log: VectorLog,
    /// The lock one pass over the log holds at a time (`<index-dir>/semantic-rerank.lock`).
    pub(crate) lock_path: PathBuf,
    /// A query found the log full: a pass should make room.
    pub(crate) log_full: std::sync::atomic::AtomicBool,
}

/// Chunk vectors a re-ranking process keeps (384 f32 each: about 38 MB), emptied when full
/// (one in unit tests that do not fill the index, so that they empty it). Above
/// [`KEPT_CHUNKS_LIMIT`], so that a whole repository's vectors fit.
pub(crate) const RERANK_CACHE_VECTORS: usize = if cfg!(test) { 1 } else { 25_000 };

/// Chunk vectors the kept file holds (half floats: about 20 MB, read in milliseconds when a
/// re-ranking process starts). Past it a query keeps nothing more for a store a pass keeps
/// vectors for (the pass rewrites the file with the live chunks' vectors), and starts the file
/// over for a larger store.
pub(crate) const RERANK_LOG_VECTORS: usize = if cfg!(test) { 70 } else { 25_000 };

// A pass leaves a tenth of the log free for the vectors queries compute until the next one,
// and a process's cache holds a whole store's.
const _: () = assert!(KEPT_CHUNKS_LIMIT + RERANK_LOG_VECTORS / 10 <= RERANK_LOG_VECTORS);
const _: () = assert!(cfg!(test) || KEPT_CHUNKS_LIMIT <= RERANK_CACHE_VECTORS);

/// Chunks MiniLM embeds per call while it fills the index, so that progress is kept (and
/// reported) as it goes.
pub(crate) const FILL_BATCH: usize = 256;

impl Reranker {
    /// MiniLM from `model_dir` and the vectors kept in `index_dir`'s log, read into the cache.
    pub(crate) fn load(
        model_dir: &Path,
        store_dir: &Path,
        weights: &Weights,
    ) -> Result<Reranker, crate::Error> {
        let minilm = MiniLm::load(model_dir)?;
        let log = VectorLog::new(
            &rerank_log_path(store_dir),
            crate::rank::rerank_key(&minilm, weights),
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
    pub(crate) fn append_waiting(
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
    pub(crate) fn embed_chunks(
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
                .map(|v| crate::kept(v))
                .collect(),
        )
    }

    /// Re-scores and re-orders the head of `hits` (best first). `false`, with `hits` untouched,
    /// when a head chunk is no longer in its file as it reads now (it changed since the store
    /// read it: the next refresh catches up) or MiniLM fails: the hybrid ranking is served.
    pub(crate) fn rerank(
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
                crate::chunk_file(&hit.path, &text)
                    .into_iter()
                    .find(|c| c.hash[..HASH_BYTES] == hit.chunk_hash)
            });
            let Some(chunk) = chunk else {
                return false;
            };
            missing.push((
                hit.chunk_hash,
                crate::rank::rerank_text(&hit.path, &chunk.text),
            ));
        }
        // The query is read whole; each chunk only as far as the weights say (its path and
        // first lines), which bounds MiniLM's work per missing chunk. One call, so that the
        // query and the chunks share the threads.
        let tokenized: Result<Vec<Vec<u32>>, _> = std::iter::once(
            self.minilm
                .tokenize(&crate::for_embedding(query), usize::MAX),
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
            .zip(embedded.iter().map(|v| crate::kept(v)))
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
                    .map_or(0.0, |v| crate::rank::unit_cosine(v, &query))
            })
            .collect();
        let hybrid: Vec<f32> = hits.iter().map(|h| h.score).collect();
        let scores = crate::rank::rerank_scores(weights, &cosines, &hybrid);
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

/// Where the kept re-rank vectors of the store in `store_dir` live: beside it, in the index
/// directory.
pub(crate) fn rerank_log_path(store_dir: &Path) -> PathBuf {
    store_dir.with_file_name("semantic-rerank.vectors")
}

/// Makes room in a full `cache` for `incoming` vectors, at most `cap` in all: the vectors of
/// chunks that are not `live` (edited away) go first, so that a store whose vectors are kept
/// stays covered; all go when that is not enough, or no live set is known (a store too large
/// for one).
pub(crate) fn make_room<V>(
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
pub(crate) fn keeper_lock_path(store_dir: &Path) -> PathBuf {
    store_dir.with_file_name("semantic-rerank.lock")
}

/// The content hashes of the store's live chunks.
pub(crate) fn live_hashes(store: &Store) -> std::collections::HashSet<[u8; HASH_BYTES]> {
    store
        .live_chunk_hashes()
        .into_iter()
        .flat_map(|(_, hashes)| hashes)
        .collect()
}
