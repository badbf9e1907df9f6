//! The few git questions the host asks, answered by the `git` command itself.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn git(root: &Path, args: &[&str]) -> Result<Vec<u8>, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("could not run git: {e}"))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

fn line(bytes: Vec<u8>) -> String {
    String::from_utf8_lossy(&bytes).trim().to_owned()
}

/// The worktree's top directory.
pub(crate) fn toplevel(dir: &Path) -> Result<PathBuf, String> {
    git(dir, &["rev-parse", "--show-toplevel"]).map(|b| PathBuf::from(line(b)))
}

/// This worktree's own git directory (distinct per linked worktree).
pub(crate) fn git_dir(root: &Path) -> Result<PathBuf, String> {
    git(root, &["rev-parse", "--absolute-git-dir"]).map(|b| PathBuf::from(line(b)))
}

/// The commit HEAD names, or `None` on an unborn branch.
pub(crate) fn head(root: &Path) -> Option<String> {
    git(root, &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
        .ok()
        .map(line)
        .filter(|s| !s.is_empty())
}

fn split_z(bytes: &[u8]) -> impl Iterator<Item = String> + '_ {
    bytes
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
}

/// Paths that differ from HEAD: modified, added, deleted, renamed (both sides), untracked.
pub(crate) fn dirty(root: &Path) -> Result<Vec<String>, String> {
    let out = git(
        root,
        &[
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
            "--no-renames",
        ],
    )?;
    let mut paths = Vec::new();
    for entry in split_z(&out) {
        // "XY path"
        if entry.len() > 3 {
            paths.push(entry[3..].to_owned());
        }
    }
    paths.sort();
    paths.dedup();
    Ok(paths)
}

/// Paths that differ between two commits (added, modified, deleted; renames as both sides).
pub(crate) fn changed_between(root: &Path, old: &str, new: &str) -> Result<Vec<String>, String> {
    let out = git(
        root,
        &["diff", "--name-only", "-z", "--no-renames", old, new, "--"],
    )?;
    Ok(split_z(&out).collect())
}

/// The global excludes file git uses: `core.excludesFile`, else `$XDG_CONFIG_HOME/git/ignore`,
/// else `~/.config/git/ignore`.
pub(crate) fn global_excludes_file(root: &Path) -> Option<PathBuf> {
    if let Ok(out) = git(root, &["config", "--path", "--get", "core.excludesFile"]) {
        let p = line(out);
        if !p.is_empty() {
            return Some(PathBuf::from(p));
        }
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("git").join("ignore"))
}
