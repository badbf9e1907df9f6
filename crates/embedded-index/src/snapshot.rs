//! Committed versions: loading a manifest and its segments, and noticing another process's commit.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use search_profile::PathKey;

use index_contract::{IndexState, IndexStatus, UnixMillis};
use index_storage::{FileError, IndexDir, MANIFEST, Stamp};

use crate::manifest::{FORMAT, Manifest};
use crate::segment::{Segment, SegmentError};

/// One committed version: the manifest and its mapped segments.
pub(crate) struct Snapshot {
    pub(crate) manifest: Manifest,
    pub(crate) segments: Vec<Arc<Segment>>,
    pub(crate) deleted: Vec<HashSet<u32>>,
    /// How many docs are live, over all segments.
    live_count: usize,
    /// When (ms since the epoch) a refresh of this process last found this very commit to hold
    /// exactly the selection at its HEAD; 0 when none did. Later than the manifest's `updated_at`,
    /// it stands in for a re-stamp that would change nothing but the time: the commit stays, and
    /// nothing is written. Another commit is another snapshot, which starts unverified.
    verified_at: AtomicU64,
    /// The digest of the servable files and their versions, computed once when first asked for
    /// (`EmbeddedIndex::committed_head`).
    pub(crate) files_digest: std::sync::OnceLock<u64>,
    /// The walk names of the live files no answer may name, computed once when first asked for
    /// (`EmbeddedIndex::committed_head`).
    pub(crate) unservable: std::sync::OnceLock<Arc<[String]>>,
    /// Which of its files under hidden names each request selects, found once when first asked
    /// for (`EmbeddedIndex::hidden_rules`).
    pub(crate) hidden: std::sync::OnceLock<Arc<search_profile::HiddenRules>>,
    /// The last include-glob selection worked out against this commit
    /// (`EmbeddedIndex::glob_selection`).
    pub(crate) glob_memo: std::sync::Mutex<Option<Arc<crate::query::GlobMemo>>>,
}

/// The revision a removal commits when the facade routed it as the first half of an update: the
/// index then matches no revision and reports `building` until the update commits. The empty
/// string, because no update can carry it (the guard refuses an empty revision).
pub(crate) const UPDATE_UNDER_WAY: &str = "";

/// Why no committed version could be loaded.
#[derive(Debug)]
pub(crate) enum LoadError {
    /// The manifest or a segment is damaged.
    Corrupt,
    /// Reading failed (other than a file vanishing under a concurrent commit, which is retried).
    Io(std::io::Error),
}

impl Snapshot {
    pub(crate) fn empty() -> Snapshot {
        Snapshot {
            manifest: Manifest::empty(),
            segments: Vec::new(),
            deleted: Vec::new(),
            live_count: 0,
            verified_at: AtomicU64::new(0),
            files_digest: std::sync::OnceLock::new(),
            unservable: std::sync::OnceLock::new(),
            hidden: std::sync::OnceLock::new(),
            glob_memo: std::sync::Mutex::new(None),
        }
    }

    /// The live copy of `path`: (segment, doc). Each segment holds its docs in path order, so
    /// this is a binary search per segment, newest first; a path is live in at most one.
    pub(crate) fn find(&self, path: &str) -> Option<(usize, u32)> {
        for (si, seg) in self.segments.iter().enumerate().rev() {
            if let Some(id) = seg.find_path(path)
                && !self.deleted[si].contains(&id)
            {
                return Some((si, id));
            }
        }
        None
    }

    /// How many docs are live.
    pub(crate) fn live_count(&self) -> usize {
        self.live_count
    }

    /// Every live doc as (path, segment, doc), in path order: a k-way merge of the segments,
    /// which hold their docs in path order. No path is copied.
    pub(crate) fn live_docs(&self) -> impl Iterator<Item = (&str, usize, u32)> + '_ {
        struct Head<'a>(&'a str, usize, u32);
        impl PartialEq for Head<'_> {
            fn eq(&self, o: &Self) -> bool {
                self.cmp(o).is_eq()
            }
        }
        impl Eq for Head<'_> {}
        impl PartialOrd for Head<'_> {
            fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(o))
            }
        }
        impl Ord for Head<'_> {
            fn cmp(&self, o: &Self) -> std::cmp::Ordering {
                PathKey::compare(self.0, o.0).then(self.1.cmp(&o.1))
            }
        }
        let next_live = move |si: usize, mut id: u32| -> Option<Head<'_>> {
            let seg = &self.segments[si];
            while id < seg.n_docs() {
                if !self.deleted[si].contains(&id) {
                    return Some(Head(seg.path(id), si, id));
                }
                id += 1;
            }
            None
        };
        let mut heap: BinaryHeap<Reverse<Head<'_>>> = (0..self.segments.len())
            .filter_map(|si| next_live(si, 0).map(Reverse))
            .collect();
        // The head that sorts before every head in the heap, kept out of it: a build writes its
        // segments as consecutive runs of the path order, so a doc usually follows the previous
        // one of its segment and costs one comparison instead of a pop and a push.
        let mut first: Option<Head<'_>> = None;
        std::iter::from_fn(move || {
            let Head(path, si, id) = match first.take() {
                Some(h) => h,
                None => heap.pop()?.0,
            };
            if let Some(h) = next_live(si, id + 1) {
                match heap.peek() {
                    Some(Reverse(top)) if *top < h => heap.push(Reverse(h)),
                    _ => first = Some(h),
                }
            }
            Some((path, si, id))
        })
    }

    /// Maps and checks the manifest's segments. Segments already mapped (and checked) by
    /// `previous` are reused, so a commit opens only the segments it wrote: its cost follows the
    /// change, not the corpus.
    fn load(
        dir: &IndexDir,
        manifest: Manifest,
        previous: Option<&Snapshot>,
    ) -> Result<Snapshot, SegmentError> {
        let mut segments = Vec::with_capacity(manifest.segments.len());
        let mut deleted = Vec::with_capacity(manifest.segments.len());
        let mut live_count = 0usize;
        let previous = previous.map(|p| (&p.manifest.segments[..], &p.segments[..]));
        for entry in &manifest.segments {
            let reused = index_storage::reuse(previous, entry, Manifest::file);
            let reused_none = reused.is_none();
            let seg = match reused {
                Some(seg) => seg,
                None => Arc::new(Segment::open_committed(
                    dir,
                    &entry.file,
                    entry.crc32,
                    entry.identity,
                )?),
            };
            if seg.n_docs() != entry.docs || (reused_none && !seg.is_in_path_order()) {
                return Err(SegmentError::Corrupt);
            }
            let del: HashSet<u32> = entry.deleted.iter().copied().collect();
            if del.iter().any(|&id| id >= seg.n_docs()) {
                return Err(SegmentError::Corrupt);
            }
            live_count += seg.n_docs() as usize - del.len();
            segments.push(seg);
            deleted.push(del);
        }
        Ok(Snapshot {
            manifest,
            segments,
            deleted,
            live_count,
            verified_at: AtomicU64::new(0),
            files_digest: std::sync::OnceLock::new(),
            unservable: std::sync::OnceLock::new(),
            hidden: std::sync::OnceLock::new(),
            glob_memo: std::sync::Mutex::new(None),
        })
    }

    /// Reads the committed version. When a segment the manifest names is gone, another process
    /// committed and collected it in between: read its newer manifest and try again.
    pub(crate) fn read_committed(
        dir: &IndexDir,
        previous: Option<&Snapshot>,
    ) -> Result<Snapshot, LoadError> {
        index_storage::load_committed(
            || {
                let m = match dir.read_manifest::<Manifest>(FORMAT) {
                    Ok(m) => m,
                    Err(FileError::Missing) => return Ok(Snapshot::empty()),
                    Err(FileError::Damaged) => return Err(LoadError::Corrupt),
                    Err(FileError::Io(e)) => return Err(LoadError::Io(e)),
                };
                Snapshot::load(dir, m, previous).map_err(|e| match e {
                    SegmentError::Io(e) => LoadError::Io(e),
                    SegmentError::Corrupt => LoadError::Corrupt,
                })
            },
            |e| matches!(e, LoadError::Io(e) if e.kind() == std::io::ErrorKind::NotFound),
            || LoadError::Corrupt,
        )
    }

    /// Records that a refresh found this commit current at `at` (ms since the epoch).
    pub(crate) fn verified(&self, at: u64) {
        self.verified_at.fetch_max(at, Ordering::Relaxed);
    }

    /// When this commit was last known to hold the worktree's selection: its commit time, or a
    /// later refresh of this process that found nothing changed.
    pub(crate) fn updated_at(&self) -> Option<u64> {
        let verified = self.verified_at.load(Ordering::Relaxed);
        match self.manifest.updated_at {
            Some(t) => Some(t.max(verified)),
            None => (verified > 0).then_some(verified),
        }
    }

    pub(crate) fn status(&self) -> IndexStatus {
        if self.manifest.source_revision.as_deref() == Some(UPDATE_UNDER_WAY) {
            return IndexStatus::new(IndexState::Building);
        }
        IndexStatus {
            state: if self.manifest.generation == 0 {
                IndexState::Empty
            } else {
                IndexState::Ready
            },
            source_revision: self.manifest.source_revision.clone(),
            updated_at: self.updated_at().map(UnixMillis),
        }
    }
}

/// The identity of the committed manifest file: every commit renames a new file into place, so a
/// different stamp means another commit.
pub(crate) type ManifestId = Stamp;

/// The identity of the manifest now, or `None` when there is none.
pub(crate) fn manifest_id(dir: &IndexDir) -> Option<ManifestId> {
    dir.stamp(MANIFEST)
}

#[cfg(test)]
mod tests {
    use crate::{EmbeddedIndex, EmbeddedIndexConfig};
    use search_profile::PathKey;

    #[test]
    fn live_docs_come_in_path_order_when_segments_interleave() {
        let repo = tempfile::tempdir().unwrap();
        let mut all = Vec::new();
        for d in ["a", "a-b", "b", "b/c"] {
            std::fs::create_dir_all(repo.path().join(d)).unwrap();
            for f in 0..80 {
                let rel = format!("{d}/f{f:02}.txt");
                std::fs::write(repo.path().join(&rel), format!("text {rel}\n")).unwrap();
                all.push(rel);
            }
        }
        let store = tempfile::tempdir().unwrap();
        let config = EmbeddedIndexConfig {
            threads: Some(1),
            pairs_per_segment: 300,
            max_small_segments: 100,
            merged_segment_bytes: 0,
        };
        let index = EmbeddedIndex::with_config(repo.path(), store.path(), config).unwrap();
        index.build("r1").unwrap();
        // Re-read every seventh file, then every third: two more segments whose docs fall between
        // those of every other segment.
        for step in [7, 3] {
            let some: Vec<String> = all.iter().step_by(step).cloned().collect();
            index.apply(&some, &[], None).unwrap();
        }
        let snap = index.snapshot().unwrap();
        assert!(snap.segments.len() >= 4, "{} segments", snap.segments.len());
        let live: Vec<&str> = snap.live_docs().map(|(p, _, _)| p).collect();
        all.sort_by(|a, b| PathKey::compare(a, b));
        assert_eq!(live, all);
    }
}
