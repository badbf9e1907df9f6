//! The store's manifest: what one committed version is made of. It is committed in
//! `index_storage`'s envelope (a crc32 of its body, bounded in size, one [`FORMAT`]).

use std::collections::HashSet;

use index_storage::{FileError, IndexDir};
use serde::{Deserialize, Serialize};

use super::error::StoreError;

/// The manifest format this version writes and reads. It also names the chunker and the
/// definition names behind a store's chunks: a store built by another is rebuilt, not mixed.
/// 2: tree-sitter chunks, definition names from the syntax tree.
/// 3: a front-coded dictionary and 16-byte content hashes (segment magic `RSSEMSG2`).
/// 4: a chunk is searched under its file's path (`crate::searched_text`): BM25 terms, static
/// vectors and content hashes read it.
/// 5: a file's name words are kept as their name stems (`crate::text::name_stem`).
pub(super) const FORMAT: u32 = 5;

/// One segment of a committed version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct SegmentEntry {
    pub(super) file: String,
    pub(super) crc32: u32,
    pub(super) chunks: u32,
    /// File ids of this segment that later commits replaced or removed.
    pub(super) deleted: Vec<u32>,
}

/// A committed version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Manifest {
    pub(super) format: u32,
    pub(super) generation: u64,
    pub(super) revision: String,
    /// The static model's sha256: another model means another vector space, so a rebuild.
    pub(super) model: String,
    /// The IDF table's file and crc32, and how many chunks it was computed over.
    pub(super) idf_file: String,
    pub(super) idf_crc32: u32,
    pub(super) idf_chunks: u64,
    pub(super) segments: Vec<SegmentEntry>,
}

impl Manifest {
    /// The committed version in `dir`, when there is one of this version's [`FORMAT`].
    pub(super) fn read(dir: &IndexDir) -> Result<Manifest, FileError> {
        dir.read_manifest(FORMAT)
    }

    /// Commits this version: the manifest replaced durably, the directory fsynced.
    pub(super) fn commit(&self, dir: &IndexDir) -> Result<(), StoreError> {
        dir.commit_manifest(self)
            .map_err(StoreError::io(dir.path()))
    }

    /// Deletes the files the committed version does not name (left by earlier commits or a
    /// killed writer). Runs under the writer lock; every file of the store's directory is
    /// written under it.
    pub(super) fn collect_garbage(dir: &IndexDir) {
        let Ok(m) = Manifest::read(dir) else {
            return;
        };
        let keep: HashSet<&str> = m
            .segments
            .iter()
            .map(|s| s.file.as_str())
            .chain([m.idf_file.as_str()])
            .collect();
        dir.collect_garbage(|_| true, |name| keep.contains(name));
    }

    /// The file a segment entry names, with its crc32: what a previous version's mapping is
    /// reused by ([`index_storage::reuse`]).
    pub(super) fn file(entry: &SegmentEntry) -> (&str, u32) {
        (&entry.file, entry.crc32)
    }
}
