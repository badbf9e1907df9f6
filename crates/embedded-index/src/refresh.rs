//! Freshness: the selection is the truth.
//!
//! A refresh walks the selection (what the literal search would search now) and compares each
//! file's `stat` stamp with the stamp the index recorded when it read the file. New, changed and
//! racy files are read again; files no longer selected are removed. Nothing here asks git: git's
//! view misses submodules, nested repositories, `skip-worktree` files and ignore files that
//! re-include what `.gitignore` excludes, and the walk sees them all.

use std::collections::HashSet;
use std::time::{Instant, SystemTime};

use index_contract::UnixMillis;
use search_profile::{FileEntry, PathKey, Selection};

use crate::dircache::DirCache;
use crate::listing::Listing;

use crate::segment::{Stamp, flags};
use crate::snapshot::Snapshot;
use crate::{EmbeddedIndex, EmbeddedIndexError};

/// What a refresh did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefreshKind {
    /// The index was empty or damaged, and was built.
    Build,
    /// Files changed and were committed.
    Update,
    /// No file changed, but HEAD did: the commit was re-stamped with a revision for it.
    Touch,
    /// Nothing changed: nothing was written. The commit's status reports it current as of this
    /// refresh, in this process (the time a re-stamp would have written).
    Fresh,
}

/// The outcome of [`EmbeddedIndex::refresh`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefreshReport {
    /// What was done.
    pub kind: RefreshKind,
    /// Files read again.
    pub upserts: usize,
    /// Files removed.
    pub removals: usize,
    /// The revision the index now attests.
    pub revision: String,
}

/// What a refresh looks at.
#[derive(Debug, Clone, Copy)]
enum Extent<'a> {
    /// The whole selection.
    Whole,
    /// Only these repo-relative paths.
    Paths(&'a [String]),
}

/// Files to read again and files to remove.
#[derive(Debug, Default)]
struct Diff {
    upserts: Vec<(String, Stamp)>,
    removals: Vec<String>,
}

impl EmbeddedIndex {
    /// The selection now, in path order, without the files' stamps: what a build reads. A build
    /// takes each file's stamp from the file it opens, so the walk need not `stat` the files,
    /// and the list costs only their paths, shared with the directory cache.
    pub(crate) fn walk_paths(&self) -> Result<Listing<()>, EmbeddedIndexError> {
        let threads = crate::threads(&self.config);
        let cached = self.cached_listing(|cache, worktree| {
            cache
                .directories_hold(worktree, threads)
                .then(|| vec![(); cache.len()])
        });
        if let Some(listing) = cached {
            return listing;
        }
        let selection = Selection::held(&self.root).threads(threads);
        Ok(self.walk_and_record(&selection, |_| Some(()))?.0)
    }

    /// The directory cache's files, with what `holding` keeps of each when it finds the cache on
    /// disk still holding (that cache is then the one known to hold); `None` when there is no
    /// such cache, and the tree must be walked.
    fn cached_listing<T>(
        &self,
        holding: impl FnOnce(&DirCache, &search_profile::RootDir) -> Option<Vec<T>>,
    ) -> Option<Result<Listing<T>, EmbeddedIndexError>> {
        let cache = DirCache::read(&self.dir())?;
        let kept = holding(&cache, &self.worktree())?;
        let paths = cache.files().clone();
        self.hold_dircache(Some(std::sync::Arc::new(cache)));
        Some(Listing::new(paths, kept).ok_or(EmbeddedIndexError::Corrupt))
    }

    /// The selection within `extent`, each file with the stamp the walk saw, in path order. A
    /// walk restricted to some paths reads only their ancestor directories, with the same ignore
    /// rules as a whole walk.
    ///
    /// Also says whether the walk was complete (no directory failed to list): what an incomplete
    /// walk did not see must not be removed.
    fn walk(&self, extent: Extent<'_>) -> Result<(Listing, bool), EmbeddedIndexError> {
        let threads = crate::threads(&self.config);
        let mut selection = Selection::held(&self.root).threads(threads);
        if let Extent::Whole = extent {
            let cached =
                self.cached_listing(|cache, worktree| cache.stamps_if_holding(worktree, threads));
            if let Some(listing) = cached {
                return Ok((listing?, true));
            }
            return self.walk_and_record(&selection, |e| match e {
                FileEntry::File { entry, .. } => entry.metadata().ok().map(|m| Stamp::of(&m)),
                _ => None,
            });
        }
        if let Extent::Paths(paths) = extent {
            if paths.is_empty() {
                return Ok((Listing::default(), true));
            }
            selection = selection.only(paths.iter().map(String::as_str));
        }
        let (walked, complete) =
            selection.collect_checked(|_, entry| entry.metadata().ok().map(|m| Stamp::of(&m)));
        Ok((
            Listing::from_vec(walked).ok_or_else(too_many_paths)?,
            complete,
        ))
    }

    /// Walks the whole selection, keeping what `keep` takes of each file (a file it gives
    /// nothing for is left out), and records what it saw in the directory cache when the walk
    /// was complete: the files and directories it selected, and what it skipped in them.
    fn walk_and_record<T: Send>(
        &self,
        selection: &Selection,
        keep: impl Fn(&FileEntry<'_>) -> Option<T> + Sync,
    ) -> Result<(Listing<T>, bool), EmbeddedIndexError> {
        let walked_at = SystemTime::now();
        let dirs = std::sync::Mutex::new(Vec::new());
        let found = std::sync::Mutex::new(Vec::new());
        let complete = std::sync::atomic::AtomicBool::new(true);
        selection.for_each_entry(true, || {
            let (complete, keep) = (&complete, &keep);
            let mut local = TreeFlush {
                dirs: Vec::new(),
                files: Vec::new(),
                into: (&dirs, &found),
            };
            move |e: FileEntry<'_>| match e {
                FileEntry::File { rel, .. } => {
                    if let Some(kept) = keep(&e) {
                        local.files.push((Box::from(rel), kept));
                    }
                }
                FileEntry::Dir { rel, entry } => match entry.metadata() {
                    Ok(m) => local.dirs.push((rel.to_owned(), Stamp::of(&m))),
                    Err(_) => complete.store(false, std::sync::atomic::Ordering::Relaxed),
                },
                FileEntry::Unreadable { io: true } => {
                    complete.store(false, std::sync::atomic::Ordering::Relaxed);
                }
                _ => {}
            }
        });
        let mut files = found.into_inner().unwrap_or_else(|p| p.into_inner());
        // In place (paths are unique, so stability adds nothing), then one block of text: at a
        // monorepo's scale a merge sort's buffer and a `String` per path are tens of megabytes.
        files.sort_unstable_by(|a, b| PathKey::compare(&a.0, &b.0));
        let files = Listing::from_vec(files).ok_or_else(too_many_paths)?;
        let complete = complete.into_inner();
        let mut recorded = None;
        if complete {
            let dirs = dirs.into_inner().unwrap_or_else(|p| p.into_inner());
            // The cache shares the list's paths: at a monorepo's scale a copy of every path is
            // tens of megabytes on top of the walk's own.
            if let Some(mut cache) =
                DirCache::record(&self.root, files.paths().clone(), dirs, walked_at)
            {
                cache.record_skipped(&self.root, crate::threads(&self.config));
                cache.write(&self.dir());
                recorded = Some(std::sync::Arc::new(cache));
            }
        }
        self.hold_dircache(recorded);
        Ok((files, complete))
    }

    /// Keeps `cache` as the directory cache known to hold, or forgets it.
    pub(crate) fn hold_dircache(&self, cache: Option<std::sync::Arc<DirCache>>) {
        *self.held_dircache.lock().unwrap_or_else(|p| p.into_inner()) = cache;
    }

    /// The directory cache, when its rules and directories still hold: the one a refresh or an
    /// earlier query found holding (until a refresh of named paths), else the cache file after
    /// a check of its directories' stamps, unless that very file was already found not holding.
    pub(crate) fn holding_dircache(&self) -> Option<std::sync::Arc<DirCache>> {
        if let Some(held) = &*self.held_dircache.lock().unwrap_or_else(|p| p.into_inner()) {
            return Some(held.clone());
        }
        let dir = self.dir();
        let refused = || {
            self.refused_dircache
                .lock()
                .unwrap_or_else(|p| p.into_inner())
        };
        // Stamped before it is read: a file replaced in between is read again next time.
        let stamp = dir.stamp(crate::dircache::DIR_CACHE)?;
        if *refused() == Some(stamp) {
            return None;
        }
        let holding = DirCache::read(&dir)
            .filter(|c| c.directories_hold(&self.worktree(), crate::threads(&self.config)));
        let Some(cache) = holding else {
            *refused() = Some(stamp);
            return None;
        };
        let cache = std::sync::Arc::new(cache);
        self.hold_dircache(Some(cache.clone()));
        Some(cache)
    }

    fn diff(snap: &Snapshot, selected: &Listing, extent: Extent<'_>) -> Diff {
        let mut d = Diff::default();
        // A racy file is read again until its stamp can vouch for it. An unreadable one is not
        // read again until its stamp changes (a `chmod` changes its ctime): queries verify it
        // anyway, since the index cannot rule it out, so nothing is missed meanwhile.
        let changed = |si: usize, id: u32, stamp: &Stamp| {
            let meta = snap.segments[si].meta(id);
            meta.stamp != *stamp || meta.flags & flags::RACY != 0
        };
        match extent {
            // Only the named paths were looked at: of the rest, none is gone.
            Extent::Paths(paths) => {
                for (path, stamp) in selected.iter() {
                    match snap.find(path) {
                        Some((si, id)) if !changed(si, id, stamp) => {}
                        _ => d.upserts.push((path.to_owned(), *stamp)),
                    }
                }
                let now: HashSet<&str> = selected.iter().map(|(p, _)| p).collect();
                d.removals = paths
                    .iter()
                    .filter(|p| !now.contains(p.as_str()) && snap.find(p).is_some())
                    .cloned()
                    .collect();
                d.removals.sort();
                d.removals.dedup();
            }
            // Both sides are in path order: one merge-join, no map of the corpus.
            Extent::Whole => {
                let mut live = snap.live_docs().peekable();
                for (path, stamp) in selected.iter() {
                    while let Some(&(p, _, _)) = live.peek() {
                        if PathKey::compare(p, path) == std::cmp::Ordering::Less {
                            d.removals.push(p.to_owned());
                            live.next();
                        } else {
                            break;
                        }
                    }
                    match live.peek() {
                        Some(&(p, si, id)) if p == path => {
                            live.next();
                            if changed(si, id, stamp) {
                                d.upserts.push((path.to_owned(), *stamp));
                            }
                        }
                        _ => d.upserts.push((path.to_owned(), *stamp)),
                    }
                }
                d.removals.extend(live.map(|(p, _, _)| p.to_owned()));
            }
        }
        d
    }

    /// Brings the index up to date with the worktree and attests `head` (the host's name for the
    /// checked-out version, e.g. a commit id) plus the commit generation, as
    /// `<head>+g<generation>`: a new revision for every commit, so no two contents share one.
    ///
    /// Safe with any number of processes and threads: the walk runs unlocked, and only when it
    /// found a change does the refresh take the writer lock (waiting until `deadline`), read the
    /// latest commit (another process may have done the work) and write the rest.
    pub fn refresh(
        &self,
        head: &str,
        deadline: Option<Instant>,
    ) -> Result<RefreshReport, EmbeddedIndexError> {
        self.refresh_extent(head, Extent::Whole, deadline)
    }

    /// [`EmbeddedIndex::refresh`] for a host that knows every path that may have changed since the
    /// last refresh (from file-system events, for example): only `paths` are looked at, so its cost
    /// follows the change. A path that is no longer selected, or no longer exists, is removed.
    ///
    /// Files flagged racy elsewhere are not read again: that is sound only when the host would
    /// have named any file written since it was read. With an empty `paths`, this only re-stamps
    /// the commit when it is old or attests another `head`.
    pub fn refresh_paths(
        &self,
        head: &str,
        paths: &[String],
        deadline: Option<Instant>,
    ) -> Result<RefreshReport, EmbeddedIndexError> {
        self.refresh_extent(head, Extent::Paths(paths), deadline)
    }

    fn refresh_extent(
        &self,
        head: &str,
        extent: Extent<'_>,
        deadline: Option<Instant>,
    ) -> Result<RefreshReport, EmbeddedIndexError> {
        self.sync();
        if let Extent::Paths(paths) = extent
            && !paths.is_empty()
        {
            // Something changed, perhaps a name in a directory: the directory cache is checked
            // again before an include glob relies on it.
            self.hold_dircache(None);
        }
        let needs_build = self.snapshot().is_none_or(|s| s.manifest.generation == 0);
        if needs_build {
            let _lock = self.lock(deadline)?;
            if self.snapshot().is_none_or(|s| s.manifest.generation == 0) {
                let generation = self.snapshot().map_or(0, |s| s.manifest.generation) + 1;
                let revision = format!("{head}+g{generation}");
                self.building
                    .store(true, std::sync::atomic::Ordering::SeqCst);
                let built = self.build_locked(&revision, &mut |_, _| {});
                self.building
                    .store(false, std::sync::atomic::Ordering::SeqCst);
                let stats = built?;
                return Ok(RefreshReport {
                    kind: RefreshKind::Build,
                    upserts: stats.files,
                    removals: 0,
                    revision: self.current_revision(),
                });
            }
        }
        let (selected, complete) = self.walk(extent)?;
        let seen = self.snapshot();
        let seen_diff = seen.as_ref().map(|s| Self::diff(s, &selected, extent));
        if let (Some(s), Some(d)) = (&seen, &seen_diff)
            && let Some(report) = Self::fresh_without_writing(s, d, head)
        {
            return Ok(report);
        }
        let _lock = self.lock(deadline)?;
        // Another process may have committed while this one waited: judge against the latest.
        let snap = self.snapshot().ok_or(EmbeddedIndexError::Corrupt)?;
        let mut d = match (seen, seen_diff) {
            // The same commit as before the lock: the diff is the same.
            (Some(s), Some(d)) if s.manifest == snap.manifest => d,
            _ => Self::diff(&snap, &selected, extent),
        };
        if let Some(report) = Self::fresh_without_writing(&snap, &d, head) {
            return Ok(report);
        }
        if !complete {
            // A directory could not be listed: its files are not known to be gone.
            d.removals.clear();
        }
        // The walk ran before the lock: a file it did not see may have been created since, and
        // another process may have committed it. Ask again, now, about every path this refresh
        // would remove, so that it never removes a file that is selected.
        if !d.removals.is_empty() {
            let (now, complete) = self.walk(Extent::Paths(&d.removals))?;
            let now = now.into_vec();
            let still: HashSet<&str> = now.iter().map(|(p, _)| p.as_str()).collect();
            if complete {
                d.removals.retain(|p| !still.contains(p.as_str()));
            } else {
                d.removals.clear();
            }
            for (path, stamp) in now {
                if let Some((si, id)) = snap.find(&path)
                    && snap.segments[si].meta(id).stamp == stamp
                    && snap.segments[si].meta(id).flags & flags::RACY == 0
                {
                    continue;
                }
                d.upserts.push((path, stamp));
            }
        }
        let kind = if d.upserts.is_empty() && d.removals.is_empty() {
            RefreshKind::Touch
        } else {
            RefreshKind::Update
        };
        // A touch changes no content: the revision stays when HEAD did.
        let revision = match &snap.manifest.source_revision {
            Some(r) if kind == RefreshKind::Touch && Self::attests_head(r, head) => r.clone(),
            _ => format!("{head}+g{}", snap.manifest.generation + 1),
        };
        self.apply_locked(&d.upserts, &d.removals, Some(&revision))?;
        Ok(RefreshReport {
            kind,
            upserts: d.upserts.len(),
            removals: d.removals.len(),
            revision,
        })
    }

    /// `Some` when the committed `snap`, whose difference from the selection is `d`, already
    /// holds exactly the selection and attests `head`: then `snap` is marked current as of now.
    /// Re-stamping the commit would write only the time (a manifest, two fsyncs and the writer
    /// lock on every refresh after a pause), so the time is kept with the snapshot instead.
    fn fresh_without_writing(snap: &Snapshot, d: &Diff, head: &str) -> Option<RefreshReport> {
        let revision = snap.manifest.source_revision.clone()?;
        if !(d.upserts.is_empty() && d.removals.is_empty() && Self::attests_head(&revision, head)) {
            return None;
        }
        snap.verified(UnixMillis::now().0);
        Some(RefreshReport {
            kind: RefreshKind::Fresh,
            upserts: 0,
            removals: 0,
            revision,
        })
    }

    /// Whether `revision` is one this index wrote for `head`.
    fn attests_head(revision: &str, head: &str) -> bool {
        revision
            .strip_prefix(head)
            .is_some_and(|rest| rest.starts_with("+g"))
    }

    fn current_revision(&self) -> String {
        self.snapshot()
            .and_then(|s| s.manifest.source_revision.clone())
            .unwrap_or_default()
    }
}

/// What a walk collects of the files: each path with what it keeps of the file.
type Found<T> = std::sync::Mutex<Vec<(Box<str>, T)>>;

/// What a walk collects of the directories it enters: each path with its stamp.
type Entered = std::sync::Mutex<Vec<(String, Stamp)>>;

/// The selection's paths do not fit the 4 GiB of text that a list of them can hold.
pub(crate) fn too_many_paths() -> EmbeddedIndexError {
    EmbeddedIndexError::Io(std::io::Error::other(
        "the selected files' paths exceed 4 GiB of text",
    ))
}

/// One walk thread's findings, handed over when the thread is done with them.
struct TreeFlush<'a, T> {
    dirs: Vec<(String, Stamp)>,
    files: Vec<(Box<str>, T)>,
    into: (&'a Entered, &'a Found<T>),
}

impl<T> Drop for TreeFlush<'_, T> {
    fn drop(&mut self) {
        self.into
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .append(&mut self.dirs);
        self.into
            .1
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .append(&mut self.files);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::EmbeddedIndex;

    /// A cache file that a query found not holding is not read again, and a cache file that
    /// replaces it is: the refusal is remembered by the file's stamp.
    #[test]
    fn a_directory_cache_found_not_holding_is_not_read_again_until_replaced() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("a.txt"), "alpha\n").unwrap();
        let store = tempfile::tempdir().unwrap();
        let index = EmbeddedIndex::open(root.path(), store.path()).unwrap();
        // Directories younger than the racy window are not cached: let them age.
        std::thread::sleep(Duration::from_millis(2100));
        index.refresh("head", None).unwrap();
        let stamp = || index.dir().stamp(crate::dircache::DIR_CACHE);
        let first = stamp().expect("a complete, settled walk is cached");
        index.hold_dircache(None);
        assert!(index.holding_dircache().is_some(), "nothing changed");
        // A new file changes the root's stamp: the file no longer holds, and that is remembered.
        std::fs::write(root.path().join("b.txt"), "beta\n").unwrap();
        index.hold_dircache(None);
        assert!(index.holding_dircache().is_none());
        assert_eq!(*index.refused_dircache.lock().unwrap(), Some(first));
        // The next query compares the file's stamp with the remembered one, and reads nothing.
        assert!(index.holding_dircache().is_none());
        // A walk after the tree settled writes a new file, which is read and holds.
        std::thread::sleep(Duration::from_millis(2100));
        index.refresh("head", None).unwrap();
        let second = stamp().expect("recorded again");
        assert_ne!(second, first);
        index.hold_dircache(None);
        assert!(index.holding_dircache().is_some(), "the new file holds");
    }
}
