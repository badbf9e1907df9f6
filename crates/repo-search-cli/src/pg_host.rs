//! The host on a shared index in PostgreSQL (`--backend postgres://…` or `REPO_SEARCH_BACKEND`).
//!
//! - **Pushing** (the default): before each index query the host pushes the worktree to the
//!   shared index ([`PgIndex::sync`]): the selection is walked and stat'ed as the literal search
//!   walks it, compared with the stored stamps and hashes, and only new or changed content is
//!   uploaded, in one transaction that also commits the revision `<HEAD>+h<content digest>`.
//!   The query is then served only if the index still attests exactly that revision: a push by
//!   another host in between makes the answer `stale`, never silently someone else's files.
//! - **Read-only** (`--read-only`): nothing is ever written (the session is read-only on the
//!   server too). An answer is served only when the index is `ready` and attests the commit the
//!   reader expects: this worktree's HEAD, or `--revision` (a commit, or a full revision with
//!   its `+h` digest for exact content). Within that, the attestation replaces the age: a
//!   commit's content does not change, so the index is current for what was asked however long
//!   ago it was pushed.
//!
//! Credentials never leave the driver's `tokio_postgres::Config`: every error is a fixed
//! [`Failure`], and nothing here prints the URL.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use index_contract::{
    BackendCapabilities, BackendError, BackendSearchResponse, BoxFuture, IndexState, IndexStatus,
    RemoveRequest, RepositoryIndexBackend, SearchMode, SearchRequest, UnixMillis, UpdateRequest,
    limits::DEFAULT_DEADLINE_MS,
};
use literal_search::LiteralSearch;
use pg_index::{PgIndex, PgIndexConfig, PgIndexError, revision_commit};
use repo_search_tool::{IndexedOperationsConfig, IndexedRepositoryOperations, RepoSearchTool};
use serde_json::json;

use crate::failure::Failure;
use crate::host::{self, Host};

/// The environment variable that names the shared index when `--backend` is not given.
pub(crate) const BACKEND_ENV: &str = "REPO_SEARCH_BACKEND";

/// The options of a shared index. Not `Debug`: the URL can hold a password.
#[derive(clap::Args, Clone, Default)]
pub(crate) struct SharedArgs {
    /// Use a shared index in PostgreSQL instead of the embedded one: a `postgres://` URL (default:
    /// $REPO_SEARCH_BACKEND). Parts it leaves out come from the PG* variables; keep the password
    /// in PGPASSWORD rather than on the command line.
    #[arg(long, value_name = "URL")]
    backend: Option<String>,
    /// The tenant in the shared index (default: `default`).
    #[arg(long, value_name = "ID")]
    tenant: Option<String>,
    /// The repository in the shared index (default: the worktree directory's name).
    #[arg(long, value_name = "ID")]
    repo_id: Option<String>,
    /// Only query the shared index: never push, and answer only when it attests the expected
    /// revision.
    #[arg(long)]
    read_only: bool,
    /// With --read-only: the revision the shared index must attest (default: this worktree's
    /// HEAD): a commit, or a full revision `<commit>+h<digest>` for exact content.
    #[arg(long, value_name = "REV", requires = "read_only")]
    revision: Option<String>,
}

/// A shared index the command line asked for.
pub(crate) struct Backend {
    server: pg_index::ServerConfig,
    tenant: Option<String>,
    repo_id: Option<String>,
    read_only: bool,
    revision: Option<String>,
}

impl SharedArgs {
    /// The shared index asked for, `None` for the embedded index. The URL is parsed here and
    /// never echoed; options of a shared index without one are refused rather than ignored.
    pub(crate) fn backend(&self) -> Result<Option<Backend>, Failure> {
        let spec = self.backend.clone().or_else(|| {
            std::env::var(BACKEND_ENV)
                .ok()
                .filter(|v| !v.trim().is_empty())
        });
        let Some(spec) = spec else {
            let asked = self.tenant.is_some() || self.repo_id.is_some() || self.read_only;
            return if asked {
                Err(Failure::BackendUnusable)
            } else {
                Ok(None)
            };
        };
        let server =
            PgIndex::server_from_spec(spec.trim()).map_err(|_| Failure::BackendUnusable)?;
        Ok(Some(Backend {
            server,
            tenant: self.tenant.clone(),
            repo_id: self.repo_id.clone(),
            read_only: self.read_only,
            revision: self.revision.clone(),
        }))
    }
}

/// The fixed failure for an error of the shared index: its class only, never its text.
pub(crate) fn failure(e: &PgIndexError) -> Failure {
    match e {
        PgIndexError::BadConfig(_) => Failure::BackendUnusable,
        PgIndexError::Connect { .. } => Failure::BackendUnreachable,
        PgIndexError::ConnectTimeout | PgIndexError::StatementTimeout => Failure::BackendTimeout,
        PgIndexError::ReadOnly => Failure::BackendReadOnly,
        _ => Failure::BackendFailed,
    }
}

/// The repository id by default: the worktree directory's name, kept to the characters an id
/// may hold, so that clones of one repository on several machines share one index.
fn default_repo_id(root: &Path) -> String {
    let name: String = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(100)
        .collect();
    if name.is_empty() {
        "repo".to_owned()
    } else {
        name
    }
}

/// The worktree, its git directory and the connected index.
async fn connect(dir: &Path, backend: &Backend) -> Result<(PathBuf, PathBuf, PgIndex), Failure> {
    let (root, git_dir) = host::worktree_root(dir)?;
    let mut config = PgIndexConfig::new(
        backend.tenant.as_deref().unwrap_or("default"),
        backend
            .repo_id
            .clone()
            .unwrap_or_else(|| default_repo_id(&root)),
    );
    config.read_only = backend.read_only;
    let index = PgIndex::connect(backend.server.clone(), &root, config)
        .await
        .map_err(|e| failure(&e))?;
    Ok((root, git_dir, index))
}

/// The commit HEAD names, or `unborn`.
fn head(root: &Path, git_dir: &Path) -> String {
    crate::git::read_head(root, git_dir).unwrap_or_else(|| "unborn".to_owned())
}

/// What the index must attest for a query to be served.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Expect {
    /// Nothing yet: no query is served.
    Nothing,
    /// This revision exactly.
    Exact(String),
    /// A revision of this commit.
    Commit(String),
}

/// The shared index behind the freshness gate, judged against what this host expects: a status
/// that does not attest it is reported `stale`, which the gate refuses.
struct Attested {
    index: Arc<PgIndex>,
    expect: Mutex<Expect>,
    read_only: bool,
}

impl Attested {
    fn expect(&self, e: Expect) {
        *self.expect.lock().unwrap_or_else(|p| p.into_inner()) = e;
    }

    fn judge(&self, mut status: IndexStatus) -> IndexStatus {
        if status.state != IndexState::Ready {
            return status;
        }
        let revision = status.source_revision.as_deref().unwrap_or("");
        let attested = match &*self.expect.lock().unwrap_or_else(|p| p.into_inner()) {
            Expect::Nothing => false,
            Expect::Exact(r) => revision == r,
            Expect::Commit(c) => revision_commit(revision) == c,
        };
        if !attested {
            status.state = IndexState::Stale;
        } else if self.read_only {
            // The attestation, read in the same snapshot as the rows, is the freshness of a
            // read-only answer: the content of the expected revision does not age.
            status.updated_at = Some(UnixMillis::now());
        }
        status
    }
}

impl RepositoryIndexBackend for Attested {
    fn capabilities(&self) -> BackendCapabilities {
        self.index.capabilities()
    }

    fn update(&self, request: UpdateRequest) -> BoxFuture<'_, Result<(), BackendError>> {
        if self.read_only {
            return Box::pin(async { Err(Box::new(PgIndexError::ReadOnly) as BackendError) });
        }
        self.index.update(request)
    }

    fn remove(&self, request: RemoveRequest) -> BoxFuture<'_, Result<(), BackendError>> {
        if self.read_only {
            return Box::pin(async { Err(Box::new(PgIndexError::ReadOnly) as BackendError) });
        }
        self.index.remove(request)
    }

    fn search(
        &self,
        request: SearchRequest,
    ) -> BoxFuture<'_, Result<BackendSearchResponse, BackendError>> {
        Box::pin(async move {
            let mut response = self.index.search_now(&request).await?;
            response.status = self.judge(response.status);
            Ok(response)
        })
    }

    fn status(&self) -> BoxFuture<'_, Result<IndexStatus, BackendError>> {
        Box::pin(async move { Ok(self.judge(self.index.current_status().await?)) })
    }

    fn dispose(&self) -> BoxFuture<'_, Result<(), BackendError>> {
        self.index.dispose()
    }
}

/// The shared-index half of a [`Host`]: what a query refreshes before it is answered.
pub(crate) struct Shared {
    attested: Arc<Attested>,
    root: PathBuf,
    git_dir: PathBuf,
    /// `--revision`.
    pinned: Option<String>,
    /// Pushes of this host, one at a time: each sets the revision its query expects.
    pushing: tokio::sync::Mutex<()>,
}

/// How long a push before a query may take: the query's default deadline. A push that runs
/// past it is dropped, which closes its connection, so the server rolls it back whole.
const PUSH_DEADLINE: Duration = Duration::from_millis(DEFAULT_DEADLINE_MS);

impl Shared {
    /// Before an index query: push the worktree and expect its revision, or (read-only) expect
    /// the pinned revision or HEAD's commit.
    pub(crate) async fn refresh(&self) -> Result<(), Failure> {
        let attested = &self.attested;
        if attested.read_only {
            let expect = match &self.pinned {
                Some(r) if r.contains('+') => Expect::Exact(r.clone()),
                Some(r) => Expect::Commit(r.clone()),
                // A HEAD that names no commit (unborn, unreadable) pins no content: any other
                // pusher's `unborn` push under this repository id would otherwise pass.
                None => match crate::git::read_head(&self.root, &self.git_dir) {
                    Some(commit) => Expect::Commit(commit),
                    None => Expect::Nothing,
                },
            };
            attested.expect(expect);
            return Ok(());
        }
        let _one_at_a_time = self.pushing.lock().await;
        let head = head(&self.root, &self.git_dir);
        let pushed = tokio::time::timeout(PUSH_DEADLINE, attested.index.sync(&head, true))
            .await
            .map_err(|_| Failure::BackendTimeout)?;
        match pushed {
            Ok(report) => {
                attested.expect(Expect::Exact(report.revision));
                Ok(())
            }
            Err(e) => {
                attested.expect(Expect::Nothing);
                Err(failure(&e))
            }
        }
    }
}

/// Opens a host on the shared index for the worktree containing `dir`. `literal` is served
/// from the worktree as always.
pub(crate) async fn open(
    dir: &Path,
    backend: Backend,
    deadline: Duration,
) -> Result<Host, Failure> {
    let (root, git_dir, index) = connect(dir, &backend).await?;
    let attested = Arc::new(Attested {
        index: Arc::new(index),
        expect: Mutex::new(Expect::Nothing),
        read_only: backend.read_only,
    });
    let limits = host::OpenOptions {
        deadline,
        ..host::OpenOptions::new(host::HostModes::Indexed)
    }
    .limits()?;
    let fallback = Arc::new(
        LiteralSearch::with_config(
            &root,
            literal_search::LiteralSearchConfig {
                limits,
                ..Default::default()
            },
        )
        .map_err(|_| Failure::RootUnreadable)?,
    );
    let ops = IndexedRepositoryOperations::new(
        &root,
        attested.clone(),
        fallback,
        IndexedOperationsConfig {
            limits,
            ..IndexedOperationsConfig::default()
        },
    )
    .map_err(Failure::Setup)?;
    let tool = RepoSearchTool::new(
        Arc::new(ops),
        &[SearchMode::Literal, SearchMode::IndexedLiteral],
    )
    .map_err(Failure::Setup)?;
    let shared = Shared {
        attested,
        root: root.clone(),
        git_dir,
        pinned: backend.revision,
        pushing: tokio::sync::Mutex::new(()),
    };
    Ok(Host::on_shared(root, tool, Arc::new(shared), deadline))
}

/// `repo-search index --backend …`: pushes the worktree, reading and hashing every file (no
/// stamp trusted) but uploading only what the index does not hold. No deadline: a first push
/// of a large repository takes what it takes; statements keep their own timeouts.
pub(crate) async fn index(dir: &Path, backend: Backend) -> Result<(), Failure> {
    if backend.read_only {
        return Err(Failure::BackendReadOnly);
    }
    let (root, git_dir, index) = connect(dir, &backend).await?;
    let report = index
        .sync(&head(&root, &git_dir), false)
        .await
        .map_err(|e| failure(&e))?;
    eprintln!(
        "indexed {} files at {} ({} uploaded, {} bytes; {} removed)",
        report.files, report.revision, report.uploaded, report.bytes, report.removed
    );
    Ok(())
}

/// `repo-search status --backend …`: the shared index's committed status for this repository.
pub(crate) async fn status(dir: &Path, backend: Backend, json: bool) -> Result<(), Failure> {
    let (root, _git_dir, index) = connect(dir, &backend).await?;
    let (status, files) = index.status_and_files().await.map_err(|e| failure(&e))?;
    let config = index.config();
    if json {
        let body = json!({
            "root": root,
            "backend": "postgres",
            "tenant_id": config.tenant_id,
            "repo_id": config.repo_id,
            "status": status,
            "files": files,
        });
        println!("{body}");
    } else {
        crate::print_status(
            &status,
            files,
            &format!(
                "backend:   postgres, tenant {}, repository {}",
                config.tenant_id, config.repo_id
            ),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_repo_ids_keep_only_id_characters() {
        let check = |dir: &str, expected: &str| {
            assert_eq!(default_repo_id(Path::new(dir)), expected, "{dir}");
        };
        check("/src/repo-search", "repo-search");
        check("/src/my repo:1", "my_repo_1");
        check("/", "repo");
    }

    #[test]
    fn a_bad_backend_url_is_refused_without_echoing_it() {
        let args = SharedArgs {
            backend: Some("mysql://user:hunter2@db/x".into()),
            ..SharedArgs::default()
        };
        let Err(f) = args.backend() else {
            panic!("a mysql URL was accepted")
        };
        assert_eq!(f, Failure::BackendUnusable);
        assert!(!f.message().contains("hunter2") && !f.message().contains("mysql"));
    }

    #[test]
    fn shared_index_options_without_a_backend_are_refused() {
        let args = SharedArgs {
            read_only: true,
            ..SharedArgs::default()
        };
        assert!(matches!(args.backend(), Err(Failure::BackendUnusable)));
        assert!(matches!(SharedArgs::default().backend(), Ok(None)));
    }
}
