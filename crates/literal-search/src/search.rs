//! One search: the parallel walk, the per-file searches and the bounded collection.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use grep_matcher::LineTerminator;
use grep_matcher::Matcher;
use grep_regex::RegexMatcher;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use ignore::{WalkBuilder, WalkState};
use index_contract::{CancelSignal, SearchHit, SkippedFiles, StopReason};
use index_guard::{Scope, snippet_window};

use crate::order::{Collector, PathKey};
use crate::stream;

/// Everything one search needs, shared by the walker's threads.
pub(crate) struct Job {
    pub(crate) scope: Scope,
    pub(crate) matcher: RegexMatcher,
    pub(crate) max_results: usize,
    pub(crate) snippet_bytes: usize,
    pub(crate) deadline: Instant,
    pub(crate) signal: CancelSignal,
    pub(crate) abandoned: Arc<AtomicBool>,
    pub(crate) threads: usize,
    pub(crate) heap_limit: usize,
    max_match_bytes: usize,
    collector: Mutex<Collector>,
    stop: AtomicU8,
    files_searched: AtomicU64,
    binary: AtomicU64,
    non_utf8_path: AtomicU64,
    unreadable: AtomicU64,
    not_reached: AtomicU64,
}

/// grep-searcher's initial line buffer capacity.
const INITIAL_BUFFER: u64 = 64 * 1024;

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

impl Job {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        scope: Scope,
        matcher: RegexMatcher,
        max_results: usize,
        snippet_bytes: usize,
        deadline: Instant,
        signal: CancelSignal,
        abandoned: Arc<AtomicBool>,
        threads: usize,
        heap_limit: usize,
        query_chars: usize,
    ) -> Job {
        Job {
            max_match_bytes: 4 * query_chars,
            scope,
            matcher,
            max_results,
            snippet_bytes,
            deadline,
            signal,
            abandoned,
            threads,
            heap_limit,
            collector: Mutex::new(Collector::new(max_results)),
            stop: AtomicU8::new(RUNNING),
            files_searched: AtomicU64::new(0),
            binary: AtomicU64::new(0),
            non_utf8_path: AtomicU64::new(0),
            unreadable: AtomicU64::new(0),
            not_reached: AtomicU64::new(0),
        }
    }

    /// Whether the search must stop now, recording why the first time it notices.
    pub(crate) fn should_stop(&self) -> bool {
        if self.stop.load(Ordering::Relaxed) != RUNNING {
            return true;
        }
        let reason = if self.signal.is_cancelled() || self.abandoned.load(Ordering::Relaxed) {
            CANCELLED
        } else if Instant::now() >= self.deadline {
            DEADLINE
        } else {
            return false;
        };
        let _ = self
            .stop
            .compare_exchange(RUNNING, reason, Ordering::SeqCst, Ordering::SeqCst);
        true
    }

    /// An upper bound on the bytes of any match of the query.
    pub(crate) fn max_match_bytes(&self) -> usize {
        self.max_match_bytes
    }

    fn collector(&self) -> MutexGuard<'_, Collector> {
        // The collector is only ever mutated by whole operations; a panicking worker cannot leave
        // it half-updated, so a poisoned lock is still usable.
        self.collector.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn run(self, root: &Path) -> Outcome {
        let mut builder = WalkBuilder::new(root);
        // ripgrep's defaults, spelled out so a change of the library's defaults cannot move us.
        builder
            .hidden(true)
            .parents(true)
            .ignore(true)
            .git_ignore(true)
            .git_global(true)
            .git_exclude(true)
            .require_git(true)
            .follow_links(false)
            .threads(self.threads);
        builder.add_custom_ignore_filename(".rgignore");
        if let Some(scope) = self.scope.as_path() {
            let scope = scope.to_owned();
            let root = root.to_owned();
            // Walk from the root and prune, so that a scope selects from exactly the files an
            // unscoped search would see: ignore rules of parents still apply.
            builder.filter_entry(move |entry| {
                let Ok(rel) = entry.path().strip_prefix(&root) else {
                    return false;
                };
                if rel.as_os_str().is_empty() {
                    return true;
                }
                let Some(rel) = rel.to_str() else {
                    return false;
                };
                let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
                let inside = rel == scope
                    || (rel.len() > scope.len()
                        && rel.starts_with(scope.as_str())
                        && rel.as_bytes()[scope.len()] == b'/');
                let ancestor = is_dir
                    && scope.len() > rel.len()
                    && scope.starts_with(rel)
                    && scope.as_bytes()[rel.len()] == b'/';
                inside || ancestor
            });
        }
        let job = &self;
        builder.build_parallel().run(|| {
            let mut searcher = job.searcher();
            let mut local = LocalStats { job, searched: 0 };
            Box::new(move |entry| job.visit(root, &mut searcher, &mut local, entry))
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
        let stopped = stopped.or(collector.capped.then_some(StopReason::MaxResults));
        Outcome {
            hits: collector.into_hits(),
            stopped,
            files_searched: self.files_searched.into_inner(),
            skipped: SkippedFiles {
                binary: self.binary.into_inner(),
                non_utf8_path: self.non_utf8_path.into_inner(),
                unreadable: self.unreadable.into_inner(),
                not_reached: self.not_reached.into_inner(),
            },
        }
    }

    fn searcher(&self) -> Searcher {
        SearcherBuilder::new()
            .line_terminator(LineTerminator::byte(b'\n'))
            .line_number(true)
            .binary_detection(BinaryDetection::quit(b'\x00'))
            .heap_limit(Some(self.heap_limit))
            .build()
    }

    fn visit(
        &self,
        root: &Path,
        searcher: &mut Searcher,
        local: &mut LocalStats<'_>,
        entry: Result<ignore::DirEntry, ignore::Error>,
    ) -> WalkState {
        if self.should_stop() {
            if entry
                .as_ref()
                .is_ok_and(|e| e.file_type().is_some_and(|t| t.is_file()))
            {
                self.not_reached.fetch_add(1, Ordering::Relaxed);
            }
            return WalkState::Quit;
        }
        let entry = match entry {
            Ok(e) => e,
            Err(_) => {
                self.unreadable.fetch_add(1, Ordering::Relaxed);
                return WalkState::Continue;
            }
        };
        // Symlinks are never followed, so a symlinked file is not searched (as in ripgrep).
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            return WalkState::Continue;
        }
        let Some(rel) = entry
            .path()
            .strip_prefix(root)
            .ok()
            .and_then(|p| p.to_str())
        else {
            self.non_utf8_path.fetch_add(1, Ordering::Relaxed);
            return WalkState::Continue;
        };
        // Borrowed, not owned: most files have no hits, and an allocation per file shows at
        // ripgrep's speed.
        let rel: std::borrow::Cow<'_, str> = if std::path::MAIN_SEPARATOR == '/' {
            std::borrow::Cow::Borrowed(rel)
        } else {
            std::borrow::Cow::Owned(rel.replace(std::path::MAIN_SEPARATOR, "/"))
        };
        if !self.scope.contains(&rel) {
            return WalkState::Continue;
        }
        // Every file is searched, even once the collector is full: skipping files that sort
        // after the kept hits would make the stats depend on thread scheduling, and the same tree
        // and query must give the same bytes.
        local.searched += 1;
        let (hits, longest_line) = self.search_file(searcher, entry.path(), &rel);
        // A line longer than half the initial buffer may have grown the searcher's line buffer,
        // and a grown buffer changes where binary detection stops in the next file (a larger
        // first read can reach a NUL before any match is searched). Start afresh after such a
        // file, so every file is searched as by a fresh searcher whatever ran before it on this
        // thread: the answer stays deterministic. (Half, to cover UTF-16 transcoding growth.)
        if longest_line > INITIAL_BUFFER / 2 {
            *searcher = self.searcher();
        }
        // Most files have no hits: do not contend for the lock for them.
        if !hits.is_empty() {
            self.collector().add(PathKey(rel.into_owned()), hits);
        }
        WalkState::Continue
    }

    /// Searches one file. Returns its first `max_results + 1` hits: one more than the cap, so the
    /// collector knows whether the cap actually cut something.
    /// Also returns the longest line read (an upper bound; `u64::MAX` after the stream path).
    fn search_file(
        &self,
        searcher: &mut Searcher,
        path: &Path,
        rel: &str,
    ) -> (Vec<SearchHit>, u64) {
        let file = match File::open(path) {
            Ok(f) => f,
            Err(_) => {
                self.unreadable.fetch_add(1, Ordering::Relaxed);
                return (Vec::new(), 0);
            }
        };
        let mut reader = GuardedReader {
            inner: file,
            job: self,
            stopped: false,
            failed: false,
            run: 0,
            longest: 0,
        };
        let mut sink = HitSink {
            job: self,
            rel,
            hits: Vec::new(),
            binary: false,
        };
        match searcher.search_reader(&self.matcher, &mut reader, &mut sink) {
            Ok(()) => {}
            Err(_) if reader.stopped => {}
            Err(_) if reader.failed => {
                self.unreadable.fetch_add(1, Ordering::Relaxed);
                return (Vec::new(), reader.longest());
            }
            Err(_) => {
                // The only other error is a line longer than the heap limit: search the file
                // again as a stream with bounded memory.
                let hits = match stream::search(self, path, rel) {
                    Ok(s) => {
                        if s.binary {
                            self.binary.fetch_add(1, Ordering::Relaxed);
                        }
                        s.hits
                    }
                    Err(_) => {
                        self.unreadable.fetch_add(1, Ordering::Relaxed);
                        Vec::new()
                    }
                };
                return (hits, u64::MAX);
            }
        }
        if sink.binary {
            self.binary.fetch_add(1, Ordering::Relaxed);
        }
        (sink.hits, reader.longest())
    }

    /// Builds a hit for a match at `start..end` of `line` (line number `line_no`).
    pub(crate) fn hit(
        &self,
        line: &[u8],
        line_no: u64,
        start: usize,
        end: usize,
        rel: &str,
    ) -> SearchHit {
        let (snippet, snippet_truncated) = snippet_window(line, start, end, self.snippet_bytes);
        SearchHit {
            path: rel.to_owned(),
            line: line_no,
            column: start as u64 + 1,
            snippet,
            snippet_truncated,
            score: None,
        }
    }
}

/// Per-thread counters, added to the shared ones once, when the thread's visitor is dropped: a
/// shared atomic bumped for every file would bounce its cache line between cores.
struct LocalStats<'a> {
    job: &'a Job,
    searched: u64,
}

impl Drop for LocalStats<'_> {
    fn drop(&mut self) {
        self.job
            .files_searched
            .fetch_add(self.searched, Ordering::Relaxed);
    }
}

/// A reader that stops the search when the deadline passes or the caller cancels, so that even a
/// huge file with no matches is abandoned promptly.
struct GuardedReader<'a> {
    inner: File,
    job: &'a Job,
    stopped: bool,
    failed: bool,
    /// Bytes since the last line terminator, and the longest line seen so far.
    run: u64,
    longest: u64,
}

impl GuardedReader<'_> {
    fn longest(&self) -> u64 {
        self.longest.max(self.run)
    }
}

impl Read for GuardedReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.job.should_stop() {
            self.stopped = true;
            return Err(io::Error::other("search stopped"));
        }
        let n = self.inner.read(buf).inspect_err(|_| self.failed = true)?;
        // Track line lengths with two searches per read: a chunk no longer than the buffer
        // cannot hold a whole over-long line between two terminators.
        let chunk = &buf[..n];
        match memchr::memchr(b'\n', chunk) {
            Some(first) => {
                self.longest = self.longest.max(self.run + first as u64);
                let last = memchr::memrchr(b'\n', chunk).unwrap_or(first);
                self.run = (n - last - 1) as u64;
            }
            None => self.run += n as u64,
        }
        Ok(n)
    }
}

struct HitSink<'a> {
    job: &'a Job,
    rel: &'a str,
    hits: Vec<SearchHit>,
    binary: bool,
}

impl Sink for HitSink<'_> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        let first = mat.line_number().unwrap_or(1);
        for (i, line) in mat.lines().enumerate() {
            let (start, end) = match self.job.matcher.find(line) {
                Ok(Some(m)) => (m.start(), m.end()),
                // The searcher reported this line as matching; find cannot disagree, but if it
                // did, the line is still a hit and its column is the line start.
                _ => (0, 0),
            };
            self.hits
                .push(self.job.hit(line, first + i as u64, start, end, self.rel));
            if self.hits.len() > self.job.max_results {
                return Ok(false);
            }
        }
        Ok(!self.job.should_stop())
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}
