//! Pushing a worktree: make the index hold exactly the worktree's selection, uploading only what
//! changed, in one transaction.
//!
//! The index keeps, per file, the pusher's stat stamp and the SHA-256 of the bytes. A push walks
//! the selection (the walk the literal search makes) and stats each file outside any
//! transaction; then, in one transaction, it locks the repository's row, reads the stored
//! `(path, stamp, hash)` list in one statement, and compares. A file whose stamp equals the
//! stored one is not read. Any other file is read and hashed: a new hash is uploaded (`COPY`),
//! an equal one costs a stamp update only. Stored files outside the selection are deleted. The
//! revision is the HEAD the host names plus a digest of every `(path, hash)` of the selection,
//! so it names the content exactly, and the same content pushed from anywhere gets the same
//! revision. The commit sets it, `ready` and `updated_at` together: readers see the old
//! selection or the new one, never a mix. Reading the stored list after the lock makes the
//! comparison exact even when several hosts push the same repository. A long-lived host keeps the
//! list it committed in memory and reuses it while the locked row is still the version its push
//! wrote (same `xmin`): every write of a repository's files also writes its row, so anyone
//! else's write makes the list be read again.

use std::collections::HashMap;
use std::time::SystemTime;

use search_profile::Selection;
use sha2::{Digest, Sha256};
use tokio_postgres::types::ToSql;

use crate::write::{Copy, Read, stamp_of};
use crate::{PgIndex, PgIndexError};

/// The temporary table a write fills before it upserts; dropped at commit.
// lz4 here too: a compressed value is moved into `files` as it is, not recompressed.
pub(crate) const CREATE_INCOMING: &str = "CREATE TEMPORARY TABLE incoming (
     path text NOT NULL, sort_key bytea NOT NULL, content text COMPRESSION lz4 NOT NULL,
     words text COMPRESSION lz4 NOT NULL, raw bytea COMPRESSION lz4, prior real NOT NULL, stamp bytea, hash bytea
 ) ON COMMIT DROP";

/// Moves the rows of `incoming` into the repository `$1`/`$2`: new paths inserted, changed ones
/// replaced, unchanged ones left alone (no dead row, no trigram work).
pub(crate) const UPSERT_INCOMING: &str = "INSERT INTO repo_search.files
     (tenant_id, repo_id, path, sort_key, content, words, raw, prior, stamp, hash)
 SELECT $1, $2, path, sort_key, content, words, raw, prior, stamp, hash FROM incoming
 ON CONFLICT (tenant_id, repo_id, path) DO UPDATE
 SET content = EXCLUDED.content, words = EXCLUDED.words, raw = EXCLUDED.raw,
     prior = EXCLUDED.prior,
     stamp = EXCLUDED.stamp, hash = EXCLUDED.hash
 WHERE files.content IS DISTINCT FROM EXCLUDED.content
    OR files.raw IS DISTINCT FROM EXCLUDED.raw
    OR files.stamp IS DISTINCT FROM EXCLUDED.stamp
    OR files.hash IS DISTINCT FROM EXCLUDED.hash";

/// What a push did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SyncReport {
    /// The revision committed: `<head>+h<digest of the selection's paths and hashes>`.
    pub revision: String,
    /// Files in the selection, as committed.
    pub files: u64,
    /// Files uploaded: new, or with new content.
    pub uploaded: u64,
    /// Bytes uploaded.
    pub bytes: u64,
    /// Files read again because their stamp changed, whose content had not: only their stamp
    /// was written.
    pub restamped: u64,
    /// Files deleted from the index: gone from the selection, or unreadable.
    pub removed: u64,
    /// Whether the selection was already what the index held under this revision: the commit
    /// then only refreshed `updated_at`.
    pub unchanged: bool,
}

/// A stored file: its stamp and hash (either `None` for rows that predate them).
type Stored = (Option<Vec<u8>>, Option<Vec<u8>>);

/// The stored list as this index's last push committed it.
pub(crate) struct Pushed {
    /// The transaction that last wrote the repository's row: the push's own.
    row_version: String,
    files: HashMap<String, Stored>,
}

impl PgIndex {
    /// Makes the index hold exactly the worktree's selection, attested as `head` plus the
    /// content digest, in one transaction. With `trust_stamps` off every file is read and hashed
    /// (a stamp can be forged by a tool that restores mtimes); only changed content is uploaded
    /// either way.
    pub async fn sync(&self, head: &str, trust_stamps: bool) -> Result<SyncReport, PgIndexError> {
        if self.config.read_only {
            return Err(PgIndexError::ReadOnly);
        }
        let root = self.root().to_path_buf();
        // The walk and its stats run outside the transaction: the repository's row is locked
        // only while the comparison and the writes run.
        let local: Vec<(String, Option<Vec<u8>>)> = tokio::task::spawn_blocking(move || {
            let now = SystemTime::now();
            Selection::new(root)
                .collect(|_, entry| Some(entry.metadata().ok().and_then(|m| stamp_of(&m, now))))
                .into_iter()
                .map(|(name, stamp)| (crate::content::stored_path(&name).into_owned(), stamp))
                .collect()
        })
        .await
        .map_err(|_| PgIndexError::Io(std::io::Error::other("the walk panicked")))?;

        let (t, r) = (&self.config.tenant_id, &self.config.repo_id);
        let conn = self.begin_write().await?;
        let client = conn.client();
        self.lock_repo(&conn).await?;
        let repo = client
            .query_one(
                "SELECT state, source_revision, xmin::text FROM repo_search.repos
                  WHERE tenant_id = $1 AND repo_id = $2",
                &[t, r],
            )
            .await?;
        let (state, committed): (String, Option<String>) = (repo.get(0), repo.get(1));
        let row_version: String = repo.get(2);
        // Taken out: it is put back only by a push that commits.
        let remembered = self.pushed.lock().unwrap_or_else(|p| p.into_inner()).take();
        let mut stored: HashMap<String, Stored> = match remembered {
            Some(p) if p.row_version == row_version => p.files,
            _ => client
                .query(
                    "SELECT path, stamp, hash FROM repo_search.files
                      WHERE tenant_id = $1 AND repo_id = $2",
                    &[t, r],
                )
                .await?
                .into_iter()
                .map(|row| (row.get(0), (row.get(1), row.get(2))))
                .collect(),
        };
        // The list as this push will commit it.
        let mut next: HashMap<String, Stored> = HashMap::with_capacity(stored.len());

        let mut report = SyncReport::default();
        let mut selection: Vec<(String, Vec<u8>)> = Vec::with_capacity(local.len());
        let mut restamps: Vec<(String, Option<Vec<u8>>)> = Vec::new();
        let mut copy: Option<Copy> = None;
        let now = SystemTime::now();
        for (path, stamp) in local {
            let known = stored.remove(&path);
            if let Some((Some(was), Some(hash))) = &known
                && trust_stamps
                && stamp.as_ref() == Some(was)
            {
                selection.push((path.clone(), hash.clone()));
                next.insert(path, (stamp, Some(hash.clone())));
                continue;
            }
            let file = match self.read_file(&path, now) {
                Read::File(f) => f,
                // Gone since the walk, or unreadable: not held, as the literal search skips it.
                Read::Vanished | Read::Unreadable => {
                    if known.is_some() {
                        stored.insert(path, (None, None));
                    }
                    continue;
                }
            };
            selection.push((path.clone(), file.hash.clone()));
            next.insert(path.clone(), (file.stamp.clone(), Some(file.hash.clone())));
            match known {
                Some((was, Some(hash))) if hash == file.hash => {
                    if was != file.stamp {
                        report.restamped += 1;
                        restamps.push((path, file.stamp));
                    }
                }
                _ => {
                    if copy.is_none() {
                        client.batch_execute(CREATE_INCOMING).await?;
                        copy = Some(Copy::start(&conn).await?);
                    }
                    report.uploaded += 1;
                    report.bytes += file.bytes.len() as u64;
                    if let Some(c) = copy.as_mut() {
                        c.row(&path, file).await?;
                    }
                }
            }
        }
        // What is left of the stored list is no longer in the selection.
        let doomed: Vec<&str> = stored.keys().map(String::as_str).collect();
        report.removed = doomed.len() as u64;
        report.files = selection.len() as u64;
        report.revision = revision(head, &mut selection);
        report.unchanged = copy.is_none()
            && restamps.is_empty()
            && doomed.is_empty()
            && state == "ready"
            && committed.as_deref() == Some(report.revision.as_str());

        if let Some(c) = copy {
            c.finish().await?;
            client.execute(UPSERT_INCOMING, &[t, r]).await?;
        }
        if !restamps.is_empty() {
            let (paths, stamps): (Vec<String>, Vec<Option<Vec<u8>>>) = restamps.into_iter().unzip();
            client
                .execute(
                    "UPDATE repo_search.files f SET stamp = u.stamp
                       FROM unnest($3::text[], $4::bytea[]) AS u(path, stamp)
                      WHERE f.tenant_id = $1 AND f.repo_id = $2 AND f.path = u.path",
                    &[t, r, &paths, &stamps],
                )
                .await?;
        }
        if !doomed.is_empty() {
            let params: [&(dyn ToSql + Sync); 3] = [t, r, &doomed];
            client
                .execute(
                    "DELETE FROM repo_search.files
                      WHERE tenant_id = $1 AND repo_id = $2 AND path = ANY($3)",
                    &params,
                )
                .await?;
        }
        // Even an unchanged selection refreshes `updated_at`: it says when the index was last
        // checked against a worktree, which is what the freshness gate's age measures.
        let row_version: String = client
            .query_one(
                "UPDATE repo_search.repos
                    SET state = 'ready', source_revision = $3, updated_at = clock_timestamp()
                  WHERE tenant_id = $1 AND repo_id = $2
                 RETURNING xmin::text",
                &[t, r, &report.revision],
            )
            .await?
            .get(0);
        client.batch_execute("COMMIT").await?;
        conn.release();
        *self.pushed.lock().unwrap_or_else(|p| p.into_inner()) = Some(Pushed {
            row_version,
            files: next,
        });
        Ok(report)
    }
}

/// `<head>+h<16 hex digits>`: the digest of every `(path, hash)` of the selection, in path
/// order, so that the revision names the content exactly.
fn revision(head: &str, selection: &mut [(String, Vec<u8>)]) -> String {
    selection.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let mut digest = Sha256::new();
    for (path, hash) in selection.iter() {
        digest.update(path.as_bytes());
        digest.update([0u8]);
        digest.update(hash);
    }
    let sum = digest.finalize();
    let hex: String = sum[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{head}+h{hex}")
}

/// The commit a revision attests: the part before the first `+` (all of it when there is none).
pub fn revision_commit(revision: &str) -> &str {
    revision.split_once('+').map_or(revision, |(c, _)| c)
}

#[cfg(test)]
mod tests {
    use super::{revision, revision_commit};

    #[test]
    fn revisions_name_the_content_whatever_the_walk_order() {
        let mut a = vec![("b".to_owned(), vec![2]), ("a".to_owned(), vec![1])];
        let mut b = vec![("a".to_owned(), vec![1]), ("b".to_owned(), vec![2])];
        let mut c = vec![("a".to_owned(), vec![1]), ("b".to_owned(), vec![3])];
        let (ra, rb, rc) = (
            revision("abc", &mut a),
            revision("abc", &mut b),
            revision("abc", &mut c),
        );
        assert_eq!(ra, rb);
        assert_ne!(ra, rc);
        assert!(
            ra.starts_with("abc+h") && ra.len() == "abc+h".len() + 16,
            "{ra}"
        );
        assert_eq!(revision_commit(&ra), "abc");
        assert_eq!(revision_commit("abc"), "abc");
    }
}
