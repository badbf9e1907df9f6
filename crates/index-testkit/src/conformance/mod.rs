//! The backend conformance suite: one set of checks that every [`RepositoryIndexBackend`] runs
//! against itself (the embedded index, PostgreSQL, any backend to come).
//!
//! A backend takes part through a [`Subject`], which opens it over a worktree with the worktree's
//! selection committed at a revision (the full build is the host's business, not the seam's).
//! From then on the suite drives it only through the seam: `update`, `remove`, `search`,
//! `status` and `capabilities`, behind the facade ([`IndexedRepositoryOperations`]) wherever its
//! gates matter. Each check is a function named after what it guards ([`CHECKS`]); a failing
//! check panics with a message that names it.
//!
//! What the suite holds a backend to:
//! - its hits are ripgrep's first match per file on the generated trees, in both case modes and
//!   within a scope;
//! - the revision its `status` and its answers attest is the one last committed, and the
//!   freshness gate refuses it once it is older than the policy allows;
//! - a file whose name the trust gate refuses is never served, and the answer says so;
//! - updates over the caps are refused before it sees them; renames reach it as a removal plus
//!   an add, deletes as a removal, and both show in its hits;
//! - queries racing updates see one committed revision or the next, never an error or a mix;
//! - the grep options it declares agree with the literal search, and the ones it does not
//!   declare are refused before it is asked;
//! - when it declares `semantic`, its semantic answers ([`SEMANTIC_CHECKS`]) pass the same gates
//!   and hold one hit per file, scored in `[0, 1]`, best first.
//!
//! # Example
//!
//! A host's test opens its backend in a [`Subject`] and runs every check:
//!
//! ```no_run
//! use std::path::Path;
//! use std::sync::Arc;
//! use index_contract::{BoxFuture, RepositoryIndexBackend};
//! use index_testkit::conformance::{self, Subject};
//!
//! struct MyBackend;
//! impl Subject for MyBackend {
//!     fn open<'a>(
//!         &'a self,
//!         root: &'a Path,
//!         revision: &'a str,
//!     ) -> BoxFuture<'a, Arc<dyn RepositoryIndexBackend>> {
//!         // Open the backend over `root` and build it, committed as `revision`.
//!         Box::pin(async move { unimplemented!("{root:?} at {revision}") })
//!     }
//! }
//!
//! # async fn run() {
//! let report = conformance::run_all(Arc::new(MyBackend)).await;
//! assert!(report.failed.is_empty(), "{report}");
//! # }
//! ```

/// A [`Check`] named after the check function it runs (defined before the modules that list
/// their checks with it).
macro_rules! check {
    ($name:ident) => {
        Check {
            name: stringify!($name),
            run: |subject| Box::pin($name(subject)),
        }
    };
}

mod checks;
mod semantic;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use index_contract::{
    BackendCapabilities, BackendError, BackendSearchResponse, BoxFuture, ErrorCode, IndexStatus,
    RemoveRequest, RepositoryIndexBackend, RepositoryOperations, SearchHit, SearchMode,
    SearchRequest, SearchResult, UnixMillis, UpdateRequest,
    limits::{SearchLimits, StalePolicy, UpdateLimits},
};
use literal_search::{LiteralSearch, LiteralSearchConfig};
use repo_search_tool::{IndexedOperationsConfig, IndexedRepositoryOperations};

pub use checks::CHECKS;
pub use semantic::SEMANTIC_CHECKS;

/// A backend under test: how to open one over a worktree.
pub trait Subject: Send + Sync {
    /// Opens a backend over the worktree at `root` holding the worktree's whole selection
    /// committed as `revision`, `ready`. Each call must give an index of its own (a fresh
    /// directory, tenant or repository), since checks run on worktrees of their own. Panics
    /// when the backend cannot be opened.
    fn open<'a>(
        &'a self,
        root: &'a Path,
        revision: &'a str,
    ) -> BoxFuture<'a, Arc<dyn RepositoryIndexBackend>>;
}

/// One check of the suite.
pub type CheckFn = fn(Arc<dyn Subject>) -> BoxFuture<'static, ()>;

/// A named check.
#[derive(Debug, Clone, Copy)]
pub struct Check {
    /// What it guards, as a test name.
    pub name: &'static str,
    /// Runs it; it panics, with a message naming the check, when the backend fails it.
    pub run: CheckFn,
}

/// What [`run_all`] found.
#[derive(Debug, Default)]
pub struct Report {
    /// The checks that passed, with how long each took.
    pub passed: Vec<(&'static str, Duration)>,
    /// The checks that failed, with their panic messages.
    pub failed: Vec<(&'static str, String)>,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (name, took) in &self.passed {
            writeln!(f, "conformance {name} ... ok ({:.2} s)", took.as_secs_f64())?;
        }
        for (name, message) in &self.failed {
            writeln!(f, "conformance {name} ... FAILED: {message}")?;
        }
        write!(
            f,
            "conformance: {} passed, {} failed",
            self.passed.len(),
            self.failed.len()
        )
    }
}

impl Report {
    /// Prints the report and panics unless every one of `checks` passed: what a backend's test
    /// asserts after [`run_all`] or [`run_semantic`].
    pub fn assert_passed(&self, checks: &[Check]) {
        println!("{self}");
        assert!(self.failed.is_empty(), "{self}");
        assert_eq!(self.passed.len(), checks.len(), "{self}");
    }
}

/// The runtime the checks need: multi-threaded (two workers, as the machines that run the suite
/// have two cores) with the time driver. Panics when it cannot be built.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime for the conformance suite")
}

/// Runs every check of [`CHECKS`] on `subject`, one after another, each in a task of its own so
/// that one failure does not hide the others. Must run inside a multi-threaded Tokio runtime with
/// the time driver (the facade's requirement), such as [`runtime`].
pub async fn run_all(subject: Arc<dyn Subject>) -> Report {
    run(subject, CHECKS).await
}

/// Runs every check of [`SEMANTIC_CHECKS`] on `subject`, a backend that declares
/// `capabilities.semantic`, as [`run_all`] runs [`CHECKS`]. A semantic backend runs both.
pub async fn run_semantic(subject: Arc<dyn Subject>) -> Report {
    run(subject, SEMANTIC_CHECKS).await
}

async fn run(subject: Arc<dyn Subject>, checks: &[Check]) -> Report {
    let mut report = Report::default();
    for check in checks {
        let started = Instant::now();
        match tokio::spawn((check.run)(subject.clone())).await {
            Ok(()) => report.passed.push((check.name, started.elapsed())),
            Err(e) => {
                let message = match e.try_into_panic() {
                    Ok(payload) => panic_text(payload),
                    Err(e) => e.to_string(),
                };
                report.failed.push((check.name, message));
            }
        }
    }
    report
}

fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(payload) => payload
            .downcast::<&'static str>()
            .map(|s| (*s).to_owned())
            .unwrap_or_else(|_| "a panic without a message".to_owned()),
    }
}

/// What the counting wrapper saw reach the backend.
#[derive(Debug, Clone, PartialEq)]
enum Call {
    Update(UpdateRequest),
    Remove(RemoveRequest),
}

/// The backend under test, wrapped so that a check can see which calls reached it, in order.
struct Counted {
    inner: Arc<dyn RepositoryIndexBackend>,
    calls: Mutex<Vec<Call>>,
    searches: AtomicUsize,
}

impl Counted {
    fn log(&self, call: Call) {
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(call);
    }

    /// The updates and removals that reached the backend so far, in order.
    fn writes(&self) -> Vec<Call> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn searches(&self) -> usize {
        self.searches.load(Ordering::SeqCst)
    }
}

impl RepositoryIndexBackend for Counted {
    fn capabilities(&self) -> BackendCapabilities {
        self.inner.capabilities()
    }

    fn update(&self, request: UpdateRequest) -> BoxFuture<'_, Result<(), BackendError>> {
        self.log(Call::Update(request.clone()));
        self.inner.update(request)
    }

    fn remove(&self, request: RemoveRequest) -> BoxFuture<'_, Result<(), BackendError>> {
        self.log(Call::Remove(request.clone()));
        self.inner.remove(request)
    }

    fn search(
        &self,
        request: SearchRequest,
    ) -> BoxFuture<'_, Result<BackendSearchResponse, BackendError>> {
        // Searches are counted, not logged: the racing check makes thousands of them.
        self.searches.fetch_add(1, Ordering::SeqCst);
        self.inner.search(request)
    }

    fn status(&self) -> BoxFuture<'_, Result<IndexStatus, BackendError>> {
        self.inner.status()
    }

    fn dispose(&self) -> BoxFuture<'_, Result<(), BackendError>> {
        self.inner.dispose()
    }
}

/// The snippet cap of the suite's facades; context lines are cut to it too.
const SNIPPET_BYTES: usize = 4096;

/// Caps wide enough that no answer of the suite's trees is cut.
fn limits() -> SearchLimits {
    SearchLimits::new(10_000, SNIPPET_BYTES, Duration::from_secs(60)).expect("suite limits")
}

/// The facade configuration of most checks: both literal modes, the default freshness policy
/// and update caps, wide search caps.
fn config() -> IndexedOperationsConfig {
    IndexedOperationsConfig {
        allowed_modes: vec![SearchMode::Literal, SearchMode::IndexedLiteral],
        stale: StalePolicy::default(),
        limits: limits(),
        update_limits: UpdateLimits::default(),
    }
}

/// A backend opened for one check, behind the facade, with the literal search as fallback.
struct Harness {
    check: &'static str,
    backend: Arc<Counted>,
    ops: Arc<IndexedRepositoryOperations>,
}

impl Harness {
    async fn open(
        check: &'static str,
        subject: &dyn Subject,
        root: &Path,
        revision: &str,
    ) -> Harness {
        Harness::with_config(check, subject, root, revision, config()).await
    }

    async fn with_config(
        check: &'static str,
        subject: &dyn Subject,
        root: &Path,
        revision: &str,
        config: IndexedOperationsConfig,
    ) -> Harness {
        let backend = Arc::new(Counted {
            inner: subject.open(root, revision).await,
            calls: Mutex::new(Vec::new()),
            searches: AtomicUsize::new(0),
        });
        let literal = LiteralSearchConfig {
            limits: limits(),
            ..LiteralSearchConfig::default()
        };
        let fallback = LiteralSearch::with_config(root, literal).expect("literal search");
        let ops =
            IndexedRepositoryOperations::new(root, backend.clone(), Arc::new(fallback), config)
                .unwrap_or_else(|e| panic!("{check}: the facade refused the backend: {e}"));
        Harness {
            check,
            backend,
            ops: Arc::new(ops),
        }
    }

    /// Searches through the facade; a refusal or failure fails the check.
    async fn search(&self, request: SearchRequest) -> SearchResult {
        let described = format!("{request:?}");
        self.ops
            .search(request)
            .await
            .unwrap_or_else(|e| panic!("{}: {described} failed: {e}", self.check))
    }

    /// Every page of `request`'s answer, `page` hits at a time, joined.
    async fn pages(&self, mut request: SearchRequest, page: usize) -> Vec<SearchHit> {
        let check = self.check;
        let mut joined = Vec::new();
        request.max_results = Some(page);
        loop {
            let found = self.search(request.clone()).await;
            assert!(found.hits.len() <= page, "{check}: an oversized page");
            joined.extend(found.hits);
            match found.next_offset {
                Some(next) => {
                    request.offset = usize::try_from(next).expect("offset");
                    request.page_token = found.page_token;
                }
                None => return joined,
            }
        }
    }

    /// The index's status through the facade.
    async fn status(&self) -> IndexStatus {
        self.ops
            .index()
            .status()
            .await
            .unwrap_or_else(|e| panic!("{}: status failed: {e}", self.check))
    }

    /// Waits until the index's last commit is older than `max_age_ms` by this process's clock,
    /// with a margin.
    async fn wait_until_older_than(&self, max_age_ms: u64) {
        let at = self.status().await.updated_at.expect("updated_at");
        loop {
            let age = UnixMillis::now().0.saturating_sub(at.0);
            if age > max_age_ms + 300 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(max_age_ms + 310 - age)).await;
        }
    }

    /// Checks that the facade refuses `request` as stale without asking the backend.
    async fn assert_refused_as_stale(&self, request: SearchRequest) {
        let check = self.check;
        let searches = self.backend.searches();
        let err = self
            .ops
            .search(request)
            .await
            .expect_err("an index older than the policy was served");
        assert_eq!(err.code(), ErrorCode::Stale, "{check}: {err}");
        assert_eq!(
            self.backend.searches(),
            searches,
            "{check}: the backend was searched although its status was already too old"
        );
    }

    /// Applies an update through the facade.
    async fn update(&self, revision: &str, changes: Vec<index_contract::Change>) {
        let request = UpdateRequest {
            repository_id: "conformance".into(),
            worktree_id: "main".into(),
            source_revision: revision.into(),
            changes,
        };
        let described = format!("{request:?}");
        self.ops
            .index()
            .update(request)
            .await
            .unwrap_or_else(|e| panic!("{}: {described} failed: {e}", self.check));
    }
}

/// Readers that query through a harness's facade, over and over, while a check commits
/// versions `1..=last` named by their number (version 0 is the one the backend opened with).
struct Readers {
    check: &'static str,
    done: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<BTreeSet<usize>>>,
}

impl Readers {
    /// Starts `count` readers of `request`, each handing every answer to `verify` with the
    /// version it attests, and returns once each has answered once (so each sees two versions
    /// at least). An update under way is refused as stale, never served under a version's name,
    /// so a refusal is retried; any other error fails the check.
    async fn start(
        h: &Arc<Harness>,
        count: usize,
        request: SearchRequest,
        verify: impl Fn(usize, SearchResult) + Send + Sync + 'static,
    ) -> Readers {
        let check = h.check;
        let verify = Arc::new(verify);
        let started = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let tasks = (0..count)
            .map(|_| {
                let (h, started, done) = (h.clone(), started.clone(), done.clone());
                let (request, verify) = (request.clone(), verify.clone());
                tokio::spawn(async move {
                    let mut seen = BTreeSet::new();
                    loop {
                        // Read before the query: a query that starts after the last update
                        // returned must attest it.
                        let last = done.load(Ordering::SeqCst);
                        let found = match h.ops.search(request.clone()).await {
                            Ok(found) => found,
                            Err(e) if e.code() == ErrorCode::Stale && !last => continue,
                            Err(e) => panic!("{check}: a query racing updates failed: {e}"),
                        };
                        let (revision, _) = checks::attested(check, &found);
                        let k: usize = revision.parse().unwrap_or_else(|_| {
                            panic!("{check}: an unknown revision {revision:?}")
                        });
                        verify(k, found);
                        if seen.is_empty() {
                            started.fetch_add(1, Ordering::SeqCst);
                        }
                        seen.insert(k);
                        if last {
                            return seen;
                        }
                    }
                })
            })
            .collect();
        while started.load(Ordering::SeqCst) < count {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        Readers { check, done, tasks }
    }

    /// Stops the readers after `last` was committed, and checks each saw an earlier version and
    /// `last`.
    async fn finish(self, last: usize) {
        let check = self.check;
        self.done.store(true, Ordering::SeqCst);
        for task in self.tasks {
            let seen = match task.await {
                Ok(seen) => seen,
                Err(e) => std::panic::resume_unwind(e.into_panic()),
            };
            assert!(
                seen.len() >= 2 && seen.contains(&last),
                "{check}: a reader saw revisions {seen:?}: not the first and the last"
            );
        }
    }
}

/// An `indexed_literal` request for `query` with no cap of its own (the facade's applies).
fn indexed(query: &str) -> SearchRequest {
    let mut r = SearchRequest::new(query, SearchMode::IndexedLiteral);
    r.max_results = Some(10_000);
    r.deadline = Some(Duration::from_secs(60));
    r
}
