//! Why building, updating or refreshing failed.

/// Why building, updating or refreshing failed. Searches and status never return these for a
/// damaged index: it reports `failed`.
#[derive(Debug)]
pub enum EmbeddedIndexError {
    /// Reading the worktree or writing the index directory failed.
    Io(std::io::Error),
    /// The committed index is damaged; rebuild it with [`crate::EmbeddedIndex::build`].
    Corrupt,
    /// A search was given a query the matcher cannot compile, or a glob or type it cannot.
    BadQuery,
    /// Another process (or thread) held the writer lock until the caller's deadline passed.
    Busy,
    /// A worker thread panicked: nothing was committed.
    WorkerPanicked,
}

impl std::fmt::Display for EmbeddedIndexError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EmbeddedIndexError::Io(e) => write!(f, "index I/O failed: {e}"),
            EmbeddedIndexError::Corrupt => {
                f.write_str("the committed index is damaged; rebuild it")
            }
            EmbeddedIndexError::BadQuery => f.write_str("the query cannot be compiled"),
            EmbeddedIndexError::Busy => {
                f.write_str("another writer held the index lock past the deadline")
            }
            EmbeddedIndexError::WorkerPanicked => {
                f.write_str("an index worker panicked; nothing was committed")
            }
        }
    }
}

impl std::error::Error for EmbeddedIndexError {}

impl From<std::io::Error> for EmbeddedIndexError {
    fn from(e: std::io::Error) -> Self {
        EmbeddedIndexError::Io(e)
    }
}

impl From<crate::parallel::Panicked> for EmbeddedIndexError {
    fn from(_: crate::parallel::Panicked) -> Self {
        EmbeddedIndexError::WorkerPanicked
    }
}
