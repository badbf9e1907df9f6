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
//!
//! The file is read in one piece and not parsed file by file: the paths are one block of text
//! with a table of fixed-width offsets, and a second table lists the files of each directory, so
//! a refresh opens each directory once, checks its stamp through the open directory and `stat`s
//! the names in it. No path is allocated until one has changed.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use search_profile::IGNORE_FILES;

use crate::listing::PathBlock;
use crate::segment::Stamp;

/// The cache file's name in the index directory.
pub(crate) const DIR_CACHE: &str = "dircache";
const MAGIC: &[u8; 8] = b"RSDIRC\0\x05";
const RACY: Duration = Duration::from_secs(2);
/// A cache file larger than this is damage: its size is checked before it is read, so a damaged
/// cache of any size costs at most this much to read. A walk whose cache would be larger (about
/// 1.3 million files with paths like Linux's; ten copies of Linux, 862 431 files, take 50 MB) is
/// not cached: every refresh of such a tree walks.
pub(crate) const MAX_BYTES: u64 = 64 << 20;
/// A `.git` file or a `commondir` larger than this names no directory.
const MAX_POINTER_BYTES: u64 = 64 << 10;

/// What one complete walk saw.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct DirCache {
    /// Rule files outside the selected directories, absolute, with their stamps (`None`: absent).
    rules: Vec<(PathBuf, Option<Stamp>)>,
    /// Every selected directory (repo-relative) with its stamp and how many selected files it
    /// holds directly.
    dirs: Vec<(String, Stamp, u32)>,
    /// Ignore files inside selected directories (repo-relative) with their stamps.
    ignore_files: Vec<(String, Stamp)>,
    /// What the walk skipped in the directories it entered: ignored regular files and
    /// directories (`true`), repo-relative, in path order; git's internals are left out. An
    /// include glob can select them (ripgrep's overrides come before its ignore rules), so a
    /// glob is answered from this list while the directories' stamps hold. `None` when the
    /// walk could not list them all (a name that is not UTF-8, a directory that vanished).
    skipped: Option<Skipped>,
    /// The selected files' paths, in path order (shared with the walk's list of them).
    files: std::sync::Arc<PathBlock>,
    /// The files (indexes in path order) grouped by directory, in the order of `dirs`.
    by_dir: Vec<u32>,
    /// What include globs ask of the directories, found on first use.
    hidden: Derived<HiddenDirs>,
}

/// Paths a walk skipped, each a file or a directory, with a kind byte each.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Skipped {
    paths: PathBlock,
    /// Per path: 1 for a directory, 0 for a regular file.
    kinds: Vec<u8>,
}

impl Skipped {
    /// `entries` (each a path and whether it is a directory) as one block; `None` when their
    /// text outgrows the offsets' 4 GiB.
    pub(crate) fn new(entries: &[(String, bool)]) -> Option<Skipped> {
        let mut out = Skipped {
            paths: PathBlock::with_capacity(
                entries.len(),
                entries.iter().map(|(p, _)| p.len()).sum(),
            ),
            kinds: Vec::with_capacity(entries.len()),
        };
        for (path, is_dir) in entries {
            out.paths.push(path)?;
            out.kinds.push(u8::from(*is_dir));
        }
        Some(out)
    }

    /// Each path, with whether it is a directory, in the order they were recorded.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, bool)> + '_ {
        self.kinds
            .iter()
            .enumerate()
            .map(|(i, &kind)| (self.paths.get(i), kind == 1))
    }
}

/// The directories with a hidden component (indexes in `dirs`), and whether each holds a
/// selected file beneath it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct HiddenDirs {
    dirs: Vec<(u32, bool)>,
}

/// A value derived from the rest of a [`DirCache`] on first use: equal whenever the fields it is
/// derived from are, so it takes no part in comparisons.
#[derive(Debug, Clone, Default)]
struct Derived<T>(std::sync::OnceLock<T>);

impl<T> PartialEq for Derived<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl<T> Eq for Derived<T> {}

/// What [`DirCache::check`] stats besides the rules, directories and ignore files.
#[derive(Clone, Copy)]
enum Look {
    /// Nothing else.
    Directories,
    /// Every recorded file.
    Files,
}

fn lstat(path: &Path) -> Option<Stamp> {
    std::fs::symlink_metadata(path).ok().map(|m| Stamp::of(&m))
}

/// The stamp of an entry that a directory listing `lstat`ed.
pub(crate) fn as_stamp(s: &search_profile::EntryStat) -> Stamp {
    Stamp {
        len: s.len,
        mtime_ns: s.mtime_ns,
        ctime_ns: s.ctime_ns,
        ino: s.ino,
    }
}

/// The directory part of a repo-relative path (`""` at the root).
pub(crate) fn parent(rel: &str) -> &str {
    rel.rfind('/').map_or("", |at| &rel[..at])
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
        let git_dir = match read_pointer(&dot_git) {
            Ok(text) => match text.trim().strip_prefix("gitdir: ") {
                Some(target) => dir.join(target),
                None => continue,
            },
            Err(_) => dot_git,
        };
        let common = read_pointer(&git_dir.join("commondir"))
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

/// The text of a `.git` file or a `commondir` (a path git follows), read only when it is a regular
/// file small enough to be one (a FIFO in its place is never waited on).
fn read_pointer(path: &Path) -> std::io::Result<String> {
    let bytes = search_profile::read_regular(path, MAX_POINTER_BYTES)?;
    String::from_utf8(bytes).map_err(|_| std::io::ErrorKind::InvalidData.into())
}

impl DirCache {
    /// Records a complete walk of `root` that selected `files` (in path order) and entered `dirs`
    /// (both repo-relative, with the stamps the walk saw); what it skipped there is not recorded
    /// until [`DirCache::record_skipped`]. `None` when a directory is too young to vouch for
    /// itself, changed while it was recorded, or does not account for a file.
    pub(crate) fn record(
        root: &Path,
        files: std::sync::Arc<PathBlock>,
        mut dirs: Vec<(String, Stamp)>,
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
        dirs.sort_by(|a, b| search_profile::PathKey::compare(&a.0, &b.0));
        let mut repo_dirs = Vec::new();
        let mut ignore_files = Vec::new();
        for (rel, stamp) in &dirs {
            if !settled(stamp) {
                return None;
            }
            let dir = search_profile::name_path(root, rel);
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
        DirCache::from_parts(rules, dirs, ignore_files, files)
    }

    /// Records what the walk skipped in the directories it entered ([`DirCache::skipped`]): each
    /// is listed again, and its regular files and directories that are neither a selected file
    /// nor an entered directory are kept (git's internals, symlinks and special files are left
    /// out: no selection searches them). One directory at a time against its own recorded
    /// files, so that only what was skipped is ever held, never every entry of the tree. Nothing
    /// is recorded when a directory cannot be listed or holds a name that is not UTF-8 (which a
    /// glob would match by another name). An entry created since the walk is a change the
    /// directory's recorded stamp no longer vouches for, so the cache is not used then.
    pub(crate) fn record_skipped(&mut self, root: &Path, threads: usize) {
        self.skipped = self
            .list_skipped(root, threads)
            .and_then(|s| Skipped::new(&s));
    }

    fn list_skipped(&self, root: &Path, threads: usize) -> Option<Vec<(String, bool)>> {
        let mut children: HashMap<&str, HashSet<&str>> = HashMap::new();
        for (rel, _, _) in self.dirs.iter().filter(|(rel, _, _)| !rel.is_empty()) {
            let (up, name) = rel.rsplit_once('/').unwrap_or(("", rel));
            children.entry(up).or_default().insert(name);
        }
        let first = self.group_starts();
        let lists = crate::parallel::map(
            &self.dirs,
            threads,
            || (),
            |d, (rel, _, n), _| {
                let files: HashSet<&str> = self.by_dir[first[d]..first[d] + *n as usize]
                    .iter()
                    .map(|&i| {
                        let path = self.path(i as usize);
                        path.rsplit_once('/').map_or(path, |(_, name)| name)
                    })
                    .collect();
                let entered = children.get(rel.as_str());
                let mut out = Vec::new();
                for entry in std::fs::read_dir(search_profile::name_path(root, rel)).ok()? {
                    let entry = entry.ok()?;
                    let kind = entry.file_type().ok()?;
                    let name = entry.file_name().into_string().ok()?;
                    if !(kind.is_dir() || kind.is_file())
                        || index_guard::is_git_internal_segment(&name)
                    {
                        continue;
                    }
                    let selected = if kind.is_dir() {
                        entered.is_some_and(|c| c.contains(name.as_str()))
                    } else {
                        files.contains(name.as_str())
                    };
                    if !selected {
                        let path = if rel.is_empty() {
                            name
                        } else {
                            format!("{rel}/{name}")
                        };
                        out.push((path, kind.is_dir()));
                    }
                }
                Some(out)
            },
        )
        .ok()?;
        let mut all: Vec<(String, bool)> = lists.into_iter().collect::<Option<Vec<_>>>()?.concat();
        all.sort_by(|a, b| search_profile::PathKey::compare(&a.0, &b.0));
        Some(all)
    }

    /// The cache of a walk that selected `files` (in path order) in `dirs` (in path order), with
    /// these rules: `None` when a file's directory is not among `dirs`.
    fn from_parts(
        rules: Vec<(PathBuf, Option<Stamp>)>,
        dirs: Vec<(String, Stamp)>,
        ignore_files: Vec<(String, Stamp)>,
        files: std::sync::Arc<PathBlock>,
    ) -> Option<DirCache> {
        // Group the files by directory: each file's directory must be one the walk entered.
        let slot: std::collections::HashMap<&str, usize> = dirs
            .iter()
            .enumerate()
            .map(|(i, (rel, _))| (rel.as_str(), i))
            .collect();
        let mut groups: Vec<Vec<u32>> = vec![Vec::new(); dirs.len()];
        for (i, f) in files.iter().enumerate() {
            groups[*slot.get(parent(f))?].push(u32::try_from(i).ok()?);
        }
        let dirs = dirs
            .into_iter()
            .zip(&groups)
            .map(|((rel, s), g)| (rel, s, g.len() as u32))
            .collect();
        Some(DirCache {
            rules,
            dirs,
            ignore_files,
            skipped: None,
            files,
            by_dir: groups.concat(),
            hidden: Derived::default(),
        })
    }

    /// Where each directory's files start in `by_dir`, in the order of `dirs`.
    fn group_starts(&self) -> Vec<usize> {
        self.dirs
            .iter()
            .scan(0usize, |at, (_, _, n)| {
                let start = *at;
                *at += *n as usize;
                Some(start)
            })
            .collect()
    }

    /// The selected files' paths, in path order.
    pub(crate) fn files(&self) -> &std::sync::Arc<PathBlock> {
        &self.files
    }

    /// How many files the walk selected.
    pub(crate) fn len(&self) -> usize {
        self.files.len()
    }

    /// The path of file `i` (< `len()`), in path order.
    pub(crate) fn path(&self, i: usize) -> &str {
        self.files.get(i)
    }

    /// What the walk skipped in the directories it entered, when it could list them all:
    /// ignored regular files and directories (`true`), repo-relative, in path order.
    pub(crate) fn skipped(&self) -> Option<&Skipped> {
        self.skipped.as_ref()
    }

    /// The directories the walk entered that have a hidden component.
    pub(crate) fn hidden_directories(&self) -> impl Iterator<Item = &str> {
        let hidden = self.hidden.0.get_or_init(|| self.find_hidden_directories());
        hidden
            .dirs
            .iter()
            .map(|&(d, _)| self.dirs[d as usize].0.as_str())
    }

    /// Whether the entered directory `dir` has a hidden component and a selected file beneath
    /// it: then ripgrep's hidden rules know whether its default walk enters `dir`
    /// (`HiddenRules::enters`).
    pub(crate) fn hidden_with_files(&self, dir: &str) -> bool {
        let hidden = self.hidden.0.get_or_init(|| self.find_hidden_directories());
        let Ok(at) = self
            .dirs
            .binary_search_by(|(d, _, _)| search_profile::PathKey::compare(d, dir))
        else {
            return false;
        };
        hidden
            .dirs
            .binary_search_by_key(&(at as u32), |&(d, _)| d)
            .is_ok_and(|i| hidden.dirs[i].1)
    }

    fn find_hidden_directories(&self) -> HiddenDirs {
        let mut with_files: std::collections::HashSet<&str> = std::collections::HashSet::new();
        for (rel, _, n) in &self.dirs {
            if *n == 0 || !search_profile::has_hidden_component(rel) {
                continue;
            }
            // The directory and its ancestors with a hidden component hold a file beneath.
            let mut at = rel.as_str();
            while search_profile::has_hidden_component(at) && with_files.insert(at) {
                at = parent(at);
            }
        }
        let dirs = self
            .dirs
            .iter()
            .enumerate()
            .filter(|(_, (rel, _, _))| search_profile::has_hidden_component(rel))
            .map(|(d, (rel, _, _))| (d as u32, with_files.contains(rel.as_str())))
            .collect();
        HiddenDirs { dirs }
    }

    /// Whether every recorded stamp of a rule, a directory and an ignore file still holds: then
    /// the names in every entered directory, and which of them the rules select, are the
    /// recorded ones (the files' own stamps are not looked at).
    pub(crate) fn directories_hold(
        &self,
        worktree: &search_profile::RootDir,
        threads: usize,
    ) -> bool {
        self.check(worktree, threads, Look::Directories).is_some()
    }

    /// The selection's stamps now, in path order, on `threads` threads; `None` when any recorded
    /// stamp of a rule, a directory or an ignore file changed, or a file is gone or no longer
    /// regular: then the selection may have changed, and the tree must be walked.
    ///
    /// Each directory is opened once (through `worktree`, without following a symlink); its
    /// stamp, its ignore files' and its files' are read through that one handle.
    pub(crate) fn stamps_if_holding(
        &self,
        worktree: &search_profile::RootDir,
        threads: usize,
    ) -> Option<Vec<Stamp>> {
        self.check(worktree, threads, Look::Files)
    }

    fn check(
        &self,
        worktree: &search_profile::RootDir,
        threads: usize,
        look: Look,
    ) -> Option<Vec<Stamp>> {
        if !self.rules.iter().all(|(p, s)| lstat(p) == *s) {
            return None;
        }
        let mut ignore_of: Vec<Vec<(&str, Stamp)>> = vec![Vec::new(); self.dirs.len()];
        for (rel, s) in &self.ignore_files {
            let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
            let at = self
                .dirs
                .binary_search_by(|(d, _, _)| search_profile::PathKey::compare(d, dir))
                .ok()?;
            ignore_of[at].push((name, *s));
        }
        let first = self.group_starts();
        let doubt = AtomicBool::new(false);
        let found = crate::parallel::map(
            &self.dirs,
            threads,
            Vec::new,
            |d, (rel, stamp, n), names: &mut Vec<&str>| -> Option<Vec<Stamp>> {
                if doubt.load(Ordering::Relaxed) {
                    return None;
                }
                let ids = match look {
                    Look::Files => &self.by_dir[first[d]..first[d] + *n as usize],
                    Look::Directories => &[],
                };
                names.clear();
                names.push(".");
                names.extend(ignore_of[d].iter().map(|(n, _)| *n));
                for &i in ids {
                    let path = self.path(i as usize);
                    // The name must be a direct child of this directory: a damaged table is
                    // doubt, never a stamp read for the wrong file.
                    let name = match rel.as_str() {
                        "" => Some(path),
                        r => path.strip_prefix(r).and_then(|p| p.strip_prefix('/')),
                    };
                    match name {
                        Some(n) if !n.is_empty() && !n.contains('/') => names.push(n),
                        _ => {
                            doubt.store(true, Ordering::Relaxed);
                            return None;
                        }
                    }
                }
                let stats = worktree.stat_entries(rel, names);
                let (own, rest) = stats.split_first()?;
                let (ignores, files) = rest.split_at(ignore_of[d].len());
                let holds = own.is_some_and(|s| !s.is_file && as_stamp(&s) == *stamp)
                    && ignores
                        .iter()
                        .zip(&ignore_of[d])
                        .all(|(got, (_, want))| got.is_some_and(|s| as_stamp(&s) == *want));
                // A file that is gone or no longer regular, though its directory's stamp held:
                // doubt, so the tree is walked.
                let stamps: Option<Vec<Stamp>> = files
                    .iter()
                    .map(|s| s.filter(|s| s.is_file).map(|s| as_stamp(&s)))
                    .collect();
                match stamps {
                    Some(stamps) if holds => Some(stamps),
                    _ => {
                        doubt.store(true, Ordering::Relaxed);
                        None
                    }
                }
            },
        )
        .ok()?;
        if let Look::Directories = look {
            return found.into_iter().all(|f| f.is_some()).then(Vec::new);
        }
        let mut out = vec![Stamp::default(); self.len()];
        for ((_, _, n), (from, stamps)) in self.dirs.iter().zip(first.iter().zip(found)) {
            let stamps = stamps?;
            for (&i, s) in self.by_dir[*from..*from + *n as usize].iter().zip(stamps) {
                out[i as usize] = s;
            }
        }
        Some(out)
    }

    /// Reads the cache file in `dir`; `None` when it is missing, damaged, or larger than
    /// [`MAX_BYTES`] (refused by its size, before a byte of it is read).
    pub(crate) fn read(dir: &index_storage::IndexDir) -> Option<DirCache> {
        decode(dir.read(DIR_CACHE, MAX_BYTES).ok()?)
    }

    /// Writes the cache file in `dir` by a temporary name and a rename (no fsync: a cache lost
    /// in a crash only costs one walk). A cache over [`MAX_BYTES`] is not written: a reader
    /// would refuse it.
    pub(crate) fn write(&self, dir: &index_storage::IndexDir) {
        let _ = dir.write_unsynced_with(DIR_CACHE, |w| encode_to(self, w));
    }
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u32(out, s.len() as u32);
    out.extend_from_slice(s.as_bytes());
}

fn put_stamp(out: &mut Vec<u8>, s: &Stamp) {
    for v in [s.len, s.mtime_ns, s.ctime_ns, s.ino] {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// Passes bytes on to `out` while it sums their crc32 and counts them, refusing any byte past
/// `limit` ([`MAX_BYTES`]): a cache that large is not written.
struct Summed<'w> {
    out: &'w mut dyn Write,
    crc: crc32fast::Hasher,
    len: u64,
    limit: u64,
}

impl Write for Summed<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.len += bytes.len() as u64;
        if self.len > self.limit {
            return Err(std::io::Error::other("directory cache too large"));
        }
        self.crc.update(bytes);
        self.out.write_all(bytes)?;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Writes `ids` as little-endian u32s, a block at a time.
fn put_u32s(w: &mut dyn Write, ids: &[u32]) -> std::io::Result<()> {
    let mut block = Vec::with_capacity(4 << 10);
    for chunk in ids.chunks(1 << 10) {
        block.clear();
        for v in chunk {
            put_u32(&mut block, *v);
        }
        w.write_all(&block)?;
    }
    Ok(())
}

/// Writes the cache file's bytes to `out`, streaming the paths and tables rather than copying
/// them into one buffer first: at a monorepo's scale they are tens of megabytes. Fails, having
/// written part of it, once the file would pass [`MAX_BYTES`], its checksum included.
///
/// The file: magic; rules; directories (path, stamp, file count); ignore files; the skipped
/// entries (a flag, then, when recorded, their count, `count + 1` path starts, a kind byte each
/// and their text); the file count, then `files + 1` path starts and `files` indexes grouped by
/// directory (all u32, little endian); the paths' text; a crc32 of everything before it.
fn encode_to(c: &DirCache, out: &mut dyn Write) -> std::io::Result<()> {
    encode_within(c, out, MAX_BYTES)
}

/// [`encode_to`] with the bound `limit` in place of [`MAX_BYTES`].
fn encode_within(c: &DirCache, out: &mut dyn Write, limit: u64) -> std::io::Result<()> {
    let mut w = Summed {
        out,
        crc: crc32fast::Hasher::new(),
        len: 0,
        limit,
    };
    let mut head = MAGIC.to_vec();
    put_u32(&mut head, c.rules.len() as u32);
    for (p, s) in &c.rules {
        put_str(&mut head, &p.to_string_lossy());
        head.push(u8::from(s.is_some()));
        put_stamp(&mut head, &s.unwrap_or_default());
    }
    put_u32(&mut head, c.dirs.len() as u32);
    for (p, s, n) in &c.dirs {
        put_str(&mut head, p);
        put_stamp(&mut head, s);
        put_u32(&mut head, *n);
    }
    put_u32(&mut head, c.ignore_files.len() as u32);
    for (p, s) in &c.ignore_files {
        put_str(&mut head, p);
        put_stamp(&mut head, s);
    }
    match &c.skipped {
        None => head.push(0),
        Some(skipped) => {
            head.push(1);
            put_u32(&mut head, skipped.kinds.len() as u32);
            w.write_all(&head)?;
            head.clear();
            put_u32s(&mut w, skipped.paths.starts())?;
            w.write_all(&skipped.kinds)?;
            w.write_all(skipped.paths.text().as_bytes())?;
        }
    }
    put_u32(&mut head, c.len() as u32);
    w.write_all(&head)?;
    put_u32s(&mut w, c.files.starts())?;
    put_u32s(&mut w, &c.by_dir)?;
    w.write_all(c.files.text().as_bytes())?;
    // Through the counting writer, so that the bound holds for the whole file as read back.
    let crc = w.crc.clone().finalize();
    w.write_all(&crc.to_le_bytes())
}

/// The cache file's bytes.
#[cfg(test)]
fn encode(c: &DirCache) -> Vec<u8> {
    let mut out = Vec::new();
    encode_to(c, &mut out).expect("a test's cache fits");
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
    /// A flag byte: 0 or 1, anything else is damage.
    fn flag(&mut self) -> Option<bool> {
        match self.take(1)?[0] {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }
    fn stamp(&mut self) -> Option<Stamp> {
        Some(Stamp {
            len: self.u64()?,
            mtime_ns: self.u64()?,
            ctime_ns: self.u64()?,
            ino: self.u64()?,
        })
    }
    /// `n` little-endian u32s.
    fn u32s(&mut self, n: usize) -> Option<Vec<u32>> {
        let b = self.take(n.checked_mul(4)?)?;
        Some(
            b.chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        )
    }
}

/// Decodes a cache file, checked whole. The files' paths are the body's last section: their text
/// stays in the file's own buffer, moved to its front, so that a cache in memory costs its file
/// once rather than twice (on a monorepo of 860 000 files, tens of megabytes).
fn decode(mut bytes: Vec<u8>) -> Option<DirCache> {
    let body_len = bytes.len().checked_sub(4)?;
    let (mut c, starts, text_at) = {
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
            let present = r.flag()?;
            let s = r.stamp()?;
            c.rules.push((p, present.then_some(s)));
        }
        for _ in 0..r.u32()? {
            c.dirs.push((r.string()?, r.stamp()?, r.u32()?));
        }
        for _ in 0..r.u32()? {
            c.ignore_files.push((r.string()?, r.stamp()?));
        }
        if r.flag()? {
            let count = r.u32()? as usize;
            let starts = r.u32s(count.checked_add(1)?)?;
            let kinds = r.take(count)?.to_vec();
            let len = *starts.last()? as usize;
            let paths = PathBlock::checked(starts, r.take(len)?.to_vec())?;
            // Every kind is a file's or a directory's.
            if kinds.iter().any(|&k| k > 1) {
                return None;
            }
            c.skipped = Some(Skipped { paths, kinds });
        }
        let files = r.u32()? as usize;
        let starts = r.u32s(files.checked_add(1)?)?;
        c.by_dir = r.u32s(files)?;
        (c, starts, r.at)
    };
    // The text is the rest of the body: the checksum goes, the sections before it move out.
    bytes.truncate(body_len);
    bytes.drain(..text_at);
    let files = starts.len() - 1;
    c.files = std::sync::Arc::new(PathBlock::checked(starts, bytes)?);
    // Every directory's files add up to all of them, and each names a file.
    let grouped = c.dirs.iter().map(|d| d.2 as usize).sum::<usize>() == files
        && c.by_dir.iter().all(|&i| (i as usize) < files);
    grouped.then_some(c)
}

#[cfg(test)]
mod tests {
    use super::{DirCache, decode, encode};
    use crate::segment::Stamp;

    fn s(n: u64) -> Stamp {
        Stamp {
            len: n,
            mtime_ns: n + 1,
            ctime_ns: n + 2,
            ino: n + 3,
        }
    }

    /// `paths` as the block a walk would share with the cache.
    fn block(paths: &[&str]) -> std::sync::Arc<crate::listing::PathBlock> {
        let mut b = crate::listing::PathBlock::default();
        for p in paths {
            b.push(p).expect("small");
        }
        std::sync::Arc::new(b)
    }

    #[test]
    fn the_cache_file_round_trips_and_damage_is_refused() {
        let mut c = DirCache::from_parts(
            vec![
                ("/a/.ignore".into(), None),
                ("/a/.gitconfig".into(), Some(s(1))),
            ],
            vec![(String::new(), s(2)), ("src".into(), s(3))],
            vec![(".gitignore".into(), s(4))],
            block(&["a.txt", "src/b.rs", "名前.md"]),
        )
        .expect("every file's directory was walked");
        assert_eq!(
            decode(encode(&c)),
            Some(c.clone()),
            "nothing skipped recorded"
        );
        c.skipped = super::Skipped::new(&[("a.log".into(), false), ("target".into(), true)]);
        assert_eq!(c.len(), 3);
        assert_eq!(
            (0..3).map(|i| c.path(i)).collect::<Vec<_>>(),
            ["a.txt", "src/b.rs", "名前.md"]
        );
        // The root's files first, then those of `src`.
        assert_eq!(c.by_dir, [0, 2, 1]);
        let bytes = encode(&c);
        assert_eq!(decode(bytes.clone()), Some(c));
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 1;
            assert_eq!(decode(damaged), None, "byte {at}");
        }
        assert_eq!(decode(bytes[..bytes.len() - 1].to_vec()), None);
        assert_eq!(decode(Vec::new()), None);
    }

    /// A crafted file that lists as many skipped paths as its bytes allow (one byte each)
    /// decodes into no more memory than its own size: the paths are one block, not a string each.
    #[test]
    fn a_crafted_cache_of_many_skipped_paths_costs_no_more_memory_than_its_size() {
        let mut c = DirCache::from_parts(
            Vec::new(),
            vec![(String::new(), s(2))],
            Vec::new(),
            block(&[]),
        )
        .expect("no file to account for");
        let entries: Vec<(String, bool)> = (0..200_000)
            .map(|i| (((b'a' + (i % 26) as u8) as char).to_string(), i % 3 == 0))
            .collect();
        c.skipped = super::Skipped::new(&entries);
        let bytes = encode(&c);
        let decoded = decode(bytes.clone()).expect("a valid file");
        let skipped = decoded.skipped().expect("recorded");
        assert_eq!(skipped.iter().count(), entries.len());
        assert!(
            skipped
                .iter()
                .zip(&entries)
                .all(|((p, d), (q, e))| p == q && d == *e)
        );
        let heap = skipped.paths.heap_bytes() + skipped.kinds.capacity();
        assert!(
            heap <= bytes.len(),
            "{heap} bytes decoded from {}",
            bytes.len()
        );
    }

    /// The size bound counts the whole file, its checksum included: a cache one byte over it is
    /// not written (a reader would refuse it by its size), one that fits is written whole.
    #[test]
    fn the_size_bound_counts_the_whole_file() {
        let c = DirCache::from_parts(
            Vec::new(),
            vec![(String::new(), s(2)), ("src".into(), s(3))],
            Vec::new(),
            block(&["a.txt", "src/b.rs"]),
        )
        .expect("every file in a directory");
        let whole = encode(&c);
        let len = whole.len() as u64;
        let mut out = Vec::new();
        super::encode_within(&c, &mut out, len).expect("fits exactly");
        assert_eq!(out, whole);
        let mut out = Vec::new();
        assert!(super::encode_within(&c, &mut out, len - 1).is_err());
        assert!(super::encode_within(&c, &mut Vec::new(), len - 4).is_err());
    }

    /// Flags are 0 or 1; any other value is damage, even under a matching checksum.
    #[test]
    fn a_flag_byte_other_than_0_or_1_is_refused() {
        let mut c = DirCache::from_parts(
            vec![("/a/.ignore".into(), Some(s(1)))],
            vec![(String::new(), s(2))],
            Vec::new(),
            block(&[]),
        )
        .expect("no file to account for");
        c.skipped = super::Skipped::new(&[("a.log".into(), false)]);
        let bytes = encode(&c);
        assert!(decode(bytes.clone()).is_some());
        // The rule's presence flag follows its path, the skipped entries' flag the directories
        // and ignore files; the kind byte precedes the skipped text, which the (empty) files'
        // count, one start and the checksum follow.
        let rule_flag = super::MAGIC.len() + 4 + 4 + "/a/.ignore".len();
        let kind = bytes.len() - 4 - 4 - 4 - "a.log".len() - 1;
        let skipped_flag = kind - 4 * 2 - 4 - 1;
        for at in [rule_flag, skipped_flag, kind] {
            assert!(bytes[at] <= 1, "byte {at} is a flag");
            let mut damaged = bytes.clone();
            damaged[at] = 2;
            let body = damaged.len() - 4;
            let crc = crc32fast::hash(&damaged[..body]).to_le_bytes();
            damaged[body..].copy_from_slice(&crc);
            assert_eq!(decode(damaged), None, "byte {at}");
        }
    }

    #[test]
    fn hidden_directories_know_whether_a_selected_file_lies_beneath() {
        let dirs = ["", ".a", ".a/b", ".a/b/c", ".e", "src", "src/.h"];
        let c = DirCache::from_parts(
            Vec::new(),
            dirs.iter().map(|d| (d.to_string(), s(1))).collect(),
            Vec::new(),
            block(&[".a/b/c/f.rs", "src/.h/g.rs", "x.rs"]),
        )
        .expect("every file's directory was walked");
        assert_eq!(
            c.hidden_directories().collect::<Vec<_>>(),
            [".a", ".a/b", ".a/b/c", ".e", "src/.h"]
        );
        for (dir, expected) in [
            (".a", true),
            (".a/b", true),
            (".a/b/c", true),
            (".e", false),
            ("src", false),
            ("src/.h", true),
            (".missing", false),
        ] {
            assert_eq!(c.hidden_with_files(dir), expected, "{dir}");
        }
    }

    #[test]
    fn a_file_outside_every_walked_directory_is_not_recorded() {
        let c = DirCache::from_parts(
            Vec::new(),
            vec![(String::new(), s(2))],
            Vec::new(),
            block(&["a.txt", "lost/b.rs"]),
        );
        assert_eq!(c, None);
    }
}
