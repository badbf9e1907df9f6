//! A shared `repo_search` index on PostgreSQL: a [`RepositoryIndexBackend`] for teams, many
//! repositories and many agents, serving `indexed_literal`.
//!
//! - **Storage**: two tables in the schema `repo_search`. `repos(tenant_id, repo_id, state,
//!   source_revision, updated_at)` is the state machine of each repository's index;
//!   `files(tenant_id, repo_id, path, sort_key, content, words, raw, prior)` holds the files,
//!   with lz4 column compression and a `pg_trgm` GIN index on `words`, the distinct words of
//!   `content` (the same trigrams from about an eighth of the bytes). `tenant_id` leads every key, so
//!   the same SQL runs on Citus with both tables distributed by it and co-located. Migrations
//!   are versioned and applied on connect (under an advisory lock).
//! - **Tenants**: every transaction sets `SET LOCAL repo_search.tenant_id`, and row-level
//!   security (forced, so it binds the tables' owner too) shows it only that tenant's rows.
//!   Every statement also filters on `tenant_id` itself, for roles that bypass row-level
//!   security.
//! - **Writes**: an update is one transaction: lock the repository's row, `COPY` the changed
//!   files into a temporary table, upsert, delete, set the revision and `updated_at`. Readers
//!   see the old version or the new one, never a mix. A full build ([`PgIndex::build`]) commits
//!   `building` first, then writes the whole selection the same way.
//! - **Search**: one read-only `REPEATABLE READ` transaction reads the repository's status and
//!   the candidates in the same snapshot. `LIKE` (or `ILIKE`) patterns on `words` that every
//!   file holding the query satisfies, or for a regex an AND/OR tree of them (`plan`),
//!   pre-filter the candidates, with the tenant, repository and scope in SQL; rows stream from
//!   a portal in path order and each is verified with the shared ripgrep profile
//!   (`search_profile`), so a hit is exactly ripgrep's first match in that file. Fetching stops
//!   at the result cap. A query whose words give no trigram cannot use the trigram index: it
//!   is answered by a scan bounded by the cap and the deadline, flagged `full_scan`.
//! - **Failures**: errors name a class of failure ([`PgIndexError`]) and never carry server
//!   text or connection parameters. A connection is reused only after a clean `COMMIT`; one
//!   dropped mid-operation (an error, a deadline) is closed, so the server rolls back.
//!
//! # Example
//!
//! ```no_run
//! use index_contract::{RepositoryIndexBackend, SearchMode, SearchRequest};
//! use pg_index::{PgIndex, PgIndexConfig};
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! // The server from the PG* environment variables, as psql reads them.
//! let server = PgIndex::config_from_env();
//! let index = PgIndex::connect(server, "/path/to/worktree", PgIndexConfig::new("team-a", "repo-1")).await?;
//! index.build("rev-1").await?;
//! let found = index
//!     .search(SearchRequest::new("parse_config", SearchMode::IndexedLiteral))
//!     .await?;
//! for hit in &found.hits {
//!     println!("{}:{}:{}", hit.path, hit.line, hit.snippet);
//! }
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod content;
mod error;
mod plan;
mod pool;
mod query;
mod schema;
mod sync;
mod write;

use std::path::{Path, PathBuf};
use std::time::Duration;

use index_contract::{
    BackendCapabilities, BackendError, BackendSearchResponse, BoxFuture, IndexState, IndexStatus,
    RemoveRequest, RepositoryIndexBackend, SearchRequest, UnixMillis, UpdateRequest,
};
use search_profile::RootDir;
use tokio_postgres::{IsolationLevel, Transaction};

pub use error::PgIndexError;
pub use schema::SCHEMA_VERSION;
pub use sync::{SyncReport, revision_commit};
/// The driver's server configuration (host, port, user, password, database), as
/// [`PgIndex::connect`] takes it.
pub use tokio_postgres::Config as ServerConfig;
pub use write::WriteStats;

use pool::{Conn, Pool};

/// Which repository of which tenant a [`PgIndex`] serves, and its limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgIndexConfig {
    /// The tenant: the row-level security and distribution key.
    pub tenant_id: String,
    /// The repository, within the tenant.
    pub repo_id: String,
    /// Most connections open at once.
    pub pool_size: usize,
    /// How long connecting (socket and login) may take.
    pub connect_timeout: Duration,
    /// The `statement_timeout` of a search without a deadline, and of `status`.
    pub read_timeout: Duration,
    /// The `statement_timeout` of writes (a full build's `COPY` is one statement).
    pub write_timeout: Duration,
    /// Never write: no migration, every write refused before it reaches the server, and the
    /// session's transactions read-only on the server too (`default_transaction_read_only`).
    pub read_only: bool,
}

impl PgIndexConfig {
    /// A configuration with the default limits: 8 connections, 5 s to connect, 30 s per read
    /// statement, 10 min per write statement.
    pub fn new(tenant_id: impl Into<String>, repo_id: impl Into<String>) -> PgIndexConfig {
        PgIndexConfig {
            tenant_id: tenant_id.into(),
            repo_id: repo_id.into(),
            pool_size: 8,
            connect_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(600),
            read_only: false,
        }
    }
}

/// The index of one repository of one tenant, on a PostgreSQL server shared with others.
pub struct PgIndex {
    pool: Pool,
    config: PgIndexConfig,
    /// The tenant as an SQL string literal, for `SET LOCAL`.
    tenant_literal: String,
    root: PathBuf,
    worktree: RootDir,
    /// What this index's last push committed, so that a long-lived host's next push need not
    /// read the stored list again while the index still attests that revision.
    pushed: std::sync::Mutex<Option<sync::Pushed>>,
}

impl std::fmt::Debug for PgIndex {
    // The server configuration is left out: it can hold a password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgIndex")
            .field("tenant_id", &self.config.tenant_id)
            .field("repo_id", &self.config.repo_id)
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl PgIndex {
    /// The server named by the `PG*` environment variables (`PGHOST`, `PGPORT`, `PGUSER`,
    /// `PGPASSWORD`, `PGDATABASE`), as `psql` reads them; `PGHOST` defaults to `localhost`.
    pub fn config_from_env() -> tokio_postgres::Config {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let mut c = tokio_postgres::Config::new();
        c.host(var("PGHOST").as_deref().unwrap_or("localhost"));
        if let Some(port) = var("PGPORT").and_then(|p| p.parse().ok()) {
            c.port(port);
        }
        if let Some(user) = var("PGUSER") {
            c.user(&user);
        }
        if let Some(password) = var("PGPASSWORD") {
            c.password(password);
        }
        if let Some(db) = var("PGDATABASE") {
            c.dbname(&db);
        }
        c.application_name("repo-search");
        c
    }

    /// The server named by `spec`, a `postgres://` URL or a libpq `key=value` string; what it
    /// leaves out (host, port, user, password, database) comes from the `PG*` variables as
    /// [`PgIndex::config_from_env`] reads them, as libpq does. The error never quotes `spec`,
    /// which can hold a password.
    pub fn server_from_spec(spec: &str) -> Result<tokio_postgres::Config, PgIndexError> {
        let unusable = PgIndexError::BadConfig("the server is not a postgres:// URL");
        let url = spec.starts_with("postgres://") || spec.starts_with("postgresql://");
        if !url && !spec.contains('=') {
            return Err(unusable);
        }
        let mut c: tokio_postgres::Config = spec.parse().map_err(|_| unusable)?;
        let env = PgIndex::config_from_env();
        if c.get_hosts().is_empty() {
            for h in env.get_hosts() {
                match h {
                    tokio_postgres::config::Host::Tcp(h) => c.host(h),
                    #[cfg(unix)]
                    tokio_postgres::config::Host::Unix(p) => c.host_path(p),
                };
            }
        }
        if c.get_ports().is_empty() {
            for &p in env.get_ports() {
                c.port(p);
            }
        }
        if c.get_user().is_none() {
            let user = env
                .get_user()
                .map(str::to_owned)
                .or_else(|| std::env::var("USER").ok())
                .unwrap_or_else(|| "postgres".to_owned());
            c.user(&user);
        }
        if let (None, Some(p)) = (c.get_password(), env.get_password()) {
            c.password(p);
        }
        if let (None, Some(db)) = (c.get_dbname(), env.get_dbname()) {
            c.dbname(db);
        }
        if c.get_application_name().is_none() {
            c.application_name("repo-search");
        }
        Ok(c)
    }

    /// Connects to `server`, applies the missing migrations, and serves `config`'s repository,
    /// whose worktree is `root` (files are read from it, beneath it, without following
    /// symlinks). Must be called inside a Tokio runtime.
    pub async fn connect(
        server: tokio_postgres::Config,
        root: impl AsRef<Path>,
        config: PgIndexConfig,
    ) -> Result<PgIndex, PgIndexError> {
        for id in [&config.tenant_id, &config.repo_id] {
            index_guard::check_id(index_contract::Field::RepositoryId, id)
                .map_err(|_| PgIndexError::BadConfig("a tenant or repository id is not valid"))?;
        }
        if config.pool_size == 0 {
            return Err(PgIndexError::BadConfig("the pool size is zero"));
        }
        let mut server = server;
        server.connect_timeout(config.connect_timeout);
        server.keepalives(true);
        if config.read_only {
            // The server refuses a write too, whatever this crate's own checks miss.
            server.options("-c default_transaction_read_only=on");
        }
        let root = root.as_ref().canonicalize()?;
        let index = PgIndex {
            pool: Pool::new(server, config.pool_size, config.connect_timeout),
            tenant_literal: literal(&config.tenant_id),
            worktree: RootDir::open(&root)?,
            pushed: std::sync::Mutex::new(None),
            root,
            config,
        };
        let conn = index.pool.get().await?;
        schema::migrate(conn.client(), index.config.read_only).await?;
        conn.release();
        Ok(index)
    }

    /// The configuration.
    pub fn config(&self) -> &PgIndexConfig {
        &self.config
    }

    /// The worktree root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Takes a connection and opens a write transaction on it for this tenant, with a statement
    /// timeout. One round trip: `BEGIN`, `SET LOCAL repo_search.tenant_id`, `SET LOCAL
    /// statement_timeout`.
    pub(crate) async fn begin_write(&self) -> Result<Conn<'_>, PgIndexError> {
        if self.config.read_only {
            return Err(PgIndexError::ReadOnly);
        }
        let conn = self.pool.get().await?;
        conn.client()
            .batch_execute(&format!(
                "BEGIN ISOLATION LEVEL READ COMMITTED; {}",
                self.set_local(self.config.write_timeout)
            ))
            .await?;
        Ok(conn)
    }

    /// Opens a read-only `REPEATABLE READ` transaction on `conn` for this tenant: every
    /// statement in it reads one snapshot.
    pub(crate) async fn begin_read<'c>(
        &self,
        conn: &'c mut Conn<'_>,
        timeout: Duration,
    ) -> Result<Transaction<'c>, PgIndexError> {
        let tx = conn
            .client_mut()
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        tx.batch_execute(&self.set_local(timeout)).await?;
        Ok(tx)
    }

    /// The settings of one transaction: the tenant, which row-level security reads, and the
    /// statement timeout.
    fn set_local(&self, timeout: Duration) -> String {
        let ms = timeout.as_millis().clamp(1, i32::MAX as u128);
        format!(
            "SET LOCAL repo_search.tenant_id = {}; SET LOCAL statement_timeout = {ms}",
            self.tenant_literal
        )
    }

    /// The committed status of this repository's index, read in `conn`'s transaction.
    pub(crate) async fn read_status(
        &self,
        tx: &Transaction<'_>,
    ) -> Result<IndexStatus, PgIndexError> {
        let row = tx
            .query_opt(
                "SELECT state, source_revision,
                        (extract(epoch FROM updated_at) * 1000)::bigint
                   FROM repo_search.repos WHERE tenant_id = $1 AND repo_id = $2",
                &[&self.config.tenant_id, &self.config.repo_id],
            )
            .await?;
        let Some(row) = row else {
            return Ok(IndexStatus::new(IndexState::Empty));
        };
        let state = match row.get::<_, &str>(0) {
            "empty" => IndexState::Empty,
            "building" => IndexState::Building,
            "ready" => IndexState::Ready,
            "stale" => IndexState::Stale,
            _ => IndexState::Failed,
        };
        Ok(IndexStatus {
            state,
            source_revision: row.get(1),
            updated_at: row
                .get::<_, Option<i64>>(2)
                .map(|ms| UnixMillis(u64::try_from(ms).unwrap_or(0))),
        })
    }

    /// The committed status and the number of files the index holds, from one snapshot.
    pub async fn status_and_files(&self) -> Result<(IndexStatus, u64), PgIndexError> {
        let mut conn = self.pool.get().await?;
        let tx = self.begin_read(&mut conn, self.config.read_timeout).await?;
        let status = self.read_status(&tx).await?;
        let files: i64 = tx
            .query_one(
                "SELECT count(*) FROM repo_search.files WHERE tenant_id = $1 AND repo_id = $2",
                &[&self.config.tenant_id, &self.config.repo_id],
            )
            .await?
            .get(0);
        tx.commit().await?;
        conn.release();
        Ok((status, u64::try_from(files).unwrap_or(0)))
    }

    /// The status of the committed index.
    pub async fn current_status(&self) -> Result<IndexStatus, PgIndexError> {
        let mut conn = self.pool.get().await?;
        let tx = self.begin_read(&mut conn, self.config.read_timeout).await?;
        let status = self.read_status(&tx).await?;
        tx.commit().await?;
        conn.release();
        Ok(status)
    }
}

/// `s` as an SQL string literal, whatever `standard_conforming_strings` says: an escape string
/// with its backslashes and quotes escaped. Ids hold no control characters (checked on connect).
fn literal(s: &str) -> String {
    let mut out = String::from("E'");
    for c in s.chars() {
        if c == '\\' || c == '\'' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('\'');
    out
}

impl RepositoryIndexBackend for PgIndex {
    /// Fixed strings and regexes; hits come in path order (component by component), so the
    /// facade can page them.
    fn capabilities(&self) -> BackendCapabilities {
        BackendCapabilities {
            paging: true,
            regex: true,
            ..BackendCapabilities::default()
        }
    }

    /// Reads the added and edited files from the worktree and commits them with the request's
    /// revision, in one transaction. A file that is gone is dropped from the index.
    fn update(&self, request: UpdateRequest) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            let upserts = request.upserted_paths();
            self.apply(&upserts, &[], Some(&request.source_revision))
                .await?;
            Ok(())
        })
    }

    fn remove(&self, request: RemoveRequest) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            self.remove_paths(&request.paths, request.update_follows)
                .await?;
            Ok(())
        })
    }

    fn search(
        &self,
        request: SearchRequest,
    ) -> BoxFuture<'_, Result<BackendSearchResponse, BackendError>> {
        Box::pin(async move { Ok(self.search_now(&request).await?) })
    }

    fn status(&self) -> BoxFuture<'_, Result<IndexStatus, BackendError>> {
        Box::pin(async move { Ok(self.current_status().await?) })
    }

    fn dispose(&self) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            self.pool.clear();
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::literal;

    #[test]
    fn tenant_literals_survive_quotes_and_backslashes() {
        let check = |id: &str, expected: &str| assert_eq!(literal(id), expected);
        check("team-a", "E'team-a'");
        check("o'brien", "E'o\\'brien'");
        check("a\\'; DROP TABLE x; --", "E'a\\\\\\'; DROP TABLE x; --'");
    }
}
