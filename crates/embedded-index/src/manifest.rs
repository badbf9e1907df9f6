//! The manifest: which segments make up the committed index, which of their docs are deleted,
//! and the revision and time of the commit. Replacing it (write, fsync, rename, fsync the
//! directory) is the commit point of every build and update.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The file name of the committed manifest.
pub(crate) const MANIFEST: &str = "MANIFEST";
/// The manifest format this version writes and reads. Format 3 holds segments with per-doc
/// stamps, docs in path order (segment magic `\x03`), and each segment's committed identity.
pub(crate) const FORMAT: u32 = 3;
/// A manifest larger than this is damage, not an index: its size is checked before it is read,
/// so a damaged manifest of any size costs at most twice this much memory (its bytes and its
/// body). A commit never writes a larger one. About two million deleted doc ids fit.
pub(crate) const MAX_MANIFEST_BYTES: u64 = 16 << 20;

/// One segment of the committed index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SegmentEntry {
    pub(crate) file: String,
    pub(crate) crc32: u32,
    pub(crate) docs: u32,
    /// Doc ids of this segment that later commits replaced or removed.
    pub(crate) deleted: Vec<u32>,
    /// The segment file's identity (size, inode, mtime, ctime) right after it was written: while
    /// it is unchanged, opening skips the checksum scan (see `Segment::open_committed`).
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

impl Manifest {
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

/// The manifest on disk: its body as a string, and the crc32 of that string.
#[derive(Serialize, Deserialize)]
struct Envelope {
    crc32: u32,
    body: String,
}

/// Why a manifest could not be read.
#[derive(Debug)]
pub(crate) enum ManifestError {
    /// There is none: the index is empty.
    Missing,
    /// It exists but is damaged, or of a format this version does not read.
    Corrupt,
    /// It could not be read.
    Io(std::io::Error),
}

/// Reads the committed manifest. It is opened without following a symlink and without blocking,
/// and must be a regular file of bounded size: a FIFO or a link planted in its place is damage.
pub(crate) fn read(dir: &search_profile::RootDir) -> Result<Manifest, ManifestError> {
    use search_profile::OpenError;
    let file = match dir.open_file(MANIFEST) {
        Ok(f) => f,
        Err(OpenError::Missing) => return Err(ManifestError::Missing),
        Err(OpenError::Io(e)) => return Err(ManifestError::Io(e)),
        Err(_) => return Err(ManifestError::Corrupt),
    };
    let bytes = match search_profile::read_bounded(&file, MAX_MANIFEST_BYTES) {
        Ok(b) => b,
        // Too large, or changed while read (a manifest is renamed into place, never rewritten).
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::FileTooLarge | std::io::ErrorKind::InvalidData
            ) =>
        {
            return Err(ManifestError::Corrupt);
        }
        Err(e) => return Err(ManifestError::Io(e)),
    };
    let env: Envelope = serde_json::from_slice(&bytes).map_err(|_| ManifestError::Corrupt)?;
    drop(bytes);
    if crc32fast::hash(env.body.as_bytes()) != env.crc32 {
        return Err(ManifestError::Corrupt);
    }
    let m: Manifest = serde_json::from_str(&env.body).map_err(|_| ManifestError::Corrupt)?;
    if m.format != FORMAT {
        return Err(ManifestError::Corrupt);
    }
    Ok(m)
}

/// Commits `m`: after this returns, a crash at any point leaves either the old or the new
/// manifest in place, never a mix.
pub(crate) fn commit(dir: &Path, m: &Manifest) -> std::io::Result<()> {
    let body = serde_json::to_string(m).map_err(std::io::Error::other)?;
    let env = Envelope {
        crc32: crc32fast::hash(body.as_bytes()),
        body,
    };
    let bytes = serde_json::to_vec(&env).map_err(std::io::Error::other)?;
    // A reader would refuse it as damage: fail this commit rather than write an unreadable index.
    if bytes.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            "the manifest would be larger than a reader accepts",
        ));
    }
    crate::segment::write_durably(dir, MANIFEST, &bytes)?;
    sync_dir(dir)
}

/// Makes the renames in `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::fs::File::open(dir)?.sync_all()?;
    }
    let _ = dir;
    Ok(())
}
