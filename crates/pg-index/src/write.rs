//! Writes: a full build, and updates and removals, each one transaction.

use std::io::Read as _;
use std::time::{Duration, SystemTime};

use search_profile::{OpenError, Selection};
use sha2::{Digest, Sha256};
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
        let files = tokio::task::spawn_blocking(move || {
            let files = Selection::new(root).files().into_iter();
            files
                .map(|name| content::stored_path(&name).into_owned())
                .collect::<Vec<_>>()
        })
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
    pub(crate) async fn lock_repo(&self, conn: &Conn<'_>) -> Result<(), PgIndexError> {
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
                      WHERE c.oid = 'repo_search.files_words_trgm'::regclass
                        AND pg_has_role(c.relowner, 'USAGE')",
                    &[],
                )
                .await?;
            // Fresh statistics for the search's choice of plan (a role that does not own the
            // table gets a warning, not an error, and autovacuum analyzes later).
            client.batch_execute("ANALYZE repo_search.files").await?;
            return self.finish(conn, stats, under_way, source_revision).await;
        }
        client.batch_execute(crate::sync::CREATE_INCOMING).await?;
        let (stats, gone) = self.copy_files(&conn, paths).await?;
        client
            .execute(crate::sync::UPSERT_INCOMING, &[t, r])
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
        if source_revision.is_none() && !under_way {
            // Files change while the row would not: write it anyway, so that its version
            // (`xmin`) changes with every write of the repository's files, which a pushing
            // host's remembered list is checked against.
            client
                .execute(
                    "UPDATE repo_search.repos SET state = state
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
        let mut copy = Copy::start(conn).await?;
        let mut stats = WriteStats::default();
        let mut gone = Vec::new();
        let now = SystemTime::now();
        for path in paths {
            match self.read_file(path, now) {
                Read::File(file) => {
                    stats.files += 1;
                    stats.bytes += file.bytes.len() as u64;
                    copy.row(path, file).await?;
                }
                Read::Vanished => {
                    stats.vanished += 1;
                    gone.push(path.clone());
                }
                Read::Unreadable => {
                    stats.unreadable += 1;
                    gone.push(path.clone());
                }
            }
        }
        copy.finish().await?;
        Ok((stats, gone))
    }

    /// Reads the file of the worktree a row's `path` names, beneath the root and following no
    /// symlink, with the stamp of the very file read (taken before reading, so a write during
    /// the read changes the stamp the next push sees) and the hash of its bytes.
    pub(crate) fn read_file(&self, path: &str, now: SystemTime) -> Read {
        let mut f = match self.worktree.open_file(&content::walk_name(path)) {
            Ok(f) => f,
            Err(
                OpenError::Missing
                | OpenError::NotRegular
                | OpenError::Symlink
                | OpenError::BadPath,
            ) => return Read::Vanished,
            Err(OpenError::Io(_)) => return Read::Unreadable,
        };
        let stamp = f.metadata().ok().and_then(|m| stamp_of(&m, now));
        let mut bytes = Vec::new();
        if f.read_to_end(&mut bytes).is_err() {
            return Read::Unreadable;
        }
        let hash = Sha256::digest(&bytes).to_vec();
        Read::File(FileRead { bytes, stamp, hash })
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
                "INSERT INTO repo_search.files
                     (tenant_id, repo_id, path, sort_key, content, words, raw, prior, stamp, hash)
                 SELECT $1, $2, * FROM unnest($3::text[], $4::bytea[], $5::text[], $6::text[],
                                              $7::bytea[], $8::real[], $9::bytea[], $10::bytea[])",
            )
            .await?;
        let mut stats = WriteStats::default();
        let mut batch = Batch::default();
        let mut left = paths.iter().peekable();
        let now = SystemTime::now();
        while let Some(path) = left.next() {
            match self.read_file(path, now) {
                Read::File(file) => {
                    stats.files += 1;
                    stats.bytes += file.bytes.len() as u64;
                    batch.bytes += file.bytes.len();
                    let stored = content::stored(file.bytes);
                    batch.paths.push(path.as_str());
                    batch.keys.push(content::sort_key(path));
                    batch.contents.push(stored.content);
                    batch.words.push(stored.words);
                    batch.raws.push(stored.raw);
                    batch.priors.push(content::prior_column(path));
                    batch.stamps.push(file.stamp);
                    batch.hashes.push(file.hash);
                }
                Read::Vanished => stats.vanished += 1,
                Read::Unreadable => stats.unreadable += 1,
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
                            &batch.words,
                            &batch.raws,
                            &batch.priors,
                            &batch.stamps,
                            &batch.hashes,
                        ],
                    )
                    .await?;
                batch = Batch::default();
            }
        }
        Ok(stats)
    }
}

/// What reading one file of the worktree gave.
pub(crate) enum Read {
    /// Its bytes, stamp and hash.
    File(FileRead),
    /// Gone, no longer a regular file, or reached through a symlink: not in the selection.
    Vanished,
    /// It could not be read: the literal search skips it, so the index does not hold it.
    Unreadable,
}

/// A file as read for the index.
pub(crate) struct FileRead {
    pub(crate) bytes: Vec<u8>,
    /// `None` when the stamp cannot vouch for these bytes (see [`stamp_of`]).
    pub(crate) stamp: Option<Vec<u8>>,
    /// SHA-256 of `bytes`.
    pub(crate) hash: Vec<u8>,
}

/// A file modified less than this before it was read may change again within the same mtime
/// tick ("racy clean" in git's words), leaving the stamp as it was: its stamp is not stored, so
/// the next push reads it again.
const RACY_WINDOW: Duration = Duration::from_secs(2);

/// A file's stat stamp (size, mtime, ctime, inode; 32 bytes), or `None` when it was modified
/// within [`RACY_WINDOW`] of `now` and so cannot vouch for the content.
pub(crate) fn stamp_of(m: &std::fs::Metadata, now: SystemTime) -> Option<Vec<u8>> {
    let modified = m.modified().ok()?;
    if now
        .duration_since(modified)
        .map_or(true, |age| age < RACY_WINDOW)
    {
        return None;
    }
    let ns = |t: SystemTime| {
        t.duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    };
    #[cfg(unix)]
    let (ctime, ino) = {
        use std::os::unix::fs::MetadataExt;
        let ctime = (m.ctime() as u64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(m.ctime_nsec() as u64);
        (ctime, m.ino())
    };
    #[cfg(not(unix))]
    let (ctime, ino) = (0u64, 0u64);
    let mut stamp = Vec::with_capacity(32);
    for v in [m.len(), ns(modified), ctime, ino] {
        stamp.extend_from_slice(&v.to_be_bytes());
    }
    Some(stamp)
}

/// One binary `COPY` into the temporary table `incoming`.
pub(crate) struct Copy {
    writer: std::pin::Pin<Box<BinaryCopyInWriter>>,
}

impl Copy {
    /// Starts the `COPY` on `conn`, whose transaction created `incoming`.
    pub(crate) async fn start(conn: &Conn<'_>) -> Result<Copy, PgIndexError> {
        let sink = conn
            .client()
            .copy_in(
                "COPY incoming (path, sort_key, content, words, raw, prior, stamp, hash)
                 FROM STDIN (FORMAT binary)",
            )
            .await?;
        let writer = BinaryCopyInWriter::new(
            sink,
            &[
                Type::TEXT,
                Type::BYTEA,
                Type::TEXT,
                Type::TEXT,
                Type::BYTEA,
                Type::FLOAT4,
                Type::BYTEA,
                Type::BYTEA,
            ],
        );
        Ok(Copy {
            writer: Box::pin(writer),
        })
    }

    /// Sends one file's row.
    pub(crate) async fn row(&mut self, path: &str, file: FileRead) -> Result<(), PgIndexError> {
        let stored = content::stored(file.bytes);
        let key = content::sort_key(path);
        let prior = content::prior_column(path);
        let row: [&(dyn ToSql + Sync); 8] = [
            &path,
            &key,
            &stored.content,
            &stored.words,
            &stored.raw,
            &prior,
            &file.stamp,
            &file.hash,
        ];
        self.writer.as_mut().write(&row).await?;
        Ok(())
    }

    /// Ends the `COPY`.
    pub(crate) async fn finish(mut self) -> Result<(), PgIndexError> {
        self.writer.as_mut().finish().await?;
        Ok(())
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
    words: Vec<String>,
    raws: Vec<Option<Vec<u8>>>,
    priors: Vec<f32>,
    stamps: Vec<Option<Vec<u8>>>,
    hashes: Vec<Vec<u8>>,
}
