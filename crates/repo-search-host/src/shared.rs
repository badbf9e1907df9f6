//! The host on a shared index in PostgreSQL.
//!
//! - **Pushing** (the default): before each index query the host pushes the worktree to the
//!   shared index ([`PgIndex::sync`]): the selection is walked and stat'ed as the literal search
//!   walks it, compared with the stored stamps and hashes, and only new or changed content is
//!   uploaded, in one transaction that also commits the revision `<HEAD>+h<content digest>`.
//!   The query is then served only if the index still attests exactly that revision: a push by
//!   another host in between makes the answer `stale`, never silently someone else's files.
//! - **Read-only**: nothing is ever written (the session is read-only on the server too). An
//!   answer is served only when the index is `ready` and attests the commit the reader expects:
//!   this worktree's HEAD, or a pinned revision (a commit, or a full revision with its `+h`
//!   digest for exact content). Within that, the attestation replaces the age: a commit's
//!   content does not change, so the index is current for what was asked however long ago it
//!   was pushed.
//!
//! Credentials never leave the driver's `tokio_postgres::Config`: every error is a fixed
//! [`HostError`], and nothing here prints the URL.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use index_contract::{
    BackendCapabilities, BackendError, BackendSearchResponse, BoxFuture, IndexState, IndexStatus,
    RemoveRequest, RepositoryIndexBackend, SearchRequest, UnixMillis, UpdateRequest,
};
use pg_index::{PgIndex, PgIndexConfig, PgIndexError, revision_commit};

use crate::HostError;
use crate::host::{HostStatus, Place, Rebuilt, Refreshed, Uploaded};

/// The environment variable that names the shared index when a front end is given none.
pub const BACKEND_ENV: &str = "REPO_SEARCH_BACKEND";

/// A shared index to use. Its `Debug` shows the tenant and repository only: the URL can hold a
/// password.
#[derive(Clone)]
pub struct SharedConfig {
    server: pg_index::ServerConfig,
    tenant: Option<String>,
    repo_id: Option<String>,
    read_only: bool,
    revision: Option<String>,
}

impl std::fmt::Debug for SharedConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedConfig")
            .field("tenant", &self.tenant)
            .field("repo_id", &self.repo_id)
            .field("read_only", &self.read_only)
            .finish_non_exhaustive()
    }
}

impl SharedConfig {
    /// A shared index at `url` (a `postgres://` URL; parts it leaves out come from the PG*
    /// variables), for `tenant` (default `default`) and `repo_id` (default: the worktree
    /// directory's name). Read-only hosts never write, and answer only when the index attests
    /// `revision` (default: the worktree's HEAD). The URL is parsed here and never echoed.
    pub fn new(
        url: &str,
        tenant: Option<String>,
        repo_id: Option<String>,
        read_only: bool,
        revision: Option<String>,
    ) -> Result<SharedConfig, HostError> {
        let server =
            PgIndex::server_from_spec(url.trim()).map_err(|_| HostError::SharedUnusable)?;
        Ok(SharedConfig {
            server,
            tenant,
            repo_id,
            read_only,
            revision,
        })
    }
}

/// The fixed error for an error of the shared index: its class only, never its text.
fn failure(e: &PgIndexError) -> HostError {
    match e {
        PgIndexError::BadConfig(_) => HostError::SharedUnusable,
        PgIndexError::Connect { .. } => HostError::SharedUnreachable,
        PgIndexError::ConnectTimeout | PgIndexError::StatementTimeout => HostError::SharedTimeout,
        PgIndexError::ReadOnly => HostError::SharedReadOnly,
        _ => HostError::SharedFailed,
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
async fn connect(
    dir: &Path,
    backend: &SharedConfig,
) -> Result<(PathBuf, PathBuf, PgIndex), HostError> {
    let (root, git_dir) = crate::locate::worktree_root(dir)?;
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

/// The shared-index half of a [`crate::Host`]: what a query refreshes before it is answered.
pub(crate) struct Shared {
    attested: Arc<Attested>,
    root: PathBuf,
    git_dir: PathBuf,
    /// The revision a read-only host expects.
    pinned: Option<String>,
    /// The settings it was opened with.
    config: SharedConfig,
    /// Pushes of this host, one at a time: each sets the revision its query expects.
    pushing: tokio::sync::Mutex<()>,
}

impl Shared {
    /// Before an index query: push the worktree and expect its revision, or (read-only) expect
    /// the pinned revision or HEAD's commit. A push may take the query's `deadline`: one that
    /// runs past it is dropped, which closes its connection, so the server rolls it back whole.
    pub(crate) async fn refresh(&self, deadline: Duration) -> Result<Refreshed, HostError> {
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
            let revision = match &expect {
                Expect::Exact(r) | Expect::Commit(r) => r.clone(),
                Expect::Nothing => String::new(),
            };
            attested.expect(expect);
            return Ok(Refreshed {
                kind: "read-only",
                upserts: 0,
                removals: 0,
                revision,
            });
        }
        let _one_at_a_time = self.pushing.lock().await;
        let head = head(&self.root, &self.git_dir);
        let pushed = tokio::time::timeout(deadline, attested.index.sync(&head, true))
            .await
            .map_err(|_| HostError::SharedTimeout)?;
        match pushed {
            Ok(report) => {
                attested.expect(Expect::Exact(report.revision.clone()));
                Ok(Refreshed {
                    kind: "push",
                    upserts: usize::try_from(report.uploaded).unwrap_or(usize::MAX),
                    removals: usize::try_from(report.removed).unwrap_or(usize::MAX),
                    revision: report.revision,
                })
            }
            Err(e) => {
                attested.expect(Expect::Nothing);
                Err(failure(&e))
            }
        }
    }
}

impl Shared {
    /// Connects to the shared index for the worktree containing `dir`: its root, the host's
    /// half, and the backend behind the facade.
    pub(crate) async fn open(
        dir: &Path,
        config: SharedConfig,
    ) -> Result<(PathBuf, Shared, Arc<dyn RepositoryIndexBackend>), HostError> {
        let (root, git_dir, index) = connect(dir, &config).await?;
        let attested = Arc::new(Attested {
            index: Arc::new(index),
            expect: Mutex::new(Expect::Nothing),
            read_only: config.read_only,
        });
        let shared = Shared {
            attested: attested.clone(),
            root: root.clone(),
            git_dir,
            pinned: config.revision.clone(),
            config,
            pushing: tokio::sync::Mutex::new(()),
        };
        Ok((root, shared, attested))
    }

    /// Pushes the worktree, reading and hashing every file (no stamp trusted) but uploading only
    /// what the index does not hold. No deadline: a first push of a large repository takes what
    /// it takes; statements keep their own timeouts.
    pub(crate) async fn push_all(&self) -> Result<Rebuilt, HostError> {
        if self.config.read_only {
            return Err(HostError::SharedReadOnly);
        }
        let _one_at_a_time = self.pushing.lock().await;
        let report = self
            .attested
            .index
            .sync(&head(&self.root, &self.git_dir), false)
            .await
            .map_err(|e| failure(&e))?;
        Ok(Rebuilt {
            files: report.files,
            revision: report.revision,
            uploaded: Some(Uploaded {
                files: report.uploaded,
                bytes: report.bytes,
                removed: report.removed,
            }),
        })
    }

    /// The shared index's committed status for this repository.
    pub(crate) async fn status(&self, root: &Path) -> Result<HostStatus, HostError> {
        let index = &self.attested.index;
        let (status, files) = index.status_and_files().await.map_err(|e| failure(&e))?;
        let config = index.config();
        Ok(HostStatus {
            root: root.to_path_buf(),
            place: Place::Shared {
                backend: "postgres",
                tenant_id: config.tenant_id.clone(),
                repo_id: config.repo_id.clone(),
            },
            status,
            files,
        })
    }
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
        let Err(e) = SharedConfig::new("mysql://user:hunter2@db/x", None, None, false, None) else {
            panic!("a mysql URL was accepted")
        };
        assert_eq!(e, HostError::SharedUnusable);
        assert!(!format!("{e:?}").contains("hunter2"));
    }

    #[test]
    fn a_shared_configs_debug_never_shows_its_url() {
        let config =
            SharedConfig::new("postgres://user:hunter2@db/x", None, None, false, None).unwrap();
        assert!(!format!("{config:?}").contains("hunter2"));
    }
}
