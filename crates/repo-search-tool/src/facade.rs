//! `IndexedRepositoryOperations`: the specification's `createIndexedRepositoryOperations`.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use index_contract::{
    BackendCapabilities, BackendError, BoxFuture, IndexError, IndexStatus, RemoveRequest,
    RepositoryIndexBackend, RepositoryOperations, SearchMode, SearchRequest, SearchResult,
    StopReason, UnixMillis, UpdateRequest,
    limits::{SearchLimits, StalePolicy, UpdateLimits},
};
use index_guard::{
    OptionSupport, Scope, TrustContext, check_freshness, check_mode, check_options,
    check_request_query, paginate, stamp, validate_hits, validate_remove, validate_update,
};

/// How the facade is configured: which modes it allows, its freshness policy and its caps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedOperationsConfig {
    /// Modes a caller may ask for. Each must be servable (literal by the fallback, the index
    /// modes by the backend), or construction fails.
    pub allowed_modes: Vec<SearchMode>,
    /// The freshness policy.
    pub stale: StalePolicy,
    /// Caps for index queries (the fallback applies its own to literal queries).
    pub limits: SearchLimits,
    /// Caps for updates and removals.
    pub update_limits: UpdateLimits,
}

impl Default for IndexedOperationsConfig {
    /// `literal` and `indexed_literal`, the default freshness policy and the default caps.
    fn default() -> Self {
        IndexedOperationsConfig {
            allowed_modes: vec![SearchMode::Literal, SearchMode::IndexedLiteral],
            stale: StalePolicy::default(),
            limits: SearchLimits::default(),
            update_limits: UpdateLimits::default(),
        }
    }
}

/// A [`RepositoryOperations`] that serves `literal` from a fallback, unchanged, and the index modes
/// from a host backend behind the freshness and trust gates. There is no silent fallback: an
/// index query that cannot be served fails with a stable code; it is never answered by a scan.
///
/// # Runtime
///
/// Index queries and [`IndexFacade`] calls must run inside a Tokio runtime with the time driver
/// enabled. Each backend call runs in a task of its own, so that a backend which blocks its thread
/// still cannot hold a caller past its deadline, as long as the runtime has another worker thread.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use index_contract::{RepositoryOperations, SearchMode, SearchRequest};
/// use literal_search::LiteralSearch;
/// use repo_search_tool::{IndexedOperationsConfig, IndexedRepositoryOperations};
/// use index_testkit::FixtureBackend;
///
/// # let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
/// # rt.block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("a.rs"), "fn main() {}\n").unwrap();
/// let ops = IndexedRepositoryOperations::new(
///     dir.path(),
///     Arc::new(FixtureBackend::ready([("a.rs", "fn main() {}\n")])),
///     Arc::new(LiteralSearch::new(dir.path()).unwrap()),
///     IndexedOperationsConfig::default(),
/// )
/// .unwrap();
/// let hits = ops.search(SearchRequest::new("main", SearchMode::IndexedLiteral)).await.unwrap();
/// assert_eq!(hits.untrusted_index, Some(true));
/// assert_eq!(hits.hits[0].path, "a.rs");
/// # });
/// ```
pub struct IndexedRepositoryOperations {
    root: PathBuf,
    backend: Arc<dyn RepositoryIndexBackend>,
    fallback: Arc<dyn RepositoryOperations>,
    capabilities: BackendCapabilities,
    config: IndexedOperationsConfig,
    disposed: AtomicBool,
}

impl std::fmt::Debug for IndexedRepositoryOperations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexedRepositoryOperations")
            .field("root", &self.root)
            .field("capabilities", &self.capabilities)
            .field("config", &self.config)
            .field("disposed", &self.disposed)
            .finish_non_exhaustive()
    }
}

impl IndexedRepositoryOperations {
    /// Builds the facade. Nothing starts: no index is built or read here.
    ///
    /// Refuses allowed modes that cannot be served: `literal` when the fallback does not serve it,
    /// `semantic` when the backend does not declare the capability. (Caps above their hard limits
    /// are already refused when the config values are built.)
    pub fn new(
        root: impl AsRef<Path>,
        backend: Arc<dyn RepositoryIndexBackend>,
        fallback: Arc<dyn RepositoryOperations>,
        config: IndexedOperationsConfig,
    ) -> Result<IndexedRepositoryOperations, IndexError> {
        let capabilities = backend.capabilities();
        let fallback_modes = fallback.modes();
        for &mode in &config.allowed_modes {
            let servable = match mode {
                SearchMode::Literal => fallback_modes.contains(&SearchMode::Literal),
                SearchMode::IndexedLiteral => true,
                SearchMode::Semantic => capabilities.semantic,
            };
            if !servable {
                return Err(IndexError::ModeUnservable { mode });
            }
        }
        Ok(IndexedRepositoryOperations {
            root: root.as_ref().to_path_buf(),
            backend,
            fallback,
            capabilities,
            config,
            disposed: AtomicBool::new(false),
        })
    }

    /// The worktree root this facade was built for.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The configuration.
    pub fn config(&self) -> &IndexedOperationsConfig {
        &self.config
    }

    /// The index facade: `update`, `remove`, `status`, `dispose`.
    pub fn index(&self) -> IndexFacade<'_> {
        IndexFacade { ops: self }
    }

    async fn search_index(&self, mut request: SearchRequest) -> Result<SearchResult, IndexError> {
        // 1-2. Mode allowed, capability declared, index not disposed.
        check_mode(request.mode, &self.config.allowed_modes, self.capabilities)?;
        if self.disposed.load(Ordering::SeqCst) {
            return Err(IndexError::Disposed);
        }
        check_request_query(&request)?;
        check_options(&request, OptionSupport::Backend(self.capabilities))?;
        search_profile::check_patterns(&request)?;
        let scope = Scope::parse(request.path.as_deref())?;
        let limits = self.config.limits;
        let page_size = limits.clamp_max_results(request.max_results);
        let deadline = limits.clamp_deadline(request.deadline);
        // The backend sees the clamped values and the canonical scope. It never sees paging: it
        // is asked for the first `offset + page_size` hits of its order, and the page is cut here.
        let paging = request.clone();
        let max_results = request.offset + page_size;
        request.max_results = Some(max_results);
        request.deadline = Some(deadline);
        request.path = scope.as_path().map(str::to_owned);
        request.offset = 0;
        request.page_token = None;
        let mode = request.mode;
        let signal = request.signal.clone();
        if signal.is_cancelled() {
            return Err(IndexError::Cancelled);
        }
        let backend = self.backend.clone();
        let policy = self.config.stale;
        let work = async move {
            // 3. Fresh? A cheap look before running the query...
            let status = call(&backend, |b| b.status()).await?;
            check_freshness(&status, &policy, UnixMillis::now())?;
            // 4. ...then the query, judged again on the status it attests for the version it
            // searched: that is the status stamped on the hits, so it must pass the gate too.
            let response = call(&backend, move |b| b.search(request)).await?;
            check_freshness(&response.status, &policy, UnixMillis::now())?;
            Ok::<_, IndexError>(response)
        };
        let due = Instant::now() + deadline;
        let response = tokio::select! {
            biased;
            () = signal.cancelled() => return Err(IndexError::Cancelled),
            r = tokio::time::timeout(deadline, work) => match r {
                Ok(r) => r?,
                Err(_) => return Err(IndexError::DeadlineExceeded { deadline_ms: millis(deadline) }),
            },
        };
        // A backend that blocks its thread cannot be interrupted on a runtime of one thread, and
        // one that stops itself at the deadline answers a moment after it: an answer that comes
        // after the deadline is a timeout, as it is on a runtime whose timer fires first, never
        // a late answer (or a cut one passed off as cut at its cap).
        if Instant::now() >= due {
            return Err(IndexError::DeadlineExceeded {
                deadline_ms: millis(deadline),
            });
        }
        // 5. Trust gate. 6. Provenance.
        let ctx = TrustContext {
            scope: &scope,
            max_results,
            snippet_bytes: limits.snippet_bytes(),
            output: paging.output,
            context: paging.context,
        };
        let trusted = validate_hits(response.hits, &ctx)?;
        let backend_under_cap = (trusted.backend_hits as usize) < max_results;
        // More hits follow the window when it was cut at its cap, by the gate or the backend.
        let more = trusted.capped || (!response.complete && !backend_under_cap);
        let mut result = stamp(mode, &response.status, trusted, response.complete);
        if response.full_scan {
            result.stats.full_scan = Some(true);
        }
        if let Some(skipped) = response.skipped {
            // Counts only; no backend text reaches the caller through them.
            result.stats.files_skipped = Some(skipped);
            if !result.complete && backend_under_cap && skipped.unserved() > 0 {
                result.stopped = Some(StopReason::UnservedFiles);
            }
        }
        let revision = response.status.source_revision.as_deref();
        let window = std::mem::take(&mut result.hits);
        let page = paginate(&paging, revision, window, page_size, more)?;
        result.hits = page.hits;
        result.next_offset = page.next_offset;
        result.page_token = page.page_token;
        Ok(result)
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Runs one backend call in a task of its own. A panic becomes [`IndexError::BackendPanicked`] and
/// an error [`IndexError::BackendFailed`]; neither carries backend text. Dropping the returned
/// future (on deadline or cancel) aborts the task.
async fn call<T, F>(backend: &Arc<dyn RepositoryIndexBackend>, f: F) -> Result<T, IndexError>
where
    T: Send + 'static,
    F: for<'a> FnOnce(&'a dyn RepositoryIndexBackend) -> BoxFuture<'a, Result<T, BackendError>>
        + Send
        + 'static,
{
    let backend = backend.clone();
    let task = AbortOnDrop(tokio::spawn(async move { f(&*backend).await }));
    join(task).await
}

struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn join<T: Send + 'static>(
    mut task: AbortOnDrop<Result<T, BackendError>>,
) -> impl Future<Output = Result<T, IndexError>> {
    std::future::poll_fn(move |cx| {
        std::pin::Pin::new(&mut task.0)
            .poll(cx)
            .map(|joined| match joined {
                Ok(Ok(v)) => Ok(v),
                Ok(Err(_backend_text_dropped)) => Err(IndexError::BackendFailed),
                Err(e) if e.is_panic() => Err(IndexError::BackendPanicked),
                Err(_) => Err(IndexError::BackendFailed),
            })
    })
}

impl RepositoryOperations for IndexedRepositoryOperations {
    fn modes(&self) -> Vec<SearchMode> {
        self.config.allowed_modes.clone()
    }

    fn limits(&self) -> SearchLimits {
        self.config.limits
    }

    fn index_capabilities(&self) -> BackendCapabilities {
        self.capabilities
    }

    /// `literal` goes to the fallback unchanged (its output is byte-identical to the bare
    /// fallback's); `indexed_literal` and `semantic` go through the gates to the backend.
    fn search(&self, request: SearchRequest) -> BoxFuture<'_, Result<SearchResult, IndexError>> {
        match request.mode {
            SearchMode::Literal if self.config.allowed_modes.contains(&SearchMode::Literal) => {
                self.fallback.search(request)
            }
            SearchMode::Literal => Box::pin(async move {
                Err(IndexError::ModeNotAllowed {
                    mode: SearchMode::Literal,
                })
            }),
            _ => Box::pin(self.search_index(request)),
        }
    }
}

/// The specification's `operations.index`: update, remove, status, dispose.
#[derive(Debug, Clone, Copy)]
pub struct IndexFacade<'a> {
    ops: &'a IndexedRepositoryOperations,
}

impl IndexFacade<'_> {
    fn live(&self) -> Result<&Arc<dyn RepositoryIndexBackend>, IndexError> {
        if self.ops.disposed.load(Ordering::SeqCst) {
            Err(IndexError::Disposed)
        } else {
            Ok(&self.ops.backend)
        }
    }

    /// Validates and routes an update, then applies it: removals first (deletes and the old side
    /// of renames), then the adds and edits with the new revision. Every refusal (caps, ids, paths)
    /// happens before any backend call.
    ///
    /// # Cancellation
    ///
    /// Dropping the future after the removal has been sent leaves the backend with the removal
    /// applied and the update not: the index then attests its previous revision, and the next
    /// update brings it forward. Backends commit each call atomically.
    pub async fn update(&self, request: UpdateRequest) -> Result<(), IndexError> {
        let backend = self.live()?;
        let routed = validate_update(request, &self.ops.config.update_limits)?;
        if let Some(removals) = routed.removals {
            call(backend, move |b| b.remove(removals)).await?;
        }
        let update = routed.update;
        call(backend, move |b| b.update(update)).await
    }

    /// Validates and applies a removal.
    pub async fn remove(&self, request: RemoveRequest) -> Result<(), IndexError> {
        let backend = self.live()?;
        let request = validate_remove(request, &self.ops.config.update_limits)?;
        call(backend, move |b| b.remove(request)).await
    }

    /// The backend's status, as it reports it (not judged: the gate judges at query time).
    pub async fn status(&self) -> Result<IndexStatus, IndexError> {
        let backend = self.live()?;
        call(backend, |b| b.status()).await
    }

    /// Disposes the backend once. Later calls return `Ok` and do nothing; afterwards the index
    /// modes fail with [`IndexError::Disposed`] and `literal` keeps working.
    pub async fn dispose(&self) -> Result<(), IndexError> {
        if self.ops.disposed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        call(&self.ops.backend, |b| b.dispose()).await
    }
}
