//! Committed versions: loading a manifest and its segments, and noticing another process's commit.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use index_contract::{IndexState, IndexStatus, UnixMillis};
use search_profile::RootDir;

use crate::manifest::{self, MANIFEST, Manifest, ManifestError};
use crate::segment::{Segment, SegmentError};

/// One committed version: the manifest and its mapped segments.
pub(crate) struct Snapshot {
    pub(crate) manifest: Manifest,
    pub(crate) segments: Vec<Arc<Segment>>,
    pub(crate) deleted: Vec<HashSet<u32>>,
    /// Live path → (segment, doc).
    pub(crate) live: HashMap<String, (usize, u32)>,
}

/// Why no committed version could be loaded.
#[derive(Debug)]
pub(crate) enum LoadError {
    /// The manifest or a segment is damaged.
    Corrupt,
    /// Reading failed (other than a file vanishing under a concurrent commit, which is retried).
    Io(std::io::Error),
}

/// How often a reader tries again when a concurrent commit removed a segment it was about to
/// map: each retry reads the newer manifest, so this only runs out under a storm of commits.
const LOAD_ATTEMPTS: usize = 50;

impl Snapshot {
    pub(crate) fn empty() -> Snapshot {
        Snapshot {
            manifest: Manifest::empty(),
            segments: Vec::new(),
            deleted: Vec::new(),
            live: HashMap::new(),
        }
    }

    /// Maps and checks the manifest's segments. Segments already mapped (and checked) by
    /// `previous` are reused, so a commit opens only the segments it wrote: its cost follows the
    /// change, not the corpus.
    fn load(
        dir: &RootDir,
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
                None => Arc::new(Segment::open_committed(
                    dir,
                    &entry.file,
                    entry.crc32,
                    entry.identity,
                )?),
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

    /// Reads the committed version. When a segment the manifest names is gone, another process
    /// committed and collected it in between: read its newer manifest and try again.
    pub(crate) fn read_committed(
        dir: &RootDir,
        previous: Option<&Snapshot>,
    ) -> Result<Snapshot, LoadError> {
        for _ in 0..LOAD_ATTEMPTS {
            let m = match manifest::read(dir) {
                Ok(m) => m,
                Err(ManifestError::Missing) => return Ok(Snapshot::empty()),
                Err(ManifestError::Corrupt) => return Err(LoadError::Corrupt),
                Err(ManifestError::Io(e)) => return Err(LoadError::Io(e)),
            };
            match Snapshot::load(dir, m, previous) {
                Ok(s) => return Ok(s),
                Err(SegmentError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                Err(SegmentError::Io(e)) => return Err(LoadError::Io(e)),
                Err(SegmentError::Corrupt) => return Err(LoadError::Corrupt),
            }
        }
        Err(LoadError::Corrupt)
    }

    pub(crate) fn status(&self) -> IndexStatus {
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

/// The identity of the committed manifest file: every commit renames a new file into place, so a
/// different identity means another commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ManifestId {
    ino: u64,
    len: u64,
    mtime_ns: i128,
}

/// The identity of the manifest now, or `None` when there is none.
pub(crate) fn manifest_id(dir: &RootDir) -> Option<ManifestId> {
    let m = std::fs::symlink_metadata(dir.path().join(MANIFEST)).ok()?;
    #[cfg(unix)]
    let (ino, mtime_ns) = {
        use std::os::unix::fs::MetadataExt;
        (
            m.ino(),
            i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        )
    };
    #[cfg(not(unix))]
    let (ino, mtime_ns) = (
        0,
        m.modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i128),
    );
    Some(ManifestId {
        ino,
        len: m.len(),
        mtime_ns,
    })
}
