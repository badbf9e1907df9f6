//! The persistent semantic store: per file its chunks (line ranges, content hashes), their int8
//! static vectors and BM25 postings, in immutable checksummed [`segment`](crate::segment) files
//! named by one manifest.
//!
//! - **Commit.** A catch-up writes a new segment under a fresh name (write, fsync), then replaces
//!   `MANIFEST` (write a temporary file, fsync, rename, fsync the directory): a process killed at
//!   any moment leaves the previous commit whole. Files no manifest names are deleted after the
//!   commit.
//! - **Damage.** The manifest carries a crc32 of its body and one per segment; anything that does
//!   not match is [`StoreError::Corrupt`], which the next catch-up answers by a rebuild.
//! - **Freshness.** The store attests the revision of the trigram index's snapshot it caught up to.
//!   [`Store::catch_up`] diffs the store's per-file versions with that snapshot's, so it never walks
//!   the worktree, and embeds only chunks whose content hash it does not hold yet.
//! - **IDF.** Static vectors weight each token by its inverse document frequency over the chunks
//!   (`Weights::idf_dense`). The table is frozen at a full build (from every chunk of up to
//!   [`IDF_SAMPLE_FILES`] files, evenly spread), so that a file's vectors never depend on other
//!   files; a full build happens again when the live chunks grow or shrink past twice (or half)
//!   the count the table was made over.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::chunk::{chunk_file, searched_text};
use crate::rank::{Weights, combine, quantize};
use crate::segment::{
    ChunkData, DEFINITION, FILE_NAME, FileData, HASH_BYTES, Segment, encode, stored_hash,
};
use crate::statics::StaticModel;
use crate::text::sub_tokens;

/// The manifest's name in the store directory.
const MANIFEST: &str = "MANIFEST";
/// The manifest format this version writes and reads. It also names the chunker and the
/// definition names behind a store's chunks: a store built by another is rebuilt, not mixed.
/// 2: tree-sitter chunks, definition names from the syntax tree.
/// 3: a front-coded dictionary and 16-byte content hashes (segment magic `RSSEMSG2`).
/// 4: a chunk is searched under its file's path (`crate::searched_text`): BM25 terms, static
/// vectors and content hashes read it.
const FORMAT: u32 = 4;
/// The IDF table is computed over the chunks of at most this many files.
pub const IDF_SAMPLE_FILES: usize = 4000;
/// A build or an update writes a segment each time this many chunks have accumulated, which
/// bounds its memory (small in unit tests, so that they cross the bound).
const CHUNKS_PER_SEGMENT: usize = if cfg!(test) { 40 } else { 120_000 };
/// Files read, chunked and embedded between two checks of the pending segment's size.
const FILES_PER_BATCH: usize = if cfg!(test) { 8 } else { 2000 };
/// Updates merge the small segments once there are more than this many.
const MAX_SMALL_SEGMENTS: usize = 8;
/// A segment under this many chunks is small.
const SMALL_SEGMENT: u32 = 20_000;
/// Files larger than this are kept without chunks: generated tables and blobs, not prose or code
/// anyone describes.
pub const MAX_FILE_BYTES: usize = 1 << 20;
/// How much the trigram index's path prior (1 for ordinary source, less for tests, docs and
/// vendored code) weighs: a hit's score is `hybrid · (1 − PRIOR_WEIGHT + PRIOR_WEIGHT · prior)`.
pub const PRIOR_WEIGHT: f32 = 0.2;
/// A semantic answer holds at most this many files: ranking by meaning has no match set, so the
/// answer is the head of the ranking.
pub const MAX_ANSWER_FILES: usize = 100;
/// Hits scoring under this share of the best hit's score are left out of the answer.
pub const RELATIVE_FLOOR: f32 = 0.5;
/// Snippets are cut (on a character boundary) at this many bytes when stored.
const SNIPPET_BYTES: usize = 512;
/// A manifest larger than this is damage: its size is checked before it is read, so a damaged
/// one of any size costs at most twice this much memory (its bytes and its body). A commit never
/// writes a larger one.
const MAX_MANIFEST_BYTES: u64 = 16 << 20;
/// An IDF table holds one f32 per token of the static model's vocabulary.
const MAX_IDF_BYTES: u64 = 4 * crate::model_file::MAX_VOCAB as u64;

/// Why the store could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file of the store could not be read or written.
    #[error("semantic store I/O on {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The manifest or a segment does not match its checksum or its layout.
    #[error("the semantic store is damaged")]
    Corrupt,
    /// Another writer held the store past the deadline.
    #[error("another writer holds the semantic store")]
    Busy,
}

impl StoreError {
    pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
        move |source| StoreError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// One file of the trigram index's snapshot, as the store keeps pace with it.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceFile {
    /// Repo-relative path.
    pub path: String,
    /// Changes whenever the trigram index read the file again (a digest of its stamp).
    pub version: u64,
    /// The trigram index's path prior, in `(0, 1]`.
    pub prior: f32,
}

/// What [`Store::catch_up`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CatchUp {
    /// Whether everything was rebuilt (no store, damage, another model, the IDF rule).
    pub rebuilt: bool,
    /// Files read and chunked.
    pub files_read: usize,
    /// Files dropped.
    pub removed: usize,
    /// Chunks written.
    pub chunks: usize,
    /// Chunks whose static vector was computed (the others' content hash was already held).
    pub embedded: usize,
}

/// A ranked file.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreHit {
    /// Repo-relative path.
    pub path: String,
    /// The best chunk's first non-blank line, 1-based.
    pub line: u64,
    /// That line's text.
    pub snippet: String,
    /// The score, in `[0, 1]`.
    pub score: f32,
    /// The first bytes of the best chunk's [`crate::Chunk::hash`] when the store read it: a
    /// re-rank finds the chunk's text by it, among the chunks of the file as it reads now.
    pub chunk_hash: [u8; HASH_BYTES],
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct SegmentEntry {
    file: String,
    crc32: u32,
    chunks: u32,
    /// File ids of this segment that later commits replaced or removed.
    deleted: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Manifest {
    format: u32,
    generation: u64,
    revision: String,
    /// The static model's sha256: another model means another vector space, so a rebuild.
    model: String,
    /// The IDF table's file and crc32, and how many chunks it was computed over.
    idf_file: String,
    idf_crc32: u32,
    idf_chunks: u64,
    segments: Vec<SegmentEntry>,
}

#[derive(Serialize, Deserialize)]
struct Envelope {
    crc32: u32,
    body: String,
}

/// A committed version of the store, mapped.
pub struct Store {
    dir: PathBuf,
    manifest: Manifest,
    segments: Vec<Arc<Segment>>,
    /// Per segment, per file: whether a later commit replaced or removed it.
    deleted: Vec<Vec<bool>>,
    idf: Vec<f32>,
    live_chunks: usize,
    /// Mean BM25 length of the live chunks.
    avg_length: f32,
    /// Per segment: whether no later commit replaced or removed any of its files (a query then
    /// checks no chunk's liveness there).
    untouched: Vec<bool>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.dir)
            .field("revision", &self.manifest.revision)
            .field("generation", &self.manifest.generation)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Opens the committed store in `dir`: `Ok(None)` when there is none, [`StoreError::Corrupt`]
    /// when it is damaged. Every segment is checked against its crc32.
    pub fn open(dir: &Path) -> Result<Option<Store>, StoreError> {
        Self::open_reusing(dir, None)
    }

    fn open_reusing(dir: &Path, previous: Option<&Store>) -> Result<Option<Store>, StoreError> {
        // A concurrent commit may delete a segment between reading the manifest and mapping it:
        // read the newer manifest and try again.
        for _ in 0..50 {
            let Some(manifest) = read_manifest(dir)? else {
                return Ok(None);
            };
            match Self::load(dir, manifest, previous) {
                Err(StoreError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound =>
                {
                    std::thread::sleep(Duration::from_millis(2));
                }
                other => return other.map(Some),
            }
        }
        Err(StoreError::Corrupt)
    }

    fn load(dir: &Path, manifest: Manifest, previous: Option<&Store>) -> Result<Store, StoreError> {
        // The manifest names files of this directory only.
        let mut named =
            std::iter::once(&manifest.idf_file).chain(manifest.segments.iter().map(|e| &e.file));
        if !named.all(|n| is_plain_name(n)) {
            return Err(StoreError::Corrupt);
        }
        let idf_path = dir.join(&manifest.idf_file);
        let idf_bytes = read_store_file(&idf_path, MAX_IDF_BYTES)?;
        if crc32fast::hash(&idf_bytes) != manifest.idf_crc32 || idf_bytes.len() % 4 != 0 {
            return Err(StoreError::Corrupt);
        }
        let idf: Vec<f32> = idf_bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let mut segments = Vec::new();
        let mut deleted = Vec::new();
        let (mut live_chunks, mut total_length) = (0usize, 0u64);
        for entry in &manifest.segments {
            let reused = previous.and_then(|p| {
                p.manifest
                    .segments
                    .iter()
                    .position(|e| e.file == entry.file && e.crc32 == entry.crc32)
                    .map(|i| p.segments[i].clone())
            });
            let seg = match reused {
                Some(s) => s,
                None => Arc::new(Segment::open(&dir.join(&entry.file), entry.crc32)?),
            };
            if seg.n_chunks != entry.chunks {
                return Err(StoreError::Corrupt);
            }
            let mut dead = vec![false; seg.n_files as usize];
            for &f in &entry.deleted {
                *dead.get_mut(f as usize).ok_or(StoreError::Corrupt)? = true;
            }
            for c in 0..seg.n_chunks {
                let length = seg.chunk_length(c);
                if !dead
                    .get(seg.chunk_file(c) as usize)
                    .copied()
                    .unwrap_or(true)
                {
                    live_chunks += 1;
                    total_length += u64::from(length);
                }
            }
            segments.push(seg);
            deleted.push(dead);
        }
        let untouched = manifest
            .segments
            .iter()
            .map(|e| e.deleted.is_empty())
            .collect();
        Ok(Store {
            dir: dir.to_path_buf(),
            avg_length: if live_chunks == 0 {
                1.0
            } else {
                (total_length as f32 / live_chunks as f32).max(1.0)
            },
            manifest,
            segments,
            deleted,
            idf,
            live_chunks,
            untouched,
        })
    }

    /// The revision this version attests: the trigram index's it caught up to.
    pub fn revision(&self) -> &str {
        &self.manifest.revision
    }

    /// The sha256 of the static model that made this version's vectors.
    pub fn model(&self) -> &str {
        &self.manifest.model
    }

    /// The commit's generation (1 for the first).
    pub fn generation(&self) -> u64 {
        self.manifest.generation
    }

    /// How many chunks are live.
    pub fn live_chunks(&self) -> usize {
        self.live_chunks
    }

    /// The bytes of the committed files (manifest, IDF table, segments).
    pub fn disk_bytes(&self) -> u64 {
        let mut names = vec![MANIFEST.to_owned(), self.manifest.idf_file.clone()];
        names.extend(self.manifest.segments.iter().map(|s| s.file.clone()));
        names
            .iter()
            .filter_map(|n| fs::metadata(self.dir.join(n)).ok())
            .map(|m| m.len())
            .sum()
    }

    /// Whether the committed manifest is still the one this version was loaded from.
    pub fn is_current(&self) -> bool {
        matches!(read_manifest(&self.dir), Ok(Some(m)) if m == self.manifest)
    }

    /// Every live file's path with the content hashes of its chunks, in chunk order: what a
    /// pass that computes something for every chunk (the re-rank's kept vectors) reads.
    pub fn live_chunk_hashes(&self) -> Vec<(String, Vec<[u8; HASH_BYTES]>)> {
        self.live_files()
            .into_iter()
            .map(|(si, f)| {
                let seg = &self.segments[si];
                let (first, count, _) = seg.file_chunks(f);
                let hashes = (first..first + count)
                    .filter_map(|c| seg.chunk_hash(c).try_into().ok())
                    .collect();
                (seg.file(f).path.to_owned(), hashes)
            })
            .collect()
    }

    /// Every live file: (segment, file id).
    fn live_files(&self) -> Vec<(usize, u32)> {
        let mut out = Vec::new();
        for (si, seg) in self.segments.iter().enumerate() {
            out.extend(
                (0..seg.n_files)
                    .filter(|&f| !self.deleted[si][f as usize])
                    .map(|f| (si, f)),
            );
        }
        out
    }

    /// Brings the store in `dir` to `revision`, whose files (from the trigram index's committed
    /// snapshot) are `files`; `read` gives a file's text (`None` when it is gone or unreadable).
    /// Builds from scratch when there is no store, it is damaged, it was made with another model,
    /// or the IDF rule says so. Takes the store's writer lock (waiting until `deadline`), so that
    /// processes sharing the directory commit one at a time.
    pub fn catch_up(
        dir: &Path,
        statics: &StaticModel,
        model: &str,
        revision: &str,
        files: &[SourceFile],
        read: &(dyn Fn(&str) -> Option<String> + Sync),
        deadline: Option<Instant>,
    ) -> Result<(Store, CatchUp), StoreError> {
        fs::create_dir_all(dir).map_err(StoreError::io(dir))?;
        let _lock = lock(dir, deadline)?;
        let mut current = match Self::open(dir) {
            Ok(Some(s))
                if s.manifest.model == model
                    && s.manifest.format == FORMAT
                    && s.idf.len() == statics.vocab_size()
                    && s.segments.iter().all(|seg| seg.dim == statics.dim()) =>
            {
                Some(s)
            }
            _ => None,
        };
        if let Some(s) = current.take_if(|s| s.manifest.revision == revision) {
            // Another process caught up while this one waited for the lock.
            return Ok((s, CatchUp::default()));
        }
        let grown = current.as_ref().is_some_and(|s| {
            let base = s.manifest.idf_chunks as usize + 1000;
            s.live_chunks > 2 * base || 2 * (s.live_chunks + 1000) < base
        });
        let current = current.filter(|_| !grown);
        let stats = match &current {
            Some(s) => s.update(statics, revision, files, read)?,
            None => build(dir, statics, model, revision, files, read)?,
        };
        collect_garbage(dir);
        // The segments this commit kept are already mapped and checked: only the new one is.
        let store = Self::open_reusing(dir, current.as_ref())?.ok_or(StoreError::Corrupt)?;
        Ok((store, stats))
    }

    /// Applies the difference between this version and `files`, reusing vectors by content hash.
    fn update(
        &self,
        statics: &StaticModel,
        revision: &str,
        files: &[SourceFile],
        read: &(dyn Fn(&str) -> Option<String> + Sync),
    ) -> Result<CatchUp, StoreError> {
        let mut held: HashMap<&str, (usize, u32, u64)> = HashMap::new();
        for (si, f) in self.live_files() {
            let row = self.segments[si].file(f);
            held.insert(row.path, (si, f, row.version));
        }
        let mut manifest = self.manifest.clone();
        let mut stats = CatchUp::default();
        let mut upserts: Vec<&SourceFile> = Vec::new();
        let wanted: HashSet<&str> = files.iter().map(|f| f.path.as_str()).collect();
        for f in files {
            match held.get(f.path.as_str()) {
                Some(&(_, _, v)) if v == f.version => {}
                Some(&(si, id, _)) => {
                    manifest.segments[si].deleted.push(id);
                    upserts.push(f);
                }
                None => upserts.push(f),
            }
        }
        for (path, &(si, id, _)) in &held {
            if !wanted.contains(path) {
                manifest.segments[si].deleted.push(id);
                stats.removed += 1;
            }
        }
        // Too many small segments: their live files are read again into the new one, their
        // vectors reused by hash. Small beside the store too (under half of all its chunks): a
        // repository of under SMALL_SEGMENT chunks is one such segment after its build, and
        // reading it again whole every eighth update would cost a one-file update a full build.
        let total: u32 = self.segments.iter().map(|s| s.n_chunks).sum();
        let small: Vec<usize> = (0..self.segments.len())
            .filter(|&si| {
                let n = self.segments[si].n_chunks;
                // A segment without chunks (binary or oversized files) is always small.
                n < SMALL_SEGMENT && (n == 0 || n < total / 2)
            })
            .collect();
        let mut merged: HashSet<usize> = HashSet::new();
        let extra: Vec<SourceFile> = if small.len() >= MAX_SMALL_SEGMENTS && !upserts.is_empty() {
            let by_path: HashMap<&str, &SourceFile> =
                files.iter().map(|f| (f.path.as_str(), f)).collect();
            let pending: HashSet<&str> = upserts.iter().map(|f| f.path.as_str()).collect();
            let mut more = Vec::new();
            for &si in &small {
                merged.insert(si);
                for f in 0..self.segments[si].n_files {
                    let row = self.segments[si].file(f);
                    let dead = manifest.segments[si].deleted.contains(&f);
                    if !dead
                        && !pending.contains(row.path)
                        && let Some(src) = by_path.get(row.path)
                    {
                        more.push((*src).clone());
                    }
                }
            }
            more
        } else {
            Vec::new()
        };
        upserts.extend(extra.iter());
        if !upserts.is_empty() {
            let known = self.vectors_by_hash(&chunk_hashes(&upserts, read));
            let mut caches = token_caches(statics);
            let entries = write_segments(
                &self.dir,
                manifest.generation + 1,
                statics,
                &self.idf,
                &upserts,
                read,
                &known,
                &mut caches,
                &mut stats,
            )?;
            // The files of merged segments were read again, but they are not this update's.
            stats.files_read = stats.files_read.saturating_sub(extra.len());
            manifest.segments = manifest
                .segments
                .into_iter()
                .enumerate()
                .filter(|(si, _)| !merged.contains(si))
                .map(|(_, e)| e)
                .collect();
            manifest.segments.extend(entries);
        }
        for s in &mut manifest.segments {
            s.deleted.sort_unstable();
            s.deleted.dedup();
        }
        manifest.generation += 1;
        manifest.revision = revision.to_owned();
        commit_manifest(&self.dir, &manifest)?;
        Ok(stats)
    }

    /// Where the store holds a chunk of each content hash in `wanted`.
    fn vectors_by_hash(
        &self,
        wanted: &HashSet<[u8; HASH_BYTES]>,
    ) -> HashMap<[u8; HASH_BYTES], (Arc<Segment>, u32)> {
        let mut known = HashMap::new();
        for seg in &self.segments {
            for c in 0..seg.n_chunks {
                if let Some(h) = wanted.get(seg.chunk_hash(c)) {
                    known.insert(*h, (seg.clone(), c));
                }
            }
        }
        known
    }

    /// The best files for `query`, at most `limit` (and at most [`MAX_ANSWER_FILES`]), among the
    /// paths `keep` accepts: BM25 over identifier sub-tokens, the IDF-weighted static cosine,
    /// definition and file-name boosts combined by `weights` (see [`crate::rank::Weights`]),
    /// times the path prior; one hit per file (its best chunk); ties in path order.
    pub fn search(
        &self,
        statics: &StaticModel,
        query: &str,
        weights: &Weights,
        keep: &dyn Fn(&str) -> bool,
        limit: usize,
    ) -> Vec<StoreHit> {
        let mut terms = sub_tokens(query);
        terms.sort();
        terms.dedup();
        let qv = query_vector(statics, &self.idf, self.live_chunks, query);
        let (q, qscale) = quantize(&qv);
        // The lexical scores are computed on this thread while the others scan.
        let (cosines, cos_top, lexical) = self.cosines(&q, qscale, || self.lexical(&terms));
        let Lexical {
            bm25,
            defs,
            names,
            top: top_bm25,
        } = lexical;
        let share = |k: u16| {
            if terms.is_empty() {
                0.0
            } else {
                f32::from(k) / terms.len() as f32
            }
        };
        // Every live file's best chunk, scored; paths and the scope are looked at only for the
        // files whose score can reach the answer.
        let mut best: Vec<(f32, usize, u32, u32)> = Vec::new();
        for (si, seg) in self.segments.iter().enumerate() {
            for f in 0..seg.n_files {
                if self.deleted[si][f as usize] {
                    continue;
                }
                let (first, chunks, prior) = seg.file_chunks(f);
                let name = share(names[si].get(f as usize).copied().unwrap_or(0));
                let mut top: Option<(f32, u32)> = None;
                for c in first..first + chunks {
                    let lexical = if top_bm25 > 0.0 {
                        bm25[si][c as usize] / top_bm25
                    } else {
                        0.0
                    };
                    let cos = cosines[si][c as usize];
                    let cosine = if weights.relative_dense && cos_top > 0.0 {
                        cos / cos_top
                    } else {
                        cos
                    };
                    let definition = share(defs[si].get(c as usize).copied().unwrap_or(0));
                    let s = combine(weights, lexical, cosine, definition, name);
                    if top.is_none_or(|(b, _)| s > b) {
                        top = Some((s, c));
                    }
                }
                if let Some((s, c)) = top {
                    let prior = prior.clamp(0.0, 1.0);
                    let score = (s * (1.0 - PRIOR_WEIGHT + PRIOR_WEIGHT * prior)).clamp(0.0, 1.0);
                    if score > 0.0 {
                        best.push((score, si, f, c));
                    }
                }
            }
        }
        let path_of = |&(_, si, f, _): &(f32, usize, u32, u32)| self.segments[si].file(f).path;
        let kept = best_kept(
            &mut best,
            limit.min(MAX_ANSWER_FILES),
            |b| b.0,
            path_of,
            keep,
        );
        let floor = kept.first().map_or(0.0, |b| b.0 * RELATIVE_FLOOR);
        kept.into_iter()
            .take_while(|b| b.0 >= floor)
            .map(|(score, si, f, c)| {
                let seg = &self.segments[si];
                let chunk = seg.chunk(c);
                let mut chunk_hash = [0; HASH_BYTES];
                chunk_hash.copy_from_slice(seg.chunk_hash(c));
                StoreHit {
                    path: seg.file(f).path.to_owned(),
                    line: u64::from(chunk.snippet_line),
                    snippet: chunk.snippet.to_owned(),
                    score,
                    chunk_hash,
                }
            })
            .collect()
    }

    /// BM25 over the query's `terms`, per segment and chunk; definition-name matches per chunk and
    /// file-name matches per file (allocated only for a segment with a match).
    fn lexical(&self, terms: &[String]) -> Lexical {
        let whole = &self.untouched;
        let n = self.live_chunks.max(1) as f32;
        let live_chunk = |si: usize, seg: &Segment, c: u32| {
            whole[si] || !self.deleted[si][seg.chunk_file(c) as usize]
        };
        // Per segment, per chunk: the BM25 score and the definition matches; per file: name
        // matches (the last two allocated only for a segment that has a match).
        let mut bm25: Vec<Vec<f32>> = self
            .segments
            .iter()
            .map(|s| vec![0.0; s.n_chunks as usize])
            .collect();
        let mut defs: Vec<Vec<u16>> = vec![Vec::new(); self.segments.len()];
        let mut names: Vec<Vec<u16>> = vec![Vec::new(); self.segments.len()];
        let count = |slot: &mut Vec<u16>, size: u32, id: u32| {
            if slot.is_empty() {
                slot.resize(size as usize, 0);
            }
            if let Some(x) = slot.get_mut(id as usize) {
                *x = x.saturating_add(1);
            }
        };
        for t in terms {
            // A segment no commit touched is read in place; another's list is filtered first.
            let lists: Vec<Postings> = self
                .segments
                .iter()
                .enumerate()
                .map(|(si, seg)| match seg.lookup(t) {
                    Some(list) if whole[si] => Postings::InPlace(list),
                    Some(_) => {
                        let mut list = seg.postings(t);
                        list.retain(|&(c, _)| live_chunk(si, seg, c));
                        Postings::Listed(list)
                    }
                    None => Postings::Listed(Vec::new()),
                })
                .collect();
            let df: usize = lists
                .iter()
                .map(|list| match list {
                    Postings::InPlace((_, n)) => *n as usize,
                    Postings::Listed(l) => l.len(),
                })
                .sum();
            if df > 0 {
                let idf = (1.0 + (n - df as f32 + 0.5) / (df as f32 + 0.5)).ln();
                for (si, list) in lists.into_iter().enumerate() {
                    let seg = &self.segments[si];
                    let lengths = seg.lengths();
                    let scores = &mut bm25[si];
                    let mut add = |c: u32, tf: u32| {
                        if let (Some(x), Some(&len)) =
                            (scores.get_mut(c as usize), lengths.get(c as usize))
                        {
                            *x += crate::bm25::term_score(idf, tf as f32, len, self.avg_length);
                        }
                    };
                    match list {
                        Postings::InPlace(list) => seg.each_posting(list, &mut add),
                        Postings::Listed(l) => l.into_iter().for_each(|(c, tf)| add(c, tf)),
                    }
                }
            }
            for (si, seg) in self.segments.iter().enumerate() {
                for (c, _) in seg.postings(&format!("{DEFINITION}{t}")) {
                    count(&mut defs[si], seg.n_chunks, c);
                }
                for (f, _) in seg.postings(&format!("{FILE_NAME}{t}")) {
                    count(&mut names[si], seg.n_files, f);
                }
            }
        }
        let top = bm25.iter().flatten().copied().fold(0.0f32, f32::max);
        Lexical {
            bm25,
            defs,
            names,
            top,
        }
    }

    /// The cosine of every chunk with the quantized query `q` (per segment, per chunk), the
    /// largest among live chunks, and what `beside` returns. The matrices are cut into blocks
    /// that the cores take in turn; this thread runs `beside` first, then takes blocks too.
    fn cosines<R>(
        &self,
        q: &[i8],
        qscale: f32,
        beside: impl FnOnce() -> R,
    ) -> (Vec<Vec<f32>>, f32, R) {
        const BLOCK: usize = 16_384;
        let q16: Vec<i16> = q.iter().map(|&x| i16::from(x)).collect();
        let mut out: Vec<Vec<f32>> = self
            .segments
            .iter()
            .map(|s| vec![0.0; s.n_chunks as usize])
            .collect();
        let top = {
            let mut jobs = Vec::new();
            for (si, (seg, cos)) in self.segments.iter().zip(out.iter_mut()).enumerate() {
                for (b, slot) in cos.chunks_mut(BLOCK).enumerate() {
                    jobs.push((si, seg, (b * BLOCK) as u32, slot));
                }
            }
            let jobs = std::sync::Mutex::new(jobs);
            let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
            let work = || {
                let mut top = 0.0f32;
                loop {
                    let job = jobs.lock().ok().and_then(|mut j| j.pop());
                    let Some((si, seg, base, slot)) = job else {
                        break;
                    };
                    let start = base as usize * seg.dim;
                    let rows = &seg.dense()[start..start + slot.len() * seg.dim];
                    scan(slot, rows, seg.dim, &q16, qscale, &|c| seg.scale(base + c));
                    for (c, &x) in slot.iter().enumerate() {
                        let live = || {
                            let file = seg.chunk_file(base + c as u32);
                            !self.deleted[si][file as usize]
                        };
                        if x > top && (self.untouched[si] || live()) {
                            top = x;
                        }
                    }
                }
                top
            };
            std::thread::scope(|s| {
                let workers: Vec<_> = (1..threads).map(|_| s.spawn(work)).collect();
                let beside = beside();
                let mine = work();
                let top = workers
                    .into_iter()
                    .map(|w| w.join().unwrap_or(0.0))
                    .fold(mine, f32::max);
                (top, beside)
            })
        };
        (out, top.0, top.1)
    }
}

/// The first `wanted` entries of `all` whose path `keep` accepts, by score (descending), equal
/// scores in path order. Only the best block of scores is sorted (one more block at a time when
/// `keep` refuses too many): a query scores every file, and the answer needs a few.
fn best_kept<'p, E: Copy>(
    all: &mut [E],
    wanted: usize,
    score: impl Fn(&E) -> f32,
    path: impl Fn(&E) -> &'p str,
    keep: &dyn Fn(&str) -> bool,
) -> Vec<E> {
    let mut kept = Vec::new();
    let mut rest = all;
    while kept.len() < wanted && !rest.is_empty() {
        let all = std::mem::take(&mut rest);
        let block = all.len().min(4 * wanted.max(64));
        if block < all.len() {
            all.select_nth_unstable_by(block - 1, |a, b| score(b).total_cmp(&score(a)));
        }
        // Scores equal to the block's last one may lie past it: they join the block, so that
        // equal scores are put in path order together.
        let cut = score(&all[block - 1]);
        let mut end = block;
        for i in block..all.len() {
            if score(&all[i]) == cut {
                all.swap(i, end);
                end += 1;
            }
        }
        let (head, tail) = all.split_at_mut(end);
        head.sort_by(|a, b| {
            score(b)
                .total_cmp(&score(a))
                .then_with(|| search_order(path(a), path(b)))
        });
        kept.extend(
            head.iter()
                .filter(|e| keep(path(e)))
                .take(wanted - kept.len())
                .copied(),
        );
        rest = tail;
    }
    kept
}

/// A term's postings in one segment.
enum Postings {
    /// Where they start in the segment and how many (every one live).
    InPlace((usize, u32)),
    /// The live ones, decoded.
    Listed(Vec<(u32, u32)>),
}

/// The lexical side of a query: see [`Store::lexical`].
struct Lexical {
    bm25: Vec<Vec<f32>>,
    defs: Vec<Vec<u16>>,
    names: Vec<Vec<u16>>,
    top: f32,
}

/// Paths compared component by component, as the trigram index orders them.
fn search_order(a: &str, b: &str) -> std::cmp::Ordering {
    a.split('/').cmp(b.split('/'))
}

/// Writes into `out` the cosine of each row of `rows` (rows of `dim` int8 values, row `c` with
/// scale `scale(c)`) with the query `q16` (its int8 values widened), clamped to `[0, 1]`. The
/// loop is compiled twice: for the baseline x86-64 (SSE2) and for AVX2, chosen per call by what
/// the CPU has; both compute the same integers, so the same cosines.
fn scan(
    out: &mut [f32],
    rows: &[u8],
    dim: usize,
    q16: &[i16],
    qscale: f32,
    scale: &dyn Fn(u32) -> f32,
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512bw") {
        // SAFETY: `scan_avx512` needs AVX-512 BW, which the CPU was just found to have.
        #[allow(unsafe_code)]
        return unsafe { scan_avx512(out, rows, dim, q16, qscale, scale) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: `scan_avx2` needs AVX2, which the CPU was just found to have.
        #[allow(unsafe_code)]
        return unsafe { scan_avx2(out, rows, dim, q16, qscale, scale) };
    }
    scan_rows(out, rows, dim, q16, qscale, scale)
}

/// [`scan_rows`] with AVX2's widening multiply-add: sixteen int8 values of a row widened to
/// i16, multiplied by the query's and summed in pairs into eight i32 lanes per instruction.
/// Exact integer arithmetic, as in the portable loop.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn scan_avx2(
    out: &mut [f32],
    rows: &[u8],
    dim: usize,
    q16: &[i16],
    qscale: f32,
    scale: &dyn Fn(u32) -> f32,
) {
    use std::arch::x86_64::{
        __m128i, __m256i, _mm_add_epi32, _mm_cvtsi128_si32, _mm_loadu_si128, _mm_shuffle_epi32,
        _mm256_add_epi32, _mm256_castsi256_si128, _mm256_cvtepi8_epi16, _mm256_extracti128_si256,
        _mm256_loadu_si256, _mm256_madd_epi16, _mm256_setzero_si256,
    };
    // The widest multiple of 16 both the row and the query hold.
    let main = dim.min(q16.len()) / 16 * 16;
    for (c, (row, slot)) in rows.chunks_exact(dim).zip(out.iter_mut()).enumerate() {
        let mut acc = _mm256_setzero_si256();
        let mut i = 0;
        while i + 16 <= main {
            // SAFETY: `i + 16 <= main <= dim = row.len()` and `main <= q16.len()`, so both
            // unaligned loads read inside their slices.
            #[allow(unsafe_code)]
            let (r, q) = unsafe {
                (
                    _mm_loadu_si128(row.as_ptr().add(i).cast::<__m128i>()),
                    _mm256_loadu_si256(q16.as_ptr().add(i).cast::<__m256i>()),
                )
            };
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_cvtepi8_epi16(r), q));
            i += 16;
        }
        let half = _mm_add_epi32(
            _mm256_castsi256_si128(acc),
            _mm256_extracti128_si256(acc, 1),
        );
        let pairs = _mm_add_epi32(half, _mm_shuffle_epi32(half, 0b01_00_11_10));
        let one = _mm_add_epi32(pairs, _mm_shuffle_epi32(pairs, 0b10_11_00_01));
        let mut dot = _mm_cvtsi128_si32(one);
        for (&a, &b) in row[i..].iter().zip(&q16[i.min(q16.len())..]) {
            dot += i32::from(a as i8) * i32::from(b);
        }
        *slot = (dot as f32 * qscale * scale(c as u32)).clamp(0.0, 1.0);
    }
}

/// [`scan_avx2`] twice as wide: 32 int8 values per widening multiply-add.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512bw")]
fn scan_avx512(
    out: &mut [f32],
    rows: &[u8],
    dim: usize,
    q16: &[i16],
    qscale: f32,
    scale: &dyn Fn(u32) -> f32,
) {
    use std::arch::x86_64::{
        __m256i, __m512i, _mm256_loadu_si256, _mm512_add_epi32, _mm512_cvtepi8_epi16,
        _mm512_loadu_si512, _mm512_madd_epi16, _mm512_reduce_add_epi32, _mm512_setzero_si512,
    };
    // The widest multiple of 32 both the row and the query hold.
    let main = dim.min(q16.len()) / 32 * 32;
    for (c, (row, slot)) in rows.chunks_exact(dim).zip(out.iter_mut()).enumerate() {
        let mut acc = _mm512_setzero_si512();
        let mut i = 0;
        while i + 32 <= main {
            // SAFETY: `i + 32 <= main <= dim = row.len()` and `main <= q16.len()`, so both
            // unaligned loads read inside their slices.
            #[allow(unsafe_code)]
            let (r, q) = unsafe {
                (
                    _mm256_loadu_si256(row.as_ptr().add(i).cast::<__m256i>()),
                    _mm512_loadu_si512(q16.as_ptr().add(i).cast::<__m512i>()),
                )
            };
            acc = _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_cvtepi8_epi16(r), q));
            i += 32;
        }
        let mut dot = _mm512_reduce_add_epi32(acc);
        for (&a, &b) in row[i..].iter().zip(&q16[i.min(q16.len())..]) {
            dot += i32::from(a as i8) * i32::from(b);
        }
        *slot = (dot as f32 * qscale * scale(c as u32)).clamp(0.0, 1.0);
    }
}

/// The portable scan: sixteen i32 lanes, which the compiler vectorises for the baseline.
fn scan_rows(
    out: &mut [f32],
    rows: &[u8],
    dim: usize,
    q16: &[i16],
    qscale: f32,
    scale: &dyn Fn(u32) -> f32,
) {
    // The widest multiple of 16 both the row and the query hold; the rest one by one, as the
    // SIMD kernels do.
    let main = dim.min(q16.len()) / 16 * 16;
    for (c, (row, slot)) in rows.chunks_exact(dim).zip(out.iter_mut()).enumerate() {
        let mut lanes = [0i32; 16];
        let (row_main, row_tail) = row.split_at(main);
        let (q_main, q_tail) = q16.split_at(main);
        for (r, qq) in row_main.chunks_exact(16).zip(q_main.chunks_exact(16)) {
            for k in 0..16 {
                lanes[k] += i32::from(r[k] as i8) * i32::from(qq[k]);
            }
        }
        let mut dot: i32 = lanes.iter().sum();
        for (&a, &b) in row_tail.iter().zip(q_tail) {
            dot += i32::from(a as i8) * i32::from(b);
        }
        *slot = (dot as f32 * qscale * scale(c as u32)).clamp(0.0, 1.0);
    }
}

/// The IDF-weighted static vector of a text, as the chunks' vectors were made.
fn query_vector(statics: &StaticModel, idf: &[f32], chunks: usize, text: &str) -> Vec<f32> {
    let top = (1.0 + (chunks as f32 + 0.5) / 0.5).ln();
    statics.embed_ids(&statics.token_ids(text), |id| {
        idf.get(id as usize).copied().unwrap_or(top)
    })
}

/// Token ids of a text, piece by piece between whitespace, each piece cached: the tokenizer's
/// normaliser, pre-tokeniser and word-piece model never look across whitespace, so the ids are
/// the tokenizer's own (`cached_token_ids_are_the_tokenizers`), and code repeats its pieces.
pub(crate) struct TokenCache<'m> {
    statics: &'m StaticModel,
    pieces: HashMap<String, Vec<u32>>,
}

impl<'m> TokenCache<'m> {
    /// Pieces kept before the cache is emptied, which bounds its memory.
    const MAX_PIECES: usize = 400_000;

    pub(crate) fn new(statics: &'m StaticModel) -> Self {
        Self {
            statics,
            pieces: HashMap::new(),
        }
    }

    pub(crate) fn ids(&mut self, text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        for piece in text.split_whitespace() {
            if !piece.bytes().all(|b| b.is_ascii_graphic()) {
                self.extend(piece, &mut out);
                continue;
            }
            // In ASCII the tokenizer's pre-tokeniser makes each punctuation character a word of
            // its own, and `for_embedding` only looks inside runs of letters and digits: so a
            // piece's ids are those of its runs and punctuation bytes, each tokenised alone.
            // Code repeats identifiers far more often than it repeats whole pieces
            // (`f->f_op->read(f,`), so these are what the cache keeps.
            let bytes = piece.as_bytes();
            let mut start = 0;
            while start < bytes.len() {
                let end = if bytes[start].is_ascii_alphanumeric() {
                    bytes[start..]
                        .iter()
                        .position(|b| !b.is_ascii_alphanumeric())
                        .map_or(bytes.len(), |n| start + n)
                } else {
                    start + 1
                };
                self.extend(&piece[start..end], &mut out);
                start = end;
            }
        }
        out
    }

    /// Appends the ids of `key`, a piece the tokenizer reads without looking beyond it.
    fn extend(&mut self, key: &str, out: &mut Vec<u32>) {
        if let Some(ids) = self.pieces.get(key) {
            out.extend_from_slice(ids);
            return;
        }
        let ids = self.statics.token_ids(key);
        out.extend_from_slice(&ids);
        if self.pieces.len() >= Self::MAX_PIECES {
            self.pieces.clear();
        }
        self.pieces.insert(key.to_owned(), ids);
    }
}

/// One token cache per core.
fn token_caches(statics: &StaticModel) -> Vec<TokenCache<'_>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    (0..threads).map(|_| TokenCache::new(statics)).collect()
}

/// Reads, chunks and embeds `files` on one thread per cache in `caches` (at most one per file);
/// chunks whose hash is in `known` take its vector. `embedded` counts the vectors computed.
fn prepare(
    statics: &StaticModel,
    idf: &[f32],
    files: &[&SourceFile],
    read: &(dyn Fn(&str) -> Option<String> + Sync),
    known: &HashMap<[u8; HASH_BYTES], (Arc<Segment>, u32)>,
    embedded: &AtomicUsize,
    caches: &mut [TokenCache],
) -> Vec<FileData> {
    let threads = caches.len().min(files.len()).max(1);
    let next = AtomicUsize::new(0);
    let top = (1.0 + (idf.len() as f32 + 0.5) / 0.5).ln();
    let mut out: Vec<(usize, FileData)> = std::thread::scope(|s| {
        let workers: Vec<_> = caches
            .iter_mut()
            .take(threads)
            .map(|cache| {
                let next = &next;
                s.spawn(move || {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(f) = files.get(i) else { break };
                        let text = read(&f.path).filter(|t| t.len() <= MAX_FILE_BYTES);
                        let chunks = text.map_or_else(Vec::new, |t| {
                            chunk_data(&f.path, &t, |c| {
                                if let Some((seg, id)) = known.get(&stored_hash(&c.hash)) {
                                    return seg.vector(*id);
                                }
                                embedded.fetch_add(1, Ordering::Relaxed);
                                let ids = cache.ids(&searched_text(&c.path, &c.text));
                                quantize(&statics.embed_ids(&ids, |id| {
                                    idf.get(id as usize).copied().unwrap_or(top)
                                }))
                            })
                        });
                        done.push((
                            i,
                            FileData {
                                path: f.path.clone(),
                                version: f.version,
                                prior: f.prior,
                                chunks,
                            },
                        ));
                    }
                    done
                })
            })
            .collect();
        workers
            .into_iter()
            // A worker that panicked must not leave its files out of the store unnoticed.
            .flat_map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, f)| f).collect()
}

/// The content hashes of the chunks of `files` as they read now: a first, cheap pass over an
/// update, so that the store is searched for those hashes only.
fn chunk_hashes(
    files: &[&SourceFile],
    read: &(dyn Fn(&str) -> Option<String> + Sync),
) -> HashSet<[u8; HASH_BYTES]> {
    files
        .iter()
        .filter_map(|f| {
            read(&f.path)
                .filter(|t| t.len() <= MAX_FILE_BYTES)
                .map(|t| (f, t))
        })
        .flat_map(|(f, t)| {
            chunk_file(&f.path, &t)
                .into_iter()
                .map(|c| stored_hash(&c.hash))
        })
        .collect()
}

/// A file's chunks with their terms, snippets and vectors (`vector` gives a chunk's).
fn chunk_data(
    path: &str,
    text: &str,
    mut vector: impl FnMut(&crate::Chunk) -> (Vec<i8>, f32),
) -> Vec<ChunkData> {
    chunk_file(path, text)
        .into_iter()
        .map(|c| {
            let tokens = sub_tokens(&searched_text(path, &c.text));
            let mut counts: HashMap<String, u32> = HashMap::new();
            let length = tokens.len() as u32;
            for t in tokens {
                *counts.entry(t).or_default() += 1;
            }
            let mut terms: Vec<(String, u32)> = counts.into_iter().collect();
            // The names the chunker found (the syntax tree's, or the definition lines').
            let mut def: Vec<String> = c.defines.iter().flat_map(|d| sub_tokens(d)).collect();
            def.sort();
            def.dedup();
            terms.extend(def.into_iter().map(|d| (format!("{DEFINITION}{d}"), 1)));
            let (offset, first) = c
                .text
                .lines()
                .enumerate()
                .find(|(_, l)| !l.trim().is_empty())
                .unwrap_or((0, ""));
            let mut cut = first.len().min(SNIPPET_BYTES);
            while !first.is_char_boundary(cut) {
                cut -= 1;
            }
            let (v, scale) = vector(&c);
            ChunkData {
                start_line: c.start_line,
                end_line: c.end_line,
                snippet_line: c.start_line + offset as u32,
                snippet: first[..cut].trim_end_matches('\r').to_owned(),
                hash: c.hash,
                length,
                terms,
                vector: v,
                scale,
            }
        })
        .collect()
}

/// Builds the whole store for `files` and commits it.
fn build(
    dir: &Path,
    statics: &StaticModel,
    model: &str,
    revision: &str,
    files: &[SourceFile],
    read: &(dyn Fn(&str) -> Option<String> + Sync),
) -> Result<CatchUp, StoreError> {
    let generation = read_manifest(dir)
        .ok()
        .flatten()
        .map_or(0, |m| m.generation)
        + 1;
    // One cache per core for the whole build: identifiers repeat across the tree.
    let mut caches = token_caches(statics);
    let (idf, idf_chunks) = idf_table(statics, files, read, &mut caches);
    let mut bytes = Vec::with_capacity(idf.len() * 4);
    for x in &idf {
        bytes.extend_from_slice(&x.to_le_bytes());
    }
    let idf_file = format!("idf-{generation}.bin");
    write_durably(dir, &idf_file, &bytes)?;
    let mut stats = CatchUp {
        rebuilt: true,
        ..CatchUp::default()
    };
    let all: Vec<&SourceFile> = files.iter().collect();
    let segments = write_segments(
        dir,
        generation,
        statics,
        &idf,
        &all,
        read,
        &HashMap::new(),
        &mut caches,
        &mut stats,
    )?;
    let manifest = Manifest {
        format: FORMAT,
        generation,
        revision: revision.to_owned(),
        model: model.to_owned(),
        idf_crc32: crc32fast::hash(&bytes),
        idf_file,
        idf_chunks: idf_chunks as u64,
        segments,
    };
    commit_manifest(dir, &manifest)?;
    Ok(stats)
}

/// Reads, chunks and embeds `files` a batch at a time and writes them as segments of about
/// [`CHUNKS_PER_SEGMENT`] chunks each (checked after each batch of [`FILES_PER_BATCH`] files) (`seg-<generation>-0`, `-1`, …; at least one, empty when
/// `files` is), so that memory holds one segment's data however many files a build or an update
/// brings. Adds to `stats` the files read, the chunks and the vectors computed.
#[allow(clippy::too_many_arguments)]
fn write_segments(
    dir: &Path,
    generation: u64,
    statics: &StaticModel,
    idf: &[f32],
    files: &[&SourceFile],
    read: &(dyn Fn(&str) -> Option<String> + Sync),
    known: &HashMap<[u8; HASH_BYTES], (Arc<Segment>, u32)>,
    caches: &mut [TokenCache],
    stats: &mut CatchUp,
) -> Result<Vec<SegmentEntry>, StoreError> {
    let mut segments = Vec::new();
    let mut pending: Vec<FileData> = Vec::new();
    let mut pending_chunks = 0usize;
    let embedded = AtomicUsize::new(0);
    for batch in files.chunks(FILES_PER_BATCH) {
        for f in prepare(statics, idf, batch, read, known, &embedded, caches) {
            pending_chunks += f.chunks.len();
            stats.files_read += 1;
            pending.push(f);
        }
        if pending_chunks >= CHUNKS_PER_SEGMENT {
            stats.chunks += pending_chunks;
            let data = std::mem::take(&mut pending);
            let n = segments.len();
            segments.push(write_segment(dir, generation, n, &data, statics.dim())?);
            pending_chunks = 0;
        }
    }
    if !pending.is_empty() || segments.is_empty() {
        stats.chunks += pending_chunks;
        let n = segments.len();
        segments.push(write_segment(dir, generation, n, &pending, statics.dim())?);
    }
    stats.embedded += embedded.load(Ordering::Relaxed);
    Ok(segments)
}

/// The IDF of every token id over the chunks of an even sample of `files`, and the number of
/// chunks of all files it stands for (estimated from the sample).
fn idf_table(
    statics: &StaticModel,
    files: &[SourceFile],
    read: &(dyn Fn(&str) -> Option<String> + Sync),
    caches: &mut [TokenCache],
) -> (Vec<f32>, usize) {
    let step = files.len().div_ceil(IDF_SAMPLE_FILES).max(1);
    let sample: Vec<&SourceFile> = files.iter().step_by(step).collect();
    let next = AtomicUsize::new(0);
    let vocab = statics.vocab_size();
    let (df, chunks) = std::thread::scope(|s| {
        let workers: Vec<_> = caches
            .iter_mut()
            .map(|cache| {
                let (next, sample) = (&next, &sample);
                s.spawn(move || {
                    let mut df = vec![0u32; vocab];
                    let mut chunks = 0usize;
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(f) = sample.get(i) else { break };
                        let Some(text) = read(&f.path).filter(|t| t.len() <= MAX_FILE_BYTES) else {
                            continue;
                        };
                        for c in chunk_file(&f.path, &text) {
                            chunks += 1;
                            let mut ids = cache.ids(&searched_text(&f.path, &c.text));
                            ids.sort_unstable();
                            ids.dedup();
                            for id in ids {
                                if let Some(d) = df.get_mut(id as usize) {
                                    *d += 1;
                                }
                            }
                        }
                    }
                    (df, chunks)
                })
            })
            .collect();
        let mut df = vec![0u32; vocab];
        let mut chunks = 0usize;
        for w in workers {
            if let Ok((d, c)) = w.join() {
                df.iter_mut().zip(d).for_each(|(a, b)| *a += b);
                chunks += c;
            }
        }
        (df, chunks)
    });
    let n = chunks as f32;
    let idf = df
        .iter()
        .map(|&d| (1.0 + (n - d as f32 + 0.5) / (d as f32 + 0.5)).ln())
        .collect();
    (idf, chunks * step)
}

/// Writes a segment of `files` under a fresh name, durably, and returns its manifest entry.
fn write_segment(
    dir: &Path,
    generation: u64,
    n: usize,
    files: &[FileData],
    dim: usize,
) -> Result<SegmentEntry, StoreError> {
    let bytes = encode(files, dim);
    let file = format!("seg-{generation}-{n}.sem");
    write_durably(dir, &file, &bytes)?;
    Ok(SegmentEntry {
        file,
        crc32: crc32fast::hash(&bytes),
        chunks: files.iter().map(|f| f.chunks.len() as u32).sum(),
        deleted: Vec::new(),
    })
}

/// Writes `name` through a temporary file, fsynced, renamed into place.
fn write_durably(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
    let tmp = dir.join(format!(".{name}.tmp"));
    let path = dir.join(name);
    let mut f = fs::File::create(&tmp).map_err(StoreError::io(&tmp))?;
    f.write_all(bytes).map_err(StoreError::io(&tmp))?;
    f.sync_all().map_err(StoreError::io(&tmp))?;
    fs::rename(&tmp, &path).map_err(StoreError::io(&path))
}

/// The commit point: the manifest replaced atomically, the directory fsynced.
fn commit_manifest(dir: &Path, m: &Manifest) -> Result<(), StoreError> {
    let body = serde_json::to_string(m).map_err(|_| StoreError::Corrupt)?;
    let env = Envelope {
        crc32: crc32fast::hash(body.as_bytes()),
        body,
    };
    let bytes = serde_json::to_vec(&env).map_err(|_| StoreError::Corrupt)?;
    // A reader would refuse it as damage: fail this commit rather than write an unreadable store.
    if bytes.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(StoreError::io(dir)(std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            "the semantic store's manifest would be larger than a reader accepts",
        )));
    }
    write_durably(dir, MANIFEST, &bytes)?;
    #[cfg(unix)]
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(StoreError::io(dir))?;
    Ok(())
}

fn read_manifest(dir: &Path) -> Result<Option<Manifest>, StoreError> {
    let path = dir.join(MANIFEST);
    let bytes = match read_store_file(&path, MAX_MANIFEST_BYTES) {
        Ok(b) => b,
        Err(StoreError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let env: Envelope = serde_json::from_slice(&bytes).map_err(|_| StoreError::Corrupt)?;
    drop(bytes);
    if crc32fast::hash(env.body.as_bytes()) != env.crc32 {
        return Err(StoreError::Corrupt);
    }
    let m: Manifest = serde_json::from_str(&env.body).map_err(|_| StoreError::Corrupt)?;
    if m.format != FORMAT {
        return Err(StoreError::Corrupt);
    }
    Ok(Some(m))
}

/// Opens a file of the store without following a symlink and without blocking on a FIFO. A
/// symlink, FIFO or directory in its place is damage ([`StoreError::Corrupt`]); a missing file is
/// [`StoreError::Io`] of kind `NotFound` (a concurrent commit may have collected it).
pub(crate) fn open_store_file(path: &Path) -> Result<fs::File, StoreError> {
    search_profile::open_regular(path).map_err(|e| {
        let misplaced = fs::symlink_metadata(path).is_ok_and(|m| !m.is_file());
        if misplaced {
            StoreError::Corrupt
        } else {
            StoreError::io(path)(e)
        }
    })
}

/// Reads a file of the store whole when it holds at most `max` bytes: its size is checked before
/// it is read ([`search_profile::read_bounded`]), and a larger one is damage.
fn read_store_file(path: &Path, max: u64) -> Result<Vec<u8>, StoreError> {
    search_profile::read_bounded(&open_store_file(path)?, max).map_err(|e| match e.kind() {
        std::io::ErrorKind::FileTooLarge | std::io::ErrorKind::InvalidData => StoreError::Corrupt,
        _ => StoreError::io(path)(e),
    })
}

/// Whether `name` names a file directly in the store's directory.
fn is_plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

/// Deletes the files no committed manifest names (left by earlier commits or a killed writer).
/// Runs under the writer lock.
fn collect_garbage(dir: &Path) {
    let Ok(Some(m)) = read_manifest(dir) else {
        return;
    };
    let mut keep: HashSet<String> = m.segments.iter().map(|s| s.file.clone()).collect();
    keep.insert(m.idf_file.clone());
    keep.extend([MANIFEST.to_owned(), "LOCK".to_owned()]);
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !keep.contains(&name) {
            let _ = fs::remove_file(e.path());
        }
    }
}

/// The store's writer lock: an OS lock on `LOCK`, taken by polling until `deadline`. Writers
/// (and the clean-up of leftover files) work only in a real directory: a store directory that
/// is a symlink is refused, never followed, and the lock file is opened as the trigram index's
/// is (no symlink followed, never blocking on a FIFO, regular files only).
fn lock(dir: &Path, deadline: Option<Instant>) -> Result<fs::File, StoreError> {
    let real_dir = fs::symlink_metadata(dir).map_err(StoreError::io(dir))?;
    if !real_dir.is_dir() {
        return Err(StoreError::io(dir)(std::io::Error::other(
            "the store directory is not a directory",
        )));
    }
    let path = dir.join("LOCK");
    let file = search_profile::open_or_create_regular(&path).map_err(StoreError::io(&path))?;
    let mut pause = Duration::from_millis(1);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(fs::TryLockError::WouldBlock) => {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(StoreError::Busy);
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            Err(fs::TryLockError::Error(e)) => return Err(StoreError::io(&path)(e)),
        }
    }
}

/// The sha256 a static model directory records for the static model a host loads from it
/// ([`crate::preferred_file`]): the model's identity, so a store built with another is rebuilt.
pub fn model_id(dir: &Path) -> Option<String> {
    let file = crate::preferred_file(dir);
    let text = crate::statics::read_checksum_file(dir, file).ok()?;
    let id = text.trim().to_owned();
    (id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())).then_some(id)
}

/// A stable digest of anything that identifies a file's version (for [`SourceFile::version`]).
pub fn version_of(parts: &[u64]) -> u64 {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.to_le_bytes());
    }
    let d = h.finalize();
    u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_token_ids_are_the_tokenizers() {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/tools/models/all-minilm-l6-v2");
        let minilm = crate::MiniLm::load(&dir)
            .unwrap_or_else(|e| panic!("{e}: run `cargo xtask tools` to install the model"));
        let statics = StaticModel::build_limited(&minilm, &dir, 300).expect("builds");
        let mut cache = TokenCache::new(&statics);
        for text in [
            "static int getUserName(struct file *f) {\n\treturn f->f_op->read(f, buf);\n}",
            "  Café déjà-vu: naïve “quotes” and 中文字符 in a_snake_case identifier.\r\n",
            "x\u{a0}y\tz\n\nHTTPResponse2 parse_http_response",
            "__init__(self,*args,**kw):#x==y!=z;a[i]<<=2`q`@dec{}|~^$%&'\"?/\\",
            "0x1F__attribute__((aligned(64)))struct_a9Bc_DEF123ghi->x",
            "ab".repeat(70).as_str(),
            format!("x.{}.y", "Q".repeat(120)).as_str(),
            include_str!("store.rs"),
            include_str!("chunk/syntax.rs"),
            "",
        ] {
            // Twice: the second time every piece comes from the cache.
            for _ in 0..2 {
                let head: String = text.chars().take(80).collect();
                assert_eq!(cache.ids(text), statics.token_ids(text), "{head:?}");
            }
        }
    }

    /// A small deterministic generator, so that a failure repeats.
    fn lcg(state: &mut u64) -> u64 {
        *state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        *state >> 33
    }

    #[test]
    fn every_scan_kernel_the_cpu_has_computes_the_portable_cosines() {
        let mut state = 7;
        // Widths around the kernels' steps, and queries as long as, shorter and longer than a
        // row: every kernel multiplies the pairs both hold, and only those.
        for (dim, q_len) in [
            (256, 256),
            (250, 250),
            (32, 32),
            (32, 20),
            (16, 16),
            (7, 7),
            (40, 45),
            (64, 33),
        ] {
            let rows = 300;
            let mut dense: Vec<u8> = (0..rows * dim).map(|_| lcg(&mut state) as u8).collect();
            // The extremes of int8, where a widening multiply-add could overflow if it were wrong.
            dense[..dim].fill(0x80);
            dense[dim..2 * dim].fill(0x7f);
            let mut q16: Vec<i16> = (0..q_len)
                .map(|_| (lcg(&mut state) % 255) as i16 - 127)
                .collect();
            q16[0] = -127;
            let scales: Vec<f32> = (0..rows).map(|c| 1e-6 * (c + 1) as f32).collect();
            let scale = |c: u32| scales[c as usize];
            // The definition, one product at a time.
            let expected: Vec<f32> = dense
                .chunks_exact(dim)
                .enumerate()
                .map(|(c, row)| {
                    let dot: i32 = row
                        .iter()
                        .zip(&q16)
                        .map(|(&a, &b)| i32::from(a as i8) * i32::from(b))
                        .sum();
                    (dot as f32 * 0.01 * scales[c]).clamp(0.0, 1.0)
                })
                .collect();
            let case = format!("dim {dim}, query {q_len}");
            let mut got = vec![-1.0; rows];
            scan_rows(&mut got, &dense, dim, &q16, 0.01, &scale);
            assert_eq!(got, expected, "portable scan, {case}");
            let mut got = vec![-1.0; rows];
            scan(&mut got, &dense, dim, &q16, 0.01, &scale);
            assert_eq!(got, expected, "dispatched scan, {case}");
            #[cfg(target_arch = "x86_64")]
            #[allow(unsafe_code)]
            {
                if std::arch::is_x86_feature_detected!("avx2") {
                    let mut got = vec![-1.0; rows];
                    // SAFETY: the CPU has AVX2, checked just above.
                    unsafe { scan_avx2(&mut got, &dense, dim, &q16, 0.01, &scale) };
                    assert_eq!(got, expected, "AVX2 scan, {case}");
                }
                if std::arch::is_x86_feature_detected!("avx512bw") {
                    let mut got = vec![-1.0; rows];
                    // SAFETY: the CPU has AVX-512 BW, checked just above.
                    unsafe { scan_avx512(&mut got, &dense, dim, &q16, 0.01, &scale) };
                    assert_eq!(got, expected, "AVX-512 scan, {case}");
                }
            }
        }
    }

    #[test]
    fn the_answer_is_the_best_kept_files_in_score_then_path_order() {
        let mut state = 11;
        for case in 0..200 {
            let n = (lcg(&mut state) % 3000) as usize;
            // Few distinct scores, so that ties are many and cross every block boundary.
            let distinct = 1 + lcg(&mut state) % 40;
            let paths: Vec<String> = (0..n)
                .map(|i| format!("d{}/f{}.c", lcg(&mut state) % 7, i))
                .collect();
            let mut all: Vec<(f32, usize)> = (0..n)
                .map(|i| ((1 + lcg(&mut state) % distinct) as f32 / 64.0, i))
                .collect();
            let refuse = lcg(&mut state) % 4;
            let keep = |p: &str| refuse == 0 || !p.starts_with(&format!("d{refuse}"));
            let wanted = [1, 10, 100][case % 3];
            let mut expected = all.clone();
            expected.sort_by(|a, b| {
                b.0.total_cmp(&a.0)
                    .then_with(|| search_order(&paths[a.1], &paths[b.1]))
            });
            let expected: Vec<(f32, usize)> = expected
                .into_iter()
                .filter(|e| keep(&paths[e.1]))
                .take(wanted)
                .collect();
            let got = best_kept(&mut all, wanted, |e| e.0, |e| paths[e.1].as_str(), &keep);
            assert_eq!(got, expected, "case {case}: {n} files, {distinct} scores");
        }
    }

    /// A repository of fewer chunks than a large segment is one small segment after its build.
    /// One-file updates merge their own segments once there are too many, and never read the
    /// build's files again.
    #[test]
    fn merging_small_segments_never_reads_the_builds_files_again() {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/tools/models/all-minilm-l6-v2");
        let minilm = crate::MiniLm::load(&dir)
            .unwrap_or_else(|e| panic!("{e}: run `cargo xtask tools` to install the model"));
        let statics = StaticModel::build_limited(&minilm, &dir, 300).expect("builds");
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
                &statics,
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
                &statics,
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
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/tools/models/all-minilm-l6-v2");
        let minilm = crate::MiniLm::load(&dir)
            .unwrap_or_else(|e| panic!("{e}: run `cargo xtask tools` to install the model"));
        let statics = StaticModel::build_limited(&minilm, &dir, 300).expect("builds");
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
            // The bound is checked after each batch: one batch's chunks past it at most.
            let per_file = chunk_file("doc0.txt", &text(0, 1)).len();
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
            &statics,
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
            &statics,
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
        let hits = updated.search(&statics, "word7x2", &Weights::default(), &|_| true, 5);
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
}
