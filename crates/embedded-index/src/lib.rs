//! A persistent, crash-safe, incremental trigram index: the reference
//! [`RepositoryIndexBackend`] for `repo_search`, serving `indexed_literal`
//! (`capabilities.semantic = false`).
//!
//! - **What it indexes**: exactly the literal fallback's file selection (ripgrep's defaults).
//! - **How it answers**: the query (a fixed string or a regex) is planned into an AND/OR tree of
//!   trigrams that selects candidate files from memory-mapped posting lists; each candidate is
//!   then searched with ripgrep's own searcher and the literal fallback's exact configuration, so
//!   a hit is real and equal to ripgrep's first match in that file. One hit per file, ranked in a
//!   paging-stable order (see [`EmbeddedIndex`]); globs, types, counts and context lines as
//!   ripgrep's.
//! - **Storage**: immutable, checksummed segment files plus a manifest in a directory the host
//!   names. The manifest is replaced atomically (write, rename): that is the commit point, so a
//!   process killed at any moment leaves the previous commit readable. A build's commit is fsynced
//!   (the segments, the manifest, then the directory); an update's is not, since a query waits for
//!   it, and a crash of the machine costs at most a refresh or a rebuild. A damaged file is
//!   detected by its crc32 and reported as `failed`, never served.
//! - **Updates**: each update writes a segment holding only the changed files and marks the old
//!   copies deleted; small segments are merged once there are more than a few. Cost follows the
//!   size of the change, not of the corpus.
//! - **Freshness**: [`EmbeddedIndex::refresh`] walks the selection and compares each file's
//!   `stat` stamp with the one recorded when it was read; git is never asked. The selection is the
//!   truth.
//! - **Concurrency**: any number of processes and threads may share one index directory. One
//!   writer at a time holds an OS lock on `LOCK`; readers never wait for it: a query takes the
//!   latest committed snapshot at its start and uses only it. Files are opened beneath the
//!   worktree without following symlinks.
//!
//! # Example
//!
//! ```
//! use embedded_index::EmbeddedIndex;
//! use index_contract::{IndexState, SearchMode, SearchRequest};
//!
//! let repo = tempfile::tempdir()?;
//! std::fs::write(repo.path().join("main.rs"), "fn main() {\n    parse_config();\n}\n")?;
//! let store = tempfile::tempdir()?;
//! let index = EmbeddedIndex::open(repo.path(), store.path())?;
//! assert_eq!(index.current_status().state, IndexState::Empty);
//!
//! index.build("rev-1")?;
//! let found = index.search_now(&SearchRequest::new("parse_config", SearchMode::IndexedLiteral))?;
//! assert_eq!((found.hits[0].path.as_str(), found.hits[0].line), ("main.rs", 2));
//! assert_eq!(found.status.source_revision.as_deref(), Some("rev-1"));
//!
//! // Reopening maps the committed files; nothing is rebuilt.
//! drop(index);
//! let again = EmbeddedIndex::open(repo.path(), store.path())?;
//! assert_eq!(again.current_status().state, IndexState::Ready);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod dircache;
mod error;
mod listing;
mod manifest;
mod parallel;
mod plan;
mod postings;
mod query;
mod refresh;
mod segment;
mod snapshot;
mod trigram;
mod verify;
mod write;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use index_contract::{
    BackendCapabilities, BackendError, BackendSearchResponse, BoxFuture, FileFilter, IndexState,
    IndexStatus, RemoveRequest, RepositoryIndexBackend, SearchRequest, UpdateRequest,
};
use index_storage::IndexDir;
use search_profile::rank::Prior;
use search_profile::{HiddenRules, RootDir};

pub use error::EmbeddedIndexError;
pub use refresh::{RefreshKind, RefreshReport};

use snapshot::{LoadError, ManifestId, Snapshot};

/// How an [`EmbeddedIndex`] builds and maintains itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbeddedIndexConfig {
    /// Threads for the build and for verifying candidates; `None` uses the available parallelism.
    pub threads: Option<usize>,
    /// A build holds at most this many (trigram, file) pairs: it writes a segment each time half
    /// of them have accumulated, and encodes it while the next half is read. This
    /// bounds build memory by the segment, not the corpus: about 12 bytes per pair (the files'
    /// trigram lists, the sorted postings, the encoded bytes), plus the encoder's counts (about
    /// 16 MiB for source text) and the list of selected paths. The default (3 Mi pairs) keeps a
    /// build under 128 MiB of heap up to a corpus ten times Linux's (`docs/benchmarks.md`).
    pub pairs_per_segment: usize,
    /// Updates merge the small segments once there are more than this many.
    pub max_small_segments: usize,
    /// A build then merges the segments it wrote, in path order, into as few segments of at
    /// most about this many bytes as it can, streaming one posting list at a time (so the merge
    /// adds little heap whatever the size). One dictionary instead of one per segment, and
    /// Elias–Fano lists over all docs, make the index smaller. `0` keeps the build's segments as
    /// written. The default is 1 GiB, a quarter of a segment's 4 GiB offset limit.
    pub merged_segment_bytes: u64,
}

impl Default for EmbeddedIndexConfig {
    fn default() -> Self {
        EmbeddedIndexConfig {
            threads: None,
            pairs_per_segment: 3 << 20,
            max_small_segments: 8,
            merged_segment_bytes: 1 << 30,
        }
    }
}

enum Current {
    Ready(Arc<Snapshot>),
    Failed,
}

/// The embedded index over one worktree, stored in one directory.
///
/// **Ranking.** Every hit is a file's first matching line, exactly as ripgrep finds it. Its score
/// is the shared rank ([`search_profile::rank`]): half its path's prior (ordinary source before
/// tests, docs, vendored and generated code; deeper paths a little later) and half its match's
/// shape (a whole word on a definition's line first), the score every backend gives it. Hits
/// come best first within blocks of 1000: files are taken in order of their path prior (ties in
/// path order), and each consecutive 1000 matching files are ranked among themselves. So an answer
/// of up to 1000 hits is ranked as a whole, a capped answer holds the best-prior files, and the
/// first hits of a bigger answer are always a smaller answer: pages concatenate.
pub struct EmbeddedIndex {
    root: PathBuf,
    /// The worktree, opened: every file is opened beneath it without following symlinks.
    /// Reopened when the path comes to name another directory (a repository re-cloned in place).
    root_dir: RwLock<Arc<RootDir>>,
    config: EmbeddedIndexConfig,
    /// The latest snapshot this process loaded, and which manifest file it came from.
    current: RwLock<(Current, Option<ManifestId>)>,
    writer: Mutex<()>,
    /// Where the last long query stopped verifying, so that its next page resumes there.
    cursor: Mutex<Option<query::Cursor>>,
    building: AtomicBool,
    /// The index directory's path, and the directory opened: index files are opened beneath it
    /// the same way. Reopened when the path comes to name another directory (deleted, re-cloned).
    dir_path: PathBuf,
    dir_handle: RwLock<Arc<IndexDir>>,
    /// The last [`HiddenRules`] found, by [`hidden_rules_key`]: a commit that changes no hidden
    /// path and no ignore file reuses them instead of walking again.
    hidden_rules: Mutex<Option<(u64, Arc<HiddenRules>)>>,
    /// The directory cache as last found holding (by a whole refresh, or by a query that
    /// checked its directories), until a refresh of named paths says something changed: what
    /// answers include globs without a walk.
    held_dircache: Mutex<Option<Arc<dircache::DirCache>>>,
    /// The stamp of the directory cache file a query last found not holding (damaged, or a
    /// directory or rule changed since it was recorded). Stamps only move forward, so that file
    /// never holds again: until the file is replaced, include globs walk without reading it.
    refused_dircache: Mutex<Option<index_storage::Stamp>>,
}

impl std::fmt::Debug for EmbeddedIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedIndex")
            .field("root", &self.root)
            .field("dir", &self.dir_path)
            .finish_non_exhaustive()
    }
}

/// What a build did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildStats {
    /// Files indexed.
    pub files: usize,
    /// Bytes of the committed index on disk.
    pub index_bytes: u64,
    /// Segments committed.
    pub segments: usize,
    /// Segments written as the files were read, each of at most
    /// [`EmbeddedIndexConfig::pairs_per_segment`] pairs, before they were merged.
    pub batches: usize,
}

/// One file of the committed index (see [`EmbeddedIndex::committed_files`]).
#[derive(Debug, Clone, PartialEq)]
pub struct CommittedFile {
    /// Repo-relative path.
    pub path: String,
    /// A digest of the file's stamp as this index read it: another value means another read.
    pub version: u64,
    /// The path prior this index ranks by, in `(0, 1]`: ordinary source 1, tests, docs and
    /// vendored code less (see [`EmbeddedIndex`]).
    pub prior: f32,
}

/// What a committed snapshot attests, without its files: enough for an engine that keeps pace
/// with this index to tell whether it caught up to this very commit, at no cost per file.
#[derive(Debug, Clone, PartialEq)]
pub struct CommittedHead {
    /// The revision the snapshot attests (`None` before the first commit).
    pub revision: Option<String>,
    /// The snapshot's status: an engine that caught up to this very snapshot can answer with it.
    pub status: IndexStatus,
    /// A digest of the snapshot's servable files (paths, versions, priors:
    /// [`CommittedFiles::files`]): two commits that attest one revision but hold different files
    /// have different digests, so an engine keeping pace with this index names what it caught up
    /// to by both.
    pub digest: u64,
    /// The walk names of the files it holds but no answer may name (not UTF-8, or refused by the
    /// trust gate), in path order: an engine that ranks every file in scope counts those in
    /// scope as unserved, since it cannot rank them.
    pub unservable: Arc<[String]>,
}

impl Default for CommittedHead {
    fn default() -> Self {
        CommittedHead {
            revision: None,
            status: IndexStatus::new(IndexState::Failed),
            digest: 0,
            unservable: Arc::from([]),
        }
    }
}

/// A committed snapshot's head and servable files.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CommittedFiles {
    /// What the snapshot attests.
    pub head: CommittedHead,
    /// Its servable files, in path order.
    pub files: Vec<CommittedFile>,
}

/// A 64-bit digest of a few words (splitmix64's finaliser over a running sum).
fn mix(words: &[u64]) -> u64 {
    let mut h = 0x9e37_79b9_7f4a_7c15u64;
    for &w in words {
        h = (h ^ w).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^= h >> 31;
        h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^= h >> 29;
    }
    h
}

/// The servable files of a snapshot, in path order: what [`EmbeddedIndex::committed_files`]
/// lists: the held files `in_default` keeps (the index also holds hidden files, for the requests
/// that select them).
fn servable_files(s: &Snapshot, in_default: impl Fn(&str) -> bool) -> Vec<CommittedFile> {
    s.live_docs()
        .filter(|&(path, _, _)| in_default(path))
        .filter_map(|(path, si, id)| {
            let meta = s.segments[si].meta(id);
            if meta.flags & segment::flags::REFUSED_NAME != 0 {
                return None;
            }
            let st = meta.stamp;
            Some(CommittedFile {
                path: path.to_owned(),
                version: mix(&[
                    st.len,
                    st.mtime_ns,
                    st.ctime_ns,
                    st.ino,
                    u64::from(meta.flags),
                ]),
                prior: Prior::from_step(meta.prior).value() as f32,
            })
        })
        .collect()
}

/// The walk names of the live files of a snapshot in ripgrep's default selection that no answer
/// may name, in path order: what [`CommittedHead::unservable`] lists.
fn unservable_files(s: &Snapshot, in_default: impl Fn(&str) -> bool) -> Arc<[String]> {
    s.unservable
        .get_or_init(|| {
            s.live_docs()
                .filter(|&(path, si, id)| {
                    s.segments[si].meta(id).flags & segment::flags::REFUSED_NAME != 0
                        && in_default(path)
                })
                .map(|(path, _, _)| path.to_owned())
                .collect()
        })
        .clone()
}

/// What decides which held files under hidden names a request selects (see
/// [`HiddenRules`]): the hidden paths themselves, the stamps of the ignore files among them, and
/// the stamps of the ignore files outside the worktree that git reads.
fn hidden_rules_key(root: &Path, hidden: &[(&str, index_storage::Stamp)]) -> u64 {
    let mut words = Vec::with_capacity(hidden.len() * 5 + 8);
    let stamp = |words: &mut Vec<u64>, st: Option<index_storage::Stamp>| {
        let st = st.unwrap_or_default();
        words.extend([st.len, st.mtime_ns, st.ctime_ns, st.ino]);
    };
    for (path, st) in hidden {
        words.push((u64::from(crc32fast::hash(path.as_bytes())) << 32) | path.len() as u64);
        let name = path.rsplit_once('/').map_or(*path, |(_, n)| n);
        if search_profile::IGNORE_FILES.contains(&name) {
            stamp(&mut words, Some(*st));
        }
    }
    let outside = [
        search_profile::global_excludes_file(),
        Some(root.join(".git").join("info").join("exclude")),
    ];
    for file in outside {
        let st = file.and_then(|f| std::fs::symlink_metadata(f).ok());
        stamp(&mut words, st.map(|m| index_storage::Stamp::of(&m)));
    }
    mix(&words)
}

/// [`CommittedHead::digest`] of `files`.
fn files_digest(files: &[CommittedFile]) -> u64 {
    let mut words = Vec::with_capacity(files.len() * 3 + 1);
    words.push(files.len() as u64);
    for f in files {
        words.push((u64::from(crc32fast::hash(f.path.as_bytes())) << 32) | f.path.len() as u64);
        words.push(f.version);
        words.push(u64::from(f.prior.to_bits()));
    }
    mix(&words)
}

fn threads(config: &EmbeddedIndexConfig) -> usize {
    config
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1)
}

impl EmbeddedIndex {
    /// What every embedded index declares, without one: a host that relays another process's
    /// index (a `repo-search serve` client) declares the same.
    pub fn declared_capabilities() -> BackendCapabilities {
        // The index holds the default selection plus hidden files, which types and `--hidden`
        // select; the files an include glob or `--no-ignore` selects beyond it are found by a
        // walk (see `query.rs`).
        BackendCapabilities {
            regex: true,
            file_filters: true,
            exclude_globs: true,
            count: true,
            context: true,
            paging: true,
            hidden_files: true,
            ignored_files: true,
            multiline: true,
            ..BackendCapabilities::default()
        }
    }

    /// Opens the index of `root` stored in `dir` (created if missing). A missing index is
    /// `empty`; a damaged one opens as `failed` (and [`EmbeddedIndex::build`] repairs it).
    /// Opening maps the segments and checks their checksums; it loads no posting list.
    pub fn open(root: impl AsRef<Path>, dir: impl AsRef<Path>) -> std::io::Result<EmbeddedIndex> {
        EmbeddedIndex::with_config(root, dir, EmbeddedIndexConfig::default())
    }

    /// [`EmbeddedIndex::open`] with a configuration.
    pub fn with_config(
        root: impl AsRef<Path>,
        dir: impl AsRef<Path>,
        config: EmbeddedIndexConfig,
    ) -> std::io::Result<EmbeddedIndex> {
        let root = root.as_ref().canonicalize()?;
        let dir = dir.as_ref().to_path_buf();
        let index = EmbeddedIndex {
            root_dir: RwLock::new(Arc::new(RootDir::open(&root)?)),
            root,
            config,
            current: RwLock::new((Current::Failed, None)),
            writer: Mutex::new(()),
            cursor: Mutex::new(None),
            building: AtomicBool::new(false),
            hidden_rules: Mutex::new(None),
            held_dircache: Mutex::new(None),
            refused_dircache: Mutex::new(None),
            dir_handle: RwLock::new(Arc::new(IndexDir::create(&dir)?)),
            dir_path: dir,
        };
        if let Err(LoadError::Io(e)) = index.load() {
            return Err(e);
        }
        Ok(index)
    }

    /// The worktree root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The worktree, opened.
    pub(crate) fn worktree(&self) -> Arc<RootDir> {
        self.root_dir
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The index directory, opened.
    pub(crate) fn dir(&self) -> Arc<IndexDir> {
        self.dir_handle
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Loads the committed version, whatever this process held before.
    fn load(&self) -> Result<(), LoadError> {
        let dir = self.dir();
        let id = snapshot::manifest_id(&dir);
        let previous = self.snapshot();
        let loaded = Snapshot::read_committed(&dir, previous.as_deref());
        let mut current = self.current.write().unwrap_or_else(|p| p.into_inner());
        match loaded {
            Ok(s) => {
                *current = (Current::Ready(Arc::new(s)), id);
                Ok(())
            }
            Err(e) => {
                *current = (Current::Failed, id);
                Err(e)
            }
        }
    }

    /// Notices a commit by another process (or a damaged or deleted index) and loads it. Costs
    /// one `stat` when nothing changed.
    pub(crate) fn sync(&self) {
        self.sync_with(false);
    }

    /// [`EmbeddedIndex::sync`], and with `always_load` the committed version is read even when
    /// the manifest's identity looks unchanged: a writer must build on the latest commit, and an
    /// identity (inode, size, mtime) can repeat within one timestamp tick.
    pub(crate) fn sync_with(&self, always_load: bool) {
        if !self.worktree().is_still_at_path()
            && let Ok(d) = RootDir::open(&self.root)
        {
            // The worktree was replaced in place: read the new one. Its files have new inodes,
            // so the next refresh reads every one of them again.
            *self.root_dir.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(d);
        }
        if !self.dir().is_still_at_path() {
            // The directory was deleted or replaced: start over in whatever is there now.
            let reopened = IndexDir::create(&self.dir_path);
            if let Ok(d) = reopened {
                *self.dir_handle.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(d);
                *self.current.write().unwrap_or_else(|p| p.into_inner()) = (Current::Failed, None);
                let _ = self.load();
                return;
            }
        }
        let now = snapshot::manifest_id(&self.dir());
        let held = self.current.read().unwrap_or_else(|p| p.into_inner()).1;
        if always_load
            || now != held
            || now.is_none() && self.snapshot().is_none_or(|s| s.manifest.generation > 0)
        {
            let _ = self.load();
        }
    }

    /// A snapshot's status, `building` while this handle builds into an empty index.
    fn status_of(&self, s: &Snapshot) -> IndexStatus {
        let mut st = s.status();
        if st.state == IndexState::Empty && self.building.load(Ordering::SeqCst) {
            st.state = IndexState::Building;
        }
        st
    }

    fn snapshot(&self) -> Option<Arc<Snapshot>> {
        match &self.current.read().unwrap_or_else(|p| p.into_inner()).0 {
            Current::Ready(s) => Some(s.clone()),
            Current::Failed => None,
        }
    }

    fn install(&self, s: Snapshot) {
        let id = snapshot::manifest_id(&self.dir());
        *self.current.write().unwrap_or_else(|p| p.into_inner()) =
            (Current::Ready(Arc::new(s)), id);
    }

    /// The status of the latest commit, honestly: `empty` before the first build, `building`
    /// during a first build, `ready` once committed, `failed` when damaged.
    pub fn current_status(&self) -> IndexStatus {
        self.sync();
        match self.snapshot() {
            None => IndexStatus::new(IndexState::Failed),
            Some(s) => {
                let mut st = s.status();
                if st.state == IndexState::Empty && self.building.load(Ordering::SeqCst) {
                    st.state = IndexState::Building;
                }
                st
            }
        }
    }

    /// The paths the committed index holds, in path order (component by component).
    pub fn indexed_paths(&self) -> Vec<String> {
        self.snapshot()
            .map(|s| s.live_docs().map(|(p, _, _)| p.to_owned()).collect())
            .unwrap_or_default()
    }

    /// How many files the committed index holds.
    pub fn len(&self) -> usize {
        self.snapshot().map_or(0, |s| s.live_count())
    }

    /// Whether the committed index holds no file.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The files the index would hold if built now, in path order: the literal search's
    /// selection plus hidden files ([`search_profile::Selection::held`]).
    pub fn selection(&self) -> Vec<String> {
        search_profile::Selection::held(&self.root)
            .threads(threads(&self.config))
            .files()
    }

    /// The committed snapshot's head and servable files, in path order, for an engine that
    /// keeps pace with this index without walking the worktree again (the host's semantic store).
    /// A file's `version` changes whenever this index read it again; files whose names the trust
    /// gate refuses are left out, since no answer may name them. Lists every file: an engine
    /// that may already be caught up asks [`EmbeddedIndex::committed_head`] first.
    pub fn committed_files(&self) -> CommittedFiles {
        self.sync();
        let Some(s) = self.snapshot() else {
            return CommittedFiles::default();
        };
        let files = servable_files(&s, |p| self.in_default_selection(&s, p));
        s.files_digest.get_or_init(|| files_digest(&files));
        CommittedFiles {
            head: self.head_of(&s),
            files,
        }
    }

    /// What the committed snapshot attests ([`CommittedFiles::head`]). The digest and the
    /// unservable files are computed once per commit, so a call after the first costs nothing
    /// per file.
    pub fn committed_head(&self) -> CommittedHead {
        self.sync();
        let Some(s) = self.snapshot() else {
            return CommittedHead::default();
        };
        self.head_of(&s)
    }

    /// The revision the committed snapshot attests ([`CommittedHead::revision`]), without its
    /// digest: the first look at a new commit's head lists its files to compute that, and a
    /// caller that finds the revision changed lists them itself ([`EmbeddedIndex::committed_files`]).
    pub fn committed_revision(&self) -> Option<String> {
        self.sync();
        self.snapshot()?.manifest.source_revision.clone()
    }

    fn head_of(&self, s: &Snapshot) -> CommittedHead {
        let digest = *s
            .files_digest
            .get_or_init(|| files_digest(&servable_files(s, |p| self.in_default_selection(s, p))));
        CommittedHead {
            revision: s.manifest.source_revision.clone(),
            status: self.status_of(s),
            digest,
            unservable: unservable_files(s, |p| self.in_default_selection(s, p)),
        }
    }

    /// Whether ripgrep, with `files`'s flags, searches `s`'s held file at `path`, as far as hidden
    /// names decide it (see [`HiddenRules::selects`]). The rules are found only when a file under
    /// a hidden name asks: most queries never need them.
    pub(crate) fn held_file_selected(&self, s: &Snapshot, files: &FileFilter, path: &str) -> bool {
        files.include_hidden
            || !search_profile::has_hidden_component(path)
            || self.hidden_rules(s).selects(files, path)
    }

    /// Whether `s`'s held file at `path` is in ripgrep's default selection.
    fn in_default_selection(&self, s: &Snapshot, path: &str) -> bool {
        self.held_file_selected(s, &FileFilter::default(), path)
    }

    /// Which of `s`'s files under hidden names each request selects: found once per snapshot, by
    /// a walk over the hidden paths only ([`HiddenRules::walk`]), or reused from the last
    /// snapshot when no hidden path and no ignore file changed.
    fn hidden_rules<'s>(&self, s: &'s Snapshot) -> &'s HiddenRules {
        s.hidden.get_or_init(|| {
            let hidden: Vec<(&str, index_storage::Stamp)> = s
                .live_docs()
                .filter(|&(path, _, _)| search_profile::has_hidden_component(path))
                .map(|(path, si, id)| (path, s.segments[si].meta(id).stamp))
                .collect();
            let key = hidden_rules_key(&self.root, &hidden);
            let mut last = self.hidden_rules.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((k, rules)) = &*last
                && *k == key
            {
                return rules.clone();
            }
            let rules = Arc::new(HiddenRules::walk(
                &self.root,
                threads(&self.config),
                hidden.iter().map(|&(p, _)| p),
            ));
            *last = Some((key, rules.clone()));
            rules
        })
    }

    /// Whether the committed index holds `path`.
    pub fn contains(&self, path: &str) -> bool {
        self.snapshot().is_some_and(|s| s.find(path).is_some())
    }

    /// Indexes the whole worktree and commits it as `source_revision`, replacing whatever was
    /// committed. Memory is bounded by [`EmbeddedIndexConfig::pairs_per_segment`]. Waits for
    /// any other writer.
    pub fn build(&self, source_revision: &str) -> Result<BuildStats, EmbeddedIndexError> {
        self.build_with_progress(source_revision, &mut |_, _| {})
    }

    /// [`EmbeddedIndex::build`], calling `progress(files_done, files_total)` as it goes.
    pub fn build_with_progress(
        &self,
        source_revision: &str,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<BuildStats, EmbeddedIndexError> {
        let _lock = self.lock(None)?;
        self.building.store(true, Ordering::SeqCst);
        let result = self.build_locked(source_revision, progress);
        self.building.store(false, Ordering::SeqCst);
        result
    }

    /// Applies removals and upserts (files re-read from the worktree, without following
    /// symlinks) and commits them, with `source_revision` when given (else the committed revision
    /// stays). Cost follows the size of the change. Waits for any other writer.
    pub fn apply(
        &self,
        upserts: &[String],
        removals: &[String],
        source_revision: Option<&str>,
    ) -> Result<(), EmbeddedIndexError> {
        let _lock = self.lock(None)?;
        let upserts: Vec<(String, segment::Stamp)> = upserts
            .iter()
            .map(|p| (p.clone(), segment::Stamp::default()))
            .collect();
        self.apply_locked(&upserts, removals, source_revision)
    }

    /// Re-stamps the committed index as current at `source_revision` without changing its
    /// contents: for a host that checked and found nothing changed.
    pub fn touch(&self, source_revision: &str) -> Result<(), EmbeddedIndexError> {
        self.apply(&[], &[], Some(source_revision))
    }
}

impl RepositoryIndexBackend for EmbeddedIndex {
    fn capabilities(&self) -> BackendCapabilities {
        EmbeddedIndex::declared_capabilities()
    }

    /// Re-reads the added and edited files from the worktree and commits them with the request's
    /// revision. The work runs on the calling task; hosts that must keep an executor thread free
    /// call it through `spawn_blocking` or from a thread of their own.
    fn update(&self, request: UpdateRequest) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            let upserts = request.upserted_paths();
            self.apply(&upserts, &[], Some(&request.source_revision))?;
            Ok(())
        })
    }

    fn remove(&self, request: RemoveRequest) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            // The first half of an update matches no revision: commit it as one under way.
            let revision = request.update_follows.then_some(snapshot::UPDATE_UNDER_WAY);
            self.apply(&[], &request.paths, revision)?;
            Ok(())
        })
    }

    fn search(
        &self,
        request: SearchRequest,
    ) -> BoxFuture<'_, Result<BackendSearchResponse, BackendError>> {
        Box::pin(async move { Ok(self.search_now(&request)?) })
    }

    fn status(&self) -> BoxFuture<'_, Result<IndexStatus, BackendError>> {
        Box::pin(async move { Ok(self.current_status()) })
    }

    fn dispose(&self) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async { Ok(()) })
    }
}
