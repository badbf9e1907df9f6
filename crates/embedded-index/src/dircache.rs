//! The directory cache: what the last full walk learned, so that a refresh need not walk again
//! while no directory changed (as git's untracked cache does).
//!
//! A walk's answer (which files are selected) depends only on the names in each directory and on
//! the ignore rules. A directory's mtime and ctime change whenever an entry is created, removed or
//! renamed in it; an ignore file's change shows in its own stamp; the rules outside the selected
//! directories (the parents' ignore files, `info/exclude`, the global excludes file and the git
//! configuration that names it) are stamped too. So while every recorded stamp is unchanged,
//! the selection is the recorded one, and a refresh only `stat`s its files.
//!
//! A directory modified less than two seconds before the walk may change again within the same
//! timestamp tick without its stamp showing it: such a cache is not trusted, and the next refresh
//! walks. Any doubt (a missing or damaged cache file, a changed stamp) means a full walk, which
//! writes a new cache. The cache file is an optimisation only: it is written without a lock, by a
//! temporary name and a rename, and each one describes one complete walk.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::segment::Stamp;
use crate::write::stamp_of;

/// The cache file's name in the index directory.
pub(crate) const DIR_CACHE: &str = "dircache";
const MAGIC: &[u8; 8] = b"RSDIRC\0\x01";
/// Names of the ignore files the walk reads in each directory.
const IGNORE_FILES: [&str; 3] = [".gitignore", ".ignore", ".rgignore"];
const RACY: Duration = Duration::from_secs(2);

/// What one complete walk saw.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct DirCache {
    /// Rule files outside the selected directories, absolute, with their stamps (`None`: absent).
    rules: Vec<(PathBuf, Option<Stamp>)>,
    /// Every selected directory (repo-relative) with its stamp.
    dirs: Vec<(String, Stamp)>,
    /// Ignore files inside selected directories (repo-relative) with their stamps.
    ignore_files: Vec<(String, Stamp)>,
    /// The selected files, in path order.
    pub(crate) files: Vec<String>,
}

fn lstat(path: &Path) -> Option<Stamp> {
    std::fs::symlink_metadata(path).ok().map(|m| stamp_of(&m))
}

fn rel_join(root: &Path, rel: &str) -> PathBuf {
    if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel)
    }
}

/// The rule files outside the tree that decide the selection of `root`, and those of each
/// nested repository directory in `repo_dirs`.
fn rule_paths(root: &Path, repo_dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for parent in root.ancestors().skip(1) {
        out.extend(IGNORE_FILES.iter().map(|n| parent.join(n)));
    }
    for dir in std::iter::once(root.to_path_buf()).chain(repo_dirs.iter().cloned()) {
        let dot_git = dir.join(".git");
        out.push(dot_git.clone());
        let git_dir = match std::fs::read_to_string(&dot_git) {
            Ok(text) => match text.trim().strip_prefix("gitdir: ") {
                Some(target) => dir.join(target),
                None => continue,
            },
            Err(_) => dot_git,
        };
        let common = std::fs::read_to_string(git_dir.join("commondir"))
            .ok()
            .map(|c| git_dir.join(c.trim()))
            .unwrap_or(git_dir);
        out.push(common.join("info").join("exclude"));
    }
    out.extend(search_profile::global_excludes_file());
    // The git configuration names the global excludes file.
    if let Some(home) = std::env::var_os("HOME").map(PathBuf::from) {
        out.push(home.join(".gitconfig"));
        out.push(home.join(".config").join("git").join("config"));
    }
    if let Some(xdg) = std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from) {
        out.push(xdg.join("git").join("config"));
    }
    out
}

impl DirCache {
    /// Records a complete walk of `root` that selected `files` and entered `dirs` (both
    /// repo-relative, with the stamps the walk saw). `None` when a directory is too young to
    /// vouch for itself, or changed while it was recorded.
    pub(crate) fn record(
        root: &Path,
        files: Vec<String>,
        dirs: Vec<(String, Stamp)>,
        walked_at: SystemTime,
    ) -> Option<DirCache> {
        let oldest_trusted = walked_at
            .checked_sub(RACY)?
            .duration_since(SystemTime::UNIX_EPOCH)
            .ok()?
            .as_nanos() as u64;
        // Anything changed since shortly before the walk began may have changed after the walk
        // read it: only older stamps can vouch for what the walk saw.
        let settled = |s: &Stamp| s.mtime_ns < oldest_trusted && s.ctime_ns < oldest_trusted;
        let mut repo_dirs = Vec::new();
        let mut ignore_files = Vec::new();
        for (rel, stamp) in &dirs {
            if !settled(stamp) {
                return None;
            }
            let dir = rel_join(root, rel);
            for name in IGNORE_FILES {
                if let Some(s) = lstat(&dir.join(name)) {
                    if !settled(&s) {
                        return None;
                    }
                    let r = if rel.is_empty() {
                        name.to_owned()
                    } else {
                        format!("{rel}/{name}")
                    };
                    ignore_files.push((r, s));
                }
            }
            if !rel.is_empty() && lstat(&dir.join(".git")).is_some() {
                repo_dirs.push(dir);
            }
        }
        let mut rules = Vec::new();
        for p in rule_paths(root, &repo_dirs) {
            let s = lstat(&p);
            if s.as_ref().is_some_and(|s| !settled(s)) {
                return None;
            }
            rules.push((p, s));
        }
        Some(DirCache {
            rules,
            dirs,
            ignore_files,
            files,
        })
    }

    /// Whether every recorded stamp still holds, checked on `threads` threads.
    pub(crate) fn still_holds(&self, root: &Path, threads: usize) -> bool {
        let rules_hold = self.rules.iter().all(|(p, s)| lstat(p) == *s);
        if !rules_hold {
            return false;
        }
        let dirs = crate::parallel::map(
            &self.dirs,
            threads,
            || (),
            |_, (rel, s), ()| lstat(&rel_join(root, rel)) == Some(*s),
        );
        let ignore = crate::parallel::map(
            &self.ignore_files,
            threads,
            || (),
            |_, (rel, s), ()| lstat(&root.join(rel)) == Some(*s),
        );
        matches!((dirs, ignore), (Ok(d), Ok(i)) if d.iter().all(|&b| b) && i.iter().all(|&b| b))
    }

    /// Reads the cache file in `dir`; `None` when it is missing or damaged.
    pub(crate) fn read(dir: &search_profile::RootDir) -> Option<DirCache> {
        let file = dir.open_file(DIR_CACHE).ok()?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(&file, 1 << 30), &mut bytes).ok()?;
        decode(&bytes)
    }

    /// Writes the cache file in `dir` by a temporary name and a rename (no fsync: a cache lost
    /// in a crash only costs one walk).
    pub(crate) fn write(&self, dir: &Path) {
        let tmp = dir.join(format!(
            ".{DIR_CACHE}.{}.tmp",
            crate::write::unique_suffix()
        ));
        if std::fs::write(&tmp, encode(self)).is_err()
            || std::fs::rename(&tmp, dir.join(DIR_CACHE)).is_err()
        {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_stamp(out: &mut Vec<u8>, s: &Stamp) {
    for v in [s.len, s.mtime_ns, s.ctime_ns, s.ino] {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

fn encode(c: &DirCache) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&(c.rules.len() as u32).to_le_bytes());
    for (p, s) in &c.rules {
        put_str(&mut out, &p.to_string_lossy());
        out.push(u8::from(s.is_some()));
        put_stamp(&mut out, &s.unwrap_or_default());
    }
    for list in [&c.dirs, &c.ignore_files] {
        out.extend_from_slice(&(list.len() as u32).to_le_bytes());
        for (p, s) in list {
            put_str(&mut out, p);
            put_stamp(&mut out, s);
        }
    }
    out.extend_from_slice(&(c.files.len() as u32).to_le_bytes());
    for f in &c.files {
        put_str(&mut out, f);
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn string(&mut self) -> Option<String> {
        let n = self.u32()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
    fn stamp(&mut self) -> Option<Stamp> {
        Some(Stamp {
            len: self.u64()?,
            mtime_ns: self.u64()?,
            ctime_ns: self.u64()?,
            ino: self.u64()?,
        })
    }
}

fn decode(bytes: &[u8]) -> Option<DirCache> {
    let body_len = bytes.len().checked_sub(4)?;
    let (body, crc) = bytes.split_at(body_len);
    if !body.starts_with(MAGIC) || crc32fast::hash(body).to_le_bytes() != crc {
        return None;
    }
    let mut r = Reader {
        b: body,
        at: MAGIC.len(),
    };
    let mut c = DirCache::default();
    for _ in 0..r.u32()? {
        let p = PathBuf::from(r.string()?);
        let present = r.take(1)?[0] == 1;
        let s = r.stamp()?;
        c.rules.push((p, present.then_some(s)));
    }
    for list in [&mut c.dirs, &mut c.ignore_files] {
        for _ in 0..r.u32()? {
            list.push((r.string()?, r.stamp()?));
        }
    }
    for _ in 0..r.u32()? {
        c.files.push(r.string()?);
    }
    (r.at == body.len()).then_some(c)
}

#[cfg(test)]
mod tests {
    use super::{DirCache, decode, encode};
    use crate::segment::Stamp;

    #[test]
    fn the_cache_file_round_trips_and_damage_is_refused() {
        let s = |n: u64| Stamp {
            len: n,
            mtime_ns: n + 1,
            ctime_ns: n + 2,
            ino: n + 3,
        };
        let c = DirCache {
            rules: vec![
                ("/a/.ignore".into(), None),
                ("/a/.gitconfig".into(), Some(s(1))),
            ],
            dirs: vec![(String::new(), s(2)), ("src".into(), s(3))],
            ignore_files: vec![(".gitignore".into(), s(4))],
            files: vec!["a.txt".into(), "src/b.rs".into(), "名前.md".into()],
        };
        let bytes = encode(&c);
        assert_eq!(decode(&bytes), Some(c));
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 1;
            assert_eq!(decode(&damaged), None, "byte {at}");
        }
        assert_eq!(decode(&bytes[..bytes.len() - 1]), None);
        assert_eq!(decode(b""), None);
    }
}
