//! The manifest: which segments make up the committed index, which of their docs are deleted,
//! and the revision and time of the commit. Replacing it (write, fsync, rename, fsync the
//! directory) is the commit point of every build and update.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The file name of the committed manifest.
pub(crate) const MANIFEST: &str = "MANIFEST";
const FORMAT: u32 = 1;

/// One segment of the committed index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SegmentEntry {
    pub(crate) file: String,
    pub(crate) crc32: u32,
    pub(crate) docs: u32,
    /// Doc ids of this segment that later commits replaced or removed.
    pub(crate) deleted: Vec<u32>,
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

pub(crate) fn read(dir: &Path) -> Result<Manifest, ManifestError> {
    let bytes = match std::fs::read(dir.join(MANIFEST)) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(ManifestError::Missing),
        Err(e) => return Err(ManifestError::Io(e)),
    };
    let env: Envelope = serde_json::from_slice(&bytes).map_err(|_| ManifestError::Corrupt)?;
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
