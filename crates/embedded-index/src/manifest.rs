//! The manifest: which segments make up the committed index, which of their docs are deleted,
//! and the revision and time of the commit. It is committed in `index_storage`'s envelope (a
//! crc32 of its body, at most [`index_storage::MAX_MANIFEST_BYTES`], one [`FORMAT`]); replacing
//! it is the commit point of every build and update.

use serde::{Deserialize, Serialize};

/// The manifest format this version writes and reads. Format 5 holds segments with per-doc
/// stamps, docs in path order and Elias–Fano or bitmap postings (segment magic `\x04`), and each
/// segment's committed identity, over the held selection (ripgrep's default plus hidden files).
/// An index of another format opens as damaged and is rebuilt: another version reads neither
/// this one's postings nor its selection.
pub(crate) const FORMAT: u32 = 5;

/// One segment of the committed index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SegmentEntry {
    pub(crate) file: String,
    pub(crate) crc32: u32,
    pub(crate) docs: u32,
    /// Doc ids of this segment that later commits replaced or removed.
    pub(crate) deleted: Vec<u32>,
    /// The segment file's identity (size, inode, mtime, ctime) right after it was written: while
    /// it is unchanged, opening skips the checksum scan (see `Segment::open_committed`). Only a
    /// synced segment records one: after a crash an unsynced file's size and times may survive
    /// while its bytes do not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) identity: Option<[u64; 4]>,
}

/// The committed state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Manifest {
    pub(crate) format: u32,
    pub(crate) generation: u64,
    pub(crate) segments: Vec<SegmentEntry>,
    pub(crate) source_revision: Option<String>,
    pub(crate) updated_at: Option<u64>,
}

impl SegmentEntry {
    /// A segment file's identity as the manifest records it, from its stamp.
    pub(crate) fn identity_of(stamp: index_storage::Stamp) -> [u64; 4] {
        [stamp.len, stamp.ino, stamp.mtime_ns, stamp.ctime_ns]
    }
}

impl Manifest {
    /// The file a segment entry names, with its crc32: what a previous version's mapping is
    /// reused by ([`index_storage::reuse`]).
    pub(crate) fn file(entry: &SegmentEntry) -> (&str, u32) {
        (&entry.file, entry.crc32)
    }

    pub(crate) fn empty() -> Manifest {
        Manifest {
            format: FORMAT,
            generation: 0,
            segments: Vec::new(),
            source_revision: None,
            updated_at: None,
        }
    }
}
