//! The schema and its versioned migrations, applied on connect.
//!
//! Every key starts with `tenant_id`, the distribution column, so the same statements run on a
//! single server and on Citus, where `repos` and `files` are distributed by `tenant_id` and
//! co-located (see `docs/scale-out.md`).

use tokio_postgres::Client;

use crate::PgIndexError;

/// Migrations, in order: version and SQL. A released migration is never edited; a change is a new
/// version.
const MIGRATIONS: &[(i32, &str)] = &[
    (
        1,
        r"
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE repo_search.repos (
    tenant_id text NOT NULL,
    repo_id text NOT NULL,
    state text NOT NULL CHECK (state IN ('empty', 'building', 'ready', 'stale', 'failed')),
    source_revision text,
    updated_at timestamptz,
    PRIMARY KEY (tenant_id, repo_id)
);

-- `content` is the text the trigram index sees; `raw` holds the exact bytes when they differ
-- from it (not UTF-8, a NUL, a UTF-16 byte-order mark), and verification reads `raw` then.
-- `sort_key` is the path with `/` as a zero byte: byte order on it is the component-wise path
-- order that every searcher shares.
CREATE TABLE repo_search.files (
    tenant_id text NOT NULL,
    repo_id text NOT NULL,
    path text NOT NULL,
    sort_key bytea NOT NULL,
    content text COMPRESSION lz4 NOT NULL,
    raw bytea COMPRESSION lz4,
    prior real NOT NULL,
    PRIMARY KEY (tenant_id, repo_id, path),
    FOREIGN KEY (tenant_id, repo_id) REFERENCES repo_search.repos ON DELETE CASCADE
);
CREATE INDEX files_order ON repo_search.files (tenant_id, repo_id, sort_key);
CREATE INDEX files_content_trgm ON repo_search.files USING gin (content gin_trgm_ops);

-- Row-level security: a transaction sees the rows of the tenant it set with
-- `SET LOCAL repo_search.tenant_id`, and none when it set none. FORCE applies it to the
-- tables' owner too; only superusers and BYPASSRLS roles are exempt, which is why every
-- statement also filters on tenant_id explicitly.
ALTER TABLE repo_search.repos ENABLE ROW LEVEL SECURITY;
ALTER TABLE repo_search.repos FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON repo_search.repos
    USING (tenant_id = current_setting('repo_search.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('repo_search.tenant_id', true));
ALTER TABLE repo_search.files ENABLE ROW LEVEL SECURITY;
ALTER TABLE repo_search.files FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON repo_search.files
    USING (tenant_id = current_setting('repo_search.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('repo_search.tenant_id', true));
",
    ),
    (
        2,
        r"
-- What a pushing host needs to find its changes without uploading the worktree: the stat stamp
-- it saw when it read the file (NULL when the stamp cannot vouch for the content: rows of
-- version 1, or a file modified within the racy window), and the SHA-256 of the exact bytes.
ALTER TABLE repo_search.files ADD COLUMN stamp bytea, ADD COLUMN hash bytea;
",
    ),
    (
        3,
        r"
-- The trigram index reads `words`, the distinct runs of ASCII letters and digits of `content`,
-- each between spaces: pg_trgm makes trigrams only within words, so these are the file's, from
-- about an eighth of the bytes, and a search rechecks a candidate on its words, not its whole
-- content (docs/decision-postgres.md). The writer computes the column (`content::words`); rows
-- of older versions get it here by the same rule, the letters spelled out so that no locale
-- can change the class. Their order does not matter. Row-level security is not forced on the
-- owner for this one statement, which must see every tenant's rows.
ALTER TABLE repo_search.files ADD COLUMN words text COMPRESSION lz4;
ALTER TABLE repo_search.files NO FORCE ROW LEVEL SECURITY;
UPDATE repo_search.files SET words = ' ' || coalesce((
    SELECT string_agg(w, ' ') FROM (
        SELECT DISTINCT m[1] AS w FROM regexp_matches(content,
            '([ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789]+)', 'g') AS m
    ) AS distinct_words), '') || ' ';
ALTER TABLE repo_search.files FORCE ROW LEVEL SECURITY;
ALTER TABLE repo_search.files ALTER COLUMN words SET NOT NULL;
DROP INDEX repo_search.files_content_trgm;
CREATE INDEX files_words_trgm ON repo_search.files USING gin (words gin_trgm_ops);
",
    ),
];

/// The newest schema version this crate knows.
pub const SCHEMA_VERSION: i32 = MIGRATIONS[MIGRATIONS.len() - 1].0;

/// An arbitrary constant: the advisory lock that serializes migrations across processes.
const MIGRATION_LOCK: i64 = 0x7265_706f_7365_6172;

/// The applied version, 0 when the schema does not exist.
async fn applied(client: &Client) -> Result<i32, PgIndexError> {
    let row = client
        .query_one(
            "SELECT to_regclass('repo_search.migrations') IS NOT NULL",
            &[],
        )
        .await?;
    if !row.get::<_, bool>(0) {
        return Ok(0);
    }
    let row = client
        .query_one(
            "SELECT coalesce(max(version), 0) FROM repo_search.migrations",
            &[],
        )
        .await?;
    Ok(row.get(0))
}

/// Whether a database locale lowers text as the pre-filter assumes. `ILIKE` and `pg_trgm` lower
/// with the database's default collation: under a Turkic ctype `lower('I')` is a dotless `ı`, so
/// `-i` on `int` would miss `INT`; an ICU provider lowers by context (a final sigma), so a word
/// cut out of a longer one lowers differently. Either could drop a real match before
/// verification sees it. The libc and builtin providers with any other ctype lower each letter
/// on its own.
fn locale_is_safe(provider: &str, ctype: &str) -> bool {
    let turkic = ["tr", "az", "crh", "tt"].iter().any(|l| {
        ctype
            .strip_prefix(l)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['_', '.', '@', '-']))
    });
    matches!(provider, "c" | "b") && !turkic
}

/// Checks the encoding and applies the missing migrations. A database already at the newest
/// version is only read, so a role without `CREATE` (a read-only agent) connects fine. A
/// `read_only` index never migrates: it needs a schema a writer created, of any version it can
/// read (searches use no column added after version 1).
pub(crate) async fn migrate(client: &Client, read_only: bool) -> Result<(), PgIndexError> {
    let encoding: String = client
        .query_one("SELECT current_setting('server_encoding')", &[])
        .await?
        .get(0);
    if encoding != "UTF8" {
        return Err(PgIndexError::NotUtf8);
    }
    let locale = client
        .query_one(
            "SELECT datlocprovider::text, datctype FROM pg_database
              WHERE datname = current_database()",
            &[],
        )
        .await?;
    if !locale_is_safe(locale.get(0), locale.get(1)) {
        return Err(PgIndexError::UnsafeLocale);
    }
    let found = applied(client).await?;
    if found > SCHEMA_VERSION {
        return Err(PgIndexError::SchemaTooNew { found });
    }
    if read_only && found == 0 {
        return Err(PgIndexError::NoSchema);
    }
    if found == SCHEMA_VERSION || read_only {
        return Ok(());
    }
    client.batch_execute("BEGIN").await?;
    client
        .execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    client
        .batch_execute(
            "CREATE SCHEMA IF NOT EXISTS repo_search;
             CREATE TABLE IF NOT EXISTS repo_search.migrations (
                 version integer PRIMARY KEY,
                 applied_at timestamptz NOT NULL DEFAULT now()
             );",
        )
        .await?;
    // Another process may have migrated while this one waited for the lock.
    let found = applied(client).await?;
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > found) {
        client.batch_execute(sql).await?;
        client
            .execute(
                "INSERT INTO repo_search.migrations (version) VALUES ($1)",
                &[version],
            )
            .await?;
    }
    client.batch_execute("COMMIT").await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::locale_is_safe;

    fn check(provider: &str, ctype: &str, expected: bool) {
        assert_eq!(
            locale_is_safe(provider, ctype),
            expected,
            "{provider} {ctype}"
        );
    }

    #[test]
    fn locales_that_fold_case_unlike_the_prefilter_are_refused() {
        check("c", "C.UTF-8", true);
        check("c", "en_US.UTF-8", true);
        check("c", "C", true);
        check("b", "C.UTF-8", true);
        check("c", "tr_TR.UTF-8", false);
        check("c", "az_AZ.UTF-8", false);
        check("c", "tr", false);
        check("c", "tt_RU@iqtelif", false);
        check("c", "ta_IN.UTF-8", true);
        check("i", "en_US.UTF-8", false);
        check("i", "und", false);
    }
}
