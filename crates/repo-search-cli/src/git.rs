//! The few git questions the host asks, answered by the `git` command itself.
//!
//! Git is asked where the worktree is and which commit HEAD names, nothing more: which files are
//! searched, and whether the index is fresh, is decided by the selection itself. Git's own text
//! never reaches a caller: every failure maps to a fixed [`GitError`].

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Why a git question had no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GitError {
    /// The `git` command could not be run.
    NoGit,
    /// Git answered with an error (for example: not a git worktree).
    Refused,
}

/// Variables that would make git answer about another repository than the one at `-C`: the
/// host's answer must depend on `--root` alone.
const REPOSITORY_OVERRIDES: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
];

fn git(root: &Path, args: &[&str]) -> Result<Vec<u8>, GitError> {
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(root).args(args).stdin(Stdio::null());
    for var in REPOSITORY_OVERRIDES {
        cmd.env_remove(var);
    }
    let out = cmd.output().map_err(|_| GitError::NoGit)?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(GitError::Refused)
    }
}

fn line(bytes: Vec<u8>) -> String {
    String::from_utf8_lossy(&bytes).trim().to_owned()
}

/// The worktree's top directory.
pub(crate) fn toplevel(dir: &Path) -> Result<PathBuf, GitError> {
    git(dir, &["rev-parse", "--show-toplevel"]).map(|b| PathBuf::from(line(b)))
}

/// This worktree's own git directory (distinct per linked worktree).
pub(crate) fn git_dir(root: &Path) -> Result<PathBuf, GitError> {
    git(root, &["rev-parse", "--absolute-git-dir"]).map(|b| PathBuf::from(line(b)))
}

/// The commit HEAD names, or `None` on an unborn branch.
pub(crate) fn head(root: &Path) -> Option<String> {
    git(root, &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
        .ok()
        .map(line)
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit()))
}
