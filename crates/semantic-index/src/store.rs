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

use crate::chunk::chunk_file;
use crate::rank::{Weights, combine, quantize};
use crate::segment::{ChunkData, DEFINITION, FILE_NAME, FileData, Segment, encode};
use crate::statics::StaticModel;
use crate::text::sub_tokens;

/// The manifest's name in the store directory.
const MANIFEST: &str = "MANIFEST";
/// The manifest format this version writes and reads. It also names the chunker and the
/// definition names behind a store's chunks: a store built by another is rebuilt, not mixed.
/// 2: tree-sitter chunks, definition names from the syntax tree.
const FORMAT: u32 = 2;
/// The IDF table is computed over the chunks of at most this many files.
pub const IDF_SAMPLE_FILES: usize = 4000;
/// A build writes a segment each time this many chunks have accumulated, which bounds its memory.
const CHUNKS_PER_SEGMENT: usize = 120_000;
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
        let idf_path = dir.join(&manifest.idf_file);
        let idf_bytes = fs::read(&idf_path).map_err(StoreError::io(&idf_path))?;
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
                let row = seg.chunk(c);
                if !dead.get(row.file as usize).copied().unwrap_or(true) {
                    live_chunks += 1;
                    total_length += u64::from(row.length);
                }
            }
            segments.push(seg);
            deleted.push(dead);
        }
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
                    && s.idf.len() == statics.vocab_size() =>
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
        // vectors reused by hash.
        let small: Vec<usize> = (0..self.segments.len())
            .filter(|&si| self.segments[si].n_chunks < SMALL_SEGMENT)
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
            let embedded = AtomicUsize::new(0);
            let data = prepare(statics, &self.idf, &upserts, read, &known, &embedded);
            stats.files_read = upserts.len() - extra.len();
            stats.chunks = data.iter().map(|f| f.chunks.len()).sum();
            stats.embedded = embedded.load(Ordering::Relaxed);
            let generation = manifest.generation + 1;
            let entry = write_segment(&self.dir, generation, 0, &data, statics.dim())?;
            manifest.segments = manifest
                .segments
                .into_iter()
                .enumerate()
                .filter(|(si, _)| !merged.contains(si))
                .map(|(_, e)| e)
                .collect();
            manifest.segments.push(entry);
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
        wanted: &HashSet<[u8; 32]>,
    ) -> HashMap<[u8; 32], (Arc<Segment>, u32)> {
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
        let n = self.live_chunks.max(1) as f32;
        // Per segment, per chunk: the BM25 score and the definition matches; per file: name
        // matches.
        let per_chunk = |v| -> Vec<Vec<_>> {
            self.segments
                .iter()
                .map(|s| vec![v; s.n_chunks as usize])
                .collect()
        };
        let mut bm25: Vec<Vec<f32>> = per_chunk(0.0);
        let mut defs: Vec<HashMap<u32, u32>> = vec![HashMap::new(); self.segments.len()];
        let mut names: Vec<HashMap<u32, u32>> = vec![HashMap::new(); self.segments.len()];
        let live_chunk =
            |si: usize, seg: &Segment, c: u32| !self.deleted[si][seg.chunk_file(c) as usize];
        for t in &terms {
            let per_seg: Vec<Vec<(u32, u32)>> = self
                .segments
                .iter()
                .enumerate()
                .map(|(si, seg)| {
                    seg.postings(t)
                        .into_iter()
                        .filter(|&(c, _)| live_chunk(si, seg, c))
                        .collect()
                })
                .collect();
            let df: usize = per_seg.iter().map(Vec::len).sum();
            if df > 0 {
                let idf = (1.0 + (n - df as f32 + 0.5) / (df as f32 + 0.5)).ln();
                for (si, list) in per_seg.into_iter().enumerate() {
                    for (c, tf) in list {
                        let len = self.segments[si].chunk_length(c) as f32;
                        bm25[si][c as usize] +=
                            crate::bm25::term_score(idf, tf as f32, len, self.avg_length);
                    }
                }
            }
            for (si, seg) in self.segments.iter().enumerate() {
                for (c, _) in seg.postings(&format!("{DEFINITION}{t}")) {
                    *defs[si].entry(c).or_default() += 1;
                }
                for (f, _) in seg.postings(&format!("{FILE_NAME}{t}")) {
                    *names[si].entry(f).or_default() += 1;
                }
            }
        }
        let top_bm25 = bm25.iter().flatten().copied().fold(0.0f32, f32::max);
        let qv = query_vector(statics, &self.idf, self.live_chunks, query);
        let (q, qscale) = quantize(&qv);
        // The cosine of every live chunk: a brute-force scan of the int8 matrices.
        // One thread per segment, at most as many at once as there are cores.
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut cosines: Vec<Vec<f32>> = Vec::with_capacity(self.segments.len());
        for group in self.segments.chunks(threads.max(1)) {
            let q = &q;
            cosines.extend(std::thread::scope(|s| {
                let running: Vec<_> = group
                    .iter()
                    .map(|seg| {
                        s.spawn(move || scan(seg.dense(), seg.dim, q, qscale, |c| seg.scale(c)))
                    })
                    .collect();
                running
                    .into_iter()
                    .map(|r| r.join().unwrap_or_default())
                    .collect::<Vec<_>>()
            }));
        }
        let cos_top = cosines
            .iter()
            .enumerate()
            .flat_map(|(si, v)| {
                let seg = &self.segments[si];
                v.iter()
                    .enumerate()
                    .filter(move |&(c, _)| live_chunk(si, seg, c as u32))
                    .map(|(_, &x)| x)
            })
            .fold(0.0f32, f32::max);
        let share = |k: u32| {
            if terms.is_empty() {
                0.0
            } else {
                k as f32 / terms.len() as f32
            }
        };
        let mut best: Vec<(f32, usize, u32, u32)> = Vec::new();
        for (si, seg) in self.segments.iter().enumerate() {
            for f in 0..seg.n_files {
                if self.deleted[si][f as usize] {
                    continue;
                }
                let row = seg.file(f);
                if row.chunks == 0 || !keep(row.path) {
                    continue;
                }
                let name = share(names[si].get(&f).copied().unwrap_or(0));
                let mut top: Option<(f32, u32)> = None;
                for c in row.first_chunk..row.first_chunk + row.chunks {
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
                    let definition = share(defs[si].get(&c).copied().unwrap_or(0));
                    let s = combine(weights, lexical, cosine, definition, name);
                    if top.is_none_or(|(b, _)| s > b) {
                        top = Some((s, c));
                    }
                }
                if let Some((s, c)) = top {
                    let prior = row.prior.clamp(0.0, 1.0);
                    let score = (s * (1.0 - PRIOR_WEIGHT + PRIOR_WEIGHT * prior)).clamp(0.0, 1.0);
                    best.push((score, si, f, c));
                }
            }
        }
        let path_of = |&(_, si, f, _): &(f32, usize, u32, u32)| self.segments[si].file(f).path;
        best.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then_with(|| search_order(path_of(a), path_of(b)))
        });
        let floor = best.first().map_or(0.0, |b| b.0 * RELATIVE_FLOOR);
        best.into_iter()
            .take_while(|b| b.0 >= floor && b.0 > 0.0)
            .take(limit.min(MAX_ANSWER_FILES))
            .map(|(score, si, f, c)| {
                let seg = &self.segments[si];
                let chunk = seg.chunk(c);
                StoreHit {
                    path: seg.file(f).path.to_owned(),
                    line: u64::from(chunk.snippet_line),
                    snippet: chunk.snippet.to_owned(),
                    score,
                }
            })
            .collect()
    }
}

/// Paths compared component by component, as the trigram index orders them.
fn search_order(a: &str, b: &str) -> std::cmp::Ordering {
    a.split('/').cmp(b.split('/'))
}

/// The cosine of every row of `dense` (rows of `dim` int8 values, each with its scale) with the
/// quantized query `q`, clamped to `[0, 1]`.
fn scan(dense: &[u8], dim: usize, q: &[i8], qscale: f32, scale: impl Fn(u32) -> f32) -> Vec<f32> {
    dense
        .chunks_exact(dim)
        .enumerate()
        .map(|(c, row)| {
            // Written as a plain multiply-add over i32 lanes so that the compiler vectorises it.
            let dot: i32 = row
                .iter()
                .zip(q)
                .map(|(&a, &b)| i32::from(a as i8) * i32::from(b))
                .sum();
            (dot as f32 * qscale * scale(c as u32)).clamp(0.0, 1.0)
        })
        .collect()
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
            if let Some(ids) = self.pieces.get(piece) {
                out.extend_from_slice(ids);
                continue;
            }
            let ids = self.statics.token_ids(piece);
            out.extend_from_slice(&ids);
            if self.pieces.len() >= Self::MAX_PIECES {
                self.pieces.clear();
            }
            self.pieces.insert(piece.to_owned(), ids);
        }
        out
    }
}

/// Reads, chunks and embeds `files` on every core; chunks whose hash is in `known` take its
/// vector. `embedded` counts the vectors computed.
fn prepare(
    statics: &StaticModel,
    idf: &[f32],
    files: &[&SourceFile],
    read: &(dyn Fn(&str) -> Option<String> + Sync),
    known: &HashMap<[u8; 32], (Arc<Segment>, u32)>,
    embedded: &AtomicUsize,
) -> Vec<FileData> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(files.len().max(1));
    let next = AtomicUsize::new(0);
    let top = (1.0 + (idf.len() as f32 + 0.5) / 0.5).ln();
    let mut out: Vec<(usize, FileData)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut cache = TokenCache::new(statics);
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(f) = files.get(i) else { break };
                        let text = read(&f.path).filter(|t| t.len() <= MAX_FILE_BYTES);
                        let chunks = text.map_or_else(Vec::new, |t| {
                            chunk_data(&f.path, &t, |c| {
                                if let Some((seg, id)) = known.get(&c.hash) {
                                    return seg.vector(*id);
                                }
                                embedded.fetch_add(1, Ordering::Relaxed);
                                let ids = cache.ids(&c.text);
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
            .flat_map(|w| w.join().unwrap_or_default())
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
) -> HashSet<[u8; 32]> {
    files
        .iter()
        .filter_map(|f| {
            read(&f.path)
                .filter(|t| t.len() <= MAX_FILE_BYTES)
                .map(|t| (f, t))
        })
        .flat_map(|(f, t)| chunk_file(&f.path, &t).into_iter().map(|c| c.hash))
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
            let tokens = sub_tokens(&c.text);
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
    let (idf, idf_chunks) = idf_table(statics, files, read);
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
    let mut segments = Vec::new();
    let mut pending: Vec<FileData> = Vec::new();
    let mut pending_chunks = 0usize;
    let known = HashMap::new();
    let embedded = AtomicUsize::new(0);
    let all: Vec<&SourceFile> = files.iter().collect();
    for batch in all.chunks(2000) {
        for f in prepare(statics, &idf, batch, read, &known, &embedded) {
            pending_chunks += f.chunks.len();
            stats.files_read += 1;
            pending.push(f);
        }
        if pending_chunks >= CHUNKS_PER_SEGMENT {
            stats.chunks += pending_chunks;
            let data = std::mem::take(&mut pending);
            segments.push(write_segment(
                dir,
                generation,
                segments.len(),
                &data,
                statics.dim(),
            )?);
            pending_chunks = 0;
        }
    }
    if !pending.is_empty() || segments.is_empty() {
        stats.chunks += pending_chunks;
        segments.push(write_segment(
            dir,
            generation,
            segments.len(),
            &pending,
            statics.dim(),
        )?);
    }
    stats.embedded = embedded.load(Ordering::Relaxed);
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

/// The IDF of every token id over the chunks of an even sample of `files`, and the number of
/// chunks of all files it stands for (estimated from the sample).
fn idf_table(
    statics: &StaticModel,
    files: &[SourceFile],
    read: &(dyn Fn(&str) -> Option<String> + Sync),
) -> (Vec<f32>, usize) {
    let step = files.len().div_ceil(IDF_SAMPLE_FILES).max(1);
    let sample: Vec<&SourceFile> = files.iter().step_by(step).collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let next = AtomicUsize::new(0);
    let vocab = statics.vocab_size();
    let (df, chunks) = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut cache = TokenCache::new(statics);
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
                            let mut ids = cache.ids(&c.text);
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
    write_durably(dir, MANIFEST, &bytes)?;
    #[cfg(unix)]
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(StoreError::io(dir))?;
    Ok(())
}

fn read_manifest(dir: &Path) -> Result<Option<Manifest>, StoreError> {
    let path = dir.join(MANIFEST);
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io(&path)(e)),
    };
    let env: Envelope = serde_json::from_slice(&bytes).map_err(|_| StoreError::Corrupt)?;
    if crc32fast::hash(env.body.as_bytes()) != env.crc32 {
        return Err(StoreError::Corrupt);
    }
    let m: Manifest = serde_json::from_str(&env.body).map_err(|_| StoreError::Corrupt)?;
    if m.format != FORMAT {
        return Err(StoreError::Corrupt);
    }
    Ok(Some(m))
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
    let text = fs::read_to_string(dir.join(format!("{file}.sha256"))).ok()?;
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
            "",
        ] {
            // Twice: the second time every piece comes from the cache.
            for _ in 0..2 {
                assert_eq!(cache.ids(text), statics.token_ids(text), "{text:?}");
            }
        }
    }
}
