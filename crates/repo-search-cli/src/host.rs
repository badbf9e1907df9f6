//! The host: it owns the embedded index's lifecycle and keeps it fresh before every query.
//!
//! Any number of hosts (CLI runs, MCP servers, `index` runs) may share one worktree and one
//! index directory: the index serialises writers with an OS lock and lets readers work from
//! committed snapshots, and a refresh that finds another process already did the work writes
//! nothing.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use embedded_index::{EmbeddedIndex, EmbeddedIndexError, RefreshKind};
use index_contract::{
    SearchMode,
    limits::{DEFAULT_DEADLINE_MS, SearchLimits},
};
use literal_search::LiteralSearch;
use repo_search_tool::{IndexedOperationsConfig, IndexedRepositoryOperations, RepoSearchTool};
use serde::Serialize;

use crate::git::{self, GitError};
use crate::semantic::{CompositeBackend, RerankPolicy, SemanticEngine};
use crate::watch::{Plan, Watcher};

/// Why the host could not serve. Each maps to one fixed `Failure` (code, message, hint): no git,
/// OS or backend text reaches a caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HostError {
    /// `--root` does not exist or is not a directory.
    MissingRoot,
    /// `--root` is not inside a git worktree (or git is not installed).
    NotAWorktree,
    /// `--index-dir` is inside the searched worktree.
    IndexDirInsideWorktree,
    /// No index directory could be created or written: neither the git directory nor the user's
    /// cache directory.
    IndexDirUnusable,
    /// `--index-dir` cannot be created, or is not a directory.
    IndexDirFlagUnusable,
    /// The index directory is usable, and the index in it could not be opened.
    IndexUnopenable,
    /// The index is damaged, or reading the worktree for it failed.
    IndexFailed,
    /// Another writer held the index past this call's deadline.
    Busy,
    /// The index could not be written: the device holding the index directory is full.
    DiskFull,
    /// `--deadline-ms` is outside the caps the contract allows.
    DeadlineUnusable,
    /// `--rerank` was asked for, and MiniLM is not in the model directory.
    RerankModelMissing,
    /// A file of the model is there but cannot be used (`--rerank`'s MiniLM, or the static model
    /// where `semantic` is asked for by name).
    ModelDamaged(ModelDamage),
}

/// A model file that is there but cannot be used, in words fixed by this program: the file's name
/// in the model directory, and what is wrong with it (`semantic_index::Defect`'s words).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ModelDamage {
    /// The file's name, e.g. `static-256.bin` or `model.safetensors`.
    pub(crate) file: String,
    /// What is wrong with it.
    pub(crate) defect: String,
}

impl ModelDamage {
    /// The damage a model error reports; `None` when the model is simply not installed. No text
    /// of the operating system or the tokenizer is kept.
    pub(crate) fn of(e: &semantic_index::Error) -> Option<ModelDamage> {
        use semantic_index::Error;
        let name = |path: &Path| {
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let (file, defect) = match e {
            _ if e.is_missing() => return None,
            Error::Invalid { path, defect } => (name(path), defect.to_string()),
            Error::Read { path, .. } | Error::Write { path, .. } | Error::Missing { path } => (
                name(path),
                "it could not be read (permissions or I/O)".to_owned(),
            ),
            Error::Tokenizer(_) => (
                "tokenizer.json".to_owned(),
                "the tokenizer could not be loaded from it".to_owned(),
            ),
        };
        Some(ModelDamage { file, defect })
    }
}

/// How a host serves `semantic`: the model directory, and when MiniLM re-ranks an answer's head
/// (`--rerank`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SemanticSetup<'a> {
    pub(crate) model_dir: &'a Path,
    pub(crate) rerank: crate::semantic::RerankPolicy,
}

impl From<EmbeddedIndexError> for HostError {
    fn from(e: EmbeddedIndexError) -> Self {
        match e {
            EmbeddedIndexError::Busy => HostError::Busy,
            EmbeddedIndexError::Io(e) if is_disk_full(&e) => HostError::DiskFull,
            _ => HostError::IndexFailed,
        }
    }
}

impl From<semantic_index::StoreError> for HostError {
    fn from(e: semantic_index::StoreError) -> Self {
        match e {
            semantic_index::StoreError::Busy => HostError::Busy,
            semantic_index::StoreError::Io { source, .. } if is_disk_full(&source) => {
                HostError::DiskFull
            }
            _ => HostError::IndexFailed,
        }
    }
}

/// Whether a write failed because the device (or the user's quota on it) is full: the index is
/// not damaged then, and rebuilding it would fail the same way.
fn is_disk_full(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}

/// What a refresh did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Refresh {
    pub(crate) kind: &'static str,
    pub(crate) upserts: usize,
    pub(crate) removals: usize,
    pub(crate) revision: String,
}

/// Which modes a host serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostModes {
    /// Only `literal`: the index directory is never touched.
    LiteralOnly,
    /// `literal` and `indexed_literal`.
    Indexed,
    /// `literal` and `indexed_literal`, kept fresh from file-system events: for a long-lived
    /// host, whose queries then cost no walk when nothing changed.
    Watching,
}

pub(crate) struct Host {
    pub(crate) root: PathBuf,
    /// `None` for a literal-only host.
    git_dir: Option<PathBuf>,
    /// `None` for a literal-only host.
    pub(crate) index: Option<Arc<EmbeddedIndex>>,
    pub(crate) index_dir: Option<PathBuf>,
    pub(crate) tool: RepoSearchTool,
    /// `Some` for a watching host that could start a watcher.
    watcher: Option<Arc<Watcher>>,
    /// Serialises the refreshes of this host: a query that takes the watcher's changes must
    /// commit them before another query may trust that nothing changed.
    refreshing: Arc<Mutex<()>>,
    /// `Some` on a shared index (`--backend`): it refreshes instead of the embedded index.
    pub(crate) shared: Option<Arc<crate::pg_host::Shared>>,
    /// `Some` when the host serves `semantic`: every refresh then catches the store up too.
    semantic: Option<Arc<SemanticEngine>>,
    /// `Some` on a watching host that keeps the re-rank's vectors in the background: told after
    /// each refresh that changed the semantic store.
    rerank_vectors: Option<SyncSender<()>>,
    /// The longest a query may take: a refresh waits for another writer no longer.
    pub(crate) deadline: Duration,
    /// The index backend behind the tool (`None` for a literal-only host): what a `serve`
    /// relays.
    pub(crate) backend: Option<Arc<dyn index_contract::RepositoryIndexBackend>>,
    /// `Some` on a client of a running `serve`: the server refreshes, and its answers pass this
    /// host's own gates.
    pub(crate) served: Option<Arc<crate::serve::ServedBackend>>,
    /// What `semantic` is served with, when it is: a `serve` says it in its hello, and a client
    /// asks it for `semantic` only when its own setup is the same.
    pub(crate) semantic_setup: Option<String>,
    /// Why `semantic` is not served although its model directory was found: a damaged model.
    pub(crate) semantic_damage: Option<ModelDamage>,
}

/// What `semantic` is served with: the model directory (canonical) and the re-rank policy.
/// Two hosts with the same setup give the same `semantic` answers.
pub(crate) fn semantic_setup(setup: &SemanticSetup<'_>) -> String {
    let dir = setup
        .model_dir
        .canonicalize()
        .unwrap_or_else(|_| setup.model_dir.to_path_buf());
    format!("{} rerank={:?}", dir.display(), setup.rerank)
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
                        Ok(crate::semantic::KeptVectors::Busy) => None,
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

/// A progress bar on stderr when it is a terminal, and nothing otherwise.
struct Progress(Option<indicatif::ProgressBar>);

impl Progress {
    fn on_terminal(template: &str) -> Progress {
        Progress(
            std::io::IsTerminal::is_terminal(&std::io::stderr()).then(|| {
                let bar = indicatif::ProgressBar::new(0);
                bar.set_style(
                    indicatif::ProgressStyle::with_template(template)
                        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                );
                bar
            }),
        )
    }

    fn set(&self, done: usize, total: usize) {
        if let Some(b) = &self.0 {
            b.set_length(total as u64);
            b.set_position(done as u64);
        }
    }

    fn finish(self) {
        if let Some(b) = self.0 {
            b.finish_and_clear();
        }
    }
}

/// How long a watching host waits for its cookie before it walks instead.
const COOKIE_TIMEOUT: Duration = Duration::from_secs(2);

/// A directory to keep an index in: created if missing, and writable (a lock file can be opened
/// for writing in it).
fn usable_dir(dir: &Path) -> bool {
    // Never follow a link, and never block on a FIFO planted as the lock file.
    std::fs::create_dir_all(dir).is_ok()
        && search_profile::open_or_create_regular(&dir.join("LOCK")).is_ok()
}

/// The per-user cache directory for this worktree's index:
/// `$XDG_CACHE_HOME/repo-search/<name>-<id>` (else `~/.cache/...`; see [`worktree_dir_name`]).
fn cache_dir(root: &Path) -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("repo-search").join(worktree_dir_name(root)))
}

/// A directory name of its own for the worktree at `root`: `<name>-<id>`, where the name is the
/// worktree directory's (safe characters only, at most 40) and the id is derived from its
/// canonical path.
fn worktree_dir_name(root: &Path) -> String {
    let bytes = root.as_os_str().as_encoded_bytes();
    let reversed: Vec<u8> = bytes.iter().rev().copied().collect();
    let name: String = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(40)
        .collect();
    format!(
        "{name}-{:08x}{:08x}",
        crc32fast::hash(bytes),
        crc32fast::hash(&reversed)
    )
}

/// The index directory of the worktree containing `dir` under `base`, when one `--index-dir`
/// holds the indexes of several worktrees (an MCP server on its client's roots):
/// `<base>/<name>-<id>`, named as in the cache directory.
pub(crate) fn index_dir_under(base: &Path, dir: &Path) -> Result<PathBuf, HostError> {
    let (root, _) = worktree_root(dir)?;
    Ok(base.join(worktree_dir_name(&root)))
}

/// The worktree's canonical top directory for a directory inside it.
pub(crate) fn worktree_root(dir: &Path) -> Result<(PathBuf, PathBuf), HostError> {
    let dir = dir.canonicalize().map_err(|_| HostError::MissingRoot)?;
    if !dir.is_dir() {
        return Err(HostError::MissingRoot);
    }
    let (root, git_dir) = git::discover(&dir).map_err(|_: GitError| HostError::NotAWorktree)?;
    let root = root.canonicalize().map_err(|_| HostError::NotAWorktree)?;
    let git_dir = git_dir
        .canonicalize()
        .map_err(|_| HostError::NotAWorktree)?;
    Ok((root, git_dir))
}

/// The directory the index of the worktree at `root` lives in (created if missing):
/// `index_dir` when given, else `<git-dir>/repo-search`, else the user's cache directory.
fn index_location(
    root: &Path,
    git_dir: &Path,
    index_dir: Option<&Path>,
) -> Result<PathBuf, HostError> {
    let index_dir = match index_dir {
        Some(d) => {
            if !usable_dir(d) {
                return Err(HostError::IndexDirFlagUnusable);
            }
            let d = d
                .canonicalize()
                .map_err(|_| HostError::IndexDirFlagUnusable)?;
            // The index must never be searchable itself.
            if d.starts_with(root) && !d.starts_with(git_dir) {
                return Err(HostError::IndexDirInsideWorktree);
            }
            d
        }
        None => {
            let in_git = git_dir.join("repo-search");
            if usable_dir(&in_git) {
                in_git
            } else {
                cache_dir(root)
                    .filter(|d| usable_dir(d))
                    .ok_or(HostError::IndexDirUnusable)?
            }
        }
    };
    Ok(index_dir)
}

/// The worktree root and index directory a host for `dir` would use, worked out and checked
/// exactly as [`Host::open`] does, without opening the index: a client of `repo-search serve`
/// finds the server's socket there.
pub(crate) fn locate(
    dir: &Path,
    index_dir: Option<&Path>,
) -> Result<(PathBuf, PathBuf), HostError> {
    let (root, git_dir) = worktree_root(dir)?;
    let index_dir = index_location(&root, &git_dir, index_dir)?;
    Ok((root, index_dir))
}

/// How a host is opened, beyond the directory it serves.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OpenOptions<'a> {
    /// Where the index lives; `None` for the default place ([`Host::open`]).
    pub(crate) index_dir: Option<&'a Path>,
    /// The modes served.
    pub(crate) modes: HostModes,
    /// `Some` to serve `semantic` too, when the model directory holds a static model that loads.
    pub(crate) semantic: Option<SemanticSetup<'a>>,
    /// The longest a query may take, its refresh included (`--deadline-ms`).
    pub(crate) deadline: Duration,
}

impl OpenOptions<'_> {
    /// The options of a host serving `modes` with the index in its default place, no `semantic`
    /// and the default deadline.
    pub(crate) fn new(modes: HostModes) -> OpenOptions<'static> {
        OpenOptions {
            index_dir: None,
            modes,
            semantic: None,
            deadline: Duration::from_millis(DEFAULT_DEADLINE_MS),
        }
    }

    /// The caps a host's tool applies: the default caps with this deadline.
    pub(crate) fn limits(&self) -> Result<SearchLimits, HostError> {
        let d = SearchLimits::default();
        SearchLimits::new(d.max_results(), d.snippet_bytes(), self.deadline)
            .map_err(|_| HostError::DeadlineUnusable)
    }
}

impl Host {
    /// Opens the host for the worktree containing `dir`. An indexed host keeps its index in
    /// `options.index_dir`, or by default in this worktree's git directory
    /// (`<git-dir>/repo-search`), or, when that is not writable, in the user's cache directory.
    /// With `options.semantic`, it serves `semantic` too when the model directory holds a
    /// static model that loads (an indexed host only): the store lives in `<index-dir>/semantic`.
    pub(crate) fn open(dir: &Path, options: &OpenOptions<'_>) -> Result<Host, HostError> {
        let OpenOptions {
            index_dir,
            modes,
            semantic,
            deadline,
        } = *options;
        let limits = options.limits()?;
        let (root, git_dir) = worktree_root(dir)?;
        let fallback = Arc::new(
            LiteralSearch::with_config(
                &root,
                literal_search::LiteralSearchConfig {
                    limits,
                    ..Default::default()
                },
            )
            .map_err(|_| HostError::MissingRoot)?,
        );
        if modes == HostModes::LiteralOnly {
            let tool = RepoSearchTool::new(fallback, &[SearchMode::Literal])
                .map_err(|_| HostError::IndexFailed)?;
            return Ok(Host::bare(root, tool, deadline));
        }
        let index_dir = index_location(&root, &git_dir, index_dir)?;
        let index = Arc::new(
            EmbeddedIndex::open(&root, &index_dir).map_err(|_| HostError::IndexUnopenable)?,
        );
        let policy = semantic.map_or(RerankPolicy::Never, |setup| setup.rerank);
        let semantic_setup_served = semantic.as_ref().map(semantic_setup);
        let mut semantic_damage = None;
        let semantic = match semantic
            .map(|setup| (setup, SemanticEngine::open(setup.model_dir, &index_dir)))
        {
            Some((setup, Ok(engine))) => Some(Arc::new(engine.with_policy(setup.rerank).map_err(
                |e| match ModelDamage::of(&e) {
                    Some(damage) => HostError::ModelDamaged(damage),
                    None => HostError::RerankModelMissing,
                },
            )?)),
            // A damaged static model costs `semantic` alone: the host serves the other modes,
            // and says why `semantic` is not among them when it is asked for.
            Some((_, Err(e))) => {
                semantic_damage = ModelDamage::of(&e);
                None
            }
            None => None,
        };
        let semantic_setup_served = semantic_setup_served.filter(|_| semantic.is_some());
        let mut modes_served = vec![SearchMode::Literal, SearchMode::IndexedLiteral];
        let backend: Arc<dyn index_contract::RepositoryIndexBackend> = match &semantic {
            Some(engine) => {
                modes_served.push(SearchMode::Semantic);
                Arc::new(CompositeBackend {
                    index: index.clone(),
                    semantic: engine.clone(),
                })
            }
            None => index.clone(),
        };
        let config = IndexedOperationsConfig {
            allowed_modes: modes_served.clone(),
            limits,
            ..IndexedOperationsConfig::default()
        };
        let ops = Arc::new(
            IndexedRepositoryOperations::new(&root, backend.clone(), fallback, config)
                .map_err(|_| HostError::IndexFailed)?,
        );
        let tool = RepoSearchTool::new(ops, &modes_served).map_err(|_| HostError::IndexFailed)?;
        let watcher = (modes == HostModes::Watching)
            .then(|| Watcher::start(&root, &git_dir, &index_dir))
            .flatten()
            .map(Arc::new);
        // Only a long-lived host keeps vectors in the background: a CLI call would be gone
        // before they were computed (`repo-search index` computes them in the foreground).
        let rerank_vectors = semantic
            .clone()
            .filter(|_| modes == HostModes::Watching && policy != RerankPolicy::Never)
            .map(|engine| keep_rerank_vectors_in_background(engine, index.clone()));
        Ok(Host {
            root,
            git_dir: Some(git_dir),
            index: Some(index),
            index_dir: Some(index_dir),
            tool,
            watcher,
            refreshing: Arc::default(),
            shared: None,
            semantic,
            rerank_vectors,
            deadline,
            backend: Some(backend),
            served: None,
            semantic_setup: semantic_setup_served,
            semantic_damage,
        })
    }

    /// A host on a shared index: no index directory, no watcher; `shared` refreshes.
    pub(crate) fn on_shared(
        root: PathBuf,
        tool: RepoSearchTool,
        shared: Arc<crate::pg_host::Shared>,
        deadline: Duration,
    ) -> Host {
        Host {
            shared: Some(shared),
            ..Host::bare(root, tool, deadline)
        }
    }

    /// A host on the index of a running `repo-search serve`: the server refreshes and searches,
    /// and its answers pass this host's own facade, so they are judged as any backend's.
    /// `root` is the worktree's canonical root, as [`crate::serve::connect`] found it.
    pub(crate) fn on_server(
        root: PathBuf,
        served: Arc<crate::serve::ServedBackend>,
        deadline: Duration,
    ) -> Result<Host, HostError> {
        let options = OpenOptions {
            deadline,
            ..OpenOptions::new(HostModes::Indexed)
        };
        let limits = options.limits()?;
        let fallback = Arc::new(
            LiteralSearch::with_config(
                &root,
                literal_search::LiteralSearchConfig {
                    limits,
                    ..Default::default()
                },
            )
            .map_err(|_| HostError::MissingRoot)?,
        );
        let modes = served.modes();
        let backend: Arc<dyn index_contract::RepositoryIndexBackend> = served.clone();
        let config = IndexedOperationsConfig {
            allowed_modes: modes.clone(),
            limits,
            ..IndexedOperationsConfig::default()
        };
        let ops = Arc::new(
            IndexedRepositoryOperations::new(&root, backend.clone(), fallback, config)
                .map_err(|_| HostError::IndexFailed)?,
        );
        let tool = RepoSearchTool::new(ops, &modes).map_err(|_| HostError::IndexFailed)?;
        Ok(Host {
            backend: Some(backend),
            served: Some(served),
            ..Host::bare(root, tool, deadline)
        })
    }

    /// A host with no index of its own: its tool answers alone.
    fn bare(root: PathBuf, tool: RepoSearchTool, deadline: Duration) -> Host {
        Host {
            deadline,
            backend: None,
            served: None,
            semantic_setup: None,
            semantic_damage: None,
            root,
            git_dir: None,
            index: None,
            index_dir: None,
            tool,
            watcher: None,
            refreshing: Arc::default(),
            shared: None,
            semantic: None,
            rerank_vectors: None,
        }
    }

    /// Whether this host's `semantic` answers are the hybrid ranking only because the index
    /// keeps too few of MiniLM's vectors, which `repo-search index` would compute
    /// ([`SemanticEngine::rerank_awaits_vectors`]).
    pub(crate) fn rerank_awaits_vectors(&self) -> bool {
        self.semantic
            .as_ref()
            .is_some_and(|e| e.rerank_awaits_vectors())
    }

    /// Whether this host serves `semantic`.
    pub(crate) fn serves_semantic(&self) -> bool {
        self.semantic.is_some()
    }

    /// The commit HEAD names, or `unborn`.
    fn head(&self) -> String {
        self.git_dir
            .as_deref()
            .and_then(|g| git::read_head(&self.root, g))
            .unwrap_or_else(|| "unborn".to_owned())
    }

    fn index(&self) -> Result<&Arc<EmbeddedIndex>, HostError> {
        self.index.as_ref().ok_or(HostError::IndexDirUnusable)
    }

    /// Builds the whole index now (waiting for any other writer).
    pub(crate) fn rebuild(&self) -> Result<Refresh, HostError> {
        let index = self.index()?;
        let head = self.head();
        let bar = Progress::on_terminal("indexing {bar:40} {pos}/{len} files ({elapsed})");
        let stats = index.build_with_progress(&format!("{head}+rebuilt"), &mut |done, total| {
            bar.set(done, total)
        })?;
        bar.finish();
        // Attest the regular `<head>+g<generation>` revision right away.
        let r = index.refresh(&head, None)?;
        if let Some(engine) = &self.semantic {
            engine.catch_up(index, None)?;
        }
        Ok(Refresh {
            kind: "build",
            upserts: stats.files,
            removals: 0,
            revision: r.revision,
        })
    }

    /// Computes MiniLM's vector of every chunk of the semantic store that has none, so that
    /// `semantic` answers are re-ranked without embedding at query time
    /// ([`crate::semantic::SemanticEngine::keep_rerank_vectors`]). `None` when this host serves
    /// no `semantic`.
    pub(crate) fn keep_rerank_vectors(
        &self,
    ) -> Result<Option<crate::semantic::KeptVectors>, HostError> {
        let (Some(engine), index) = (&self.semantic, self.index()?) else {
            return Ok(None);
        };
        let bar = Progress::on_terminal("re-rank vectors {bar:40} {pos}/{len} chunks ({elapsed})");
        let kept = engine
            .keep_rerank_vectors(index, usize::MAX, &mut |done, total| bar.set(done, total))
            .map_err(HostError::from)?;
        bar.finish();
        Ok(Some(kept))
    }

    /// Brings the index up to date with the worktree: a full build on first use (or when the
    /// index is damaged), else the files whose stamps changed, the new ones and the gone ones.
    /// Runs on a blocking thread; waits for another writer at most the default query deadline.
    /// The semantic store is caught up too when the refresh is for a `mode` that reads it: a
    /// trigram query never waits for (or fails with) the store.
    pub(crate) async fn refresh(&self, mode: SearchMode) -> Result<Refresh, HostError> {
        let index = self.index()?.clone();
        let root = self.root.clone();
        let head = self.head();
        let watcher = self.watcher.clone();
        let refreshing = self.refreshing.clone();
        let semantic = self
            .semantic
            .clone()
            .filter(|_| mode == SearchMode::Semantic);
        let rerank_vectors = self.rerank_vectors.clone();
        let budget = self.deadline;
        let deadline = Instant::now() + budget;
        let report = tokio::task::spawn_blocking(move || {
            let _one_at_a_time = refreshing.lock().unwrap_or_else(|p| p.into_inner());
            let report = Host::refresh_index(&index, &root, &head, watcher.clone(), deadline)?;
            // One refresh covers both: the store catches up to what the index committed, even
            // when the index found nothing changed (the store may lag after a crash). A first
            // build of the store is not held to the query deadline.
            if let Some(engine) = semantic {
                let stats = engine.catch_up(&index, None).map_err(HostError::from)?;
                if stats != semantic_index::CatchUp::default() {
                    // A long catch-up (a first build takes minutes) outlives the freshness window
                    // the index's refresh opened: look at the worktree again, and catch up again.
                    let deadline = Instant::now() + budget;
                    Host::refresh_index(&index, &root, &head, watcher, deadline)?;
                    engine.catch_up(&index, None).map_err(HostError::from)?;
                    if let Some(changed) = rerank_vectors {
                        // Full: a pass is already due, and will read this store.
                        let _ = changed.try_send(());
                    }
                }
            }
            Ok::<_, HostError>(report)
        })
        .await
        .map_err(|_| HostError::IndexFailed)??;
        Ok(Refresh {
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

    /// The embedded index's part of [`Host::refresh`], on the calling (blocking) thread.
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
                // Watch first, then walk: a write after the watch is an event, a write
                // before it is seen by the walk. A directory created in between is caught by
                // comparing the directories again, and walked by the next query.
                let selection = search_profile::Selection::new(root);
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
}
