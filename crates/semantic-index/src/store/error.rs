//! Why the semantic store could not be read or written.

use std::path::{Path, PathBuf};

use index_storage::{FileError, IndexDir};

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

    /// Why the file `name` of the store in `dir` could not be read: damage is
    /// [`StoreError::Corrupt`]; a missing file is [`StoreError::Io`] of kind `NotFound` (a
    /// concurrent commit may have collected it).
    pub(crate) fn file(dir: &IndexDir, name: &str) -> impl FnOnce(FileError) -> StoreError {
        let path = dir.path().join(name);
        move |e| match e {
            FileError::Damaged => StoreError::Corrupt,
            FileError::Missing => StoreError::Io {
                path,
                source: std::io::ErrorKind::NotFound.into(),
            },
            FileError::Io(source) => StoreError::Io { path, source },
        }
    }
}
