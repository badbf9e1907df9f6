//! The semantic engine: the static model and the store it keeps in `<index-dir>/semantic`,
//! caught up with the trigram index's committed snapshot and searched with the hybrid ranking,
//! re-ranked by MiniLM as its [`RerankPolicy`] says.
//!
//! The store keeps pace with the embedded index: after each of the index's commits (a host
//! refresh, an `update` or a `remove`), [`SemanticEngine::catch_up`] brings the store to the
//! index's committed snapshot, reading only the files whose version changed and embedding only
//! chunks whose content hash is new, and commits the same revision. A store that lags (a process
//! killed between the two commits) answers with a `stale` status, which the facade's freshness
//! gate refuses, until the next refresh catches it up.

use std::path::{Path, PathBuf};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Instant;

use embedded_index::{CommittedFiles, CommittedHead, EmbeddedIndex};
use index_contract::{
    BackendError, BackendHit, BackendSearchResponse, IndexState, IndexStatus, SearchRequest,
    SkippedFiles, limits::DEFAULT_MAX_RESULTS,
};
use index_guard::Scope;
use search_profile::{PathFilter, RootDir};

use crate::rank::Weights;
use crate::store::Base;
use crate::{Appended, HASH_BYTES, MiniLm, SourceFile, StaticModel, Store, VectorLog};

use crate::reranker::*;

/// The static model and the store it keeps in `<index-dir>/semantic`.
pub struct SemanticEngine {
    statics: StaticModel,
    model_id: String,
    model_dir: Option<PathBuf>,
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
    /// What this engine's last catch-up that found the store behind did.
    last_catch_up: Mutex<crate::CatchUp>,
}

impl SemanticEngine {
    /// An engine for a store in `index_dir`, with the static model in `model_dir` when it holds
    /// one ([`crate::installed_file`], checked against its sha256), else the built-in one; MiniLM
    /// for the re-rank is looked for in `model_dir` when it is needed (there is none without a
    /// `model_dir`). `model_dir` need not exist. An error when the model directory's static
    /// model cannot be loaded.
    pub fn open(
        model_dir: Option<&Path>,
        index_dir: &Path,
    ) -> Result<SemanticEngine, crate::Error> {
        // Loading checks the file against its `.sha256`, which is the model's identity: a
        // damaged model is told from a missing one, and is never passed over for the built-in.
        let statics = match model_dir.and_then(|d| Some((d, crate::installed_file(d)?))) {
            Some((dir, file)) => StaticModel::load_file(dir, file)?,
            None => StaticModel::builtin()?,
        };
        let model_id = statics.sha256().to_owned();
        Ok(SemanticEngine {
            statics,
            model_id,
            model_dir: model_dir.map(Path::to_path_buf),
            dir: index_dir.join("semantic"),
            store: RwLock::new(None),
            weights: Weights::default(),
            policy: RerankPolicy::Never,
            reranker: OnceLock::new(),
            covered: Mutex::new(None),
            wake_keeper: OnceLock::new(),
            last_catch_up: Mutex::new(crate::CatchUp::default()),
        })
    }

    /// This engine, re-ranking each answer's head with MiniLM as `policy` says. MiniLM is read
    /// from the model directory (its `model.safetensors`, `config.json` and `tokenizer.json`,
    /// which `cargo xtask tools` installs beside the static model): now for
    /// [`RerankPolicy::Always`], which fails when it cannot be loaded, and on first need for
    /// [`RerankPolicy::Kept`], which serves the hybrid ranking when it cannot.
    pub fn with_policy(mut self, policy: RerankPolicy) -> Result<Self, crate::Error> {
        if policy == RerankPolicy::Always {
            let reranker = Reranker::load(self.minilm_dir()?, &self.dir, &self.weights)?;
            self.reranker = OnceLock::from(Some(reranker));
        }
        self.policy = policy;
        Ok(self)
    }

    /// MiniLM and the kept vectors, loaded on the first call.
    pub(crate) fn reranker(&self) -> Option<&Reranker> {
        self.reranker
            .get_or_init(|| {
                let dir = self.minilm_dir().ok()?;
                Reranker::load(dir, &self.dir, &self.weights).ok()
            })
            .as_ref()
    }

    /// Where MiniLM is looked for: the model directory. An [`crate::Error::Missing`] without one.
    fn minilm_dir(&self) -> Result<&Path, crate::Error> {
        self.model_dir
            .as_deref()
            .ok_or_else(|| crate::Error::Missing {
                path: PathBuf::from("model.safetensors"),
            })
    }

    /// Whether [`RerankPolicy::Kept`] re-ranks answers from `store`: it has at most
    /// [`KEPT_CHUNKS_LIMIT`] live chunks, and the kept vectors cover [`KEPT_COVERAGE`] of them.
    /// MiniLM is not loaded unless the log is long enough for that; the answer is remembered
    /// for the store's version.
    pub(crate) fn kept_vectors_cover(&self, store: &Store) -> bool {
        let live = store.live_chunks();
        if live == 0 || live > KEPT_CHUNKS_LIMIT {
            return false;
        }
        let needed = (live as f64 * KEPT_COVERAGE).ceil() as usize;
        // No MiniLM, or too short a log: nothing is loaded.
        let Some(dim) = self.minilm_dir().ok().and_then(MiniLm::dim_in) else {
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
    pub fn rerank_awaits_vectors(&self) -> bool {
        self.policy == RerankPolicy::Kept
            && self.minilm_dir().ok().and_then(MiniLm::dim_in).is_some()
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
    pub fn keep_rerank_vectors(
        &self,
        index: &EmbeddedIndex,
        threads: usize,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<KeptVectors, crate::StoreError> {
        let kept = self.keep_rerank_vectors_now(index, threads, progress);
        // Whatever the pass did, coverage is judged again.
        *self.covered.lock().unwrap_or_else(|p| p.into_inner()) = None;
        kept
    }

    pub(crate) fn keep_rerank_vectors_now(
        &self,
        index: &EmbeddedIndex,
        threads: usize,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<KeptVectors, crate::StoreError> {
        let started = Instant::now();
        let io = |path: PathBuf| move |source| crate::StoreError::Io { path, source };
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
                .map(|text| crate::chunk_file(path, &text))
                .unwrap_or_default();
            let cache = reranker.cache.lock().unwrap_or_else(|p| p.into_inner());
            for hash in hashes {
                if cache.contains_key(hash) || !queued.insert(*hash) {
                    continue;
                }
                match chunks.iter().find(|c| c.hash[..HASH_BYTES] == *hash) {
                    Some(c) => todo.push((*hash, crate::rank::rerank_text(path, &c.text))),
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
    pub fn kept_vectors_state(&self) -> Option<(String, u64, u64)> {
        let store = self.store()?;
        let log = std::fs::symlink_metadata(rerank_log_path(&self.dir)).map_or(0, |m| m.len());
        Some((store.revision().to_owned(), store.generation(), log))
    }

    /// Tells the background pass, when there is one, that a query found too few vectors kept.
    pub fn wake_keeper_with(&self, wake: SyncSender<()>) {
        let _ = self.wake_keeper.set(wake);
    }

    /// The committed store, reloaded when another process committed since.
    pub(crate) fn store(&self) -> Option<Arc<Store>> {
        let held = self.store.read().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(s) = held
            .as_ref()
            .filter(|s| s.is_current() && s.model() == self.model_id)
        {
            return Some(s.clone());
        }
        // A store whose vectors another model made is no answer for this one's queries: it
        // counts as absent until this host's catch-up rebuilds it.
        let loaded = match &held {
            // The same directory: the segments the held version mapped and checked are reused.
            Some(h) => h.reopen(),
            None => Store::open(&self.dir),
        };
        let loaded = loaded
            .ok()
            .flatten()
            .filter(|s| s.model() == self.model_id)
            .map(Arc::new);
        *self.store.write().unwrap_or_else(|p| p.into_inner()) = loaded.clone();
        loaded
    }

    /// What this engine's last catch-up that found the store behind the index did: the files it
    /// read, the chunks it embedded, whether it rebuilt. A catch-up that finds the store current
    /// reads nothing and leaves this as it was.
    pub fn last_catch_up(&self) -> crate::CatchUp {
        *self.last_catch_up.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Brings the store to the embedded index's committed snapshot. Nothing is read when the
    /// store already attests the index's revision; a snapshot in the middle of an update (no
    /// revision) is left for the update's second half.
    pub fn catch_up(
        &self,
        index: &EmbeddedIndex,
        deadline: Option<Instant>,
    ) -> Result<crate::CatchUp, crate::StoreError> {
        self.catch_up_pinned(index, deadline)
            .map(|(_, stats)| stats)
    }

    /// [`SemanticEngine::catch_up`], returning too the store version that attests the snapshot
    /// it read, with that snapshot's status and digest: an answer from that version with that
    /// status is consistent whatever other processes commit meanwhile (a version's segments stay
    /// mapped after a later commit deletes their files).
    pub(crate) fn catch_up_pinned(
        &self,
        index: &EmbeddedIndex,
        deadline: Option<Instant>,
    ) -> Result<(Option<Pinned>, crate::CatchUp), crate::StoreError> {
        let pin = |store: Arc<Store>, head: &CommittedHead| Pinned {
            store,
            status: head.status.clone(),
            digest: head.digest,
            unservable: head.unservable.clone(),
        };
        let current = |head: &CommittedHead| {
            let revision = head.revision.as_deref().filter(|r| !r.is_empty())?;
            // The store names what it caught up to by the revision and the digest of the
            // committed files: one revision can be committed twice with different files (a
            // removal that sets no revision, a rebuild after damage), and the name alone would
            // then lie.
            Some(commit_key(revision, head.digest))
        };
        // What the index committed, without its files: a store already caught up to it (every
        // query but the first after a change) reads no list of files. A commit of another
        // revision than the store's (every commit after a write) goes straight to the list
        // below: its head's digest would list the same files first.
        let same_revision = self
            .store()
            .zip(index.committed_revision())
            .is_some_and(|(s, r)| attested_revision(s.revision()) == r);
        if same_revision {
            let head = index.committed_head();
            let Some(key) = current(&head) else {
                return Ok((None, crate::CatchUp::default()));
            };
            if let Some(s) = self.store().filter(|s| s.revision() == key) {
                return Ok((Some(pin(s, &head)), crate::CatchUp::default()));
            }
        }
        // The files listed name their own head: another commit may have landed since.
        let CommittedFiles { head, files } = index.committed_files();
        let Some(key) = current(&head) else {
            return Ok((None, crate::CatchUp::default()));
        };
        if let Some(s) = self.store().filter(|s| s.revision() == key) {
            return Ok((Some(pin(s, &head)), crate::CatchUp::default()));
        }
        let files: Vec<SourceFile> = files
            .into_iter()
            .map(|f| SourceFile {
                path: f.path,
                version: f.version,
                prior: f.prior,
            })
            .collect();
        let root = RootDir::open(index.root()).map_err(|source| crate::StoreError::Io {
            path: index.root().to_path_buf(),
            source,
        })?;
        let read = |path: &str| read_text(&root, path);
        // From the version this engine holds, whose segments are mapped and checked already.
        let held = self.store();
        let base = held.as_deref().map_or(Base::Dir(&self.dir), Base::Held);
        let (store, stats) = Store::catch_up_from(
            base,
            &self.statics,
            &self.model_id,
            &key,
            &files,
            &read,
            deadline,
        )?;
        let store = Arc::new(store);
        *self.store.write().unwrap_or_else(|p| p.into_inner()) = Some(store.clone());
        *self.last_catch_up.lock().unwrap_or_else(|p| p.into_inner()) = stats;
        Ok((Some(pin(store, &head)), stats))
    }

    /// Answers a `semantic` request from the committed store, with the index's `status` when
    /// the store attests the same revision, and as `stale` otherwise. `unservable` are the
    /// files of that commit that the store does not hold because no answer may name them.
    pub(crate) fn search(
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
            let attested = attested_revision(store.revision());
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
        // One hit more than asked tells whether the ranking goes on past the answer, which the
        // answer must say (it is then not complete, and the facade offers the next page).
        let wanted = limit.saturating_add(1);
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
            None => store.search(&self.statics, &request.query, &self.weights, &keep, wanted),
            Some(reranker) => {
                // The head the re-rank sees is the hybrid ranking's, however few hits are asked.
                let depth = self.weights.rerank_depth;
                let mut hits = store.search(
                    &self.statics,
                    &request.query,
                    &self.weights,
                    &keep,
                    wanted.max(depth),
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
        let more = hits.len() > limit;
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
        answer.complete = !widened && !more && skipped.unserved() == 0;
        answer.skipped = (skipped.unserved() > 0).then_some(skipped);
        Ok(answer)
    }
}

/// A store version and the trigram index's status and digest of the snapshot it attests.
pub(crate) struct Pinned {
    pub(crate) store: Arc<Store>,
    pub(crate) status: IndexStatus,
    pub(crate) digest: u64,
    pub(crate) unservable: Arc<[String]>,
}

pub(crate) fn response(status: IndexStatus, hits: Vec<BackendHit>) -> BackendSearchResponse {
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
pub(crate) fn read_text(root: &RootDir, path: &str) -> Option<String> {
    use std::io::Read as _;
    let file = root.open_file(path).ok()?;
    let mut bytes = Vec::new();
    file.take(crate::MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    if bytes.len() > crate::MAX_FILE_BYTES || bytes.contains(&0) {
        return None;
    }
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// What a store caught up to: the trigram index's revision and the digest of its committed
/// files (`#` never appears in a revision the host commits, and is only compared here).
pub(crate) fn commit_key(revision: &str, digest: u64) -> String {
    format!("{revision}#{digest:016x}")
}

/// The revision a store's [`commit_key`] names, without the digest.
pub(crate) fn attested_revision(key: &str) -> &str {
    key.rsplit_once('#').map_or(key, |(revision, _)| revision)
}

#[cfg(test)]
mod tests;
