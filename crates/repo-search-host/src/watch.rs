//! The watching host: file-system events make a refresh cheap. They never replace it.
//!
//! A long-lived host (the MCP server) watches every directory the selection enters, the parents
//! of the root (their ignore files apply too) and the index directory. Each query first writes a
//! *cookie* file into the index directory and waits until its event arrives: events of one
//! watcher arrive in order, so every write that completed before the query started has been seen
//! by then (watchman's sync token). The query then takes what changed:
//!
//! - nothing: the index is current; the freshness gate still judges it;
//! - only files: a refresh of just those paths ([`embedded_index::EmbeddedIndex::refresh_paths`]);
//! - only files, but more than a targeted refresh handles well (a checkout, a rebase, a pull, a
//!   build): one stat-based refresh of the whole selection, which the directory cache answers
//!   without a walk when no directory changed; the watched directories stay as they are;
//! - anything else (a directory created, removed or renamed; an ignore file anywhere; an event
//!   queue overflow; a lost cookie; too many paths): the full stat-based refresh, after which
//!   the watched directories are brought in line with the selection.
//!
//! A git operation (a checkout, a rebase, a pull, a commit) holds the git directory's
//! `index.lock` while it rewrites the worktree: a query that arrives meanwhile waits, up to
//! [`GIT_BATCH`], until the lock goes, so that the whole operation is refreshed as one batch
//! rather than half now and half on the next query. A lock that outlives the wait (a git that
//! died, an editor open under `git commit`) is not waited for again until git takes it anew.
//!
//! Where no watcher can be made (no inotify, the watch limit reached), the host refreshes fully
//! every time, exactly as the one-shot CLI does.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use notify::{Event, EventKind, RecursiveMode, Watcher as _};

/// More changed paths than this are refreshed as one batch of the whole selection
/// ([`Plan::Stamps`]): cheaper than a pruned walk for each path.
const MAX_TARGETED_PATHS: usize = 2000;

/// How long a query waits for a running git operation to release `index.lock`.
pub(crate) const GIT_BATCH: Duration = Duration::from_secs(1);

/// The prefix of cookie files, which live in the index directory only.
const COOKIE_PREFIX: &str = "cookie-";

/// What a query must refresh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Walk the whole selection, then [`Watcher::track`] its directories.
    Full,
    /// Only these repo-relative paths may have changed (possibly none).
    Paths(Vec<String>),
    /// Only files changed, too many to name: refresh the whole selection by its stamps, in one
    /// batch. No directory was created, removed or renamed, so the watches stay right.
    Stamps,
}

/// What the event thread has seen since the last [`Watcher::changes`].
#[derive(Debug, Default)]
struct Seen {
    /// Changed paths inside the root (absolute).
    paths: BTreeSet<PathBuf>,
    /// Something happened that only a full walk can account for.
    full: bool,
    /// Cookie names a query waits for, and those whose events arrived (only those: other
    /// cookies and the deletion of ours are not recorded, so the set stays bounded).
    waiting: HashSet<String>,
    cookies: HashSet<String>,
    /// Git took `index.lock` and has not released it yet.
    git_busy: bool,
    /// The event thread ended (a read error, a panic): no cookie will ever arrive again.
    stopped: bool,
}

/// The shared state between the event thread and queries.
struct Shared {
    root: PathBuf,
    index_dir: PathBuf,
    git_dir: PathBuf,
    /// The lock git holds on its index while an operation rewrites the worktree.
    git_lock: PathBuf,
    /// Ignore files outside the worktree that decide the selection: the repository's
    /// `info/exclude` and the global excludes file.
    rule_files: Vec<PathBuf>,
    seen: Mutex<Seen>,
    arrived: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Events were lost (a queue overflow, a watcher error): only a full walk accounts for them.
    fn lost(&self) {
        self.lock().full = true;
    }

    /// The event thread ended: every later plan walks at once instead of waiting out a cookie
    /// that cannot arrive.
    fn stopped(&self) {
        let mut seen = self.lock();
        seen.full = true;
        seen.stopped = true;
        drop(seen);
        self.arrived.notify_all();
    }

    /// Git's `index.lock` was created (`taken`) or removed or renamed away.
    fn git_lock_event(&self, path: &Path, taken: bool) {
        if path == self.git_lock {
            self.lock().git_busy = taken;
            self.arrived.notify_all();
        }
    }

    /// One changed path; `folder` when it names a directory created or removed.
    fn note(&self, path: PathBuf, folder: bool) {
        let mut seen = self.lock();
        if let Ok(rest) = path.strip_prefix(&self.index_dir) {
            // Our own index writes are not changes; cookies are the sync tokens.
            if let Some(name) = rest.to_str().filter(|n| seen.waiting.contains(*n)) {
                let name = name.to_owned();
                seen.cookies.insert(name);
                self.arrived.notify_all();
            }
            return;
        }
        if self.rule_files.contains(&path) {
            seen.full = true;
            return;
        }
        if path.starts_with(&self.git_dir) {
            // Git's internals are never searched; HEAD is read at every query.
            return;
        }
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let ignore_file = search_profile::IGNORE_FILES.contains(&name);
        if !path.starts_with(&self.root) {
            // Parents of the root matter only through their ignore files.
            if ignore_file {
                seen.full = true;
            }
            return;
        }
        if folder || ignore_file {
            seen.full = true;
        }
        seen.paths.insert(path);
    }

    /// An event from `notify` (the backend where inotify is not available).
    #[cfg_attr(target_os = "linux", allow(dead_code))]
    fn on_notify(&self, event: notify::Result<Event>) {
        let event = match event {
            Ok(e) => e,
            Err(_) => return self.lost(),
        };
        if event.need_rescan() {
            self.lost();
        }
        // Reading a file (ours included) is no change; a write shows as a modification.
        if matches!(event.kind, EventKind::Access(_)) {
            return;
        }
        let folder = matches!(
            event.kind,
            EventKind::Create(notify::event::CreateKind::Folder)
                | EventKind::Remove(notify::event::RemoveKind::Folder)
        );
        for path in event.paths {
            self.note(path, folder);
        }
    }
}

/// The watch backend: inotify itself on Linux, asked for changes only (notify also asks for every
/// open, so each search of the tree would flood the queue with its own reads); `notify`
/// elsewhere.
enum Backend {
    #[cfg(target_os = "linux")]
    Inotify {
        watches: inotify::Watches,
        dirs: Arc<Mutex<WatchMap>>,
    },
    #[cfg_attr(target_os = "linux", allow(dead_code))]
    Notify(notify::RecommendedWatcher),
}

/// Which directory each inotify watch descriptor watches, both ways.
#[cfg(target_os = "linux")]
#[derive(Default)]
struct WatchMap {
    by_wd: std::collections::HashMap<inotify::WatchDescriptor, PathBuf>,
    by_path: std::collections::HashMap<PathBuf, inotify::WatchDescriptor>,
}

#[cfg(target_os = "linux")]
impl WatchMap {
    fn insert(&mut self, wd: inotify::WatchDescriptor, dir: PathBuf) {
        if let Some(old) = self.by_wd.insert(wd.clone(), dir.clone()) {
            self.by_path.remove(&old);
        }
        self.by_path.insert(dir, wd);
    }

    fn remove_wd(&mut self, wd: &inotify::WatchDescriptor) -> bool {
        match self.by_wd.remove(wd) {
            Some(dir) => {
                self.by_path.remove(&dir);
                true
            }
            None => false,
        }
    }
}

#[cfg(target_os = "linux")]
const CHANGES: inotify::WatchMask = inotify::WatchMask::CREATE
    .union(inotify::WatchMask::DELETE)
    .union(inotify::WatchMask::MODIFY)
    .union(inotify::WatchMask::CLOSE_WRITE)
    .union(inotify::WatchMask::ATTRIB)
    .union(inotify::WatchMask::MOVED_FROM)
    .union(inotify::WatchMask::MOVED_TO)
    .union(inotify::WatchMask::DELETE_SELF)
    .union(inotify::WatchMask::MOVE_SELF)
    // Never a watch on what a symlink points to (outside the worktree, perhaps): a directory
    // swapped for a symlink between the walk and the watch is refused, not followed.
    .union(inotify::WatchMask::DONT_FOLLOW)
    .union(inotify::WatchMask::ONLYDIR);

/// Marks the event thread stopped when dropped, on return or unwind.
#[cfg(target_os = "linux")]
struct Stopped(Arc<Shared>);

#[cfg(target_os = "linux")]
impl Drop for Stopped {
    fn drop(&mut self) {
        self.0.stopped();
    }
}

impl Backend {
    fn start(shared: &Arc<Shared>) -> Option<Backend> {
        #[cfg(target_os = "linux")]
        {
            let mut inotify = inotify::Inotify::init().ok()?;
            let watches = inotify.watches();
            let dirs: Arc<Mutex<WatchMap>> = Arc::default();
            let (shared, map) = (shared.clone(), dirs.clone());
            std::thread::Builder::new()
                .name("repo-search-watch".into())
                .spawn(move || {
                    // However the thread ends (an error return or a panic), queries must learn
                    // it, or each would wait out its cookie for nothing.
                    let _stopped = Stopped(shared.clone());
                    let mut buffer = vec![0u8; 64 * 1024];
                    loop {
                        let events = match inotify.read_events_blocking(&mut buffer) {
                            Ok(e) => e,
                            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                            Err(_) => return,
                        };
                        for e in events {
                            if e.mask.contains(inotify::EventMask::Q_OVERFLOW) {
                                shared.lost();
                                continue;
                            }
                            // A watched directory deleted, moved away or otherwise unwatched by
                            // the kernel: whatever now stands at its path is not watched, so the
                            // next plan walks, and the next `track` watches it again.
                            let gone = inotify::EventMask::IGNORED
                                | inotify::EventMask::DELETE_SELF
                                | inotify::EventMask::MOVE_SELF;
                            if e.mask.intersects(gone) {
                                let ours = map
                                    .lock()
                                    .unwrap_or_else(|p| p.into_inner())
                                    .remove_wd(&e.wd);
                                if ours {
                                    shared.lost();
                                }
                                continue;
                            }
                            let Some(name) = e.name else {
                                continue;
                            };
                            let dir = map
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .by_wd
                                .get(&e.wd)
                                .cloned();
                            if let Some(dir) = dir {
                                let folder = e.mask.contains(inotify::EventMask::ISDIR);
                                let path = dir.join(name);
                                let taken =
                                    inotify::EventMask::CREATE | inotify::EventMask::MOVED_TO;
                                let released =
                                    inotify::EventMask::DELETE | inotify::EventMask::MOVED_FROM;
                                if e.mask.intersects(taken | released) {
                                    shared.git_lock_event(&path, e.mask.intersects(taken));
                                }
                                shared.note(path, folder);
                            }
                        }
                    }
                })
                .ok()?;
            Some(Backend::Inotify { watches, dirs })
        }
        #[cfg(not(target_os = "linux"))]
        {
            let handler = shared.clone();
            notify::recommended_watcher(move |e: notify::Result<Event>| handler.on_notify(e))
                .ok()
                .map(Backend::Notify)
        }
    }

    fn watch(&mut self, dir: &Path) -> bool {
        match self {
            #[cfg(target_os = "linux")]
            Backend::Inotify { watches, dirs } => match watches.add(dir, CHANGES) {
                Ok(wd) => {
                    dirs.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(wd, dir.to_path_buf());
                    true
                }
                Err(_) => false,
            },
            Backend::Notify(w) => w.watch(dir, RecursiveMode::NonRecursive).is_ok(),
        }
    }

    /// Whether `dir` is still watched (the kernel may have dropped the watch).
    fn is_watching(&self, dir: &Path) -> bool {
        match self {
            #[cfg(target_os = "linux")]
            Backend::Inotify { dirs, .. } => dirs
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .by_path
                .contains_key(dir),
            Backend::Notify(_) => true,
        }
    }

    fn unwatch(&mut self, dir: &Path) {
        match self {
            #[cfg(target_os = "linux")]
            Backend::Inotify { watches, dirs } => {
                // Forgotten first, so the kernel's IGNORED event for it is not taken for a lost
                // directory.
                let mut map = dirs.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(wd) = map.by_path.get(dir).cloned() {
                    map.remove_wd(&wd);
                    drop(map);
                    let _ = watches.remove(wd);
                }
            }
            Backend::Notify(w) => {
                let _ = w.unwatch(dir);
            }
        }
    }
}

/// Watches a worktree for a long-lived host.
pub(crate) struct Watcher {
    shared: Arc<Shared>,
    inner: Mutex<Inner>,
    counter: AtomicU64,
}

struct Inner {
    backend: Backend,
    /// The selection's directories watched now (absolute), as [`Watcher::track`] set them; the
    /// index directory and the root's parents are watched besides.
    watched: HashSet<PathBuf>,
}

impl Watcher {
    /// Starts watching the index directory (for cookies) and the parents of `root`. The
    /// selection's directories are watched by the first [`Watcher::track`]; until then every
    /// query plans a full refresh. `None` when no watcher can be made here.
    pub(crate) fn start(root: &Path, git_dir: &Path, index_dir: &Path) -> Option<Watcher> {
        // A linked worktree's `info/exclude` lives in the common git directory.
        let common = std::fs::read_to_string(git_dir.join("commondir"))
            .ok()
            .map(|c| git_dir.join(c.trim()))
            .unwrap_or_else(|| git_dir.to_path_buf());
        let mut rule_files = vec![common.join("info").join("exclude")];
        rule_files.extend(search_profile::global_excludes_file());
        let shared = Arc::new(Shared {
            root: root.to_path_buf(),
            index_dir: index_dir.to_path_buf(),
            git_dir: git_dir.to_path_buf(),
            git_lock: git_dir.join("index.lock"),
            rule_files: rule_files.clone(),
            seen: Mutex::new(Seen {
                full: true,
                ..Seen::default()
            }),
            arrived: Condvar::new(),
        });
        let mut backend = Backend::start(&shared)?;
        if !backend.watch(index_dir) {
            return None;
        }
        // The git directory itself, for `index.lock` (its other files are not changes). Without
        // it, queries only do not wait for a running git operation.
        backend.watch(git_dir);
        for parent in root.ancestors().skip(1) {
            // A parent that cannot be watched (permissions) is read by every full walk anyway;
            // its ignore files then count only from the next full refresh.
            backend.watch(parent);
        }
        for file in &rule_files {
            // The folder of each rule file: editors replace files by renaming.
            if let Some(dir) = file.parent() {
                backend.watch(dir);
            }
        }
        Some(Watcher {
            shared,
            inner: Mutex::new(Inner {
                backend,
                watched: HashSet::new(),
            }),
            counter: AtomicU64::new(0),
        })
    }

    /// Watches exactly these directories of the selection, by their walk names (plus what
    /// [`Watcher::start`] watches). A directory that cannot be watched (the watch limit) makes
    /// every later query plan a full refresh until one succeeds.
    pub(crate) fn track(&self, dirs: &[String]) {
        let root = &self.shared.root;
        // Walk names: a directory whose name is not UTF-8 is watched as the name it stands for.
        let wanted: HashSet<PathBuf> = dirs
            .iter()
            .map(|d| search_profile::name_path(root, d))
            .collect();
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let Inner { backend, watched } = &mut *inner;
        let stale: Vec<PathBuf> = watched
            .iter()
            .filter(|w| !wanted.contains(*w))
            .cloned()
            .collect();
        for w in stale {
            backend.unwatch(&w);
            watched.remove(&w);
        }
        let mut failed = false;
        for dir in wanted {
            if watched.contains(&dir) && backend.is_watching(&dir) {
                continue;
            }
            if backend.watch(&dir) {
                watched.insert(dir);
            } else {
                failed = true;
            }
        }
        if failed {
            self.shared.lock().full = true;
        }
    }

    /// Forces the next plan to be a full refresh.
    pub(crate) fn invalidate(&self) {
        self.shared.lock().full = true;
    }

    /// Waits until every event of a write that completed before this call has arrived (or
    /// `timeout` passes, which plans a full refresh), then takes what changed.
    pub(crate) fn changes(&self, timeout: Duration) -> Plan {
        // The cookie comes first: only once every earlier event has arrived does `git_busy`
        // say whether git held its lock when this query came. If it did, what git writes while
        // the query waits arrives before a second cookie.
        let mut synced = self.sync(timeout);
        if synced && self.wait_for_git(GIT_BATCH) {
            synced = self.sync(timeout);
        }
        let mut seen = self.shared.lock();
        let paths = std::mem::take(&mut seen.paths);
        let full = std::mem::take(&mut seen.full);
        drop(seen);
        if !synced || full {
            return Plan::Full;
        }
        let storm = paths.len() > MAX_TARGETED_PATHS;
        let watched = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut rel = Vec::with_capacity(paths.len());
        for p in paths {
            // A path that is a directory now, or was one we watched (renamed or removed), can
            // change many files at once.
            if watched.watched.contains(&p)
                || std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir())
            {
                return Plan::Full;
            }
            match search_profile::relative_path(&self.shared.root, &p) {
                Some(r) if !r.is_empty() => rel.push(r.into_owned()),
                _ => return Plan::Full,
            }
        }
        if storm {
            Plan::Stamps
        } else {
            Plan::Paths(rel)
        }
    }

    /// Writes a cookie and waits for its event: true when every event of a write completed
    /// before this call has then arrived.
    fn sync(&self, timeout: Duration) -> bool {
        if self.shared.lock().stopped {
            return false;
        }
        let name = format!(
            "{COOKIE_PREFIX}{}-{}",
            std::process::id(),
            self.counter.fetch_add(1, Ordering::Relaxed)
        );
        let cookie = self.shared.index_dir.join(&name);
        self.shared.lock().waiting.insert(name.clone());
        let synced = std::fs::write(&cookie, b"").is_ok() && self.wait_for(&name, timeout);
        let _ = std::fs::remove_file(&cookie);
        let mut seen = self.shared.lock();
        seen.waiting.remove(&name);
        seen.cookies.remove(&name);
        synced
    }

    /// Waits until no git operation holds `index.lock`, at most `timeout`, and says whether it
    /// found the lock held; a lock still held then is taken for stale, and not waited for again
    /// until git takes it anew.
    fn wait_for_git(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut seen = self.shared.lock();
        let busy = seen.git_busy;
        while seen.git_busy {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                seen.git_busy = false;
                return busy;
            }
            seen = self
                .shared
                .arrived
                .wait_timeout(seen, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        busy
    }

    fn wait_for(&self, name: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut seen = self.shared.lock();
        while !seen.cookies.contains(name) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || seen.stopped {
                return false;
            }
            seen = self
                .shared
                .arrived
                .wait_timeout(seen, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::{Plan, Watcher};
    use std::time::Duration;

    fn setup() -> (tempfile::TempDir, std::path::PathBuf, Watcher) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let git = root.join(".git");
        let index = git.join("repo-search");
        std::fs::create_dir_all(&index).unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        let w = Watcher::start(&root, &git, &index).unwrap();
        w.track(&["".into(), "src".into()]);
        // The first plan is always full: nothing was watched before.
        assert_eq!(w.changes(Duration::from_secs(5)), Plan::Full);
        (dir, root, w)
    }

    #[test]
    fn a_completed_write_is_always_in_the_next_plan() {
        let (_dir, root, w) = setup();
        for i in 0..200 {
            std::fs::write(root.join("src/a.rs"), format!("v{i}")).unwrap();
            assert_eq!(
                w.changes(Duration::from_secs(5)),
                Plan::Paths(vec!["src/a.rs".into()]),
                "write {i}"
            );
            assert_eq!(w.changes(Duration::from_secs(5)), Plan::Paths(vec![]));
        }
    }

    /// A directory whose name is not UTF-8 is tracked by its walk name and watched as the
    /// directory it stands for: no watch fails, so a quiet tree plans no walk, and a write in it
    /// plans one (its path names no file an answer may carry).
    #[cfg(unix)]
    #[test]
    fn a_directory_not_named_in_utf8_is_watched_by_its_walk_name() {
        use std::os::unix::ffi::OsStrExt;
        let (_dir, root, w) = setup();
        let odd = root.join(std::ffi::OsStr::from_bytes(b"s\xe9"));
        std::fs::create_dir(&odd).unwrap();
        assert_eq!(w.changes(Duration::from_secs(5)), Plan::Full);
        w.track(&["".into(), "src".into(), "s\0e9".into()]);
        assert_eq!(w.changes(Duration::from_secs(5)), Plan::Paths(vec![]));
        std::fs::write(odd.join("a.rs"), "x").unwrap();
        assert_eq!(w.changes(Duration::from_secs(5)), Plan::Full);
        assert_eq!(w.changes(Duration::from_secs(5)), Plan::Paths(vec![]));
    }

    /// Events lost (inotify's `IN_Q_OVERFLOW`, notify's rescan flag, any watcher error) make the
    /// next plan walk. The real overflow is driven end to end in `tests/watch_overflow.rs`.
    #[test]
    fn lost_events_plan_a_full_refresh() {
        let (_dir, root, w) = setup();
        std::fs::write(root.join("src/a.rs"), "x").unwrap();
        w.shared.lost();
        assert_eq!(w.changes(Duration::from_secs(5)), Plan::Full);
        assert_eq!(w.changes(Duration::from_secs(5)), Plan::Paths(vec![]));
        w.shared.on_notify(Ok(
            notify::Event::new(notify::EventKind::Other).set_flag(notify::event::Flag::Rescan)
        ));
        assert_eq!(w.changes(Duration::from_secs(5)), Plan::Full);
        w.shared
            .on_notify(Err(notify::Error::generic("the watch limit was reached")));
        assert_eq!(w.changes(Duration::from_secs(5)), Plan::Full);
    }

    /// A watched directory deleted and made again (a regenerated folder, a checkout, a re-clone)
    /// is a new directory: it is watched again, and writes in it are seen.
    #[test]
    fn a_directory_deleted_and_made_again_is_watched_again() {
        let (_dir, root, w) = setup();
        std::fs::remove_dir_all(root.join("src")).unwrap();
        std::fs::create_dir(root.join("src")).unwrap();
        assert_eq!(w.changes(Duration::from_secs(5)), Plan::Full);
        w.track(&["".into(), "src".into()]);
        std::fs::write(root.join("src/a.rs"), "x").unwrap();
        assert_eq!(
            w.changes(Duration::from_secs(5)),
            Plan::Paths(vec!["src/a.rs".into()])
        );
        // Moved away and replaced by a new directory of the same name.
        std::fs::rename(root.join("src"), root.join("old")).unwrap();
        std::fs::create_dir(root.join("src")).unwrap();
        assert_eq!(w.changes(Duration::from_secs(5)), Plan::Full);
        w.track(&["".into(), "src".into(), "old".into()]);
        std::fs::write(root.join("src/b.rs"), "x").unwrap();
        std::fs::write(root.join("old/c.rs"), "x").unwrap();
        assert_eq!(
            w.changes(Duration::from_secs(5)),
            Plan::Paths(vec!["old/c.rs".into(), "src/b.rs".into()])
        );
    }

    /// `info/exclude` changes the selection though it lies in the git directory.
    #[test]
    fn an_edit_of_info_exclude_plans_a_full_refresh() {
        let (_dir, root, w) = setup();
        std::fs::create_dir_all(root.join(".git/info")).unwrap();
        // The folder did not exist when the watcher started: a new watcher sees it.
        let w2 = Watcher::start(&root, &root.join(".git"), &root.join(".git/repo-search")).unwrap();
        w2.track(&["".into(), "src".into()]);
        assert_eq!(w2.changes(Duration::from_secs(5)), Plan::Full);
        std::fs::write(root.join(".git/info/exclude"), "src/\n").unwrap();
        assert_eq!(w2.changes(Duration::from_secs(5)), Plan::Full);
        std::fs::write(root.join(".git/info/other"), "not a rule file").unwrap();
        assert_eq!(w2.changes(Duration::from_secs(5)), Plan::Paths(vec![]));
        drop(w);
    }

    /// Waits until the watcher has seen git take (or release) its index lock.
    fn until_git_busy_is(w: &Watcher, busy: bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while w.shared.lock().git_busy != busy {
            assert!(std::time::Instant::now() < deadline, "no lock event");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// A query during a git operation waits for it to end, and takes its changes in one batch.
    #[test]
    fn a_query_during_a_git_operation_waits_for_it_to_end() {
        let (_dir, root, w) = setup();
        let lock = root.join(".git/index.lock");
        std::fs::write(&lock, "").unwrap();
        until_git_busy_is(&w, true);
        let started = std::time::Instant::now();
        let plan = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(300));
                std::fs::write(root.join("src/a.rs"), "checked out").unwrap();
                std::fs::rename(&lock, root.join(".git/index")).unwrap();
            });
            w.changes(Duration::from_secs(5))
        });
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert_eq!(plan, Plan::Paths(vec!["src/a.rs".into()]));
    }

    /// A lock git took just before a query, whose event had not arrived when the query came, is
    /// still waited for: the cookie barrier comes before the look at the lock.
    #[test]
    fn a_git_lock_whose_event_is_in_flight_is_waited_for() {
        let (_dir, root, w) = setup();
        let lock = root.join(".git/index.lock");
        for round in 0..20 {
            std::fs::write(&lock, "").unwrap();
            // No wait for the lock's event here: the query races it.
            let plan = std::thread::scope(|s| {
                s.spawn(|| {
                    std::thread::sleep(Duration::from_millis(100));
                    std::fs::write(root.join("src/a.rs"), format!("checkout {round}")).unwrap();
                    std::fs::remove_file(&lock).unwrap();
                });
                w.changes(Duration::from_secs(5))
            });
            assert_eq!(plan, Plan::Paths(vec!["src/a.rs".into()]), "round {round}");
            until_git_busy_is(&w, false);
        }
    }

    /// An event thread that ended makes every later plan a full refresh at once: no query
    /// waits out a cookie that cannot arrive.
    #[test]
    fn a_stopped_event_thread_plans_full_refreshes_without_waiting() {
        let (_dir, _root, w) = setup();
        w.shared.stopped();
        for _ in 0..3 {
            let started = std::time::Instant::now();
            assert_eq!(w.changes(Duration::from_secs(60)), Plan::Full);
            // Far below the cookie timeout given: the plan did not wait for a cookie.
            assert!(started.elapsed() < Duration::from_secs(30));
        }
    }

    /// A lock git never releases (it died) delays one query by at most the batch wait.
    #[test]
    fn a_stale_git_lock_is_waited_for_once() {
        let (_dir, root, w) = setup();
        std::fs::write(root.join(".git/index.lock"), "").unwrap();
        until_git_busy_is(&w, true);
        let started = std::time::Instant::now();
        assert_eq!(w.changes(Duration::from_secs(5)), Plan::Paths(vec![]));
        let waited = started.elapsed();
        assert!(waited >= super::GIT_BATCH, "{waited:?}");
        let started = std::time::Instant::now();
        assert_eq!(w.changes(Duration::from_secs(5)), Plan::Paths(vec![]));
        assert!(
            started.elapsed() < super::GIT_BATCH,
            "{:?}",
            started.elapsed()
        );
        // Taken anew: waited for again, until released.
        std::fs::remove_file(root.join(".git/index.lock")).unwrap();
        until_git_busy_is(&w, false);
        std::fs::write(root.join(".git/index.lock"), "").unwrap();
        until_git_busy_is(&w, true);
    }

    /// Cookies are remembered only while a query waits for them.
    #[test]
    fn cookies_do_not_accumulate() {
        let (_dir, _root, w) = setup();
        for _ in 0..50 {
            assert_eq!(w.changes(Duration::from_secs(5)), Plan::Paths(vec![]));
        }
        // Late events (the cookies' deletions) may still arrive: give them time.
        std::thread::sleep(Duration::from_millis(100));
        let seen = w.shared.lock();
        assert!(seen.cookies.is_empty() && seen.waiting.is_empty());
    }

    /// More changed files than a targeted refresh handles well (a checkout): one refresh of the
    /// whole selection by its stamps, without walking to re-watch the directories. A directory
    /// in the storm still plans the full refresh.
    #[test]
    fn an_event_storm_of_files_plans_one_batch_refresh() {
        let (_dir, root, w) = setup();
        for i in 0..=super::MAX_TARGETED_PATHS {
            std::fs::write(root.join(format!("src/f{i}.rs")), "x").unwrap();
        }
        assert_eq!(w.changes(Duration::from_secs(5)), Plan::Stamps);
        assert_eq!(w.changes(Duration::from_secs(5)), Plan::Paths(vec![]));
        for i in 0..=super::MAX_TARGETED_PATHS {
            std::fs::write(root.join(format!("src/f{i}.rs")), "y").unwrap();
        }
        std::fs::create_dir(root.join("src/new")).unwrap();
        assert_eq!(w.changes(Duration::from_secs(5)), Plan::Full);
    }

    #[test]
    fn directories_and_ignore_files_plan_a_full_refresh() {
        let (_dir, root, w) = setup();
        std::fs::create_dir(root.join("src/new")).unwrap();
        assert_eq!(w.changes(Duration::from_secs(5)), Plan::Full);
        std::fs::write(root.join(".ignore"), "x\n").unwrap();
        assert_eq!(w.changes(Duration::from_secs(5)), Plan::Full);
        std::fs::write(root.join(".git/index"), "git's own file").unwrap();
        assert_eq!(w.changes(Duration::from_secs(5)), Plan::Paths(vec![]));
        w.invalidate();
        assert_eq!(w.changes(Duration::from_secs(5)), Plan::Full);
    }
}
