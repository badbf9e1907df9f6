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

/// The worktree containing `dir` and its git directory, found as git finds them (the nearest
/// ancestor holding `.git`, a directory or a `gitdir:` file) without running git: a query must not
/// pay for two processes. Anything unusual is asked of git itself.
pub(crate) fn discover(dir: &Path) -> Result<(PathBuf, PathBuf), GitError> {
    for at in dir.ancestors() {
        let dot_git = at.join(".git");
        let Ok(meta) = std::fs::symlink_metadata(&dot_git) else {
            continue;
        };
        if meta.is_dir() && dot_git.join("HEAD").is_file() {
            return Ok((at.to_path_buf(), dot_git));
        }
        if meta.is_file()
            && let Ok(text) = std::fs::read_to_string(&dot_git)
            && let Some(target) = text.trim().strip_prefix("gitdir: ")
        {
            let git_dir = at.join(target);
            if git_dir.join("HEAD").is_file() {
                return Ok((at.to_path_buf(), git_dir));
            }
        }
        break;
    }
    let root = toplevel(dir)?;
    let git_dir = git_dir(&root)?;
    Ok((root, git_dir))
}

/// The worktree's top directory.
pub(crate) fn toplevel(dir: &Path) -> Result<PathBuf, GitError> {
    git(dir, &["rev-parse", "--show-toplevel"]).map(|b| PathBuf::from(line(b)))
}

/// This worktree's own git directory (distinct per linked worktree).
pub(crate) fn git_dir(root: &Path) -> Result<PathBuf, GitError> {
    git(root, &["rev-parse", "--absolute-git-dir"]).map(|b| PathBuf::from(line(b)))
}

/// The commit HEAD names, read from the git directory's files without running git (a query must
/// not pay for a process); `git rev-parse` answers whatever the files do not (a ref storage other
/// than files, a symbolic ref to a symbolic ref). `None` on an unborn branch.
pub(crate) fn read_head(root: &Path, git_dir: &Path) -> Option<String> {
    resolve_head_files(git_dir).or_else(|| head(root))
}

fn is_object_id(s: &str) -> bool {
    matches!(s.len(), 40 | 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn resolve_head_files(git_dir: &Path) -> Option<String> {
    let head = std::fs::read_to_string(git_dir.join("HEAD")).ok()?;
    let head = head.trim();
    let Some(name) = head.strip_prefix("ref: ") else {
        return is_object_id(head).then(|| head.to_owned());
    };
    if !name.starts_with("refs/") || name.split('/').any(|c| c.is_empty() || c == "..") {
        return None;
    }
    // A linked worktree keeps its branches in the common directory.
    let common = std::fs::read_to_string(git_dir.join("commondir"))
        .ok()
        .map(|c| git_dir.join(c.trim()))
        .unwrap_or_else(|| git_dir.to_path_buf());
    for base in [git_dir, common.as_path()] {
        if let Ok(id) = std::fs::read_to_string(base.join(name)) {
            let id = id.trim();
            return is_object_id(id).then(|| id.to_owned());
        }
    }
    let packed = std::fs::read_to_string(common.join("packed-refs")).ok()?;
    packed.lines().find_map(|line| {
        let (id, r) = line.split_once(' ')?;
        (r == name && is_object_id(id)).then(|| id.to_owned())
    })
}

/// The commit HEAD names, or `None` on an unborn branch.
pub(crate) fn head(root: &Path) -> Option<String> {
    git(root, &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
        .ok()
        .map(line)
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit()))
}
