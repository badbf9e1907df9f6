//! The persistent semantic store: per file its chunks (line ranges, content hashes), their int8
//! static vectors and BM25 postings, in immutable checksummed [`segment`](crate::segment) files
//! named by one manifest. Its files are written, committed, locked, collected and opened as
//! every index's are ([`index_storage`]).
//!
//! - **Commit.** A catch-up writes new segments under names unique to the writer (write, fsync,
//!   rename), then replaces `MANIFEST` the same way and fsyncs the directory: a process killed
//!   at any moment leaves the previous commit whole. Files no manifest names are deleted after
//!   the commit.
//! - **Damage.** The manifest carries a crc32 of its body and one per segment; anything that does
//!   not match, or is not a regular file under its name, is [`StoreError::Corrupt`], which the
//!   next catch-up answers by a rebuild.
//! - **Freshness.** The store attests the revision of the trigram index's snapshot it caught up to.
//!   [`Store::catch_up`] diffs the store's per-file versions with that snapshot's, so it never walks
//!   the worktree, and embeds only chunks whose content hash it does not hold yet.
//! - **IDF.** Static vectors weight each token by its inverse document frequency over the chunks
//!   (`Weights::idf_dense`). The table is frozen at a full build (from every chunk of up to
//!   [`IDF_SAMPLE_FILES`] files, evenly spread), so that a file's vectors never depend on other
//!   files; a full build happens again when the live chunks grow or shrink past twice (or half)
//!   the count the table was made over.
//!
//! Its parts: `manifest` (what a version is made of, its commit and the collection after it),
//! `build` (reading, chunking, embedding and writing segments), `search` (ranking from the
//! segments), `scan` (the cosine kernels) and `error`.

mod build;
pub(crate) mod error;
mod manifest;
mod scan;
mod search;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use index_storage::{FileError, IndexDir, LOCK, LockError, MANIFEST, Wait};
use sha2::{Digest, Sha256};

use crate::segment::{HASH_BYTES, Segment};
use crate::statics::StaticModel;

use build::{build, chunk_hashes, token_caches, write_segments};
use manifest::Manifest;

pub use build::{CatchUp, IDF_SAMPLE_FILES, MAX_FILE_BYTES, SourceFile};
pub use error::StoreError;
pub use search::{MAX_ANSWER_FILES, PRIOR_WEIGHT, RELATIVE_FLOOR, StoreHit};

/// Updates merge the small segments once there are more than this many.
const MAX_SMALL_SEGMENTS: usize = 8;
/// A segment under this many chunks is small.
const SMALL_SEGMENT: u32 = 20_000;
/// An IDF table holds one f32 per token of the static model's vocabulary.
const MAX_IDF_BYTES: u64 = 4 * crate::model_file::MAX_VOCAB as u64;

/// Where a catch-up starts ([`Store::catch_up_from`]).
#[derive(Clone, Copy)]
pub(crate) enum Base<'a> {
    /// The store in this directory, every segment mapped and checked against its crc32.
    Dir(&'a Path),
    /// A version of the store this process holds, in its own directory: the segments it mapped
    /// and checked are taken as they are (a committed segment's name is never written again), so
    /// a catch-up of one changed file maps and checks only what is new, not the whole store (on
    /// Linux about 700 MB of checksums).
    Held(&'a Store),
}

/// A committed version of the store, mapped.
pub struct Store {
    dir: Arc<IndexDir>,
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
    /// The newest version directory under each parent ([`crate::variants::newest_versions`]),
    /// found on the first question whose candidates lie in one.
    versions: std::sync::OnceLock<crate::variants::NewestVersions>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.dir.path())
            .field("revision", &self.manifest.revision)
            .field("generation", &self.manifest.generation)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Opens the committed store in `dir`: `Ok(None)` when there is none, [`StoreError::Corrupt`]
    /// when it is damaged. Every segment is checked against its crc32.
    pub fn open(dir: &Path) -> Result<Option<Store>, StoreError> {
        Self::open_at(dir, None)
    }

    /// The store's committed version now, as [`Store::open`] finds it in this store's directory,
    /// reusing the segments this version mapped and checked: after another process's commit,
    /// only the segments it wrote are mapped and checked.
    pub fn reopen(&self) -> Result<Option<Store>, StoreError> {
        Self::open_at(self.dir.path(), Some(self))
    }

    fn open_at(dir: &Path, previous: Option<&Store>) -> Result<Option<Store>, StoreError> {
        match IndexDir::open_own(dir) {
            Ok(d) => Self::open_in(&Arc::new(d), previous),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::io(dir)(e)),
        }
    }

    /// [`Store::open`] in the opened `dir`, reusing the segments `previous` already mapped and
    /// checked. A concurrent commit may collect a segment between reading the manifest and
    /// mapping it: then the newer manifest is read.
    fn open_in(dir: &Arc<IndexDir>, previous: Option<&Store>) -> Result<Option<Store>, StoreError> {
        index_storage::load_committed(
            || match Manifest::read(dir) {
                Ok(manifest) => Self::load(dir, manifest, previous).map(Some),
                Err(FileError::Missing) => Ok(None),
                Err(e) => Err(StoreError::file(dir, MANIFEST)(e)),
            },
            |e| matches!(e, StoreError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound),
            || StoreError::Corrupt,
        )
    }

    fn load(
        dir: &Arc<IndexDir>,
        manifest: Manifest,
        previous: Option<&Store>,
    ) -> Result<Store, StoreError> {
        // Each file the manifest names is a plain name in this directory, opened as every index
        // file is: anything else is damage.
        let idf_bytes = dir
            .read(&manifest.idf_file, MAX_IDF_BYTES)
            .map_err(StoreError::file(dir, &manifest.idf_file))?;
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
        let previous = previous.map(|p| (&p.manifest.segments[..], &p.segments[..]));
        for entry in &manifest.segments {
            let seg = match index_storage::reuse(previous, entry, Manifest::file) {
                Some(s) => s,
                None => Arc::new(Segment::open(dir, &entry.file, entry.crc32)?),
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
            dir: dir.clone(),
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
            versions: std::sync::OnceLock::new(),
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
            .filter_map(|n| self.dir.stamp(n))
            .map(|s| s.len)
            .sum()
    }

    /// Whether the committed manifest is still the one this version was loaded from.
    pub fn is_current(&self) -> bool {
        matches!(Manifest::read(&self.dir), Ok(m) if m == self.manifest)
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

    /// The live files' newest version directories, found once per version of the store.
    pub(crate) fn newest_versions(&self) -> &crate::variants::NewestVersions {
        self.versions.get_or_init(|| {
            crate::variants::newest_versions(
                self.live_files()
                    .into_iter()
                    .map(|(si, f)| self.segments[si].path_bytes(f)),
            )
        })
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
    /// processes sharing the directory commit one at a time. Every segment is mapped and checked
    /// against its crc32 (a host that holds a version of the store starts from it instead).
    pub fn catch_up(
        dir: &Path,
        statics: &StaticModel,
        model: &str,
        revision: &str,
        files: &[SourceFile],
        read: &(dyn Fn(&str) -> Option<String> + Sync),
        deadline: Option<Instant>,
    ) -> Result<(Store, CatchUp), StoreError> {
        Self::catch_up_from(
            Base::Dir(dir),
            statics,
            model,
            revision,
            files,
            read,
            deadline,
        )
    }

    /// [`Store::catch_up`] from `base`: a directory, or a version this process holds, whose
    /// mapped segments are reused.
    pub(crate) fn catch_up_from(
        base: Base<'_>,
        statics: &StaticModel,
        model: &str,
        revision: &str,
        files: &[SourceFile],
        read: &(dyn Fn(&str) -> Option<String> + Sync),
        deadline: Option<Instant>,
    ) -> Result<(Store, CatchUp), StoreError> {
        let (dir, previous) = match base {
            Base::Dir(dir) => (dir, None),
            Base::Held(held) => (held.dir.path(), Some(held)),
        };
        // Writers, and the collection of leftover files, work only in a real directory: a store
        // directory that is a symlink is refused, never followed.
        let dir = Arc::new(IndexDir::create_own(dir).map_err(StoreError::io(dir))?);
        let _lock = dir.lock(&mut Wait::until(deadline)).map_err(|e| match e {
            LockError::Busy => StoreError::Busy,
            LockError::Io(e) => StoreError::io(&dir.path().join(LOCK))(e),
        })?;
        let mut current = match Self::open_in(&dir, previous) {
            Ok(Some(s))
                if s.manifest.model == model
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
            None => build(&dir, statics, model, revision, files, read)?,
        };
        Manifest::collect_garbage(&dir);
        // The segments this commit kept are already mapped and checked: only the new one is.
        let store = Self::open_in(&dir, current.as_ref())?.ok_or(StoreError::Corrupt)?;
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
        // The held files and the wanted ones in path order, walked side by side. A commit lists
        // its files in path order and each segment holds sorted runs of them, so both sorts
        // mostly merge runs; a map of every path cost a one-file catch-up on Linux 70–100 ms.
        let mut held: Vec<(&str, usize, u32, u64)> = self
            .live_files()
            .into_iter()
            .map(|(si, f)| {
                let row = self.segments[si].file(f);
                (row.path, si, f, row.version)
            })
            .collect();
        held.sort_by(|a, b| a.0.cmp(b.0));
        let mut wanted: Vec<&SourceFile> = files.iter().collect();
        wanted.sort_by(|a, b| a.path.cmp(&b.path));
        wanted.dedup_by(|a, b| a.path == b.path);
        let mut manifest = self.manifest.clone();
        let mut stats = CatchUp::default();
        let mut upserts: Vec<&SourceFile> = Vec::new();
        let (mut held, mut wanted) = (held.into_iter().peekable(), wanted.into_iter().peekable());
        loop {
            let order = match (held.peek(), wanted.peek()) {
                (Some(h), Some(w)) => h.0.cmp(w.path.as_str()),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => break,
            };
            match order {
                // Held, no longer wanted (a path held twice, which no commit makes, ends here too).
                std::cmp::Ordering::Less => {
                    if let Some((_, si, id, _)) = held.next() {
                        manifest.segments[si].deleted.push(id);
                        stats.removed += 1;
                    }
                }
                std::cmp::Ordering::Greater => upserts.extend(wanted.next()),
                std::cmp::Ordering::Equal => {
                    if let (Some((_, si, id, version)), Some(f)) = (held.next(), wanted.next())
                        && version != f.version
                    {
                        manifest.segments[si].deleted.push(id);
                        upserts.push(f);
                    }
                }
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
        manifest.commit(&self.dir)?;
        Ok(stats)
    }

    /// Where the store holds a chunk of each content hash in `wanted`.
    fn vectors_by_hash(
        &self,
        wanted: &HashSet<[u8; HASH_BYTES]>,
    ) -> HashMap<[u8; HASH_BYTES], (Arc<Segment>, u32)> {
        // A bit per value of a hash's first two bytes, set for the wanted ones: a catch-up wants
        // a few hashes, and most of the store's chunks are passed over without hashing theirs.
        let mut maybe = vec![0u64; 1 << 10];
        let slot = |h: &[u8]| usize::from(u16::from_le_bytes([h[0], h[1]]));
        for h in wanted {
            maybe[slot(h) / 64] |= 1 << (slot(h) % 64);
        }
        let mut known = HashMap::new();
        for seg in &self.segments {
            for c in 0..seg.n_chunks {
                let hash = seg.chunk_hash(c);
                if maybe[slot(hash) / 64] & (1 << (slot(hash) % 64)) == 0 {
                    continue;
                }
                if let Some(h) = wanted.get(hash) {
                    known.insert(*h, (seg.clone(), c));
                }
            }
        }
        known
    }
}

/// The identity of the static model an engine loads for `dir`: the sha256 recorded beside the
/// directory's own static model ([`crate::installed_file`]), else [`crate::BUILTIN_SHA256`]. A
/// store built with another model is rebuilt. `None` when the recorded sha256 is unreadable.
pub fn model_id(dir: &Path) -> Option<String> {
    let Some(file) = crate::installed_file(dir) else {
        return Some(crate::BUILTIN_SHA256.to_owned());
    };
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
