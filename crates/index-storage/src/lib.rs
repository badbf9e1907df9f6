//! The files of an index directory, written and read one way by every index: the trigram index
//! (`embedded-index`) and the semantic store (`semantic-index`).
//!
//! - **Opening** ([`IndexDir::open_file`], [`IndexDir::read`], [`IndexDir::map`]): a file of
//!   an index is a plain name directly in its directory, opened beneath it without following a
//!   symlink and without blocking, and only if it is a regular file. Its size is checked before
//!   a byte of it is read, mapped or checksummed ([`search_profile::read_bounded`],
//!   [`search_profile::read_in_chunks`]), so a damaged file of any size costs bounded memory.
//!   Anything else in its place is [`FileError::Damaged`]: never read through, rebuilt.
//! - **The durable write** ([`IndexDir::write_durably`]): a temporary file of a name unique to
//!   the writer, fsync, rename; [`IndexDir::sync`] makes the renames durable. A name, once
//!   renamed into place, is never written again, which is what makes mapping it sound.
//! - **The manifest** ([`IndexDir::read_manifest`], [`IndexDir::commit_manifest`]): one JSON
//!   file naming what is committed, in an envelope that carries the crc32 of its body, bounded in
//!   size, its body of one `format` per version. Replacing it is the commit point; a commit is
//!   durable or unsynced ([`Durability`]), and either way a killed process leaves a readable one.
//! - **The writer lock** ([`IndexDir::lock`]): one writer per directory, across processes, by an
//!   OS lock on [`LOCK`], waited for until a deadline ([`Wait`]). Readers never take it.
//! - **Garbage collection** ([`IndexDir::collect_garbage`]): after a commit, the files no
//!   manifest names, and the temporary files of killed writers.
//! - **Reuse** ([`reuse`], [`load_committed`]): a version loads only the files it does not
//!   share with the previous one, and tries again when a concurrent commit collected a file it
//!   was about to open.
//!
//! The formats inside the files (segments, what a manifest lists) are each index's own; the
//! LEB128 varints of the semantic store's segments are here ([`put_varint`], [`read_varint`]).
//!
//! # Example
//!
//! ```
//! use index_storage::{IndexDir, Wait};
//!
//! const FORMAT: u32 = 1;
//!
//! #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
//! struct Committed {
//!     format: u32,
//!     segments: Vec<String>,
//! }
//!
//! let tmp = tempfile::tempdir()?;
//! let dir = IndexDir::create(tmp.path())?;
//! let _lock = dir.lock(&mut Wait::until(None))?;
//! dir.write_durably("seg-1", b"segment bytes")?;
//! let committed = Committed { format: FORMAT, segments: vec!["seg-1".into()] };
//! dir.commit_manifest(&committed)?;
//! assert_eq!(dir.read_manifest::<Committed>(FORMAT)?, committed);
//! assert_eq!(dir.read("seg-1", 1 << 20)?, b"segment bytes");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod dir;
mod lock;
mod manifest;
mod stamp;
mod varint;

pub use dir::{IndexDir, Mapped, STALE_TEMP, unique_name_part};
pub use lock::{LockError, Wait, WriterLock};
pub use manifest::{Durability, LOAD_ATTEMPTS, load_committed, reuse};
pub use memmap2::Mmap;
pub use stamp::Stamp;
pub use varint::{put_varint, read_varint};

/// The manifest's name in an index directory.
pub const MANIFEST: &str = "MANIFEST";
/// The writer lock's file name in an index directory.
pub const LOCK: &str = "LOCK";
/// A manifest larger than this is damage: its size is checked before it is read, so a damaged
/// one of any size costs at most twice this much memory (its bytes and its body). A commit never
/// writes a larger one. About two million deleted ids fit.
pub const MAX_MANIFEST_BYTES: u64 = 16 << 20;

/// Why a file of an index could not be opened or read.
#[derive(Debug)]
pub enum FileError {
    /// There is no such file: the index has none yet, or a concurrent commit collected it.
    Missing,
    /// What is there is not an intact file of its kind: a symlink, FIFO, directory or device in
    /// its place, a name that is not a plain name, a size out of bounds, a file that changed or
    /// ended while it was read, or (for a manifest) a checksum, body or format that does not
    /// match. Never read through: the index is rebuilt.
    Damaged,
    /// Reading failed otherwise (permissions, I/O).
    Io(std::io::Error),
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileError::Missing => f.write_str("the index file does not exist"),
            FileError::Damaged => f.write_str("the index file is damaged"),
            FileError::Io(e) => write!(f, "reading the index file failed: {e}"),
        }
    }
}

impl std::error::Error for FileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FileError::Io(e) => Some(e),
            _ => None,
        }
    }
}
