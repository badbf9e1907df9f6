//! A persistent, crash-safe, incremental trigram index: the reference
//! [`RepositoryIndexBackend`] for `repo_search`, serving `indexed_literal`
//! (`capabilities.semantic = false`).
//!
//! - **What it indexes**: exactly the literal fallback's file selection (ripgrep's defaults).
//! - **How it answers**: the query's trigrams select candidate files from memory-mapped posting
//!   lists; each candidate is then searched with ripgrep's own searcher and the literal fallback's
//!   exact configuration, so a hit is real and equal to ripgrep's first match in that file. One
//!   hit per file, ranked (see [`EmbeddedIndex`]).
//! - **Storage**: immutable, checksummed segment files plus a manifest in a directory the host
//!   names. The manifest is replaced atomically (write, fsync, rename, fsync the directory): that
//!   is the commit point, so a process killed at any moment leaves the previous commit readable.
//!   A damaged file is detected by its crc32 and reported as `failed`, never served.
//! - **Updates**: each update writes a segment holding only the changed files and marks the old
//!   copies deleted; small segments are merged once there are more than a few. Cost follows the
//!   size of the change, not of the corpus.
//! - **Concurrency**: a query takes the committed snapshot at its start and uses only it; updates
//!   swap in a new snapshot after they commit.
//!
//! # Example
//!
//! ```
//! use embedded_index::EmbeddedIndex;
//! use index_contract::{IndexState, SearchMode, SearchRequest};
//!
//! let repo = tempfile::tempdir()?;
//! std::fs::write(repo.path().join("main.rs"), "fn main() {\n    parse_config();\n}\n")?;
//! let store = tempfile::tempdir()?;
//! let index = EmbeddedIndex::open(repo.path(), store.path())?;
//! assert_eq!(index.current_status().state, IndexState::Empty);
//!
//! index.build("rev-1")?;
//! let found = index.search_now(&SearchRequest::new("parse_config", SearchMode::IndexedLiteral))?;
//! assert_eq!((found.hits[0].path.as_str(), found.hits[0].line), ("main.rs", 2));
//! assert_eq!(found.status.source_revision.as_deref(), Some("rev-1"));
//!
//! // Reopening maps the committed files; nothing is rebuilt.
//! drop(index);
//! let again = EmbeddedIndex::open(repo.path(), store.path())?;
//! assert_eq!(again.current_status().state, IndexState::Ready);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod manifest;
mod segment;
mod select;
mod trigram;
mod verify;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use index_contract::{
    BackendCapabilities, BackendError, BackendHit, BackendSearchResponse, BoxFuture, Change,
    IndexState, IndexStatus, RemoveRequest, RepositoryIndexBackend, SearchRequest, UnixMillis,
    UpdateRequest,
};

use manifest::{Manifest, ManifestError, SegmentEntry};
use segment::{DocTrigrams, Encoder, Segment, SegmentError};

/// How an [`EmbeddedIndex`] builds and maintains itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbeddedIndexConfig {
    /// Threads for the build and for verifying candidates; `None` uses the available parallelism.
    pub threads: Option<usize>,
    /// A build writes a segment each time this many (trigram, file) pairs have accumulated. This
    /// bounds build memory: about 8 bytes per pair, plus a fixed 64 MiB table.
    pub pairs_per_segment: usize,
    /// Updates merge the small segments once there are more than this many.
    pub max_small_segments: usize,
}

impl Default for EmbeddedIndexConfig {
    fn default() -> Self {
        EmbeddedIndexConfig {
            threads: None,
            pairs_per_segment: 24 << 20,
            max_small_segments: 8,
        }
    }
}

/// Why building or updating failed. Searches and status never return these: a damaged index
/// reports `failed`.
#[derive(Debug)]
pub enum EmbeddedIndexError {
    /// Reading the worktree or writing the index directory failed.
    Io(std::io::Error),
    /// The committed index is damaged; rebuild it with [`EmbeddedIndex::build`].
    Corrupt,
    /// A search was given a query the matcher cannot compile.
    BadQuery,
}

impl std::fmt::Display for EmbeddedIndexError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EmbeddedIndexError::Io(e) => write!(f, "index I/O failed: {e}"),
            EmbeddedIndexError::Corrupt => {
                f.write_str("the committed index is damaged; rebuild it")
            }
            EmbeddedIndexError::BadQuery => f.write_str("the query cannot be compiled"),
        }
    }
}

impl std::error::Error for EmbeddedIndexError {}

impl From<std::io::Error> for EmbeddedIndexError {
    fn from(e: std::io::Error) -> Self {
        EmbeddedIndexError::Io(e)
    }
}

/// One committed version: the manifest and its mapped segments.
struct Snapshot {
    manifest: Manifest,
    segments: Vec<Arc<Segment>>,
    deleted: Vec<HashSet<u32>>,
    /// Live path → (segment, doc).
    live: HashMap<String, (usize, u32)>,
}

impl Snapshot {
    /// Maps and checks the manifest's segments. Segments already mapped (and checked) by
    /// `previous` are reused, so a commit opens only the segments it wrote: its cost follows the
    /// change, not the corpus.
    fn load(
        dir: &Path,
        manifest: Manifest,
        previous: Option<&Snapshot>,
    ) -> Result<Snapshot, SegmentError> {
        let mut segments = Vec::with_capacity(manifest.segments.len());
        let mut deleted = Vec::with_capacity(manifest.segments.len());
        let mut live = HashMap::new();
        for (si, entry) in manifest.segments.iter().enumerate() {
            let reused = previous.and_then(|p| {
                p.manifest
                    .segments
                    .iter()
                    .position(|e| e.file == entry.file && e.crc32 == entry.crc32)
                    .map(|i| p.segments[i].clone())
            });
            let seg = match reused {
                Some(seg) => seg,
                None => Arc::new(Segment::open(&dir.join(&entry.file), entry.crc32)?),
            };
            if seg.n_docs() != entry.docs {
                return Err(SegmentError::Corrupt);
            }
            let del: HashSet<u32> = entry.deleted.iter().copied().collect();
            for id in 0..seg.n_docs() {
                if !del.contains(&id) {
                    live.insert(seg.path(id).to_owned(), (si, id));
                }
            }
            segments.push(seg);
            deleted.push(del);
        }
        Ok(Snapshot {
            manifest,
            segments,
            deleted,
            live,
        })
    }

    fn status(&self) -> IndexStatus {
        IndexStatus {
            state: if self.manifest.generation == 0 {
                IndexState::Empty
            } else {
                IndexState::Ready
            },
            source_revision: self.manifest.source_revision.clone(),
            updated_at: self.manifest.updated_at.map(UnixMillis),
        }
    }
}

enum Current {
    Ready(Arc<Snapshot>),
    Failed,
}

/// The embedded index over one worktree, stored in one directory.
///
/// **Ranking.** Every hit is a file's first matching line, exactly as ripgrep finds it. Its score
/// is half a path prior (ordinary source 1.0; tests × 0.6; docs × 0.8; vendored or generated code
/// × 0.4; a little less per directory level) and half the match's shape (a whole-word match on a
/// line that looks like a definition 1.0, whole word 0.7, a definition 0.6, otherwise 0.4). Hits
/// come best first. Under a result cap, candidates are verified in order of their path prior, so
/// the answer holds the best-prior files.
pub struct EmbeddedIndex {
    root: PathBuf,
    dir: PathBuf,
    config: EmbeddedIndexConfig,
    current: RwLock<Current>,
    writer: Mutex<()>,
    building: AtomicBool,
}

impl std::fmt::Debug for EmbeddedIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedIndex")
            .field("root", &self.root)
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// What a build did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildStats {
    /// Files indexed.
    pub files: usize,
    /// Bytes of the committed index on disk.
    pub index_bytes: u64,
    /// Segments written.
    pub segments: usize,
}

fn threads(config: &EmbeddedIndexConfig) -> usize {
    config
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1)
}

impl EmbeddedIndex {
    /// Opens the index of `root` stored in `dir` (created if missing). A missing index is
    /// `empty`; a damaged one opens as `failed` (and [`EmbeddedIndex::build`] repairs it).
    /// Opening maps the segments and checks their checksums; it loads no posting list.
    pub fn open(root: impl AsRef<Path>, dir: impl AsRef<Path>) -> std::io::Result<EmbeddedIndex> {
        EmbeddedIndex::with_config(root, dir, EmbeddedIndexConfig::default())
    }

    /// [`EmbeddedIndex::open`] with a configuration.
    pub fn with_config(
        root: impl AsRef<Path>,
        dir: impl AsRef<Path>,
        config: EmbeddedIndexConfig,
    ) -> std::io::Result<EmbeddedIndex> {
        let root = root.as_ref().canonicalize()?;
        let dir = dir.as_ref().to_path_buf();
        std::fs::create_dir_all(&dir)?;
        let current = match manifest::read(&dir) {
            Ok(m) => match Snapshot::load(&dir, m, None) {
                Ok(s) => Current::Ready(Arc::new(s)),
                Err(SegmentError::Io(e)) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(e);
                }
                Err(_) => Current::Failed,
            },
            Err(ManifestError::Missing) => Current::Ready(Arc::new(Snapshot {
                manifest: Manifest::empty(),
                segments: Vec::new(),
                deleted: Vec::new(),
                live: HashMap::new(),
            })),
            Err(ManifestError::Corrupt) => Current::Failed,
            Err(ManifestError::Io(e)) => return Err(e),
        };
        Ok(EmbeddedIndex {
            root,
            dir,
            config,
            current: RwLock::new(current),
            writer: Mutex::new(()),
            building: AtomicBool::new(false),
        })
    }

    /// The worktree root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn snapshot(&self) -> Option<Arc<Snapshot>> {
        match &*self.current.read().unwrap_or_else(|p| p.into_inner()) {
            Current::Ready(s) => Some(s.clone()),
            Current::Failed => None,
        }
    }

    fn install(&self, s: Snapshot) {
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Current::Ready(Arc::new(s));
    }

    /// The status of the committed index, honestly: `empty` before the first build, `building`
    /// during a first build, `ready` once committed, `failed` when damaged.
    pub fn current_status(&self) -> IndexStatus {
        match self.snapshot() {
            None => IndexStatus::new(IndexState::Failed),
            Some(s) => {
                let mut st = s.status();
                if st.state == IndexState::Empty && self.building.load(Ordering::SeqCst) {
                    st.state = IndexState::Building;
                }
                st
            }
        }
    }

    /// The paths the committed index holds, sorted.
    pub fn indexed_paths(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .snapshot()
            .map(|s| s.live.keys().cloned().collect())
            .unwrap_or_default();
        v.sort();
        v
    }

    /// The files the index would hold if built now: the literal search's selection, sorted.
    pub fn selection(&self) -> Vec<String> {
        select::files(&self.root, threads(&self.config))
    }

    /// Which of `candidates` belong to the selection now (same rules as [`EmbeddedIndex::selection`],
    /// at the cost of reading only the candidates' ancestor directories).
    pub fn select(&self, candidates: &[String]) -> Vec<String> {
        select::select(&self.root, threads(&self.config), candidates)
    }

    /// Whether the committed index holds `path`.
    pub fn contains(&self, path: &str) -> bool {
        self.snapshot().is_some_and(|s| s.live.contains_key(path))
    }

    /// Indexes the whole worktree and commits it as `source_revision`, replacing whatever was
    /// committed. Memory is bounded by [`EmbeddedIndexConfig::pairs_per_segment`].
    pub fn build(&self, source_revision: &str) -> Result<BuildStats, EmbeddedIndexError> {
        self.build_with_progress(source_revision, &mut |_, _| {})
    }

    /// [`EmbeddedIndex::build`], calling `progress(files_done, files_total)` as it goes.
    pub fn build_with_progress(
        &self,
        source_revision: &str,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<BuildStats, EmbeddedIndexError> {
        let _w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        self.building.store(true, Ordering::SeqCst);
        let result = self.build_locked(source_revision, progress);
        self.building.store(false, Ordering::SeqCst);
        result
    }

    fn build_locked(
        &self,
        source_revision: &str,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<BuildStats, EmbeddedIndexError> {
        let n_threads = threads(&self.config);
        let paths = select::files(&self.root, n_threads);
        let generation = self.snapshot().map_or(0, |s| s.manifest.generation) + 1;
        let mut encoder = Encoder::new();
        let mut entries = Vec::new();
        let mut start = 0;
        while start < paths.len() {
            // Take files until the pair budget is reached (measured as we extract).
            let (docs, next) = self.extract_batch(&paths, start, n_threads);
            start = next;
            progress(start, paths.len());
            let file = format!("seg-{generation}-{}.idx", entries.len());
            entries.push(self.write_segment(&mut encoder, &docs, file)?);
        }
        let m = Manifest {
            format: 1,
            generation,
            segments: entries,
            source_revision: Some(source_revision.to_owned()),
            updated_at: Some(UnixMillis::now().0),
        };
        let stats = self.commit(m)?;
        Ok(BuildStats {
            files: paths.len(),
            index_bytes: stats,
            segments: self.snapshot().map_or(0, |s| s.segments.len()),
        })
    }

    /// Extracts trigrams for files from `start` on, in parallel, until the pair budget is used.
    fn extract_batch(
        &self,
        paths: &[String],
        start: usize,
        n_threads: usize,
    ) -> (Vec<DocTrigrams>, usize) {
        let budget = self.config.pairs_per_segment;
        let mut docs: Vec<DocTrigrams> = Vec::new();
        let mut pairs = 0usize;
        let mut at = start;
        // Work in chunks so the budget is checked often without serialising the threads.
        const CHUNK: usize = 256;
        while at < paths.len() && pairs < budget {
            let end = (at + CHUNK * n_threads).min(paths.len());
            let slice = &paths[at..end];
            let next = AtomicUsize::new(0);
            let mut parts: Vec<Vec<(usize, Vec<u32>)>> = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..n_threads)
                    .map(|_| {
                        let next = &next;
                        scope.spawn(move || {
                            let mut ex = trigram::Extractor::new();
                            let mut out = Vec::new();
                            loop {
                                let i = next.fetch_add(1, Ordering::Relaxed);
                                if i >= slice.len() {
                                    break;
                                }
                                // An unreadable file is indexed as empty: the literal search
                                // would find nothing in it either.
                                let bytes =
                                    std::fs::read(self.root.join(&slice[i])).unwrap_or_default();
                                out.push((i, ex.extract(&bytes)));
                            }
                            out
                        })
                    })
                    .collect();
                handles.into_iter().filter_map(|h| h.join().ok()).collect()
            });
            let mut merged: Vec<(usize, Vec<u32>)> =
                parts.iter_mut().flat_map(std::mem::take).collect();
            merged.sort_unstable_by_key(|(i, _)| *i);
            for (i, trigrams) in merged {
                pairs += trigrams.len();
                docs.push(DocTrigrams {
                    path: slice[i].clone(),
                    trigrams,
                });
            }
            at = end;
        }
        (docs, at)
    }

    /// Encodes `docs` into segment `file`, writes it durably, and returns its manifest entry.
    fn write_segment(
        &self,
        encoder: &mut Encoder,
        docs: &[DocTrigrams],
        file: String,
    ) -> Result<SegmentEntry, EmbeddedIndexError> {
        let (bytes, crc) = encoder.encode(docs);
        segment::write_durably(&self.dir, &file, &bytes)?;
        Ok(SegmentEntry {
            file,
            crc32: crc,
            docs: docs.len() as u32,
            deleted: Vec::new(),
        })
    }

    /// Commits a manifest, installs its snapshot and removes files no manifest names.
    fn commit(&self, m: Manifest) -> Result<u64, EmbeddedIndexError> {
        manifest::commit(&self.dir, &m)?;
        let previous = self.snapshot();
        let snapshot = Snapshot::load(&self.dir, m, previous.as_deref())
            .map_err(|_| EmbeddedIndexError::Corrupt)?;
        let bytes = snapshot.segments.iter().map(|s| s.bytes() as u64).sum();
        let keep: HashSet<String> = snapshot
            .manifest
            .segments
            .iter()
            .map(|e| e.file.clone())
            .collect();
        self.install(snapshot);
        // Queries that still hold an older snapshot keep their mappings: on Unix a removed file
        // stays readable while mapped.
        if let Ok(rd) = std::fs::read_dir(&self.dir) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let stale_segment = name.ends_with(".idx") && !keep.contains(&name);
                let leftover = name.starts_with('.') && name.ends_with(".tmp");
                if stale_segment || leftover {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        Ok(bytes)
    }

    /// Applies removals and upserts (files re-read from the worktree) and commits them, with
    /// `source_revision` when given (else the committed revision stays). Cost is proportional to
    /// the change: one new segment for the upserted files, deletion marks for the old copies.
    pub fn apply(
        &self,
        upserts: &[String],
        removals: &[String],
        source_revision: Option<&str>,
    ) -> Result<(), EmbeddedIndexError> {
        let _w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let Some(snap) = self.snapshot() else {
            return Err(EmbeddedIndexError::Corrupt);
        };
        let mut m = snap.manifest.clone();
        m.generation += 1;
        let mut entries = m.segments.clone();
        for path in upserts.iter().chain(removals) {
            if let Some(&(si, id)) = snap.live.get(path)
                && !entries[si].deleted.contains(&id)
            {
                entries[si].deleted.push(id);
            }
        }
        let mut new_docs: Vec<String> = upserts
            .iter()
            .filter(|p| !removals.contains(p))
            .cloned()
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        new_docs.sort();
        if !new_docs.is_empty() {
            let mut ex = trigram::Extractor::new();
            let docs: Vec<DocTrigrams> = new_docs
                .into_iter()
                .filter_map(|path| {
                    // A path that is not a file now (deleted since) is simply not indexed.
                    let bytes = std::fs::read(self.root.join(&path)).ok()?;
                    Some(DocTrigrams {
                        trigrams: ex.extract(&bytes),
                        path,
                    })
                })
                .collect();
            if !docs.is_empty() {
                let file = format!("seg-{}-0.idx", m.generation);
                entries.push(self.write_segment(&mut Encoder::new(), &docs, file)?);
            }
        }
        // Drop segments with nothing live, then merge the small ones when there are too many.
        entries.retain(|e| (e.deleted.len() as u32) < e.docs);
        let entries = self.maybe_merge(entries, &snap, m.generation)?;
        m.segments = entries;
        if let Some(rev) = source_revision {
            m.source_revision = Some(rev.to_owned());
        }
        m.updated_at = Some(UnixMillis::now().0);
        self.commit(m)?;
        Ok(())
    }

    /// Re-stamps the committed index as current at `source_revision` without changing its
    /// contents: for a host that checked and found nothing changed.
    pub fn touch(&self, source_revision: &str) -> Result<(), EmbeddedIndexError> {
        self.apply(&[], &[], Some(source_revision))
    }

    fn maybe_merge(
        &self,
        entries: Vec<SegmentEntry>,
        snap: &Snapshot,
        generation: u64,
    ) -> Result<Vec<SegmentEntry>, EmbeddedIndexError> {
        let largest = entries.iter().map(|e| e.docs).max().unwrap_or(0);
        // "Small" is relative to the largest segment; the build's segments are all large.
        let small: Vec<usize> = (0..entries.len())
            .filter(|&i| entries[i].docs * 16 < largest)
            .collect();
        if small.len() <= self.config.max_small_segments {
            return Ok(entries);
        }
        let mut docs: Vec<DocTrigrams> = Vec::new();
        for &i in &small {
            let e = &entries[i];
            let seg = match snap.manifest.segments.iter().position(|s| s.file == e.file) {
                Some(si) => snap.segments[si].clone(),
                None => Arc::new(
                    Segment::open(&self.dir.join(&e.file), e.crc32)
                        .map_err(|_| EmbeddedIndexError::Corrupt)?,
                ),
            };
            let deleted: HashSet<u32> = e.deleted.iter().copied().collect();
            let mut per_doc: Vec<Vec<u32>> = vec![Vec::new(); seg.n_docs() as usize];
            for (t, list) in seg.pairs() {
                for d in list {
                    per_doc[d as usize].push(t);
                }
            }
            for (id, trigrams) in per_doc.into_iter().enumerate() {
                if !deleted.contains(&(id as u32)) {
                    docs.push(DocTrigrams {
                        path: seg.path(id as u32).to_owned(),
                        trigrams,
                    });
                }
            }
        }
        let merged = self.write_segment(
            &mut Encoder::new(),
            &docs,
            format!("seg-{generation}-merged.idx"),
        )?;
        let mut out: Vec<SegmentEntry> = entries
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !small.contains(i))
            .map(|(_, e)| e)
            .collect();
        out.push(merged);
        Ok(out)
    }

    /// Answers a query from the committed snapshot taken at its start.
    pub fn search_now(
        &self,
        request: &SearchRequest,
    ) -> Result<BackendSearchResponse, EmbeddedIndexError> {
        let started = Instant::now();
        let Some(snap) = self.snapshot() else {
            return Ok(BackendSearchResponse {
                status: IndexStatus::new(IndexState::Failed),
                hits: Vec::new(),
                complete: true,
            });
        };
        let status = snap.status();
        let cap = request.max_results.unwrap_or(1000);
        let matcher = verify::matcher(&request.query, request.case_insensitive)
            .map_err(|_| EmbeddedIndexError::BadQuery)?;
        let scope = request.path.as_deref();
        let in_scope = |p: &str| match scope {
            None => true,
            Some(s) => {
                p == s || (p.len() > s.len() && p.starts_with(s) && p.as_bytes()[s.len()] == b'/')
            }
        };
        // Candidates: files holding every query trigram, in every segment, minus deleted docs.
        let trigrams = trigram::query_trigrams(&request.query, request.case_insensitive);
        // Each candidate is one packed key: inverted prior, segment, doc. Sorting the keys orders
        // candidates best prior first, ties in index order (path order for a fresh build).
        let mut keys: Vec<u64> = Vec::new();
        for (si, seg) in snap.segments.iter().enumerate() {
            let ids: Vec<u32> = match &trigrams {
                None => (0..seg.n_docs()).collect(),
                Some(ts) => {
                    let mut order: Vec<u32> = ts.clone();
                    order.sort_by_key(|&t| seg.count(t));
                    let mut acc = seg.postings(order[0]);
                    for &t in &order[1..] {
                        if acc.is_empty() {
                            break;
                        }
                        let next = seg.postings(t);
                        acc = intersect(&acc, &next);
                    }
                    acc
                }
            };
            for id in ids {
                if snap.deleted[si].contains(&id) || !in_scope(seg.path(id)) {
                    continue;
                }
                let inverted = u64::from(255 - seg.prior(id));
                keys.push((inverted << 56) | ((si as u64) << 32) | u64::from(id));
            }
        }
        keys.sort_unstable();
        let candidates: Vec<(f64, &str)> = keys
            .iter()
            .map(|&k| {
                let (si, id) = (((k >> 32) & 0xFF_FFFF) as usize, k as u32);
                (
                    f64::from(snap.segments[si].prior(id)) / 255.0,
                    snap.segments[si].path(id),
                )
            })
            .collect();
        let deadline = request.deadline.map(|d| started + d);
        let n_threads = threads(&self.config).min(candidates.len().max(1));
        let mut hits: Vec<(usize, BackendHit)> = Vec::new();
        let mut complete = true;
        let mut at = 0;
        // Verify in rank order, a block at a time across threads, until the cap is reached.
        while at < candidates.len() {
            if request.signal.is_cancelled() || deadline.is_some_and(|d| Instant::now() >= d) {
                complete = false;
                break;
            }
            let block = (cap - hits.len()).clamp(16, 512) * n_threads;
            let end = (at + block).min(candidates.len());
            let slice = &candidates[at..end];
            let next = AtomicUsize::new(0);
            let found: Vec<Vec<(usize, BackendHit)>> = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..n_threads)
                    .map(|_| {
                        let (next, matcher) = (&next, &matcher);
                        scope.spawn(move || {
                            let mut searcher = verify::searcher();
                            let mut out = Vec::new();
                            loop {
                                let i = next.fetch_add(1, Ordering::Relaxed);
                                if i >= slice.len() {
                                    break;
                                }
                                let (prior, path) = slice[i];
                                let (found, grown) = verify::first_match(
                                    &mut searcher,
                                    matcher,
                                    &self.root.join(path),
                                );
                                // As in the literal search: a fresh buffer for every file, so
                                // binary detection stops where it would for a fresh searcher.
                                if grown {
                                    searcher = verify::searcher();
                                }
                                if let Some(m) = found {
                                    out.push((
                                        at + i,
                                        BackendHit {
                                            path: path.to_owned(),
                                            line: m.line,
                                            column: m.column,
                                            score: verify::score(prior, &m),
                                            snippet: m.snippet,
                                        },
                                    ));
                                }
                            }
                            out
                        })
                    })
                    .collect();
                handles.into_iter().filter_map(|h| h.join().ok()).collect()
            });
            hits.extend(found.into_iter().flatten());
            at = end;
            if hits.len() >= cap {
                break;
            }
        }
        hits.sort_by_key(|(rank, _)| *rank);
        if hits.len() > cap || (hits.len() == cap && at < candidates.len()) {
            complete = false;
        }
        hits.truncate(cap);
        let mut hits: Vec<BackendHit> = hits.into_iter().map(|(_, h)| h).collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        Ok(BackendSearchResponse {
            status,
            hits,
            complete,
        })
    }
}

fn intersect(a: &[u32], b: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(a.len().min(b.len()));
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out
}

impl RepositoryIndexBackend for EmbeddedIndex {
    fn capabilities(&self) -> BackendCapabilities {
        BackendCapabilities { semantic: false }
    }

    /// Re-reads the added and edited files from the worktree and commits them with the request's
    /// revision. The work runs on the calling task; hosts that must keep an executor thread free
    /// call it through `spawn_blocking` or from a thread of their own.
    fn update(&self, request: UpdateRequest) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            let upserts: Vec<String> = request
                .changes
                .into_iter()
                .filter_map(|c| match c {
                    Change::Add { path } | Change::Edit { path } => Some(path),
                    Change::Rename { .. } | Change::Delete { .. } => None,
                })
                .collect();
            self.apply(&upserts, &[], Some(&request.source_revision))?;
            Ok(())
        })
    }

    fn remove(&self, request: RemoveRequest) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            self.apply(&[], &request.paths, None)?;
            Ok(())
        })
    }

    fn search(
        &self,
        request: SearchRequest,
    ) -> BoxFuture<'_, Result<BackendSearchResponse, BackendError>> {
        Box::pin(async move { Ok(self.search_now(&request)?) })
    }

    fn status(&self) -> BoxFuture<'_, Result<IndexStatus, BackendError>> {
        Box::pin(async move { Ok(self.current_status()) })
    }

    fn dispose(&self) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async { Ok(()) })
    }
}
