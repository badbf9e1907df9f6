//! Writes: a full build, and updates and removals, each one transaction.

use std::io::Read;

use search_profile::{OpenError, Selection};
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{ToSql, Type};

use crate::pool::Conn;
use crate::{PgIndex, PgIndexError, content};

/// What a write did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Files read from the worktree and sent to the server.
    pub files: u64,
    /// Bytes of those files.
    pub bytes: u64,
    /// Files named for upsert that are gone (or are no longer regular files, or are reached
    /// through a symlink): dropped from the index.
    pub vanished: u64,
    /// Files that could not be read: dropped from the index, as the literal search skips them.
    pub unreadable: u64,
}

/// Which files a write replaces.
enum Upserts<'a> {
    /// The whole index becomes exactly these files.
    All(&'a [String]),
    /// These files are (re)read; the others stay.
    Some(&'a [String]),
}

impl PgIndex {
    /// Indexes the worktree's selection (ripgrep's defaults) and commits it as
    /// `source_revision`, replacing whatever was committed. Commits `building` first, so the
    /// index reports that while the build runs; a build that fails leaves `failed` (when the
    /// server can still be told).
    pub async fn build(&self, source_revision: &str) -> Result<WriteStats, PgIndexError> {
        let root = self.root().to_path_buf();
        let files = tokio::task::spawn_blocking(move || Selection::new(root).files())
            .await
            .map_err(|_| PgIndexError::Io(std::io::Error::other("the walk panicked")))?;
        self.set_state("building").await?;
        let written = self
            .write(Upserts::All(&files), &[], Some(source_revision), false)
            .await;
        if written.is_err() {
            // Best effort: the error that matters is the build's.
            let _ = self.set_state("failed").await;
        }
        written
    }

    /// Applies upserts (re-read from the worktree) and removals in one transaction, and sets
    /// `source_revision` when given (else the committed revision stays).
    pub async fn apply(
        &self,
        upserts: &[String],
        removals: &[String],
        source_revision: Option<&str>,
    ) -> Result<WriteStats, PgIndexError> {
        self.write(Upserts::Some(upserts), removals, source_revision, false)
            .await
    }

    /// Removes `paths` in one transaction. When `update_follows` (the facade routed them as the
    /// first half of an update), the same transaction sets the state to `building`, which the
    /// freshness gate refuses until the update commits `ready` with its revision.
    pub async fn remove_paths(
        &self,
        paths: &[String],
        update_follows: bool,
    ) -> Result<WriteStats, PgIndexError> {
        self.write(Upserts::Some(&[]), paths, None, update_follows)
            .await
    }

    /// Creates the repository's row when missing and locks it for the rest of the transaction:
    /// writers of one repository go one at a time; readers never wait.
    async fn lock_repo(&self, conn: &Conn<'_>) -> Result<(), PgIndexError> {
        let (t, r) = (&self.config.tenant_id, &self.config.repo_id);
        conn.client()
            .execute(
                "INSERT INTO repo_search.repos (tenant_id, repo_id, state)
                 VALUES ($1, $2, 'empty') ON CONFLICT DO NOTHING",
                &[t, r],
            )
            .await?;
        conn.client()
            .execute(
                "SELECT 1 FROM repo_search.repos WHERE tenant_id = $1 AND repo_id = $2 FOR UPDATE",
                &[t, r],
            )
            .await?;
        Ok(())
    }

    async fn set_state(&self, state: &str) -> Result<(), PgIndexError> {
        let conn = self.begin_write().await?;
        self.lock_repo(&conn).await?;
        conn.client()
            .execute(
                "UPDATE repo_search.repos SET state = $3 WHERE tenant_id = $1 AND repo_id = $2",
                &[&self.config.tenant_id, &self.config.repo_id, &state],
            )
            .await?;
        conn.client().batch_execute("COMMIT").await?;
        conn.release();
        Ok(())
    }

    async fn write(
        &self,
        upserts: Upserts<'_>,
        removals: &[String],
        source_revision: Option<&str>,
        under_way: bool,
    ) -> Result<WriteStats, PgIndexError> {
        let (t, r) = (&self.config.tenant_id, &self.config.repo_id);
        let conn = self.begin_write().await?;
        let client = conn.client();
        self.lock_repo(&conn).await?;
        let (paths, all) = match upserts {
            Upserts::All(p) => (p, true),
            Upserts::Some(p) => (p, false),
        };
        // A full build of a repository that holds no rows yet (the first, the big one) inserts
        // straight into `files`, in batches: no temporary copy of the tree, no upsert, nothing
        // to delete. (Not `COPY`: PostgreSQL refuses `COPY FROM` into a table under row-level
        // security.) Every other write goes through `incoming`.
        let fresh = all
            && client
                .query_one(
                    "SELECT NOT EXISTS (SELECT 1 FROM repo_search.files
                                         WHERE tenant_id = $1 AND repo_id = $2)",
                    &[t, r],
                )
                .await?
                .get::<_, bool>(0);
        if fresh {
            let stats = self.insert_files(&conn, paths).await?;
            // The trigram index's pending list (fast update: up to 4 MB of entries that every
            // query reads in full) is merged now, when the writer owns the index, rather than
            // by the next writer or autovacuum. A bigger pending list was measured worse: the
            // index grew to the corpus's size and queries read it all.
            client
                .execute(
                    "SELECT gin_clean_pending_list(c.oid) FROM pg_class c
                      WHERE c.oid = 'repo_search.files_content_trgm'::regclass
                        AND pg_has_role(c.relowner, 'USAGE')",
                    &[],
                )
                .await?;
            // Fresh statistics for the search's choice of plan (a role that does not own the
            // table gets a warning, not an error, and autovacuum analyzes later).
            client.batch_execute("ANALYZE repo_search.files").await?;
            return self.finish(conn, stats, under_way, source_revision).await;
        }
        // lz4 here too: a compressed value is moved into `files` as it is, not recompressed.
        client
            .batch_execute(
                "CREATE TEMPORARY TABLE incoming (
                     path text NOT NULL, sort_key bytea NOT NULL,
                     content text COMPRESSION lz4 NOT NULL, raw bytea COMPRESSION lz4,
                     prior real NOT NULL
                 ) ON COMMIT DROP",
            )
            .await?;
        let (stats, gone) = self.copy_files(&conn, paths).await?;
        client
            .execute(
                "INSERT INTO repo_search.files (tenant_id, repo_id, path, sort_key, content, raw, prior)
                 SELECT $1, $2, path, sort_key, content, raw, prior FROM incoming
                 ON CONFLICT (tenant_id, repo_id, path) DO UPDATE
                 SET content = EXCLUDED.content, raw = EXCLUDED.raw, prior = EXCLUDED.prior
                 WHERE files.content IS DISTINCT FROM EXCLUDED.content
                    OR files.raw IS DISTINCT FROM EXCLUDED.raw",
                &[t, r],
            )
            .await?;
        if all {
            client
                .execute(
                    "DELETE FROM repo_search.files f WHERE f.tenant_id = $1 AND f.repo_id = $2
                     AND NOT EXISTS (SELECT 1 FROM incoming i WHERE i.path = f.path)",
                    &[t, r],
                )
                .await?;
        } else {
            let doomed: Vec<&str> = removals
                .iter()
                .map(String::as_str)
                .chain(gone.iter().map(String::as_str))
                .collect();
            if !doomed.is_empty() {
                client
                    .execute(
                        "DELETE FROM repo_search.files
                         WHERE tenant_id = $1 AND repo_id = $2 AND path = ANY($3)",
                        &[t, r, &doomed],
                    )
                    .await?;
            }
        }
        self.finish(conn, stats, under_way, source_revision).await
    }

    /// Sets the state and the revision, and commits.
    async fn finish(
        &self,
        conn: Conn<'_>,
        stats: WriteStats,
        under_way: bool,
        source_revision: Option<&str>,
    ) -> Result<WriteStats, PgIndexError> {
        let (t, r) = (&self.config.tenant_id, &self.config.repo_id);
        let client = conn.client();
        if under_way {
            client
                .execute(
                    "UPDATE repo_search.repos SET state = 'building'
                     WHERE tenant_id = $1 AND repo_id = $2",
                    &[t, r],
                )
                .await?;
        }
        if let Some(rev) = source_revision {
            client
                .execute(
                    "UPDATE repo_search.repos
                     SET state = 'ready', source_revision = $3, updated_at = clock_timestamp()
                     WHERE tenant_id = $1 AND repo_id = $2",
                    &[t, r, &rev],
                )
                .await?;
        }
        client.batch_execute("COMMIT").await?;
        conn.release();
        Ok(stats)
    }

    /// Streams `paths` into the temporary table with one binary `COPY`; returns what it did and
    /// the paths that are gone or unreadable.
    async fn copy_files(
        &self,
        conn: &Conn<'_>,
        paths: &[String],
    ) -> Result<(WriteStats, Vec<String>), PgIndexError> {
        let sink = conn
            .client()
            .copy_in(
                "COPY incoming (path, sort_key, content, raw, prior) FROM STDIN (FORMAT binary)",
            )
            .await?;
        let writer = BinaryCopyInWriter::new(
            sink,
            &[
                Type::TEXT,
                Type::BYTEA,
                Type::TEXT,
                Type::BYTEA,
                Type::FLOAT4,
            ],
        );
        tokio::pin!(writer);
        let mut stats = WriteStats::default();
        let mut gone = Vec::new();
        for path in paths {
            let Some(bytes) = self.read_file(path, &mut stats) else {
                gone.push(path.clone());
                continue;
            };
            let stored = content::stored(bytes);
            let key = content::sort_key(path);
            let prior = content::prior(path);
            let row: [&(dyn ToSql + Sync); 5] = [path, &key, &stored.content, &stored.raw, &prior];
            writer.as_mut().write(&row).await?;
        }
        writer.finish().await?;
        Ok((stats, gone))
    }

    /// Reads one file of the worktree, counting it in `stats`; `None` when it is gone or
    /// unreadable (counted as such), so it is dropped from the index.
    fn read_file(&self, path: &str, stats: &mut WriteStats) -> Option<Vec<u8>> {
        let bytes = match self.worktree.open_file(path) {
            Ok(mut f) => {
                let mut buf = Vec::new();
                match f.read_to_end(&mut buf) {
                    Ok(_) => buf,
                    Err(_) => {
                        stats.unreadable += 1;
                        return None;
                    }
                }
            }
            Err(
                OpenError::Missing
                | OpenError::NotRegular
                | OpenError::Symlink
                | OpenError::BadPath,
            ) => {
                stats.vanished += 1;
                return None;
            }
            Err(OpenError::Io(_)) => {
                stats.unreadable += 1;
                return None;
            }
        };
        stats.files += 1;
        stats.bytes += bytes.len() as u64;
        Some(bytes)
    }

    /// Inserts `paths` into `files`, a batch of about [`INSERT_BATCH_BYTES`] per statement, for
    /// a repository that holds none of them.
    async fn insert_files(
        &self,
        conn: &Conn<'_>,
        paths: &[String],
    ) -> Result<WriteStats, PgIndexError> {
        let (t, r) = (&self.config.tenant_id, &self.config.repo_id);
        let statement = conn
            .client()
            .prepare(
                "INSERT INTO repo_search.files (tenant_id, repo_id, path, sort_key, content, raw, prior)
                 SELECT $1, $2, * FROM unnest($3::text[], $4::bytea[], $5::text[], $6::bytea[], $7::real[])",
            )
            .await?;
        let mut stats = WriteStats::default();
        let mut batch = Batch::default();
        let mut left = paths.iter().peekable();
        while let Some(path) = left.next() {
            if let Some(bytes) = self.read_file(path, &mut stats) {
                batch.bytes += bytes.len();
                let stored = content::stored(bytes);
                batch.paths.push(path.as_str());
                batch.keys.push(content::sort_key(path));
                batch.contents.push(stored.content);
                batch.raws.push(stored.raw);
                batch.priors.push(content::prior(path));
            }
            if batch.bytes >= INSERT_BATCH_BYTES
                || (left.peek().is_none() && !batch.paths.is_empty())
            {
                conn.client()
                    .execute(
                        &statement,
                        &[
                            t,
                            r,
                            &batch.paths,
                            &batch.keys,
                            &batch.contents,
                            &batch.raws,
                            &batch.priors,
                        ],
                    )
                    .await?;
                batch = Batch::default();
            }
        }
        Ok(stats)
    }
}

/// About how many bytes of files one `INSERT` of a fresh build carries.
const INSERT_BATCH_BYTES: usize = 8 << 20;

/// The columns of one batch of a fresh build's rows.
#[derive(Default)]
struct Batch<'a> {
    bytes: usize,
    paths: Vec<&'a str>,
    keys: Vec<Vec<u8>>,
    contents: Vec<String>,
    raws: Vec<Option<Vec<u8>>>,
    priors: Vec<f32>,
}
