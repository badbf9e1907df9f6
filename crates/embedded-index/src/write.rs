//! Writing: the cross-process writer lock, builds, incremental applies, merges and commits.
//!
//! One writer at a time, across processes: every write holds an OS file lock on `LOCK` in the
//! index directory (and a mutex within the process). Under the lock the writer first reads the
//! latest commit, so it never builds on a stale one. Segment and temporary names are unique per
//! writer, and no file is ever rewritten in place: readers that mapped a segment keep reading it
//! intact after a newer commit removed it from the directory.

use std::collections::HashSet;
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use index_contract::UnixMillis;
use index_storage::{LockError, Wait, WriterLock, unique_name_part};
use search_profile::rank::Prior;
use search_profile::{Prefetch, RootDir};

use crate::listing::Listing;
use crate::manifest::{FORMAT, Manifest, SegmentEntry};
use crate::segment::{DocMeta, DocTrigrams, Encoder, MergeError, Segment, Stamp, flags};
use crate::snapshot::Snapshot;
use crate::{EmbeddedIndex, EmbeddedIndexError, parallel, trigram};

/// A file modified less than this before it was read may change again within the same mtime
/// tick ("racy clean" in git's words): its stamp cannot vouch for it, so it is read again.
const RACY_WINDOW: Duration = Duration::from_secs(2);

/// Whether a segment is synced as it is written.
#[derive(Debug, Clone, Copy)]
enum Durability {
    /// Synced before it is used: a manifest will name it.
    Synced,
    /// A build's batch: synced later only if the merge keeps it rather than replacing it.
    SyncedIfKept,
    /// An incremental apply's segment, committed by an unsynced manifest
    /// ([`index_storage::Durability::Unsynced`]): never synced, so its manifest entry records no
    /// identity, and every process that opens it checks its crc32 (it holds only the changed
    /// files). After a crash its bytes may be lost while its size and times survive.
    Unsynced,
}

/// Held while writing: the in-process mutex and the directory's writer lock.
pub(crate) struct WriteLock<'a> {
    _mutex: MutexGuard<'a, ()>,
    _lock: WriterLock,
}

/// Whether a file modified at `stamp`'s mtime may be modified again, at `now`, within the same
/// timestamp tick: its stamp cannot vouch for what was read.
fn is_racy(stamp: &Stamp, now: SystemTime) -> bool {
    within_racy_window(stamp.mtime_ns, now)
}

/// Whether `ns` (since the epoch) lies less than [`RACY_WINDOW`] before `now`, or after it.
fn within_racy_window(ns: u64, now: SystemTime) -> bool {
    let now_ns = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    now_ns.saturating_sub(ns) < RACY_WINDOW.as_nanos() as u64
}

impl EmbeddedIndex {
    /// Takes the writer lock, waiting until `deadline` (forever when `None`), then brings the
    /// in-memory snapshot up to the latest commit.
    pub(crate) fn lock(
        &self,
        deadline: Option<Instant>,
    ) -> Result<WriteLock<'_>, EmbeddedIndexError> {
        let mut wait = Wait::until(deadline);
        let mutex = loop {
            match self.writer.try_lock() {
                Ok(g) => break g,
                Err(std::sync::TryLockError::Poisoned(p)) => break p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => {
                    if !wait.pause() {
                        return Err(EmbeddedIndexError::Busy);
                    }
                }
            }
        };
        let lock = self.dir().lock(&mut wait).map_err(|e| match e {
            LockError::Busy => EmbeddedIndexError::Busy,
            LockError::Io(e) => EmbeddedIndexError::Io(e),
        })?;
        self.sync_with(true);
        Ok(WriteLock {
            _mutex: mutex,
            _lock: lock,
        })
    }

    /// Reads the files at `paths` into documents, on all threads. Each file is opened beneath the
    /// root without following symlinks; its stamp is taken from the open file before it is read.
    /// A file that cannot be opened or read gets the stamp its directory lists for it, so that it
    /// is not read again until it changes.
    fn read_docs(
        &self,
        paths: &[&str],
        threads: usize,
    ) -> Result<Vec<DocTrigrams>, EmbeddedIndexError> {
        let worktree = self.worktree();
        // `None` for a file that is gone, or is no longer a regular file reached without a
        // symlink, since the walk saw it: it is not selected any more, so it is not indexed (its
        // old copy, if any, is removed by the caller's deletion mark).
        // Each worker keeps the directory it opened last: a build reads a directory's files one
        // after another, so the kernel resolves one name a file instead of its whole path, and
        // the cost of an open does not grow with the tree's depth.
        let state = || {
            (
                trigram::Extractor::new(),
                search_profile::LastDir::default(),
            )
        };
        let docs = parallel::map(paths, threads, state, |_, &path, (ex, last)| {
            let mut meta = DocMeta {
                prior: Prior::of(path).step(),
                flags: 0,
                stamp: Stamp::default(),
            };
            if index_guard::check_path(path).is_err() {
                meta.flags |= flags::REFUSED_NAME;
            }
            let opened_at = SystemTime::now();
            let file = match worktree.open_walked_file_in(last, path) {
                Ok(f) => Some(f),
                Err(
                    search_profile::OpenError::Missing
                    | search_profile::OpenError::NotRegular
                    | search_profile::OpenError::Symlink,
                ) => return None,
                Err(_) => None,
            };
            // One `fstat` is both the type check of `RootDir::open_file` (the open itself follows
            // no symlink and never blocks) and the stamp, taken before the read.
            let opened = match file.map(|f| f.metadata().map(|m| (f, m))) {
                Some(Ok((_, m))) if !m.is_file() => return None,
                Some(Ok(opened)) => Some(opened),
                Some(Err(_)) | None => None,
            };
            let read = opened.and_then(|(file, m)| {
                let now = SystemTime::now();
                let stamp = Stamp::of(&m);
                let trigrams = ex.extract_file(&file, m.len()).ok()?;
                Some((stamp, now, trigrams))
            });
            let trigrams = match read {
                Some((stamp, now, trigrams)) => {
                    meta.stamp = stamp;
                    if is_racy(&stamp, now) {
                        meta.flags |= flags::RACY;
                    }
                    trigrams
                }
                None => {
                    meta.flags |= flags::UNREADABLE;
                    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
                    if let Some(Some(s)) = worktree.stat_entries(dir, &[name]).first() {
                        meta.stamp = crate::dircache::as_stamp(s);
                    }
                    // A status change (a `chmod`) since shortly before the failed open may have
                    // made it readable after the attempt: such a stamp cannot vouch that it is
                    // still unreadable, so the next refresh tries again.
                    let changed_ns = meta.stamp.mtime_ns.max(meta.stamp.ctime_ns);
                    if within_racy_window(changed_ns, opened_at) {
                        meta.flags |= flags::RACY;
                    }
                    Vec::new()
                }
            };
            Some(DocTrigrams {
                path: path.to_owned(),
                trigrams,
                meta,
            })
        })?;
        Ok(docs.into_iter().flatten().collect())
    }

    /// Writes the files of `paths` as segments of about half `pairs_per_segment` (trigram, file)
    /// pairs each, encoding one while the next is read.
    fn write_docs<T>(
        &self,
        paths: &Listing<T>,
        generation: u64,
        durability: Durability,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Vec<SegmentEntry>, EmbeddedIndexError> {
        let threads = crate::threads(&self.config);
        let suffix = unique_name_part();
        let mut entries = Vec::new();
        let mut batch: Vec<DocTrigrams> = Vec::new();
        let mut pairs = 0usize;
        // A batch is encoded and written on a thread of its own while the workers read the
        // next: encoding is one thread's work, and the other core would wait for it. Two batches
        // are then held at once, so each is half the budget.
        let budget = (self.config.pairs_per_segment / 2).max(1);
        // Read in chunks so the pair budget is checked often without serialising the threads.
        let chunk = 256 * threads;
        let slice = |start: usize| -> Vec<&str> {
            (start..(start + chunk).min(paths.len()))
                .map(|i| paths.get(i).0)
                .collect()
        };
        let worktree = self.worktree();
        std::thread::scope(|scope| {
            let mut encoder = Some(Encoder::new());
            let mut encoding = None;
            let mut written = 0usize;
            // Waits for the batch being encoded, then starts encoding `batch` (when it holds
            // any document): at most one batch is encoded while the next is read.
            let mut flush = |batch: Vec<DocTrigrams>,
                             entries: &mut Vec<SegmentEntry>|
             -> Result<(), EmbeddedIndexError> {
                let mut enc = match encoding.take() {
                    Some(previous) => {
                        let (enc, entry) = std::thread::ScopedJoinHandle::join(previous)
                            .map_err(|_| EmbeddedIndexError::WorkerPanicked)?;
                        entries.push(entry?);
                        enc
                    }
                    None => encoder.take().unwrap_or_else(Encoder::new),
                };
                if batch.is_empty() {
                    encoder = Some(enc);
                    return Ok(());
                }
                let file = format!("seg-{generation}-{suffix}-{written}.idx");
                written += 1;
                encoding = Some(scope.spawn(move || {
                    let encoded = enc.encode(&batch);
                    let entry = self.write_segment(file, encoded, batch.len(), durability);
                    (enc, entry)
                }));
                Ok(())
            };
            // While one chunk is read, the next one's files are asked of the disk.
            let mut ahead = None;
            for (done, start) in (0..paths.len()).step_by(chunk).enumerate() {
                if let Some(hinting) = ahead.take() {
                    // A hint that panicked changes no answer: the read still reads every file.
                    let _ = std::thread::ScopedJoinHandle::join(hinting);
                }
                let next = slice(start + chunk);
                if !next.is_empty() {
                    let worktree = &worktree;
                    ahead = Some(scope.spawn(move || prefetch(worktree, &next)));
                }
                for doc in self.read_docs(&slice(start), threads)? {
                    pairs += doc.trigrams.len();
                    batch.push(doc);
                    if pairs >= budget {
                        flush(std::mem::take(&mut batch), &mut entries)?;
                        pairs = 0;
                    }
                }
                progress(((done + 1) * chunk).min(paths.len()), paths.len());
            }
            // The last batch, then an empty one, which waits for the last write.
            flush(std::mem::take(&mut batch), &mut entries)?;
            flush(Vec::new(), &mut entries)
        })?;
        Ok(entries)
    }

    /// Writes an encoded segment (its bytes and crc32) of `docs` documents as `file`, a name
    /// unique to this writer, and returns its manifest entry with the identity it has right
    /// after the write.
    fn write_segment(
        &self,
        file: String,
        (bytes, crc32): (Vec<u8>, u32),
        docs: usize,
        durability: Durability,
    ) -> Result<SegmentEntry, EmbeddedIndexError> {
        let dir = self.dir();
        // Only a file that is or will be synced may vouch for its bytes by its identity.
        let identity = match durability {
            Durability::Synced => {
                dir.write_durably(&file, &bytes)?;
                dir.stamp(&file).map(SegmentEntry::identity_of)
            }
            Durability::SyncedIfKept => {
                dir.write_unsynced(&file, &bytes)?;
                dir.stamp(&file).map(SegmentEntry::identity_of)
            }
            Durability::Unsynced => {
                dir.write_unsynced(&file, &bytes)?;
                None
            }
        };
        Ok(SegmentEntry {
            identity,
            file,
            crc32,
            docs: docs as u32,
            deleted: Vec::new(),
        })
    }

    /// Indexes every selected file and commits it as `source_revision`, replacing whatever was
    /// committed. The caller holds the lock.
    pub(crate) fn build_locked(
        &self,
        source_revision: &str,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<crate::BuildStats, EmbeddedIndexError> {
        let selected = self.walk_paths()?;
        // The walk's directory cache is on disk; kept in memory through the build, it would add
        // every path once more to the build's peak (tens of megabytes on a monorepo). A glob
        // query after the build checks the file's directories instead.
        self.hold_dircache(None);
        let generation = self.committed_generation() + 1;
        // Batches that the merge replaces need no fsync: the merge syncs the batches it keeps.
        let durability = if self.config.merged_segment_bytes > 0 {
            Durability::SyncedIfKept
        } else {
            Durability::Synced
        };
        let batches = self.write_docs(&selected, generation, durability, progress)?;
        let written = batches.len();
        let entries = self.merge_batches(batches, generation)?;
        let m = Manifest {
            format: FORMAT,
            generation,
            segments: entries,
            source_revision: Some(source_revision.to_owned()),
            updated_at: Some(UnixMillis::now().0),
        };
        let bytes = self.commit(m, index_storage::Durability::Durable)?;
        Ok(crate::BuildStats {
            files: selected.len(),
            index_bytes: bytes,
            segments: self.snapshot().map_or(0, |s| s.segments.len()),
            batches: written,
        })
    }

    /// Merges a build's segments (consecutive in path order, nothing deleted) into runs of at
    /// most [`crate::EmbeddedIndexConfig::merged_segment_bytes`], each written by streaming. A
    /// run that cannot be merged (too large for a segment's offsets, or a list that fails to
    /// decode) keeps its segments as they are: they serve the same answers. Every segment it
    /// returns is durable.
    fn merge_batches(
        &self,
        batches: Vec<SegmentEntry>,
        generation: u64,
    ) -> Result<Vec<SegmentEntry>, EmbeddedIndexError> {
        let limit = self.config.merged_segment_bytes;
        let dir = self.dir();
        if batches.len() < 2 || limit == 0 {
            if limit > 0 {
                for e in &batches {
                    dir.sync_file(&e.file)?;
                }
            }
            return Ok(batches);
        }
        let mut opened = Vec::with_capacity(batches.len());
        for e in &batches {
            let seg = Segment::open_committed(&dir, &e.file, e.crc32, e.identity)
                .map_err(|_| EmbeddedIndexError::Corrupt)?;
            opened.push(seg);
        }
        let mut runs: Vec<Vec<usize>> = Vec::new();
        let mut run_bytes = 0u64;
        for (i, seg) in opened.iter().enumerate() {
            let bytes = seg.bytes() as u64;
            match runs.last_mut() {
                Some(run) if run_bytes + bytes <= limit => run.push(i),
                _ => {
                    runs.push(vec![i]);
                    run_bytes = 0;
                }
            }
            run_bytes += bytes;
        }
        let suffix = unique_name_part();
        let merge = crate::segment::MergeConfig::on(crate::threads(&self.config));
        let mut out = Vec::with_capacity(runs.len());
        for (n, run) in runs.into_iter().enumerate() {
            if run.len() == 1 {
                dir.sync_file(&batches[run[0]].file)?;
                out.push(batches[run[0]].clone());
                continue;
            }
            let parts: Vec<&Segment> = run.iter().map(|&i| &opened[i]).collect();
            let file = format!("seg-{generation}-{suffix}-m{n}.idx");
            let (mut written, mut panicked) = (None, false);
            let merged = dir.write_durably_with(&file, |w| {
                match crate::segment::write_concatenated(&parts, w, merge) {
                    Ok(done) => written = Some(done),
                    Err(MergeError::Io(e)) => return Err(e),
                    Err(MergeError::Panicked) => {
                        panicked = true;
                        return Err(std::io::Error::other("a merge thread panicked"));
                    }
                }
                Ok(())
            });
            if panicked {
                return Err(EmbeddedIndexError::WorkerPanicked);
            }
            match (merged, written) {
                (Ok(()), Some((crc32, docs))) => out.push(SegmentEntry {
                    identity: dir.stamp(&file).map(SegmentEntry::identity_of),
                    file,
                    crc32,
                    docs,
                    deleted: Vec::new(),
                }),
                (Err(e), _)
                    if e.kind() != std::io::ErrorKind::InvalidInput
                        && e.kind() != std::io::ErrorKind::InvalidData =>
                {
                    return Err(EmbeddedIndexError::Io(e));
                }
                _ => {
                    for &i in &run {
                        dir.sync_file(&batches[i].file)?;
                        out.push(batches[i].clone());
                    }
                }
            }
        }
        Ok(out)
    }

    /// The generation of the latest commit, or 0 (also for a damaged index, which is replaced).
    fn committed_generation(&self) -> u64 {
        match self.dir().read_manifest::<Manifest>(FORMAT) {
            Ok(m) => m.generation,
            Err(_) => self.snapshot().map_or(0, |s| s.manifest.generation),
        }
    }

    /// Commits a manifest as `durability` says, installs its snapshot and removes files no
    /// manifest names. The caller holds the lock, so no other writer has files in flight.
    fn commit(
        &self,
        m: Manifest,
        durability: index_storage::Durability,
    ) -> Result<u64, EmbeddedIndexError> {
        let dir = self.dir();
        dir.commit_manifest_with(&m, durability)?;
        let previous = self.snapshot();
        let snapshot = Snapshot::read_committed(&dir, previous.as_deref())
            .map_err(|_| EmbeddedIndexError::Corrupt)?;
        let bytes = snapshot.segments.iter().map(|s| s.bytes() as u64).sum();
        let keep: HashSet<String> = snapshot
            .manifest
            .segments
            .iter()
            .map(|e| e.file.clone())
            .collect();
        self.install(snapshot);
        // Readers that still hold an older snapshot keep their mappings: on Unix a removed file
        // stays readable while mapped. A reader about to map one it no longer finds reads the
        // newer manifest instead. Segments are the only files written under the lock besides
        // the manifest; the directory cache, and whatever else shares the directory, stay.
        dir.collect_garbage(|name| name.ends_with(".idx"), |name| keep.contains(name));
        Ok(bytes)
    }

    /// Applies removals and upserts (files re-read from the worktree) and commits them, with
    /// `source_revision` when given (else the committed revision stays). The caller holds the
    /// lock. Cost follows the change: new segments for the upserted files, deletion marks for the
    /// old copies.
    pub(crate) fn apply_locked(
        &self,
        upserts: &[(String, Stamp)],
        removals: &[String],
        source_revision: Option<&str>,
    ) -> Result<(), EmbeddedIndexError> {
        let Some(snap) = self.snapshot() else {
            return Err(EmbeddedIndexError::Corrupt);
        };
        let mut m = snap.manifest.clone();
        m.format = FORMAT;
        m.generation += 1;
        let mut entries = m.segments.clone();
        for path in upserts.iter().map(|(p, _)| p).chain(removals) {
            if let Some((si, id)) = snap.find(path)
                && !entries[si].deleted.contains(&id)
            {
                entries[si].deleted.push(id);
            }
        }
        let removed: HashSet<&String> = removals.iter().collect();
        let mut seen = HashSet::new();
        let mut new_docs: Vec<(String, Stamp)> = upserts
            .iter()
            .filter(|(p, _)| !removed.contains(p) && seen.insert(p.clone()))
            .cloned()
            .collect();
        new_docs.sort_by(|a, b| search_profile::PathKey::compare(&a.0, &b.0));
        entries.extend(self.write_docs(
            &Listing::from_vec(new_docs).ok_or_else(crate::refresh::too_many_paths)?,
            m.generation,
            Durability::Unsynced,
            &mut |_, _| {},
        )?);
        // Drop segments with nothing live, then merge the small ones when there are too many.
        entries.retain(|e| (e.deleted.len() as u32) < e.docs);
        let entries = self.maybe_merge(entries, &snap, m.generation)?;
        m.segments = entries;
        if let Some(rev) = source_revision {
            m.source_revision = Some(rev.to_owned());
        }
        m.updated_at = Some(UnixMillis::now().0);
        // A query waits for this commit; a crash that loses it costs a refresh or a rebuild.
        self.commit(m, index_storage::Durability::Unsynced)?;
        Ok(())
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
                    Segment::open(&self.dir(), &e.file, e.crc32)
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
                        meta: seg.meta(id as u32),
                    });
                }
            }
        }
        // A segment holds its docs in path order; the merged ones come from several.
        docs.sort_by(|a, b| search_profile::PathKey::compare(&a.path, &b.path));
        let file = format!("seg-{generation}-{}-merged.idx", unique_name_part());
        let merged = self.write_segment(
            file,
            Encoder::new().encode(&docs),
            docs.len(),
            Durability::Synced,
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
}

/// How many files a build asks of the disk at once when the tree is not cached. A cloud disk
/// serves a deep queue several times faster than the two reads the workers keep in flight.
const PREFETCH_THREADS: usize = 16;

/// How many files of a chunk are looked at before its others are hinted: a cached tree costs
/// only these opens.
const PREFETCH_SAMPLE: usize = 8;

/// Asks the kernel to read the files at `paths` (a chunk the build reads next) unless a sample
/// of them is cached already. Only a hint: it reads nothing and fails nothing.
fn prefetch(worktree: &RootDir, paths: &[&str]) {
    let step = (paths.len() / PREFETCH_SAMPLE).max(1);
    let cold = paths
        .iter()
        .step_by(step)
        .take(PREFETCH_SAMPLE)
        .any(|path| worktree.prefetch_walked_file(path) == Prefetch::Started);
    if cold {
        let _ = parallel::map(
            paths,
            PREFETCH_THREADS,
            || (),
            |_, path, ()| {
                worktree.prefetch_walked_file(path);
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use index_contract::{IndexState, SearchMode, SearchRequest};

    use crate::EmbeddedIndex;
    use crate::manifest::{FORMAT, Manifest};

    /// A build's segments are synced and record their identity; an incremental commit is not
    /// synced, so its segment records none and every process that opens it checks its crc: its
    /// bytes could be lost in a crash while its size and times survive.
    #[test]
    fn an_incremental_commit_records_no_identity_for_its_unsynced_segment() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("a.txt"), "alpha\n").unwrap();
        let store = tempfile::tempdir().unwrap();
        let index = EmbeddedIndex::open(root.path(), store.path()).unwrap();
        index.build("rev-1").unwrap();
        let manifest = || index.dir().read_manifest::<Manifest>(FORMAT).unwrap();
        let built = manifest();
        assert!(!built.segments.is_empty());
        assert!(built.segments.iter().all(|s| s.identity.is_some()));
        std::fs::write(root.path().join("b.txt"), "beta marker\n").unwrap();
        index
            .apply(&["b.txt".to_owned()], &[], Some("rev-2"))
            .unwrap();
        let applied = manifest();
        let new: Vec<_> = applied
            .segments
            .iter()
            .filter(|s| !built.segments.iter().any(|b| b.file == s.file))
            .collect();
        assert_eq!(new.len(), 1, "{applied:?}");
        assert_eq!(new[0].identity, None);
        // Damaged in place, its size kept, the unsynced segment is refused by another process's
        // open: it is never served.
        let path = store.path().join(&new[0].file);
        let len = std::fs::metadata(&path).unwrap().len() as usize;
        std::fs::write(&path, vec![0u8; len]).unwrap();
        let other = EmbeddedIndex::open(root.path(), store.path()).unwrap();
        assert_eq!(other.current_status().state, IndexState::Failed);
        let found = other
            .search_now(&SearchRequest::new("marker", SearchMode::IndexedLiteral))
            .unwrap();
        assert_eq!(found.status.state, IndexState::Failed);
        assert!(found.hits.is_empty(), "a damaged index answered: {found:?}");
    }
}
