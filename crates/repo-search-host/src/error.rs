//! Why a host could not serve: [`HostError`], one variant per failure, each with its stable
//! [`ErrorCode`] and no text of git, the operating system or a backend.

use std::path::Path;

use embedded_index::EmbeddedIndexError;
use index_contract::{ErrorCode, IndexError};

/// Why a host could not serve. A front end maps each to its own fixed words (the CLI's
/// `Failure`: code, message, hint); none carries text of git, the operating system, a database
/// or a model file.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum HostError {
    /// The root directory does not exist or is not a directory.
    MissingRoot,
    /// The root directory is not inside a git worktree.
    NotAWorktree,
    /// The index directory asked for is inside the searched worktree (outside its git
    /// directory), where the index would be searched itself.
    IndexDirInsideWorktree,
    /// No index directory could be created or written where the host looks by default: the
    /// git directory, then the user's cache directory.
    IndexDirUnusable,
    /// The index directory asked for cannot be created, or is not a directory.
    IndexDirFlagUnusable,
    /// The index directory is usable, and the index in it could not be opened.
    IndexUnopenable,
    /// The index is damaged, or reading the worktree for it failed.
    IndexFailed,
    /// Another writer held the index past this call's deadline.
    Busy,
    /// The index could not be written: the device holding the index directory is full (or the
    /// user's quota on it). Nothing committed was lost.
    DiskFull,
    /// The deadline is outside the caps the contract allows.
    DeadlineUnusable,
    /// A re-rank on every answer was asked for, and MiniLM is not in the model directory.
    RerankModelMissing,
    /// A model file is there but cannot be used.
    ModelDamaged(ModelDamage),
    /// The tool refused the call or could not answer it (the contract's own error).
    Tool(IndexError),
    /// The shared index's settings are not usable: not a `postgres://` URL, or an id that is not
    /// a valid one.
    SharedUnusable,
    /// The shared index's server could not be reached, or refused the login.
    SharedUnreachable,
    /// The shared index did not answer in time; nothing was written.
    SharedTimeout,
    /// The shared index failed (a lost connection, a failed statement); nothing was written.
    SharedFailed,
    /// A write was asked of a read-only shared index.
    SharedReadOnly,
    /// A running `repo-search serve` could not refresh its index: the code it reported, and
    /// none of its words.
    RefreshFailed(ErrorCode),
    /// A running `repo-search serve` stopped answering mid-way; its client then answers by
    /// itself, so a caller never sees this one.
    ServerGone,
    /// A server could not take its lock or listen on its socket in the index directory.
    ServeUnavailable,
    /// Another server already serves this index directory: its lock stayed held for longer
    /// than a question about it takes.
    ServerRunning,
}

impl HostError {
    /// The stable code of this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            HostError::MissingRoot
            | HostError::NotAWorktree
            | HostError::DeadlineUnusable
            | HostError::RerankModelMissing
            | HostError::ModelDamaged(_)
            | HostError::SharedUnusable
            | HostError::SharedReadOnly
            | HostError::ServerRunning => ErrorCode::Unsupported,
            HostError::IndexDirInsideWorktree => ErrorCode::Untrusted,
            HostError::Busy | HostError::SharedTimeout => ErrorCode::Timeout,
            HostError::IndexDirUnusable
            | HostError::IndexDirFlagUnusable
            | HostError::IndexUnopenable
            | HostError::IndexFailed
            | HostError::DiskFull
            | HostError::SharedUnreachable
            | HostError::SharedFailed
            | HostError::ServerGone
            | HostError::ServeUnavailable => ErrorCode::Failed,
            HostError::Tool(e) => e.code(),
            HostError::RefreshFailed(code) => *code,
        }
    }
}

/// The variant and its code: fixed words, as every variant carries no outside text.
impl std::fmt::Display for HostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {self:?}", self.code().as_str())
    }
}

impl std::error::Error for HostError {}

impl From<IndexError> for HostError {
    fn from(e: IndexError) -> Self {
        HostError::Tool(e)
    }
}

/// A model file that is there but cannot be used, in words fixed by this program: the file's name
/// in the model directory, and what is wrong with it (`semantic_index::Defect`'s words).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelDamage {
    /// The file's name, e.g. `static-256.bin` or `model.safetensors`.
    pub file: String,
    /// What is wrong with it.
    pub defect: String,
}

impl ModelDamage {
    /// The damage a model error reports; `None` when the model is simply not installed. No text
    /// of the operating system or the tokenizer is kept.
    pub fn of(e: &semantic_index::Error) -> Option<ModelDamage> {
        use semantic_index::Error;
        let name = |path: &Path| {
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let (file, defect) = match e {
            _ if e.is_missing() => return None,
            Error::Invalid { path, defect } => (name(path), defect.to_string()),
            Error::Read { path, .. } | Error::Write { path, .. } | Error::Missing { path } => (
                name(path),
                "it could not be read (permissions or I/O)".to_owned(),
            ),
            Error::Tokenizer(_) => (
                "tokenizer.json".to_owned(),
                "the tokenizer could not be loaded from it".to_owned(),
            ),
        };
        Some(ModelDamage { file, defect })
    }
}

impl From<EmbeddedIndexError> for HostError {
    fn from(e: EmbeddedIndexError) -> Self {
        match e {
            EmbeddedIndexError::Busy => HostError::Busy,
            EmbeddedIndexError::Io(e) if is_disk_full(&e) => HostError::DiskFull,
            _ => HostError::IndexFailed,
        }
    }
}

impl From<semantic_index::StoreError> for HostError {
    fn from(e: semantic_index::StoreError) -> Self {
        match e {
            semantic_index::StoreError::Busy => HostError::Busy,
            semantic_index::StoreError::Io { source, .. } if is_disk_full(&source) => {
                HostError::DiskFull
            }
            _ => HostError::IndexFailed,
        }
    }
}

/// Whether a write failed because the device (or the user's quota on it) is full: the index is
/// not damaged then, and rebuilding it would fail the same way.
fn is_disk_full(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}
