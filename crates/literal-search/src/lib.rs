//! Git-aware, bounded, deterministic literal search: the `literal` mode of `repo_search`, and what
//! a host without an index runs.
//!
//! It walks the worktree in parallel with ripgrep's own libraries (`ignore`, `grep-searcher`,
//! `grep-regex`) and ripgrep's defaults: `.gitignore`, `.git/info/exclude`, `.ignore`, `.rgignore`
//! and the global git excludes are respected, hidden files are skipped, `.git` is never entered,
//! symlinks are never followed, binary files (a NUL byte) are skipped. So `rg` is the oracle for
//! what is found.
//!
//! Every option of the request is honoured with ripgrep's meaning: `regex` (else `-F`),
//! `case_insensitive` (`-i`), globs and types (`-g`, `-t`), `include_hidden` (`--hidden`),
//! `include_ignored` (`--no-ignore`, though `.git` stays unentered), `output: files` (`-l`: one
//! hit per file, at its first match), `output: count` (`-c`: the same hit with the file's count of
//! matching lines; a file whose search meets a NUL gives none, as with `rg -c`) and context lines
//! (`-B`/`-A`: each content hit carries its own neighbours, cut to the snippet cap).
//!
//! Every answer is bounded (result cap, snippet cap, deadline, cancellation, memory), deterministic
//! (hits ordered by path component by component, then line, then column; under a cap, the first N
//! in that order), and says how complete it is. Pages are exact: a page is cut from the first
//! `offset + max_results` hits of that order (`index_guard::paginate`), so pages taken at
//! successive `next_offset`s concatenate to the uncapped answer, and a page whose earlier hits
//! changed fails with the `Stale` code. An answer stopped by the deadline or a cancel is no page:
//! it has no `next_offset`; at `offset` 0 it holds the hits found in time, past it none (an
//! offset cannot be counted over hits that are not the first of the order).
//!
//! # Example
//!
//! ```
//! use index_contract::{SearchMode, SearchRequest};
//! use literal_search::LiteralSearch;
//!
//! let dir = tempfile::tempdir()?;
//! std::fs::write(dir.path().join("main.rs"), "fn main() {\n    println!(\"hi\");\n}\n")?;
//! let search = LiteralSearch::new(dir.path())?;
//! let result = search.search_blocking(&SearchRequest::new("println", SearchMode::Literal))?;
//! assert_eq!(result.hits.len(), 1);
//! assert_eq!((result.hits[0].path.as_str(), result.hits[0].line, result.hits[0].column), ("main.rs", 2, 5));
//! assert!(result.complete);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod collect;
mod oneshot;
mod search;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use index_contract::{
    BoxFuture, ErrorCode, Field, IndexError, PathRejection, RepositoryOperations, SearchMode,
    SearchRequest, SearchResult, SearchStats, StopReason, limits::SearchLimits,
};
use index_guard::{OptionSupport, Scope};

/// How a [`LiteralSearch`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiteralSearchConfig {
    /// Result, snippet and deadline caps.
    pub limits: SearchLimits,
    /// Walker threads; `None` uses the available parallelism, at most 12 (as ripgrep does).
    pub threads: Option<usize>,
    /// The most bytes one thread may hold for a single line (default 4 MiB). A file with a longer
    /// line is searched as a bounded stream instead, so memory stays bounded whatever the tree
    /// holds: about 1.5 times this per thread, measured. The stream needs a bound on the length
    /// of a match and gives no context lines: for a regex with unbounded repetition, or with
    /// context asked for, such a file is not searched and counts as `unreadable` (ripgrep, which
    /// has no such limit, would hold the whole line in memory).
    pub heap_limit_bytes: usize,
}

impl Default for LiteralSearchConfig {
    fn default() -> Self {
        LiteralSearchConfig {
            limits: SearchLimits::default(),
            threads: None,
            heap_limit_bytes: 4 * 1024 * 1024,
        }
    }
}

/// The literal search over one worktree.
#[derive(Debug, Clone)]
pub struct LiteralSearch {
    root: PathBuf,
    config: LiteralSearchConfig,
}

impl LiteralSearch {
    /// A search over `root` with the default configuration. Fails when `root` is not a directory.
    pub fn new(root: impl AsRef<Path>) -> io::Result<LiteralSearch> {
        LiteralSearch::with_config(root, LiteralSearchConfig::default())
    }

    /// A search over `root` with `config`.
    pub fn with_config(
        root: impl AsRef<Path>,
        config: LiteralSearchConfig,
    ) -> io::Result<LiteralSearch> {
        let root = root.as_ref().canonicalize()?;
        if !root.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                "the search root is not a directory",
            ));
        }
        Ok(LiteralSearch { root, config })
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Runs a search on the calling thread (the walk itself uses its own threads).
    ///
    /// Validation errors come back as [`IndexError`]; once the search runs it always answers, with
    /// `complete: false` and a `stopped` reason when it was cut short.
    pub fn search_blocking(&self, request: &SearchRequest) -> Result<SearchResult, IndexError> {
        self.search_inner(request, Arc::new(AtomicBool::new(false)))
    }

    fn search_inner(
        &self,
        request: &SearchRequest,
        abandoned: Arc<AtomicBool>,
    ) -> Result<SearchResult, IndexError> {
        let started = Instant::now();
        if request.mode != SearchMode::Literal {
            return Err(IndexError::ModeNotAllowed { mode: request.mode });
        }
        index_guard::check_request_query(request)?;
        index_guard::check_options(request, OptionSupport::Literal)?;
        search_profile::check_patterns(request)?;
        let scope = Scope::parse(request.path.as_deref())?;
        check_scope_on_disk(&self.root, &scope)?;
        let limits = &self.config.limits;
        let matcher = search_profile::request_matcher(request)?;
        let threads = self.config.threads.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(12)
        });
        let dir =
            search_profile::RootDir::open(&self.root).map_err(|_| IndexError::BackendFailed)?;
        let page_size = limits.clamp_max_results(request.max_results);
        // The page is cut from the first `offset + page_size` hits of the order, so those are
        // what the search keeps.
        let window = request.offset.saturating_add(page_size);
        let job = search::Job::new(search::JobParams {
            scope,
            files: request.files.clone(),
            matcher,
            output: request.output,
            context: request.context,
            max_results: window,
            snippet_bytes: limits.snippet_bytes(),
            deadline: started + limits.clamp_deadline(request.deadline),
            signal: request.signal.clone(),
            abandoned,
            threads,
            heap_limit: self.config.heap_limit_bytes,
        });
        let outcome = job.run(&self.root, &dir)?;
        let (hits, next_offset, page_token) = match outcome.stopped {
            // Stopped by the deadline or a cancel, the hits are the ones found in time, not the
            // first of the order: they are no page, so nothing follows them and the previous
            // page's token cannot be checked against them. Past the first page they would be
            // an arbitrary cut of an unordered set, so such an answer holds no hit at all.
            Some(StopReason::Deadline | StopReason::Cancelled) => {
                let hits = if request.offset == 0 {
                    outcome.hits
                } else {
                    Vec::new()
                };
                (hits, None, None)
            }
            _ => {
                let more = outcome.stopped == Some(StopReason::MaxResults);
                let page = index_guard::paginate(request, None, outcome.hits, page_size, more)?;
                (page.hits, page.next_offset, page.page_token)
            }
        };
        Ok(SearchResult {
            mode: SearchMode::Literal,
            hits,
            complete: outcome.stopped.is_none(),
            stopped: outcome.stopped,
            stats: SearchStats {
                files_searched: Some(outcome.files_searched),
                files_skipped: Some(outcome.skipped),
                ..SearchStats::default()
            },
            indexed: None,
            untrusted_index: None,
            next_offset,
            page_token,
        })
    }
}

/// Checks a search scope against the worktree at the canonical `root`: it must exist, and must not
/// pass through a symlink (the walk never follows one, so a symlinked scope could only mislead).
///
/// The one home of this rule: a host serving an index mode over a local worktree calls it too, so
/// that both modes answer a missing or symlinked scope alike.
pub fn check_scope_on_disk(root: &Path, scope: &Scope) -> Result<(), IndexError> {
    let Some(rel) = scope.as_path() else {
        return Ok(());
    };
    let joined = root.join(rel);
    match joined.canonicalize() {
        Ok(canonical) if canonical == joined => Ok(()),
        Ok(_) => Err(IndexError::UntrustedPath {
            field: Field::Scope,
            reason: PathRejection::Symlink,
        }),
        Err(_) => Err(IndexError::InvalidArgument {
            argument: "path",
            problem: "does not exist in the worktree",
            code: ErrorCode::Unsupported,
        }),
    }
}

/// Fires when dropped: a dropped search future abandons its search.
struct AbandonOnDrop(Arc<AtomicBool>);

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl RepositoryOperations for LiteralSearch {
    fn modes(&self) -> Vec<SearchMode> {
        vec![SearchMode::Literal]
    }

    fn limits(&self) -> SearchLimits {
        self.config.limits
    }

    /// Runs the search on a thread of its own, so an async caller's executor is never blocked.
    /// Dropping the future stops the search promptly.
    fn search(&self, request: SearchRequest) -> BoxFuture<'_, Result<SearchResult, IndexError>> {
        let this = self.clone();
        let abandoned = Arc::new(AtomicBool::new(false));
        let guard = AbandonOnDrop(abandoned.clone());
        let (tx, rx) = oneshot::channel();
        let spawned = std::thread::Builder::new()
            .name("literal-search".into())
            .spawn(move || tx.send(this.search_inner(&request, abandoned)));
        Box::pin(async move {
            let _guard = guard;
            if spawned.is_err() {
                return Err(IndexError::BackendFailed);
            }
            // `None` means the worker panicked: report it as a failure, never as an empty answer.
            rx.await.unwrap_or(Err(IndexError::BackendPanicked))
        })
    }
}
