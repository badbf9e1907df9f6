//! One search: the parallel walk, the per-file searches and the bounded collection.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use index_contract::{
    CancelSignal, ContextLines, FileFilter, IndexError, OutputMode, SearchHit, SkippedFiles,
    StopReason,
};
use index_guard::{Scope, snippet_window};
use search_profile::{
    ContextConfig, FileEntry, FileSearcher, LineMatch, OpenError, PathKey, QueryMatcher, RootDir,
    SearchControl, Selection,
};

use crate::collect::Collector;

/// What one search is asked to do.
pub(crate) struct JobParams {
    pub(crate) scope: Scope,
    /// Globs, types, hidden and ignored files: which files the walk selects.
    pub(crate) files: FileFilter,
    pub(crate) matcher: QueryMatcher,
    /// What each hit stands for: a line, a file, or a file with its count.
    pub(crate) output: OutputMode,
    /// Context lines for each content hit.
    pub(crate) context: ContextLines,
    /// The most hits kept: the first this many of the order.
    pub(crate) max_results: usize,
    pub(crate) snippet_bytes: usize,
    pub(crate) deadline: Instant,
    pub(crate) signal: CancelSignal,
    /// Set when the caller dropped the search's future.
    pub(crate) abandoned: Arc<AtomicBool>,
    pub(crate) threads: usize,
    pub(crate) heap_limit: usize,
}

/// One running search, shared by the walker's threads: its parameters, why it stopped, what it
/// collected and its counters.
pub(crate) struct Job {
    params: JobParams,
    collector: Mutex<Collector>,
    stop: AtomicU8,
    files_searched: AtomicU64,
    binary: AtomicU64,
    non_utf8_path: AtomicU64,
    refused_path: AtomicU64,
    unreadable: AtomicU64,
    not_reached: AtomicU64,
}

const RUNNING: u8 = 0;
const DEADLINE: u8 = 1;
const CANCELLED: u8 = 2;

/// What one search produced.
pub(crate) struct Outcome {
    pub(crate) hits: Vec<SearchHit>,
    pub(crate) stopped: Option<StopReason>,
    pub(crate) files_searched: u64,
    pub(crate) skipped: SkippedFiles,
}

impl SearchControl for Job {
    /// Whether the search must stop now, recording why the first time it notices.
    fn should_stop(&self) -> bool {
        if self.stop.load(Ordering::Relaxed) != RUNNING {
            return true;
        }
        let p = &self.params;
        let reason = if p.signal.is_cancelled() || p.abandoned.load(Ordering::Relaxed) {
            CANCELLED
        } else if Instant::now() >= p.deadline {
            DEADLINE
        } else {
            return false;
        };
        let _ = self
            .stop
            .compare_exchange(RUNNING, reason, Ordering::SeqCst, Ordering::SeqCst);
        true
    }
}

impl Job {
    pub(crate) fn new(params: JobParams) -> Job {
        Job {
            collector: Mutex::new(Collector::new(params.max_results)),
            params,
            stop: AtomicU8::new(RUNNING),
            files_searched: AtomicU64::new(0),
            binary: AtomicU64::new(0),
            non_utf8_path: AtomicU64::new(0),
            refused_path: AtomicU64::new(0),
            unreadable: AtomicU64::new(0),
            not_reached: AtomicU64::new(0),
        }
    }

    fn collector(&self) -> MutexGuard<'_, Collector> {
        // The collector is only ever mutated by whole operations; a panicking worker cannot leave
        // it half-updated, so a poisoned lock is still usable.
        self.collector.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn run(self, root: &Path, dir: &RootDir) -> Result<Outcome, IndexError> {
        let mut selection = Selection::new(root)
            .threads(self.params.threads)
            .filter(&self.params.files)?;
        if let Some(scope) = self.params.scope.as_path() {
            let scope = scope.to_owned();
            // Walk from the root and prune, so that a scope selects from exactly the files an
            // unscoped search would see: ignore rules of parents still apply.
            selection = selection.prune(move |rel, is_dir| {
                let inside = index_guard::is_within(rel, &scope);
                let ancestor = is_dir && index_guard::is_within(&scope, rel);
                inside || ancestor
            });
        }
        let job = &self;
        let context = ContextConfig {
            before: job.params.context.before as usize,
            after: job.params.context.after as usize,
            line_bytes: job.params.snippet_bytes,
        };
        selection.for_each_file(|| {
            let mut searcher = FileSearcher::new(job.params.heap_limit, job.params.snippet_bytes)
                .with_context(context);
            let mut local = LocalStats {
                job,
                searched: 0,
                last_dir: search_profile::LastDir::default(),
            };
            move |entry: FileEntry<'_>| job.visit(dir, &mut searcher, &mut local, entry)
        });
        let stopped = match self.stop.load(Ordering::SeqCst) {
            CANCELLED => Some(StopReason::Cancelled),
            DEADLINE => Some(StopReason::Deadline),
            _ => None,
        };
        let collector = self
            .collector
            .into_inner()
            .unwrap_or_else(|p| p.into_inner());
        let skipped = SkippedFiles {
            binary: self.binary.into_inner(),
            non_utf8_path: self.non_utf8_path.into_inner(),
            unreadable: self.unreadable.into_inner(),
            not_reached: self.not_reached.into_inner(),
            refused_path: self.refused_path.into_inner(),
        };
        let stopped = stopped
            .or(collector.capped.then_some(StopReason::MaxResults))
            .or((skipped.unserved() > 0).then_some(StopReason::UnservedFiles));
        Ok(Outcome {
            hits: collector.into_hits(),
            stopped,
            files_searched: self.files_searched.into_inner(),
            skipped,
        })
    }

    fn visit(
        &self,
        dir: &RootDir,
        searcher: &mut FileSearcher,
        local: &mut LocalStats<'_>,
        entry: FileEntry<'_>,
    ) {
        if self.should_stop() {
            if matches!(entry, FileEntry::File { .. }) {
                self.not_reached.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        let rel = match entry {
            FileEntry::File { rel, .. } => rel,
            FileEntry::Dir { .. } => return,
            FileEntry::Unreadable { .. } => {
                self.unreadable.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        if !self.params.scope.contains(rel) {
            return;
        }
        // Every file is searched, even once the collector is full: skipping files that sort
        // after the kept hits would make the stats depend on thread scheduling, and the same tree
        // and query must give the same bytes.
        local.searched += 1;
        let hits = self.search_file(dir, searcher, &mut local.last_dir, rel);
        // Most files have no hits: do not contend for the lock for them.
        if hits.is_empty() {
            return;
        }
        // A file whose name no answer may carry is searched all the same, so that a match in it
        // is counted and the answer says it is incomplete (docs/literal-search.md, "Names").
        if search_profile::is_non_utf8_name(rel) {
            self.non_utf8_path.fetch_add(1, Ordering::Relaxed);
        } else if index_guard::is_lookalike_path(rel) {
            self.refused_path.fetch_add(1, Ordering::Relaxed);
        } else {
            self.collector().add(PathKey(rel.to_owned()), hits);
        }
    }

    /// Searches one file. Returns its first `max_results + 1` hits: one more than the cap, so the
    /// collector knows whether the cap actually cut something.
    fn search_file(
        &self,
        dir: &RootDir,
        searcher: &mut FileSearcher,
        last_dir: &mut search_profile::LastDir,
        rel: &str,
    ) -> Vec<SearchHit> {
        let file = match dir.open_walked_file_in(last_dir, rel) {
            Ok(f) => f,
            // A path whose directory became a symlink since the walk listed it, or a file that
            // is no longer regular, is skipped like an unreadable one: never followed.
            Err(OpenError::Symlink | OpenError::NotRegular) | Err(_) => {
                self.unreadable.fetch_add(1, Ordering::Relaxed);
                return Vec::new();
            }
        };
        let mut hits = Vec::new();
        let max = self.params.max_results;
        let output = self.params.output;
        let result = searcher.search(&self.params.matcher, file, self, |m: LineMatch<'_>| {
            match output {
                OutputMode::Content => {
                    hits.push(self.hit(&m, rel));
                    hits.len() <= max && !self.should_stop()
                }
                // One hit per file, at its first match (`rg -l`).
                OutputMode::Files => {
                    hits.push(self.hit(&m, rel));
                    false
                }
                // One hit per file, at its first match, once every line is counted (`rg -c`).
                OutputMode::Count => {
                    if hits.is_empty() {
                        hits.push(self.hit(&m, rel));
                    }
                    !self.should_stop()
                }
            }
        });
        match result {
            Ok(outcome) => {
                if outcome.binary {
                    self.binary.fetch_add(1, Ordering::Relaxed);
                }
                if output == OutputMode::Count {
                    // A count cut short by the deadline or a cancel would be wrong: the file
                    // gives no hit, and the answer says it stopped.
                    if outcome.stopped || self.should_stop() {
                        return Vec::new();
                    }
                    // ripgrep's `-c` drops a file whose search met a NUL, even after matches: a
                    // count of the lines before it would understate the file.
                    if outcome.binary {
                        return Vec::new();
                    }
                    if let Some(first) = hits.first_mut() {
                        first.count = Some(outcome.matching_lines);
                    }
                }
                hits
            }
            // Unreadable, or a line over the heap limit that this query cannot be searched on
            // in bounded memory (`SearchFileError::LineTooLong`): not searched, never a guess.
            Err(_) => {
                self.unreadable.fetch_add(1, Ordering::Relaxed);
                Vec::new()
            }
        }
    }

    /// Builds a hit for a matching line.
    fn hit(&self, m: &LineMatch<'_>, rel: &str) -> SearchHit {
        let (snippet, truncated) =
            snippet_window(m.line, m.start, m.end, self.params.snippet_bytes);
        SearchHit {
            path: rel.to_owned(),
            line: m.line_number,
            column: m.column,
            snippet,
            snippet_truncated: truncated || m.partial,
            score: None,
            count: None,
            before: self.params.context.any().then(|| m.before.to_vec()),
            after: self.params.context.any().then(|| m.after.to_vec()),
        }
    }
}

/// Per-thread counters, added to the shared ones once, when the thread's visitor is dropped: a
/// shared atomic bumped for every file would bounce its cache line between cores.
struct LocalStats<'a> {
    job: &'a Job,
    searched: u64,
    /// The directory this thread opened last: its next files are opened from it.
    last_dir: search_profile::LastDir,
}

impl Drop for LocalStats<'_> {
    fn drop(&mut self) {
        self.job
            .files_searched
            .fetch_add(self.searched, Ordering::Relaxed);
    }
}
