//! Where a host works: the worktree a directory lies in, and the directory its index lives in.

use std::path::{Path, PathBuf};

use crate::HostError;
use crate::git::{self, GitError};

/// A directory to keep an index in: created if missing, and writable (a lock file can be opened
/// for writing in it).
fn usable_dir(dir: &Path) -> bool {
    // Never follow a link, and never block on a FIFO planted as the lock file.
    std::fs::create_dir_all(dir).is_ok()
        && search_profile::open_or_create_regular(&dir.join("LOCK")).is_ok()
}

/// The per-user cache directory for this worktree's index:
/// `$XDG_CACHE_HOME/repo-search/<name>-<id>` (else `~/.cache/...`; see [`worktree_dir_name`]).
fn cache_dir(root: &Path) -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("repo-search").join(worktree_dir_name(root)))
}

/// A directory name of its own for the worktree at `root`: `<name>-<id>`, where the name is the
/// worktree directory's (safe characters only, at most 40) and the id is derived from its
/// canonical path.
fn worktree_dir_name(root: &Path) -> String {
    let bytes = root.as_os_str().as_encoded_bytes();
    let reversed: Vec<u8> = bytes.iter().rev().copied().collect();
    let name: String = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(40)
        .collect();
    format!(
        "{name}-{:08x}{:08x}",
        crc32fast::hash(bytes),
        crc32fast::hash(&reversed)
    )
}

/// The index directory of the worktree containing `dir` under `base`, when one `--index-dir`
/// holds the indexes of several worktrees (an MCP server on its client's roots):
/// `<base>/<name>-<id>`, named as in the cache directory.
pub fn index_dir_under(base: &Path, dir: &Path) -> Result<PathBuf, HostError> {
    let (root, _) = worktree_root(dir)?;
    Ok(base.join(worktree_dir_name(&root)))
}

/// The worktree's canonical top directory for a directory inside it.
pub fn worktree_root(dir: &Path) -> Result<(PathBuf, PathBuf), HostError> {
    let dir = dir.canonicalize().map_err(|_| HostError::MissingRoot)?;
    if !dir.is_dir() {
        return Err(HostError::MissingRoot);
    }
    let (root, git_dir) = git::discover(&dir).map_err(|_: GitError| HostError::NotAWorktree)?;
    let root = root.canonicalize().map_err(|_| HostError::NotAWorktree)?;
    let git_dir = git_dir
        .canonicalize()
        .map_err(|_| HostError::NotAWorktree)?;
    Ok((root, git_dir))
}

/// The directory the index of the worktree at `root` lives in (created if missing):
/// `index_dir` when given, else `<git-dir>/repo-search`, else the user's cache directory.
pub(crate) fn index_location(
    root: &Path,
    git_dir: &Path,
    index_dir: Option<&Path>,
) -> Result<PathBuf, HostError> {
    let index_dir = match index_dir {
        Some(d) => {
            if !usable_dir(d) {
                return Err(HostError::IndexDirFlagUnusable);
            }
            let d = d
                .canonicalize()
                .map_err(|_| HostError::IndexDirFlagUnusable)?;
            // The index must never be searchable itself.
            if d.starts_with(root) && !d.starts_with(git_dir) {
                return Err(HostError::IndexDirInsideWorktree);
            }
            d
        }
        None => {
            let in_git = git_dir.join("repo-search");
            if usable_dir(&in_git) {
                in_git
            } else {
                cache_dir(root)
                    .filter(|d| usable_dir(d))
                    .ok_or(HostError::IndexDirUnusable)?
            }
        }
    };
    Ok(index_dir)
}

/// The worktree root and index directory a host for `dir` would use, worked out and checked
/// exactly as [`crate::Host::open`] does, without opening the index: a client of `repo-search serve`
/// finds the server's socket there.
pub fn locate(dir: &Path, index_dir: Option<&Path>) -> Result<(PathBuf, PathBuf), HostError> {
    let (root, git_dir) = worktree_root(dir)?;
    let index_dir = index_location(&root, &git_dir, index_dir)?;
    Ok((root, index_dir))
}
