//! Which files are searched: ripgrep's default selection, for every searcher.

use std::borrow::Cow;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ignore::{DirEntry, WalkBuilder};
use index_contract::{FileFilter, IndexError};

use crate::PathFilter;

/// A pruning rule: given a repo-relative path and whether it is a directory, whether the walk
/// keeps it. Directories it drops are not entered.
pub type Prune = Arc<dyn Fn(&str, bool) -> bool + Send + Sync>;

/// The names of the ignore files the selection reads in every directory it enters, besides git's
/// `info/exclude` and global excludes: what a cache of the walk or a watcher must watch.
pub const IGNORE_FILES: [&str; 3] = [".gitignore", ".ignore", ".rgignore"];

/// Whether a request with these file filters can select files beyond the held selection
/// ([`Selection::held`]): an include glob (which overrides ignore rules, so it can select an
/// ignored file) or `include_ignored`. Types and `include_hidden` select only among held files;
/// globs that all exclude only narrow.
pub fn selects_beyond_held(files: &FileFilter) -> bool {
    files.include_ignored || has_include_glob(files)
}

/// Whether any of the request's globs includes (does not start with `!`).
pub fn has_include_glob(files: &FileFilter) -> bool {
    files.globs.iter().any(|g| !g.starts_with('!'))
}

/// Whether any component of a walk name is hidden (starts with `.`): the held files that
/// ripgrep's default selection may skip ([`HiddenRules`]).
pub fn has_hidden_component(rel_path: &str) -> bool {
    rel_path.split('/').any(|c| c.starts_with('.'))
}

/// Which held files under hidden names ([`Selection::held`]) ripgrep searches, for any request
/// that does not [`selects_beyond_held`]; globs and types are [`PathFilter`]'s to apply.
///
/// ripgrep skips a hidden entry unless `--hidden` is given, an ignore rule whitelists it
/// (`!.gitignore` after `.*`, as Linux's top-level `.gitignore` has), or, for a file, a type
/// selects it: a type is matched on files only, before the hidden rule, so it selects a hidden
/// file of its type but never enters a hidden directory. A whitelist depends on every ignore
/// file on the way, so the rules are not guessed from names: [`HiddenRules::walk`] asks
/// ripgrep's own walker, with the default selection, about the hidden paths only.
///
/// # Example
///
/// ```
/// use index_contract::FileFilter;
/// use search_profile::HiddenRules;
///
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::create_dir_all(dir.path().join(".git")).unwrap();
/// std::fs::write(dir.path().join(".gitignore"), ".*\n!.gitignore\n").unwrap();
/// std::fs::write(dir.path().join(".env.rs"), "").unwrap();
/// let held = [".env.rs", ".gitignore"];
/// let rules = HiddenRules::walk(dir.path(), 1, held);
/// let default = FileFilter::default();
/// assert!(rules.selects(&default, "src/main.rs"));
/// assert!(rules.selects(&default, ".gitignore"));
/// assert!(!rules.selects(&default, ".env.rs"));
/// let typed = FileFilter { types: vec!["rust".into()], ..FileFilter::default() };
/// assert!(rules.selects(&typed, ".env.rs"));
/// let hidden = FileFilter { include_hidden: true, ..FileFilter::default() };
/// assert!(rules.selects(&hidden, ".cargo/config.rs"));
/// ```
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HiddenRules {
    /// The hidden paths that ripgrep's default walk selects.
    selected: HashSet<String>,
    /// The directories with a hidden component that ripgrep's default walk enters.
    entered: HashSet<String>,
}

impl HiddenRules {
    /// Asks ripgrep's walker, with the default selection under `root`, which of the held files
    /// `hidden_paths` (those with a hidden component) it selects and which of their directories
    /// it enters. The walk enters only the directories on the way to those paths, so its cost
    /// follows them, not the worktree. A directory that cannot be listed selects nothing.
    pub fn walk<'a>(
        root: &Path,
        threads: usize,
        hidden_paths: impl IntoIterator<Item = &'a str>,
    ) -> HiddenRules {
        let mut paths = hidden_paths.into_iter().peekable();
        if paths.peek().is_none() {
            return HiddenRules::default();
        }
        let selection = Selection::new(root).threads(threads).only(paths);
        let found = Mutex::new(Vec::new());
        selection.for_each_entry(true, || {
            let mut local = Flush {
                local: Vec::new(),
                found: &found,
            };
            move |e: FileEntry<'_>| match e {
                FileEntry::File { rel, .. } => local.local.push((rel.to_owned(), false)),
                FileEntry::Dir { rel, .. } if has_hidden_component(rel) => {
                    local.local.push((rel.to_owned(), true))
                }
                _ => {}
            }
        });
        let mut rules = HiddenRules::default();
        for (rel, is_dir) in found.into_inner().unwrap_or_else(|p| p.into_inner()) {
            if is_dir {
                rules.entered.insert(rel);
            } else {
                rules.selected.insert(rel);
            }
        }
        rules
    }

    /// Whether ripgrep's default walk enters the directory at `rel_path`, for a directory with a
    /// hidden component on the way to a held hidden file (elsewhere the rules do not know, and
    /// say no).
    pub fn enters(&self, rel_path: &str) -> bool {
        self.entered.contains(rel_path)
    }

    /// Whether ripgrep, with `files`'s flags, searches the held file at `rel_path`, as far as
    /// hidden names decide it. Not for `include_ignored`. An include glob, like a type, is
    /// matched on the file before the hidden rule (an override comes first in ripgrep), so it
    /// may select a hidden file in a directory the default walk enters; whether a glob matches
    /// the file is [`PathFilter`]'s to say. A glob that matches a hidden directory the default
    /// walk skips makes ripgrep enter it: such a request must walk.
    pub fn selects(&self, files: &FileFilter, rel_path: &str) -> bool {
        if files.include_hidden || !has_hidden_component(rel_path) {
            return true;
        }
        if self.selected.contains(rel_path) {
            return true;
        }
        let parent = rel_path.rsplit_once('/').map_or("", |(dir, _)| dir);
        (!files.types.is_empty() || has_include_glob(files))
            && (!has_hidden_component(parent) || self.entered.contains(parent))
    }
}

/// The selection of one worktree: what `rg` (with no flags, or with the flags of
/// [`Selection::filter`]) would search under the root.
#[derive(Clone)]
pub struct Selection {
    root: PathBuf,
    threads: usize,
    prune: Option<Prune>,
    filter: Option<PathFilter>,
    include_hidden: bool,
    include_ignored: bool,
}

impl std::fmt::Debug for Selection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Selection")
            .field("root", &self.root)
            .field("threads", &self.threads)
            .field("filter", &self.filter)
            .field("include_hidden", &self.include_hidden)
            .field("include_ignored", &self.include_ignored)
            .finish_non_exhaustive()
    }
}

impl Selection {
    /// The selection under `root` (an absolute, canonical directory), walked with the available
    /// parallelism, at most 12 threads (as ripgrep does).
    pub fn new(root: impl Into<PathBuf>) -> Selection {
        Selection {
            root: root.into(),
            threads: std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(12),
            prune: None,
            filter: None,
            include_hidden: false,
            include_ignored: false,
        }
    }

    /// The selection an index holds: ripgrep's default selection plus hidden files and
    /// directories (`rg --hidden`), so that the requests that select hidden files (a type,
    /// `include_hidden`) are answered from the index; [`HiddenRules`] says which of them a
    /// request selects. Hidden files are few (dotfiles, `.github/`), unlike ignored trees.
    pub fn held(root: impl Into<PathBuf>) -> Selection {
        let mut selection = Selection::new(root);
        selection.include_hidden = true;
        selection
    }

    /// Narrows or widens the selection as ripgrep's `-g`, `-t`, `--hidden` and `--no-ignore` do
    /// ([`PathFilter`] spells out the precedence of globs and types): globs and types go to the
    /// walker as ripgrep gives them to it; `include_hidden` stops skipping hidden files;
    /// `include_ignored` drops every ignore rule (`.gitignore`, `.git/info/exclude`, `.ignore`,
    /// `.rgignore`, the global excludes, and those of parent directories). Whatever the filter,
    /// git's internals are never entered and symlinks are never followed.
    ///
    /// Fails, as [`crate::check_file_filter`] does, on a bad glob or an unknown type.
    pub fn filter(mut self, files: &FileFilter) -> Result<Selection, IndexError> {
        self.filter = if files.narrows() {
            Some(PathFilter::at(files, &self.root)?)
        } else {
            None
        };
        self.include_hidden = files.include_hidden;
        self.include_ignored = files.include_ignored;
        Ok(self)
    }

    /// Walks with `threads` threads (at least one).
    pub fn threads(mut self, threads: usize) -> Selection {
        self.threads = threads.max(1);
        self
    }

    /// Prunes the walk: only paths `keep` accepts are listed, only directories it accepts are
    /// entered. Ignore rules of the directories above a kept path still apply, so a pruned walk
    /// selects exactly the files an unpruned walk would, restricted to what `keep` accepts.
    pub fn prune(mut self, keep: impl Fn(&str, bool) -> bool + Send + Sync + 'static) -> Selection {
        self.prune = Some(Arc::new(keep));
        self
    }

    /// Prunes the walk to `paths` (walk names of files): only their ancestor directories are
    /// entered and only they are listed, with the same ignore rules as a whole walk, so the cost
    /// follows the paths, not the worktree.
    pub fn only<'a>(self, paths: impl IntoIterator<Item = &'a str>) -> Selection {
        let mut files = HashSet::new();
        let mut dirs = HashSet::new();
        for p in paths {
            let mut at = p;
            while let Some(i) = at.rfind('/') {
                at = &at[..i];
                if !dirs.insert(at.to_owned()) {
                    break;
                }
            }
            files.insert(p.to_owned());
        }
        self.prune(move |rel, is_dir| {
            if is_dir {
                dirs.contains(rel)
            } else {
                files.contains(rel)
            }
        })
    }

    /// The root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The walker, configured with ripgrep's defaults (spelled out, so that a change of the
    /// library's defaults cannot move us) and the pruning rule.
    pub fn walker(&self) -> WalkBuilder {
        let mut builder = WalkBuilder::new(&self.root);
        let rules = !self.include_ignored;
        builder
            .hidden(!self.include_hidden)
            .parents(rules)
            .ignore(rules)
            .git_ignore(rules)
            .git_global(rules)
            .git_exclude(rules)
            .require_git(true)
            .follow_links(false)
            .threads(self.threads);
        if rules {
            builder.add_custom_ignore_filename(".rgignore");
        }
        if let Some(filter) = &self.filter {
            builder.overrides(filter.overrides().clone());
            builder.types(filter.types().clone());
        }
        let prune = self.prune.clone();
        let root = self.root.clone();
        builder.filter_entry(move |entry| {
            if entry.depth() == 0 {
                return true;
            }
            // What git itself refuses to check out (`.git` in any case and its HFS and NTFS
            // spellings) is never entered nor searched: it holds git's internals, such as remote
            // URLs with credentials. Most are hidden anyway; `git~1` is not.
            if entry
                .file_name()
                .to_str()
                .is_some_and(index_guard::is_git_internal_segment)
            {
                return false;
            }
            let Some(prune) = &prune else {
                return true;
            };
            let Some(rel) = walk_path(&root, entry.path()) else {
                return false;
            };
            prune(&rel, entry.file_type().is_some_and(|t| t.is_dir()))
        });
        builder
    }

    /// Walks the selection in parallel, calling `visit` for each selected regular file with its
    /// walk name (its repo-relative path, escaped when it is not UTF-8: [`crate::walk_name`]) and
    /// entry.
    pub fn for_each_file<F>(&self, make_visitor: impl Fn() -> F + Sync)
    where
        F: FnMut(FileEntry<'_>) + Send,
    {
        self.for_each_entry(false, make_visitor);
    }

    /// [`Selection::for_each_file`], also handing over every directory the walk enters (the root
    /// as `""`) when `dirs` is set.
    pub fn for_each_entry<F>(&self, dirs: bool, make_visitor: impl Fn() -> F + Sync)
    where
        F: FnMut(FileEntry<'_>) + Send,
    {
        let root = &self.root;
        self.walker().build_parallel().run(|| {
            let mut visit = make_visitor();
            Box::new(move |entry| {
                let entry = match entry {
                    Ok(entry) => entry,
                    Err(e) => {
                        visit(FileEntry::Unreadable {
                            io: e.io_error().is_some(),
                        });
                        return ignore::WalkState::Continue;
                    }
                };
                let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
                if dirs && is_dir {
                    if let Some(rel) = walk_path(root, entry.path()) {
                        visit(FileEntry::Dir {
                            rel: &rel,
                            entry: &entry,
                        });
                    }
                    return ignore::WalkState::Continue;
                }
                if !entry.file_type().is_some_and(|t| t.is_file()) {
                    return ignore::WalkState::Continue;
                }
                if let Some(rel) = walk_path(root, entry.path()) {
                    visit(FileEntry::File {
                        rel: &rel,
                        entry: &entry,
                    });
                }
                ignore::WalkState::Continue
            })
        });
    }

    /// Every selected file's walk name (its repo-relative path, escaped when it is not UTF-8),
    /// sorted by [`crate::PathKey`] order.
    pub fn files(&self) -> Vec<String> {
        self.collect(|_, _| Some(()))
            .into_iter()
            .map(|(rel, ())| rel)
            .collect()
    }

    /// For every selected file, `map(walk name, entry)`; the `Some` results with their walk
    /// names, sorted by [`crate::PathKey`] order. Each walker thread collects locally and
    /// hands its results over once.
    pub fn collect<T: Send>(
        &self,
        map: impl Fn(&str, &DirEntry) -> Option<T> + Sync,
    ) -> Vec<(String, T)> {
        self.collect_checked(map).0
    }

    /// [`Selection::collect`], and whether the walk was complete: `false` when an I/O error
    /// (a directory that could not be listed) may have hidden files from it. A caller that
    /// would remove what the walk did not see must not trust an incomplete walk for that.
    pub fn collect_checked<T: Send>(
        &self,
        map: impl Fn(&str, &DirEntry) -> Option<T> + Sync,
    ) -> (Vec<(String, T)>, bool) {
        let io_errors = std::sync::atomic::AtomicU64::new(0);
        let found = Mutex::new(Vec::new());
        self.for_each_file(|| {
            let mut local = Flush {
                local: Vec::new(),
                found: &found,
            };
            let (map, io_errors) = (&map, &io_errors);
            move |e: FileEntry<'_>| match e {
                FileEntry::File { rel, entry } => {
                    if let Some(v) = map(rel, entry) {
                        local.local.push((rel.to_owned(), v));
                    }
                }
                FileEntry::Unreadable { io: true } => {
                    io_errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                _ => {}
            }
        });
        let mut v = found.into_inner().unwrap_or_else(|p| p.into_inner());
        v.sort_by(|a, b| crate::PathKey::compare(&a.0, &b.0));
        (v, io_errors.into_inner() == 0)
    }
}

impl Selection {
    /// Every directory the walk enters (the root as `""`) by its walk name, in
    /// [`crate::PathKey`] order: the directories whose changes can change the selection, for a
    /// host that watches them.
    pub fn directories(&self) -> Vec<String> {
        let found = Mutex::new(Vec::new());
        let root = &self.root;
        self.walker().build_parallel().run(|| {
            let mut local = Flush {
                local: Vec::new(),
                found: &found,
            };
            Box::new(move |entry| {
                if let Ok(entry) = entry
                    && entry.file_type().is_some_and(|t| t.is_dir())
                    && let Some(rel) = walk_path(root, entry.path())
                {
                    local.local.push(rel.into_owned());
                }
                ignore::WalkState::Continue
            })
        });
        let mut v = found.into_inner().unwrap_or_else(|p| p.into_inner());
        v.sort_by(|a, b| crate::PathKey::compare(a, b));
        v
    }
}

/// The global git excludes file the selection honours (`core.excludesFile`, else
/// `$XDG_CONFIG_HOME/git/ignore`), as ripgrep's libraries find it: a host that watches the rules
/// of the selection watches this file too.
pub fn global_excludes_file() -> Option<PathBuf> {
    ignore::gitignore::gitconfig_excludes_path()
}

/// What the walk hands a visitor.
#[derive(Debug)]
pub enum FileEntry<'a> {
    /// A selected regular file.
    File {
        /// Its walk name: the repo-relative, `/`-separated path, escaped when it is not UTF-8
        /// ([`crate::walk_name`]).
        rel: &'a str,
        /// The walker's entry (its metadata is the file's own, never a link target's).
        entry: &'a DirEntry,
    },
    /// A directory the walk enters (only from [`Selection::for_each_entry`] with `dirs` set).
    Dir {
        /// Its walk name; `""` for the root.
        rel: &'a str,
        /// The walker's entry.
        entry: &'a DirEntry,
    },
    /// A directory or file the walk could not read.
    Unreadable {
        /// It was an I/O error (a directory that could not be listed, say), so files may be
        /// missing from the walk; otherwise it was a rule the walk could not parse.
        io: bool,
    },
}

/// The repo-relative, `/`-separated UTF-8 form of `path` under `root`; `""` for the root itself;
/// `None` when it is not under the root or not UTF-8.
pub fn relative_path<'a>(root: &Path, path: &'a Path) -> Option<Cow<'a, str>> {
    let rel = path.strip_prefix(root).ok()?.to_str()?;
    Some(if std::path::MAIN_SEPARATOR == '/' {
        Cow::Borrowed(rel)
    } else {
        Cow::Owned(rel.replace(std::path::MAIN_SEPARATOR, "/"))
    })
}

/// The walk name of `path` under `root` ([`crate::walk_name`]); `None` when it is not under
/// the root.
fn walk_path<'a>(root: &Path, path: &'a Path) -> Option<Cow<'a, str>> {
    if let Some(rel) = relative_path(root, path) {
        return Some(rel);
    }
    let rel = path.strip_prefix(root).ok()?;
    // Only Unix has names that are not UTF-8 here, and its separator is already `/`.
    Some(Cow::Owned(
        crate::walk_name(rel.as_os_str().as_encoded_bytes()).into_owned(),
    ))
}

/// A walker thread's finds, handed over once when the thread's visitor is dropped.
struct Flush<'a, T> {
    local: Vec<T>,
    found: &'a Mutex<Vec<T>>,
}

impl<T> Drop for Flush<'_, T> {
    fn drop(&mut self) {
        self.found
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .append(&mut self.local);
    }
}

#[cfg(test)]
mod tests {
    use super::Selection;

    fn check(files: &[&str], expected: &[&str]) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        for f in files {
            let p = dir.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "needle\n").unwrap();
        }
        assert_eq!(Selection::new(dir.path()).files(), expected);
    }

    #[test]
    fn directories_are_the_ones_the_walk_enters() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        for d in ["a/b", "ignored/x", ".hidden", "GIT~1"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        std::fs::write(dir.path().join(".gitignore"), "ignored/\n").unwrap();
        assert_eq!(Selection::new(dir.path()).directories(), ["", "a", "a/b"]);
    }

    /// The embedded index prunes its walk for unindexed files with the query's control: once
    /// the query is out of time or cancelled, the walk enters no directory and lists no file.
    #[test]
    fn a_walk_pruned_by_a_stopped_query_lists_nothing_more() {
        use crate::QueryControl;
        use index_contract::CancelSignal;
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        for f in ["a.txt", "sub/b.txt", "sub/deep/c.txt"] {
            let p = dir.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "needle\n").unwrap();
        }
        let signal = CancelSignal::new();
        let walk = |signal: &CancelSignal| {
            let control = QueryControl::new(std::time::Instant::now(), None, signal);
            let stop = control.detached();
            Selection::new(dir.path())
                .prune(move |_, _| !stop())
                .files()
        };
        assert_eq!(walk(&signal), ["a.txt", "sub/b.txt", "sub/deep/c.txt"]);
        signal.cancel();
        assert!(walk(&signal).is_empty());
    }

    #[test]
    fn git_internal_directories_are_never_entered() {
        check(
            &[
                "a.txt",
                "GIT~1/config",
                "sub/git~1/config",
                "sub/b.txt",
                "git/config",
            ],
            &["a.txt", "git/config", "sub/b.txt"],
        );
    }

    /// A file whose name is not UTF-8 is selected under its walk name, in a directory whose name
    /// is not UTF-8 too, and is opened, stated and filtered by it as the name it stands for.
    #[cfg(unix)]
    #[test]
    fn names_that_are_not_utf8_are_walked_by_their_walk_names_never_dropped() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
        std::fs::write(
            dir.path().join(std::ffi::OsStr::from_bytes(b"bad\xff.txt")),
            "b\n",
        )
        .unwrap();
        let sub = dir.path().join(std::ffi::OsStr::from_bytes(b"s\xe9"));
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("c.rs"), "c\n").unwrap();
        let selection = Selection::new(dir.path());
        assert_eq!(selection.files(), ["a.txt", "bad\0ff.txt", "s\0e9/c.rs"]);
        assert_eq!(selection.directories(), ["", "s\0e9"]);
        let pruned = selection.clone().prune(|rel, _| rel.starts_with("s\0e9"));
        assert_eq!(pruned.files(), ["s\0e9/c.rs"]);

        let root = crate::RootDir::open(dir.path()).unwrap();
        let mut text = String::new();
        std::io::Read::read_to_string(&mut root.open_file("bad\0ff.txt").unwrap(), &mut text)
            .unwrap();
        assert_eq!(text, "b\n");
        let stats = root.stat_entries("s\0e9", &["c.rs", "gone.rs"]);
        assert!(
            stats[0].is_some_and(|s| s.is_file && s.len == 2),
            "{stats:?}"
        );
        assert!(stats[1].is_none());
        assert!(crate::name_path(dir.path(), "s\0e9/c.rs").is_file());

        let filter = |glob: &str| {
            crate::PathFilter::new(&index_contract::FileFilter {
                globs: vec![glob.to_owned()],
                ..index_contract::FileFilter::default()
            })
            .unwrap()
        };
        // The escape is not the name: `?` is one byte of it, never the three of the escape.
        assert!(filter("*.txt").matches("bad\0ff.txt"));
        assert!(!filter("!s?").matches("s\0e9/c.rs"));
        assert!(filter("!s").matches("s\0e9/c.rs"));
    }

    /// `ignore` 0.4.35 (ours) treats a name ending in a dot like any other: a leading dot makes it
    /// hidden. ripgrep 15.2.0 bundles 0.4.29, which did not, so it searches these; see
    /// docs/literal-search.md.
    #[test]
    fn names_ending_in_a_dot_follow_the_hidden_rule() {
        check(
            &["...", ".env.", ".d./in.txt", "a.", "b/c."],
            &["a.", "b/c."],
        );
    }
}
