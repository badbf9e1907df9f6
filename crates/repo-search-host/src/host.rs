//! The host: it opens the index a [`HostConfig`] chooses, keeps it fresh before every query, and
//! answers the `repo_search` tool's calls ([`Host::answer`]).
//!
//! Any number of hosts (CLI runs, MCP servers, `index` runs, bindings) may share one worktree
//! and one index directory: the index serialises writers with an OS lock and lets readers work
//! from committed snapshots, and a refresh that finds another process already did the work
//! writes nothing.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use embedded_index::{EmbeddedIndex, RefreshKind};
use index_contract::{
    IndexError, IndexStatus, RepositoryIndexBackend, SearchMode,
    limits::{DEFAULT_DEADLINE_MS, SearchLimits},
};
use literal_search::{LiteralSearch, LiteralSearchConfig};
use repo_search_tool::{IndexedOperationsConfig, IndexedRepositoryOperations, RepoSearchTool};
use semantic_index::{CompositeBackend, KeptVectors, RerankPolicy, SemanticEngine};
use serde::Serialize;
use serde_json::Value;

use crate::catch_up::CatchUpWorker;
use crate::locate::{index_location, worktree_root};
use crate::progress::Progress;
use crate::served::ServedBackend;
use crate::shared::{Shared, SharedConfig};
use crate::watch::{Plan, Watcher};
use crate::{HostError, ModelDamage, git};

/// What a host serves and how: everything a front end decides, built once (the CLI builds it
/// from its flags, a binding from its options).
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// A directory inside the worktree to serve.
    pub root: PathBuf,
    /// Where the index lives; `None` for this worktree's git directory (`<git-dir>/repo-search`),
    /// or, when that is not writable, the user's cache directory. Never inside the worktree.
    pub index_dir: Option<PathBuf>,
    /// Which index answers the index modes.
    pub index: IndexChoice,
    /// A long-lived host (an MCP server, `serve`, a binding): keeps the index fresh from
    /// file-system events, and MiniLM's vectors in the background; catches the semantic store up
    /// on a thread of its own, and refuses a `semantic` call as `building` when the catch-up
    /// outlasts the deadline (a first build on a large tree), while the catch-up goes on.
    pub watch: bool,
    /// Serve `semantic` too, when the model directory holds a static model that loads (on the
    /// embedded index only).
    pub semantic: Option<SemanticConfig>,
    /// The longest a query may take, its refresh included.
    pub deadline: Duration,
}

impl HostConfig {
    /// A one-shot host on the embedded index of the worktree containing `root`, in the default
    /// place, without `semantic`, with the default deadline.
    pub fn new(root: impl Into<PathBuf>) -> HostConfig {
        HostConfig {
            root: root.into(),
            index_dir: None,
            index: IndexChoice::Embedded,
            watch: false,
            semantic: None,
            deadline: Duration::from_millis(DEFAULT_DEADLINE_MS),
        }
    }

    /// The caps a host's tool applies: the default caps with this deadline.
    pub fn limits(&self) -> Result<SearchLimits, HostError> {
        limits(self.deadline)
    }
}

/// The default caps with `deadline`.
fn limits(deadline: Duration) -> Result<SearchLimits, HostError> {
    let d = SearchLimits::default();
    SearchLimits::new(d.max_results(), d.snippet_bytes(), deadline)
        .map_err(|_| HostError::DeadlineUnusable)
}

/// Which index answers the index modes.
#[derive(Debug, Clone)]
pub enum IndexChoice {
    /// None: only `literal` is served, and no index directory is ever opened.
    LiteralOnly,
    /// The embedded index, in the index directory.
    Embedded,
    /// A shared index in PostgreSQL.
    Shared(Box<SharedConfig>),
}

/// How a host serves `semantic`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SemanticConfig {
    /// The model directory ([`crate::model_dir`]): MiniLM for the re-rank, and a static model of
    /// its own when it holds one. `None`: the built-in static model, and no re-rank.
    pub model_dir: Option<PathBuf>,
    /// When MiniLM re-ranks an answer's head.
    pub rerank: RerankPolicy,
}

impl SemanticConfig {
    /// What `semantic` is served with: the model directory (canonical) and the re-rank policy.
    /// Two hosts with the same setup give the same `semantic` answers; a `serve` says its setup
    /// in its hello, and a client asks it for `semantic` only with its own.
    pub fn setup(&self) -> String {
        let dir = match &self.model_dir {
            // A directory that does not exist yet is named as an absolute path all the same, so
            // that a search and the server it started (in `/`) describe it alike.
            Some(d) => d
                .canonicalize()
                .or_else(|_| std::path::absolute(d))
                .unwrap_or_else(|_| d.clone()),
            None => PathBuf::from("<built-in>"),
        };
        format!("{} rerank={:?}", dir.display(), self.rerank)
    }
}

/// Whether an index query refreshes the index before it is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refresh {
    /// Refresh, then answer: every call of the tool.
    First,
    /// The index was refreshed for an earlier page of the same search: the pages of one
    /// command are one answer, taken from the worktree as it was when the command began (as a
    /// grep reads each file once), and the freshness gate still judges each page.
    Done,
}

/// What a refresh did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refreshed {
    /// `build`, `update`, `touch` or `fresh`.
    pub kind: &'static str,
    /// Files read again.
    pub upserts: usize,
    /// Files dropped.
    pub removals: usize,
    /// The revision the index attests now.
    pub revision: String,
}

/// What a rebuild did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rebuilt {
    /// Files indexed.
    pub files: u64,
    /// The revision the index attests now.
    pub revision: String,
    /// On a shared index: what the push uploaded.
    pub uploaded: Option<Uploaded>,
}

/// What a push to a shared index uploaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Uploaded {
    /// Files whose content was sent.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Files removed from the index.
    pub removed: u64,
}

/// The index's state, for a `status`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostStatus {
    /// The worktree's canonical root.
    pub root: PathBuf,
    /// Where the index is.
    #[serde(flatten)]
    pub place: Place,
    /// The index's status.
    pub status: IndexStatus,
    /// Files it holds.
    pub files: u64,
}

/// Where an index is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Place {
    /// The embedded index, in this directory.
    Embedded {
        /// The index directory.
        index_dir: PathBuf,
    },
    /// A shared index.
    Shared {
        /// Always `postgres`.
        backend: &'static str,
        /// The tenant.
        tenant_id: String,
        /// The repository.
        repo_id: String,
    },
}

/// A host: one worktree's tool, over the index its [`HostConfig`] chose.
pub struct Host {
    root: PathBuf,
    tool: RepoSearchTool,
    deadline: Duration,
    index: Index,
    /// The backend behind the tool's index modes, when this host has an index of its own.
    pub(crate) backend: Option<Arc<dyn RepositoryIndexBackend>>,
}

/// The index a host answers the index modes from: one of these, never a mix.
enum Index {
    /// None: only `literal`.
    LiteralOnly,
    /// The embedded index (and the semantic store beside it).
    Embedded(Box<Embedded>),
    /// A shared index, pushed to before each query (or read-only).
    Shared(Arc<Shared>),
    /// The index of a running `repo-search serve`, whose answers this host's facade gates.
    Served(Arc<ServedBackend>),
}

/// The embedded index's half of a host.
struct Embedded {
    git_dir: PathBuf,
    index: Arc<EmbeddedIndex>,
    index_dir: PathBuf,
    /// The backend behind the tool: the index, or the index and the semantic store.
    backend: Arc<dyn RepositoryIndexBackend>,
    /// `Some` for a watching host that could start a watcher.
    watcher: Option<Arc<Watcher>>,
    /// Serialises the refreshes of this host: a query that takes the watcher's changes must
    /// commit them before another query may trust that nothing changed.
    refreshing: Arc<Mutex<()>>,
    /// `Some` when the host serves `semantic`: every refresh then catches the store up too.
    semantic: Option<Arc<SemanticEngine>>,
    /// What `semantic` is served with, when it is.
    semantic_setup: Option<String>,
    /// Why `semantic` is not served although its model directory was found: a damaged model.
    semantic_damage: Option<ModelDamage>,
    /// Why `semantic` is not served although its model directory holds a static model: the name
    /// of a file that model needs and the directory lacks.
    semantic_missing: Option<String>,
    /// `Some` on a long-lived host that serves `semantic`: its catch-ups run on a thread of their
    /// own, and a call waits for one at most its deadline (`crate::catch_up`). The worker tells
    /// the thread that keeps the re-rank's vectors, when there is one, after each catch-up that
    /// changed the store.
    catch_up: Option<Arc<CatchUpWorker>>,
}

/// A `semantic` call whose catch-up took longer than this looks at the worktree again before it
/// answers: the index's status it would answer with is that much older.
const RELOOK_AFTER: Duration = Duration::from_secs(1);

/// How long a long-lived host waits for the catch-up after that second look when the first one
/// used up the call's deadline: it reads only what changed meanwhile.
const RELOOK_GRACE: Duration = Duration::from_secs(2);

/// How long a watching host waits for its cookie before it walks instead.
const COOKIE_TIMEOUT: Duration = Duration::from_secs(2);

/// The literal search over `root` with `limits`.
fn fallback(root: &Path, limits: SearchLimits) -> Result<Arc<LiteralSearch>, HostError> {
    let config = LiteralSearchConfig {
        limits,
        ..Default::default()
    };
    Ok(Arc::new(
        LiteralSearch::with_config(root, config).map_err(|_| HostError::MissingRoot)?,
    ))
}

/// The tool over `backend` behind the facade's gates, with `literal` from `fallback`.
pub(crate) fn tool_over(
    root: &Path,
    backend: Arc<dyn RepositoryIndexBackend>,
    modes: &[SearchMode],
    limits: SearchLimits,
) -> Result<RepoSearchTool, HostError> {
    let config = IndexedOperationsConfig {
        allowed_modes: modes.to_vec(),
        limits,
        ..IndexedOperationsConfig::default()
    };
    let ops = IndexedRepositoryOperations::new(root, backend, fallback(root, limits)?, config)
        .map_err(|_| HostError::IndexFailed)?;
    RepoSearchTool::new(Arc::new(ops), modes).map_err(|_| HostError::IndexFailed)
}

impl Host {
    /// Opens the host `config` describes.
    ///
    /// # Cancellation
    ///
    /// Dropping the future before it completes leaves nothing behind but a shared index's
    /// connection, which is closed.
    pub async fn open(config: HostConfig) -> Result<Host, HostError> {
        let limits = config.limits()?;
        match &config.index {
            IndexChoice::LiteralOnly => {
                let (root, _) = worktree_root(&config.root)?;
                let tool = RepoSearchTool::new(fallback(&root, limits)?, &[SearchMode::Literal])
                    .map_err(|_| HostError::IndexFailed)?;
                Ok(Host {
                    root,
                    tool,
                    deadline: config.deadline,
                    index: Index::LiteralOnly,
                    backend: None,
                })
            }
            IndexChoice::Shared(shared) => {
                let (root, shared, backend) =
                    Shared::open(&config.root, (**shared).clone()).await?;
                let modes = [SearchMode::Literal, SearchMode::IndexedLiteral];
                let tool = tool_over(&root, backend.clone(), &modes, limits)?;
                Ok(Host {
                    root,
                    tool,
                    deadline: config.deadline,
                    index: Index::Shared(Arc::new(shared)),
                    backend: Some(backend),
                })
            }
            IndexChoice::Embedded => Host::open_embedded(&config, limits),
        }
    }

    fn open_embedded(config: &HostConfig, limits: SearchLimits) -> Result<Host, HostError> {
        let (root, git_dir) = worktree_root(&config.root)?;
        let index_dir = index_location(&root, &git_dir, config.index_dir.as_deref())?;
        let index = Arc::new(
            EmbeddedIndex::open(&root, &index_dir).map_err(|_| HostError::IndexUnopenable)?,
        );
        let mut semantic_damage = None;
        let mut semantic_missing = None;
        let semantic = match &config.semantic {
            Some(setup) => match SemanticEngine::open(setup.model_dir.as_deref(), &index_dir) {
                Ok(engine) => Some(Arc::new(engine.with_policy(setup.rerank).map_err(|e| {
                    match ModelDamage::of(&e) {
                        Some(damage) => HostError::ModelDamaged(damage),
                        None => HostError::RerankModelMissing,
                    }
                })?)),
                // A damaged static model costs `semantic` alone: the host serves the other
                // modes, and says why `semantic` is not among them when it is asked for.
                Err(e) => {
                    semantic_damage = ModelDamage::of(&e);
                    semantic_missing = e.missing_file();
                    None
                }
            },
            None => None,
        };
        let mut modes = vec![SearchMode::Literal, SearchMode::IndexedLiteral];
        let backend: Arc<dyn RepositoryIndexBackend> = match &semantic {
            Some(engine) => {
                modes.push(SearchMode::Semantic);
                Arc::new(CompositeBackend {
                    index: index.clone(),
                    semantic: engine.clone(),
                })
            }
            None => index.clone(),
        };
        let tool = tool_over(&root, backend.clone(), &modes, limits)?;
        let watcher = config
            .watch
            .then(|| Watcher::start(&root, &git_dir, &index_dir))
            .flatten()
            .map(Arc::new);
        let policy = config
            .semantic
            .as_ref()
            .map_or(RerankPolicy::Never, |s| s.rerank);
        // Only a long-lived host keeps vectors in the background: a one-shot call would be gone
        // before they were computed (`repo-search index` computes them in the foreground).
        let rerank_vectors = semantic
            .clone()
            .filter(|_| config.watch && policy != RerankPolicy::Never)
            .map(|engine| keep_rerank_vectors_in_background(engine, index.clone()));
        let catch_up = semantic
            .clone()
            .filter(|_| config.watch)
            .map(|engine| CatchUpWorker::new(engine, index.clone(), rerank_vectors));
        let semantic_setup = semantic
            .as_ref()
            .and(config.semantic.as_ref())
            .map(SemanticConfig::setup);
        Ok(Host {
            root,
            tool,
            deadline: config.deadline,
            backend: Some(backend.clone()),
            index: Index::Embedded(Box::new(Embedded {
                git_dir,
                index,
                index_dir,
                backend,
                watcher,
                refreshing: Arc::default(),
                semantic,
                semantic_setup,
                semantic_damage,
                semantic_missing,
                catch_up,
            })),
        })
    }

    /// A host on the index of a running `repo-search serve` (see [`crate::served::connect`]):
    /// the server refreshes and searches, and its answers pass this host's own facade, so they
    /// are judged as any backend's. `root` is the worktree's canonical root.
    pub(crate) fn on_server(
        root: PathBuf,
        served: Arc<ServedBackend>,
        deadline: Duration,
    ) -> Result<Host, HostError> {
        let modes = served.modes();
        let tool = tool_over(&root, served.clone(), &modes, limits(deadline)?)?;
        Ok(Host {
            root,
            tool,
            deadline,
            index: Index::Served(served),
            backend: None,
        })
    }

    /// The worktree's canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The `repo_search` tool this host answers with: its schema, description and modes.
    pub fn tool(&self) -> &RepoSearchTool {
        &self.tool
    }

    /// The longest a query may take.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// The embedded index's directory; `None` on any other index.
    pub fn index_dir(&self) -> Option<&Path> {
        match &self.index {
            Index::Embedded(e) => Some(&e.index_dir),
            _ => None,
        }
    }

    /// The backend behind the tool, on the embedded index: what a `serve` relays.
    pub(crate) fn embedded_backend(&self) -> Option<Arc<dyn RepositoryIndexBackend>> {
        match &self.index {
            Index::Embedded(e) => Some(e.backend.clone()),
            _ => None,
        }
    }

    /// Whether this host serves `semantic`.
    pub fn serves_semantic(&self) -> bool {
        self.tool.modes().contains(&SearchMode::Semantic)
    }

    /// What this host serves `semantic` with ([`SemanticConfig::setup`]), when it serves it
    /// from a store of its own.
    pub fn semantic_setup(&self) -> Option<&str> {
        match &self.index {
            Index::Embedded(e) => e.semantic_setup.as_deref(),
            _ => None,
        }
    }

    /// Why `semantic` is not served although a model directory was given: a damaged model.
    pub fn semantic_damage(&self) -> Option<&ModelDamage> {
        match &self.index {
            Index::Embedded(e) => e.semantic_damage.as_ref(),
            _ => None,
        }
    }

    /// Why `semantic` is not served although the model directory holds a static model: the name
    /// of a file that model needs and the directory lacks (its `.sha256`, or the tokenizer).
    pub fn semantic_missing(&self) -> Option<&str> {
        match &self.index {
            Index::Embedded(e) => e.semantic_missing.as_deref(),
            _ => None,
        }
    }

    /// Whether this host's `semantic` answers are the hybrid ranking only because the index
    /// keeps too few of MiniLM's vectors, which [`Host::keep_rerank_vectors`] would compute.
    pub fn rerank_awaits_vectors(&self) -> bool {
        match &self.index {
            Index::Embedded(e) => e
                .semantic
                .as_ref()
                .is_some_and(|s| s.rerank_awaits_vectors()),
            _ => false,
        }
    }

    /// Whether this host relays a `serve` that stopped answering: its caller should open a host
    /// of its own and ask again (the same mode and the same answer).
    pub fn server_gone(&self) -> bool {
        matches!(&self.index, Index::Served(s) if s.is_gone())
    }

    /// Answers one call of the tool: validate the arguments, then, for an index query, hold its
    /// scope to the literal scan's on-disk rules and (with [`Refresh::First`]) bring the index
    /// up to date, then search behind the facade's gates. A refused call costs no refresh.
    ///
    /// # Cancellation
    ///
    /// Dropping the future abandons the search; a refresh under way finishes on its own thread
    /// and commits, or not, as a whole.
    pub async fn answer(&self, arguments: &Value, refresh: Refresh) -> Result<Value, HostError> {
        let request = self.tool.parse_arguments(arguments)?;
        // A regex, glob or type that cannot compile is refused before it costs a refresh.
        search_profile::check_patterns(&request)?;
        let refreshed = request.mode.is_indexed()
            && self.tool.modes().contains(&request.mode)
            && refresh == Refresh::First;
        if request.mode.is_indexed() && self.tool.modes().contains(&request.mode) {
            check_scope_on_disk(&self.root, request.path.as_deref())?;
            if refreshed {
                self.refresh(request.mode).await?;
            }
        }
        // Only a refreshed `semantic` call may be asked again (below): only it keeps a copy.
        let again = (refreshed && request.mode == SearchMode::Semantic).then(|| request.clone());
        let mut result = self.tool.call_request(request).await;
        // A `semantic` answer carries the index status of the snapshot its store was caught up
        // to. When the call spent longer than the freshness window catching the store up (a new
        // server's first query on Linux, after the store's model changed, spent minutes), that
        // status is older than the window by the time the gate sees it, though nothing changed:
        // the call was refused as stale. Look at the worktree once more and ask again; the gate
        // judges the second answer as it did the first (docs/semantic-design.md, "Parallel
        // hosts: the query catches the store up").
        if let Some(request) = again
            && matches!(result, Err(IndexError::TooOld { .. }))
        {
            self.refresh(request.mode).await?;
            result = self.tool.call_request(request).await;
        }
        serde_json::to_value(&result?).map_err(|_| HostError::Tool(IndexError::BackendFailed))
    }

    /// Brings the index up to date with the worktree for a query in `mode`: on the embedded
    /// index a full build on first use (or when the index is damaged), else the files whose
    /// stamps changed, the new ones and the gone ones; on a shared index a push (or, read-only,
    /// the revision to expect); through a server, the server's refresh. Waits for another writer
    /// at most the host's deadline. The semantic store is caught up too when `mode` reads it: a
    /// trigram query never waits for (or fails with) the store.
    pub async fn refresh(&self, mode: SearchMode) -> Result<Refreshed, HostError> {
        self.refresh_within(mode, self.deadline).await
    }

    /// [`Host::refresh`] within `budget` instead of the host's deadline.
    pub(crate) async fn refresh_within(
        &self,
        mode: SearchMode,
        budget: Duration,
    ) -> Result<Refreshed, HostError> {
        match &self.index {
            Index::LiteralOnly => Err(HostError::IndexDirUnusable),
            Index::Shared(shared) => shared.refresh(budget).await,
            Index::Served(served) => served
                .refresh(mode)
                .await
                .map_err(|code| code.map_or(HostError::ServerGone, HostError::RefreshFailed))
                .map(|()| Refreshed {
                    kind: "served",
                    upserts: 0,
                    removals: 0,
                    revision: String::new(),
                }),
            Index::Embedded(e) => e.refresh(&self.root, mode, budget).await,
        }
    }

    /// Builds the whole index now: on the embedded index from scratch (waiting for any other
    /// writer), then the semantic store; on a shared index a push that reads and hashes every
    /// file (no stamp trusted) but uploads only what the index does not hold, with no deadline.
    pub async fn rebuild(&self, progress: &mut dyn Progress) -> Result<Rebuilt, HostError> {
        match &self.index {
            Index::Embedded(e) => e.rebuild(&self.root, progress),
            Index::Shared(shared) => shared.push_all().await,
            Index::LiteralOnly | Index::Served(_) => Err(HostError::IndexDirUnusable),
        }
    }

    /// Computes MiniLM's vector of every chunk of the semantic store that has none, so that
    /// `semantic` answers are re-ranked without embedding at query time
    /// ([`SemanticEngine::keep_rerank_vectors`]), on every core. `None` when this host serves
    /// no `semantic` store of its own.
    pub fn keep_rerank_vectors(
        &self,
        progress: &mut dyn Progress,
    ) -> Result<Option<KeptVectors>, HostError> {
        let Index::Embedded(e) = &self.index else {
            return Ok(None);
        };
        let Some(engine) = &e.semantic else {
            return Ok(None);
        };
        let kept = engine.keep_rerank_vectors(&e.index, usize::MAX, &mut |done, total| {
            progress.set(done, total)
        })?;
        Ok(Some(kept))
    }

    /// The index's state: where it is, its status and how many files it holds.
    pub async fn status(&self) -> Result<HostStatus, HostError> {
        match &self.index {
            Index::Embedded(e) => Ok(HostStatus {
                root: self.root.clone(),
                place: Place::Embedded {
                    index_dir: e.index_dir.clone(),
                },
                status: e.index.current_status(),
                files: e.index.len() as u64,
            }),
            Index::Shared(shared) => shared.status(&self.root).await,
            Index::LiteralOnly | Index::Served(_) => Err(HostError::IndexDirUnusable),
        }
    }
}

impl Embedded {
    /// The commit HEAD names, or `unborn`.
    fn head(&self, root: &Path) -> String {
        git::read_head(root, &self.git_dir).unwrap_or_else(|| "unborn".to_owned())
    }

    fn rebuild(&self, root: &Path, progress: &mut dyn Progress) -> Result<Rebuilt, HostError> {
        let head = self.head(root);
        let stats = self
            .index
            .build_with_progress(&format!("{head}+rebuilt"), &mut |done, total| {
                progress.set(done, total)
            })?;
        // Attest the regular `<head>+g<generation>` revision right away.
        let r = self.index.refresh(&head, None)?;
        if let Some(engine) = &self.semantic {
            engine.catch_up(&self.index, None)?;
        }
        Ok(Rebuilt {
            files: stats.files as u64,
            revision: r.revision,
            uploaded: None,
        })
    }

    async fn refresh(
        &self,
        root: &Path,
        mode: SearchMode,
        budget: Duration,
    ) -> Result<Refreshed, HostError> {
        let index = self.index.clone();
        let root = root.to_path_buf();
        let head = self.head(&root);
        let watcher = self.watcher.clone();
        let refreshing = self.refreshing.clone();
        let semantic = self
            .semantic
            .clone()
            .filter(|_| mode == SearchMode::Semantic);
        let worker = self.catch_up.clone();
        let deadline = Instant::now() + budget;
        let report = tokio::task::spawn_blocking(move || {
            let lock = || refreshing.lock().unwrap_or_else(|p| p.into_inner());
            let mut one_at_a_time = Some(lock());
            let report = refresh_index(&index, &root, &head, watcher.clone(), deadline)?;
            // One refresh covers both: the store catches up to what the index committed, even
            // when the index found nothing changed (the store may lag after a crash). A one-shot
            // host waits for a first build of the store however long it takes; a long-lived one
            // waits a deadline of its own and then refuses the call, while the build goes on.
            if let Some(engine) = semantic {
                // The catch-up reads only what the index committed, so a long-lived host waits
                // for it without the refresh lock: the other modes' refreshes go on meanwhile.
                if worker.is_some() {
                    one_at_a_time = None;
                }
                let catch_up = |until: Instant| match &worker {
                    Some(worker) => worker.catch_up_until(until),
                    None => Ok(engine.catch_up(&index, None)?),
                };
                let looked = Instant::now();
                let stats = catch_up(deadline)?;
                if stats != semantic_index::CatchUp::default() || looked.elapsed() > RELOOK_AFTER {
                    // A catch-up that changed the store may have been long (a first build takes
                    // minutes), as may a wait for another call's, and either can outlive the
                    // freshness window the index's refresh opened: look at the worktree again,
                    // and catch up again. That catch-up reads only what changed meanwhile, so it
                    // gets a moment past a deadline the first one used up.
                    {
                        let _again = one_at_a_time.is_none().then(lock);
                        refresh_index(&index, &root, &head, watcher, Instant::now() + budget)?;
                    }
                    catch_up(deadline.max(Instant::now() + RELOOK_GRACE))?;
                }
            }
            Ok::<_, HostError>(report)
        })
        .await
        .map_err(|_| HostError::IndexFailed)??;
        Ok(Refreshed {
            kind: match report.kind {
                RefreshKind::Build => "build",
                RefreshKind::Update => "update",
                RefreshKind::Touch => "touch",
                RefreshKind::Fresh => "fresh",
            },
            upserts: report.upserts,
            removals: report.removals,
            revision: report.revision,
        })
    }
}

/// The embedded index's part of a refresh, on the calling (blocking) thread.
fn refresh_index(
    index: &EmbeddedIndex,
    root: &Path,
    head: &str,
    watcher: Option<Arc<Watcher>>,
    deadline: Instant,
) -> Result<embedded_index::RefreshReport, HostError> {
    let Some(w) = watcher else {
        return Ok(index.refresh(head, Some(deadline))?);
    };
    let report = match w.changes(COOKIE_TIMEOUT) {
        Plan::Paths(paths) => index.refresh_paths(head, &paths, Some(deadline)),
        // No directory changed: the watches stay, and the directory cache spares the walk.
        Plan::Stamps => index.refresh(head, Some(deadline)),
        Plan::Full => {
            // Watch first, then walk: a write after the watch is an event, a write before it
            // is seen by the walk. A directory created in between is caught by comparing the
            // directories again, and walked by the next query.
            let selection = search_profile::Selection::held(root);
            let dirs = selection.directories();
            w.track(&dirs);
            let report = index.refresh(head, Some(deadline));
            let again = selection.directories();
            if again != dirs {
                w.track(&again);
                w.invalidate();
            }
            report
        }
    };
    if report.is_err() {
        // The changes this query took are not committed: the next one walks.
        w.invalidate();
    }
    Ok(report?)
}

/// A `path` scope for an index query is held to the literal search's on-disk rule (its one home
/// is `literal_search::check_scope_on_disk`), so that both modes give the same answer.
fn check_scope_on_disk(root: &Path, scope: Option<&str>) -> Result<(), HostError> {
    let scope = index_guard::Scope::parse(scope)?;
    Ok(literal_search::check_scope_on_disk(root, &scope)?)
}

/// Starts the thread a long-lived host keeps MiniLM's vectors of the store's chunks with
/// ([`SemanticEngine::keep_rerank_vectors`], on one thread so that queries keep a core): once
/// now, for a store an earlier process built, then whenever it is woken: by this host's refresh
/// when it changed the store, or by a query that found too few vectors kept (another process
/// changed the store, or kept vectors). A pass runs only when the store's version or the log
/// changed since the last one. The thread ends when the host, and with it every sender, is
/// gone. A failure costs only the re-rank, which the default policy then does not serve.
fn keep_rerank_vectors_in_background(
    engine: Arc<SemanticEngine>,
    index: Arc<EmbeddedIndex>,
) -> SyncSender<()> {
    // One pending signal is enough: a pass reads the store as it is when it starts.
    let (changed, wake) = std::sync::mpsc::sync_channel::<()>(1);
    engine.wake_keeper_with(changed.clone());
    let _ = std::thread::Builder::new()
        .name("rerank-vectors".into())
        .spawn(move || {
            let mut last = None;
            loop {
                let now = engine.kept_vectors_state();
                if now.is_some() && now != last {
                    let pass = engine.keep_rerank_vectors(&index, 1, &mut |_, _| {});
                    // After another process's pass, the log it leaves must be read: a Busy
                    // pass is cheap, so the next wake tries again whatever it finds.
                    last = match pass {
                        Ok(KeptVectors::Busy) => None,
                        _ => engine.kept_vectors_state(),
                    };
                }
                // The engine holds a sender too, so the channel outlives the host: every few
                // seconds the thread looks whether it alone still holds the engine.
                loop {
                    match wake.recv_timeout(Duration::from_secs(5)) {
                        Ok(()) => break,
                        Err(RecvTimeoutError::Timeout) if Arc::strong_count(&engine) > 1 => {}
                        Err(_) => return,
                    }
                }
            }
        });
    changed
}
