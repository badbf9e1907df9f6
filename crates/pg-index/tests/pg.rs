//! The PostgreSQL backend against a real server.
//!
//! A `harness = false` test: run without `PGHOST` it re-runs itself under `pg_virtualenv`, which
//! creates a throwaway cluster, exports the `PG*` variables and drops the cluster afterwards.
//! With `PGHOST` set it runs every case against that server. It never skips: without
//! PostgreSQL (`cargo xtask tools` installs it) it fails. Each case uses its own tenant, so cases
//! share one database without seeing each other. A name given on the command line runs only the
//! cases whose name contains it.
//!
//! Besides its own cases it runs the backend conformance suite (`index_testkit::conformance`),
//! each check as a case named `conformance::<check>`, every index under a tenant of its own.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use index_contract::{
    BoxFuture, ErrorCode, IndexError, IndexState, RepositoryIndexBackend, SearchMode,
    SearchRequest, UpdateRequest,
};
use index_testkit::conformance::{self, Subject};
use index_testkit::tree::{generated_tree, write};
use pg_index::{PgIndex, PgIndexConfig, PgIndexError};
use search_profile::PathKey;
use tokio_postgres::NoTls;

type Case = fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>;

const CASES: &[(&str, Case)] = &[
    (
        "schema_is_migrated_once_with_lz4_and_a_trigram_index",
        || Box::pin(schema_is_migrated_once_with_lz4_and_a_trigram_index()),
    ),
    (
        "a_schema_2_index_is_migrated_by_its_owner_and_finds_what_it_found",
        || Box::pin(a_schema_2_index_is_migrated_by_its_owner_and_finds_what_it_found()),
    ),
    ("hits_come_in_path_order_on_generated_trees", || {
        Box::pin(hits_come_in_path_order_on_generated_trees())
    }),
    ("both_backends_give_a_hit_the_same_score", || {
        Box::pin(both_backends_give_a_hit_the_same_score())
    }),
    (
        "updates_renames_and_deletes_commit_with_their_revision",
        || Box::pin(updates_renames_and_deletes_commit_with_their_revision()),
    ),
    ("readers_never_see_a_mix_of_two_versions", || {
        Box::pin(readers_never_see_a_mix_of_two_versions())
    }),
    ("one_tenant_never_sees_another_tenants_rows", || {
        Box::pin(one_tenant_never_sees_another_tenants_rows())
    }),
    ("row_level_security_alone_hides_other_tenants", || {
        Box::pin(row_level_security_alone_hides_other_tenants())
    }),
    (
        "a_server_that_is_down_or_silent_is_an_error_not_a_hang",
        || Box::pin(a_server_that_is_down_or_silent_is_an_error_not_a_hang()),
    ),
    ("a_connection_lost_between_queries_is_replaced", || {
        Box::pin(a_connection_lost_between_queries_is_replaced())
    }),
    ("a_push_uploads_only_changed_content", || {
        Box::pin(a_push_uploads_only_changed_content())
    }),
    ("a_read_only_index_never_writes", || {
        Box::pin(a_read_only_index_never_writes())
    }),
    (
        "two_pushers_of_one_repository_each_leave_exactly_their_selection",
        || Box::pin(two_pushers_of_one_repository_each_leave_exactly_their_selection()),
    ),
    ("regexes_are_answered_through_their_trigram_plan", || {
        Box::pin(regexes_are_answered_through_their_trigram_plan())
    }),
    (
        "a_dense_literal_is_read_in_path_order_up_to_the_cap",
        || Box::pin(a_dense_literal_is_read_in_path_order_up_to_the_cap()),
    ),
    (
        "words_that_pass_the_prefilter_but_not_verification_cost_no_hit",
        || Box::pin(words_that_pass_the_prefilter_but_not_verification_cost_no_hit()),
    ),
    (
        "search_now_refuses_what_the_backend_does_not_declare",
        || Box::pin(search_now_refuses_what_the_backend_does_not_declare()),
    ),
    (
        "a_matching_file_whose_name_is_not_utf8_is_stored_counted_and_never_served",
        || Box::pin(a_matching_file_whose_name_is_not_utf8_is_stored_counted_and_never_served()),
    ),
];

fn main() {
    let filters = index_testkit::pg::in_throwaway_cluster();
    let runtime = conformance::runtime();
    let subject: Arc<dyn Subject> = Arc::new(Pg::default());
    let cases = CASES.iter().map(|&(name, case)| (name.to_owned(), case()));
    let checks = conformance::CHECKS.iter().map(|check| {
        let run: std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> =
            (check.run)(subject.clone());
        (format!("conformance::{}", check.name), run)
    });
    let (mut passed, mut failed) = (0, 0);
    for (name, case) in cases.chain(checks) {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let started = Instant::now();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            runtime.block_on(case);
        }));
        let took = started.elapsed().as_secs_f64();
        if outcome.is_ok() {
            passed += 1;
            println!("test {name} ... ok ({took:.2} s)");
        } else {
            failed += 1;
            println!("test {name} ... FAILED ({took:.2} s)");
        }
    }
    println!("pg: {passed} passed, {failed} failed");
    if failed > 0 {
        std::process::exit(1);
    }
}

fn server() -> tokio_postgres::Config {
    PgIndex::config_from_env()
}

/// The conformance suite's subject: each index is a repository of a tenant of its own, built
/// from its worktree.
#[derive(Default)]
struct Pg {
    opened: AtomicUsize,
}

impl Subject for Pg {
    fn open<'a>(
        &'a self,
        root: &'a Path,
        revision: &'a str,
    ) -> BoxFuture<'a, Arc<dyn RepositoryIndexBackend>> {
        Box::pin(async move {
            let n = self.opened.fetch_add(1, Ordering::SeqCst);
            let index = open(root, &format!("conformance-{n}"), "r").await;
            index.build(revision).await.expect("build");
            Arc::new(index) as Arc<dyn RepositoryIndexBackend>
        })
    }
}

/// The server's credentials, at another address: `host` and `port` add to a configuration's
/// list rather than replace it, so this one is built afresh.
fn server_at(port: u16) -> tokio_postgres::Config {
    let env = server();
    let mut c = tokio_postgres::Config::new();
    c.host("127.0.0.1").port(port);
    if let Some(user) = env.get_user() {
        c.user(user);
    }
    if let Some(password) = env.get_password() {
        c.password(password);
    }
    if let Some(db) = env.get_dbname() {
        c.dbname(db);
    }
    c
}

async fn admin() -> tokio_postgres::Client {
    let (client, connection) = server().connect(NoTls).await.expect("connect as admin");
    tokio::spawn(connection);
    client
}

async fn open(root: &Path, tenant: &str, repo: &str) -> PgIndex {
    PgIndex::connect(server(), root, PgIndexConfig::new(tenant, repo))
        .await
        .expect("connect")
}

fn request(query: &str, case_insensitive: bool, scope: Option<&str>) -> SearchRequest {
    let mut r = SearchRequest::new(query, SearchMode::IndexedLiteral);
    r.case_insensitive = case_insensitive;
    r.path = scope.map(str::to_owned);
    r.max_results = Some(100_000);
    r.deadline = Some(Duration::from_secs(60));
    r
}

async fn hits(
    index: &PgIndex,
    query: &str,
    ci: bool,
    scope: Option<&str>,
) -> Vec<(String, u64, u64)> {
    let found = index
        .search_now(&request(query, ci, scope))
        .await
        .expect("search");
    assert!(found.complete, "{query:?}: incomplete");
    found
        .hits
        .into_iter()
        .map(|h| (h.path, h.line, h.column))
        .collect()
}

async fn schema_is_migrated_once_with_lz4_and_a_trigram_index() {
    let root = tempfile::tempdir().unwrap();
    // Two connects: the second finds the schema current and only reads.
    let _a = open(root.path(), "schema", "r").await;
    let _b = open(root.path(), "schema", "r").await;
    let db = admin().await;
    let versions: i64 = db
        .query_one("SELECT count(*) FROM repo_search.migrations", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(versions, i64::from(pg_index::SCHEMA_VERSION));
    let compression: Vec<(String, String)> = db
        .query(
            "SELECT attname::text, attcompression::text FROM pg_attribute
             WHERE attrelid = 'repo_search.files'::regclass
               AND attname IN ('content', 'raw', 'words')
             ORDER BY attname",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        compression,
        [
            ("content".into(), "l".into()),
            ("raw".into(), "l".into()),
            ("words".into(), "l".into())
        ]
    );
    let gin: i64 = db
        .query_one(
            "SELECT count(*) FROM pg_indexes WHERE schemaname = 'repo_search'
             AND tablename = 'files' AND indexdef LIKE '%gin (words gin_trgm_ops)%'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(gin, 1);
}

/// Migration 3 computes `words` in SQL for the rows older versions wrote. Run by the
/// database's owner, an ordinary role that row-level security binds, it must still reach every
/// tenant's rows; and afterwards every query finds what it found before.
async fn a_schema_2_index_is_migrated_by_its_owner_and_finds_what_it_found() {
    let db = admin().await;
    // One statement each: several in one simple query run as one transaction, and a database
    // is created or dropped outside any.
    for sql in [
        "DROP DATABASE IF EXISTS rs_migrate",
        "DROP ROLE IF EXISTS rs_owner",
        "CREATE ROLE rs_owner LOGIN PASSWORD 'owner-pw'",
        "CREATE DATABASE rs_migrate OWNER rs_owner",
    ] {
        db.batch_execute(sql).await.unwrap();
    }
    let mut owner = server();
    owner
        .dbname("rs_migrate")
        .user("rs_owner")
        .password("owner-pw");
    let queries: &[(&str, bool)] = &[
        ("fn main", false),
        ("main", true),
        ("café", true),
        ("todo", true),
        ("x", false),
        ("->", false),
    ];
    let trees = [generated_tree(3).0, generated_tree(4).0];
    let tenants = ["migrate-a", "migrate-b"];
    let mut before = Vec::new();
    for (tree, tenant) in trees.iter().zip(tenants) {
        let config = PgIndexConfig::new(tenant, "r");
        let index = PgIndex::connect(owner.clone(), tree.path(), config)
            .await
            .expect("connect as the owner");
        index.build("rev-1").await.expect("build");
        for &(query, ci) in queries {
            before.push(hits(&index, query, ci, None).await);
        }
    }
    assert!(before.iter().any(|h| h.len() > 3), "{before:?}");
    // Back to schema 2, as the owner: no `words`, the trigram index on `content`.
    let (client, connection) = owner.connect(NoTls).await.unwrap();
    tokio::spawn(connection);
    client
        .batch_execute(
            "DROP INDEX repo_search.files_words_trgm;
             ALTER TABLE repo_search.files DROP COLUMN words;
             CREATE INDEX files_content_trgm ON repo_search.files
                 USING gin (content gin_trgm_ops);
             DELETE FROM repo_search.migrations WHERE version = 3;",
        )
        .await
        .unwrap();
    let mut after = Vec::new();
    for (tree, tenant) in trees.iter().zip(tenants) {
        let config = PgIndexConfig::new(tenant, "r");
        let index = PgIndex::connect(owner.clone(), tree.path(), config)
            .await
            .expect("connect, which migrates to schema 3");
        for &(query, ci) in queries {
            after.push(hits(&index, query, ci, None).await);
        }
    }
    assert_eq!(after, before);
    // The migration lifted row-level security for the owner only for its own statement.
    let seen_without_a_tenant: i64 = client
        .query_one("SELECT count(*) FROM repo_search.files", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(seen_without_a_tenant, 0);
    let version: i32 = client
        .query_one("SELECT max(version) FROM repo_search.migrations", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(version, pg_index::SCHEMA_VERSION);
}

/// Equality with rg's first match per file on these trees is the conformance suite's
/// (`conformance::hits_equal_rg_first_match_per_file`, through the facade); what is this
/// backend's own is the order, which paging relies on: path order, component by component.
async fn hits_come_in_path_order_on_generated_trees() {
    let queries: &[(&str, bool)] = &[
        ("fn main", false),
        ("main", true),
        ("café", true),
        ("x", false),
        ("todo", true),
        ("->", false),
    ];
    for seed in [1u64, 2] {
        let (tree, _outside) = generated_tree(seed);
        let index = open(tree.path(), &format!("order-{seed}"), "generated").await;
        let built = index.build("rev-1").await.expect("build");
        assert!(built.files > 30, "{built:?}");
        for &(query, ci) in queries {
            for scope in [None, Some("src"), Some("sub")] {
                let got = hits(&index, query, ci, scope).await;
                assert!(
                    got.len() > 1 || scope.is_some(),
                    "{query:?}: too few hits to order"
                );
                let mut ordered = got.clone();
                ordered.sort_by(|a, b| PathKey::compare(&a.0, &b.0));
                assert_eq!(
                    got, ordered,
                    "seed {seed}, {query:?}: hits not in path order"
                );
            }
        }
    }
}

/// The rank is one rule (`search_profile::rank`): PostgreSQL scores a hit exactly as the
/// embedded index does, for a path under each rule of the prior and a line of each match shape,
/// whatever prior a row's column holds. A case is a path, its one line, the step of its prior
/// and the quality of the match's shape; the score is half of each.
async fn both_backends_give_a_hit_the_same_score() {
    const CASES: &[(&str, &str, u8, f64)] = &[
        ("lib.rs", "fn needle() {", 255, 1.0),
        ("src/main.rs", "    needle();", 248, 0.7),
        ("selftests/x.c", "static int needle_count;", 149, 0.6),
        ("src/x.test.ts", "x = reneedle", 149, 0.4),
        ("spec/x.rb", "def needle", 149, 1.0),
        ("src/x_test.go", "func needle() {}", 149, 1.0),
        ("documentation/x.c", "#define needle 1", 198, 1.0),
        ("docs/guide.txt", "a needle here", 198, 0.7),
        ("external/x.c", "needle", 99, 0.7),
        ("x.min.js", "var needle=1", 102, 1.0),
        ("third_party/lib/generated.rs", "pub fn needle()", 96, 1.0),
        ("vendor/tests/docs/x.md", "needles", 45, 0.4),
    ];
    let tree = tempfile::tempdir().unwrap();
    for (path, line, _, _) in CASES {
        write(tree.path(), path, format!("{line}\n").as_bytes());
    }
    let store = tempfile::tempdir().unwrap();
    let embedded = embedded_index::EmbeddedIndex::open(tree.path(), store.path()).unwrap();
    embedded.build("rev-1").unwrap();
    let pg = open(tree.path(), "rank", "r").await;
    pg.build("rev-1").await.expect("build");
    // Rows whose column holds another prior, as rows written under another rule would.
    admin()
        .await
        .execute(
            "UPDATE repo_search.files SET prior = 0.01 WHERE tenant_id = 'rank'",
            &[],
        )
        .await
        .unwrap();
    let request = request("needle", false, None);
    let scored = |hits: Vec<index_contract::BackendHit>| -> BTreeSet<(String, u64, u64, u64)> {
        hits.into_iter()
            .map(|h| (h.path, h.line, h.column, h.score.to_bits()))
            .collect()
    };
    let from_embedded = scored(embedded.search_now(&request).unwrap().hits);
    let from_pg = scored(pg.search_now(&request).await.expect("search").hits);
    assert_eq!(from_pg, from_embedded);
    assert_eq!(from_pg.len(), CASES.len());
    for (path, _, step, quality) in CASES {
        let (_, _, _, bits) = from_pg.iter().find(|h| h.0 == *path).unwrap();
        let expected = 0.5 * f64::from(*step) / 255.0 + 0.5 * quality;
        let got = f64::from_bits(*bits);
        assert!(
            (got - expected).abs() < 1e-12,
            "{path}: {got} for {expected}"
        );
    }
}

async fn updates_renames_and_deletes_commit_with_their_revision() {
    let tree = tempfile::tempdir().unwrap();
    let root = tree.path();
    write(root, "a.txt", b"needle one\n");
    write(root, "b.txt", b"needle two\n");
    write(root, "d/e.txt", b"other\nneedle three\n");
    let index = open(root, "update", "r").await;
    assert_eq!(
        index.current_status().await.unwrap().state,
        IndexState::Empty
    );
    index.build("rev-1").await.unwrap();
    let status = index.current_status().await.unwrap();
    assert_eq!(
        (status.state, status.source_revision.as_deref()),
        (IndexState::Ready, Some("rev-1"))
    );
    let all = hits(&index, "needle", false, None).await;
    assert_eq!(
        all,
        [
            ("a.txt".into(), 1, 1),
            ("b.txt".into(), 1, 1),
            ("d/e.txt".into(), 2, 1)
        ]
    );
    // Edit a, rename b to c, delete d/e: the facade routes removals first, then the update.
    write(root, "a.txt", b"first\nsecond needle\n");
    std::fs::rename(root.join("b.txt"), root.join("c.txt")).unwrap();
    std::fs::remove_file(root.join("d/e.txt")).unwrap();
    index
        .remove(index_contract::RemoveRequest {
            paths: vec!["b.txt".into(), "d/e.txt".into()],
            update_follows: true,
        })
        .await
        .unwrap();
    index
        .update(UpdateRequest {
            repository_id: "r".into(),
            worktree_id: "w".into(),
            source_revision: "rev-2".into(),
            changes: vec![
                index_contract::Change::Edit {
                    path: "a.txt".into(),
                },
                index_contract::Change::Add {
                    path: "c.txt".into(),
                },
                // Gone since it was reported: dropped, not an error.
                index_contract::Change::Add {
                    path: "never.txt".into(),
                },
            ],
        })
        .await
        .unwrap();
    let found = index
        .search_now(&request("needle", false, None))
        .await
        .unwrap();
    assert_eq!(found.status.source_revision.as_deref(), Some("rev-2"));
    let got: Vec<_> = found
        .hits
        .iter()
        .map(|h| (h.path.as_str(), h.line, h.column))
        .collect();
    assert_eq!(got, [("a.txt", 2, 8), ("c.txt", 1, 1)]);
    assert!(hits(&index, "three", false, None).await.is_empty());
    // A rebuild drops what the worktree no longer holds.
    std::fs::remove_file(root.join("c.txt")).unwrap();
    index.build("rev-3").await.unwrap();
    assert_eq!(
        hits(&index, "needle", false, None).await,
        [("a.txt".into(), 2, 8)]
    );
}

async fn readers_never_see_a_mix_of_two_versions() {
    let tree = tempfile::tempdir().unwrap();
    let root = tree.path().to_path_buf();
    let paths: Vec<String> = (0..10).map(|i| format!("f{i}.txt")).collect();
    for p in &paths {
        write(&root, p, b"marker gen0\n");
    }
    let index = Arc::new(open(&root, "mix", "r").await);
    index.build("0").await.unwrap();
    let versions = 25;
    let writer = {
        let index = index.clone();
        let paths = paths.clone();
        tokio::spawn(async move {
            for v in 1..=versions {
                for p in &paths {
                    write(&root, p, format!("marker gen{v}\n").as_bytes());
                }
                index
                    .apply(&paths, &[], Some(&v.to_string()))
                    .await
                    .unwrap();
            }
        })
    };
    let mut readers = Vec::new();
    for _ in 0..3 {
        let index = index.clone();
        readers.push(tokio::spawn(async move {
            let mut seen = BTreeSet::new();
            loop {
                let found = index
                    .search_now(&request("marker", false, None))
                    .await
                    .unwrap();
                let rev = found.status.source_revision.clone().unwrap();
                assert_eq!(found.hits.len(), 10, "revision {rev}");
                for h in &found.hits {
                    assert_eq!(
                        h.snippet,
                        format!("marker gen{rev}"),
                        "a mix at revision {rev}"
                    );
                }
                seen.insert(rev.parse::<u32>().unwrap());
                if seen.contains(&versions) {
                    return seen.len();
                }
            }
        }));
    }
    writer.await.unwrap();
    for r in readers {
        assert!(r.await.unwrap() >= 2, "readers saw only one version");
    }
}

/// Tenant `a`'s secret, in its paths and contents.
fn tenant_trees() -> (tempfile::TempDir, tempfile::TempDir) {
    let a = tempfile::tempdir().unwrap();
    write(a.path(), "src/lib.rs", b"fn secret_of_a() {}\n");
    write(
        a.path(),
        "secret_of_a/notes.txt",
        b"secret_of_a lives here\n",
    );
    write(
        a.path(),
        "shared.txt",
        b"common words % _ ' \\ secret_of_a\n",
    );
    let b = tempfile::tempdir().unwrap();
    write(b.path(), "src/main.rs", b"fn main() {}\n");
    write(b.path(), "shared.txt", b"common words of b\n");
    (a, b)
}

async fn one_tenant_never_sees_another_tenants_rows() {
    let (tree_a, tree_b) = tenant_trees();
    // The same repository id under two tenants: only the tenant tells them apart.
    let a = open(tree_a.path(), "tenant-a", "same-repo").await;
    let b = open(tree_b.path(), "tenant-b", "same-repo").await;
    a.build("a-1").await.unwrap();
    b.build("b-1").await.unwrap();
    assert!(!hits(&a, "secret_of_a", false, None).await.is_empty());
    for query in [
        "secret_of_a",
        "secret",
        "fn",
        "common",
        "%",
        "_",
        "'",
        "\\",
        "e",
        "s",
    ] {
        for ci in [false, true] {
            for scope in [
                None,
                Some("src"),
                Some("secret_of_a"),
                Some("secret_of_a/notes.txt"),
                Some("shared.txt"),
            ] {
                let found = b.search_now(&request(query, ci, scope)).await.unwrap();
                assert_eq!(found.status.source_revision.as_deref(), Some("b-1"));
                for h in &found.hits {
                    assert!(
                        tree_b.path().join(&h.path).exists() && !h.snippet.contains("secret_of_a"),
                        "tenant b saw {h:?} for {query:?} in {scope:?}"
                    );
                }
            }
        }
    }
    // Removing and updating under b never touches a's rows.
    b.apply(
        &[],
        &["shared.txt".into(), "src/lib.rs".into()],
        Some("b-2"),
    )
    .await
    .unwrap();
    assert_eq!(hits(&a, "common", false, None).await.len(), 1);
    assert_eq!(
        a.current_status().await.unwrap().source_revision.as_deref(),
        Some("a-1")
    );
}

async fn row_level_security_alone_hides_other_tenants() {
    let (tree_a, tree_b) = tenant_trees();
    let a = open(tree_a.path(), "rls-a", "r").await;
    a.build("a-1").await.unwrap();
    let db = admin().await;
    db.batch_execute(
        "DROP ROLE IF EXISTS rs_agent;
         CREATE ROLE rs_agent LOGIN PASSWORD 'agent-pw';
         GRANT USAGE ON SCHEMA repo_search TO rs_agent;
         GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA repo_search TO rs_agent;",
    )
    .await
    .unwrap();
    let mut agent = server();
    agent.user("rs_agent").password("agent-pw");
    // The backend works as an ordinary role (no CREATE: the schema is current, so it only reads).
    let b = PgIndex::connect(
        agent.clone(),
        tree_b.path(),
        PgIndexConfig::new("rls-b", "r"),
    )
    .await
    .expect("connect as a role without CREATE");
    b.build("b-1").await.unwrap();
    assert!(hits(&b, "secret_of_a", false, None).await.is_empty());
    // Raw SQL without any tenant filter: row-level security alone decides.
    let (client, connection) = agent.connect(NoTls).await.unwrap();
    tokio::spawn(connection);
    let count = |sql: &'static str| {
        let client = &client;
        async move {
            client
                .batch_execute("BEGIN; SET LOCAL repo_search.tenant_id = 'rls-b'")
                .await
                .unwrap();
            let n: i64 = client.query_one(sql, &[]).await.unwrap().get(0);
            client.batch_execute("COMMIT").await.unwrap();
            n
        }
    };
    assert_eq!(
        count("SELECT count(*) FROM repo_search.files WHERE tenant_id = 'rls-a'").await,
        0
    );
    assert_eq!(
        count("SELECT count(*) FROM repo_search.repos WHERE tenant_id = 'rls-a'").await,
        0
    );
    assert_eq!(count("SELECT count(*) FROM repo_search.files").await, 2);
    // No tenant set: no rows at all.
    let none: i64 = client
        .query_one("SELECT count(*) FROM repo_search.files", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(none, 0);
    // Writing into another tenant is refused by the policy's check.
    client
        .batch_execute("BEGIN; SET LOCAL repo_search.tenant_id = 'rls-b'")
        .await
        .unwrap();
    let forged = client
        .execute(
            "UPDATE repo_search.repos SET tenant_id = 'rls-a' WHERE tenant_id = 'rls-b'",
            &[],
        )
        .await;
    assert!(forged.is_err(), "a row was moved into another tenant");
    client.batch_execute("ROLLBACK").await.unwrap();
    // The admin (a superuser, exempt from row-level security) does see tenant a's rows, so
    // the zeros above come from the policy.
    let seen: i64 = db
        .query_one(
            "SELECT count(*) FROM repo_search.files WHERE tenant_id = 'rls-a'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(seen, 3);
}

/// A TCP proxy to the server that the test can cut: every connection through it, and the
/// listener, close at once.
struct Proxy {
    port: u16,
    tasks: Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Proxy {
    async fn start() -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let upstream_port = std::env::var("PGPORT")
            .ok()
            .and_then(|p| p.parse().ok())
            .unwrap_or(5432u16);
        let tasks = Arc::new(std::sync::Mutex::new(Vec::new()));
        let inner = tasks.clone();
        let accept = tokio::spawn(async move {
            while let Ok((mut down, _)) = listener.accept().await {
                let conn = tokio::spawn(async move {
                    let mut up = tokio::net::TcpStream::connect(("localhost", upstream_port))
                        .await
                        .unwrap();
                    let _ = tokio::io::copy_bidirectional(&mut down, &mut up).await;
                });
                inner.lock().unwrap().push(conn);
            }
        });
        tasks.lock().unwrap().push(accept);
        Proxy { port, tasks }
    }

    fn cut(&self) {
        for t in self.tasks.lock().unwrap().drain(..) {
            t.abort();
        }
    }
}

async fn a_server_that_is_down_or_silent_is_an_error_not_a_hang() {
    let root = tempfile::tempdir().unwrap();
    let bounded = Duration::from_secs(10);
    // Nothing listens.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let down = server_at(port);
    let got = tokio::time::timeout(
        bounded,
        PgIndex::connect(down, root.path(), PgIndexConfig::new("down", "r")),
    )
    .await
    .expect("connecting to a closed port hung");
    assert!(matches!(got, Err(PgIndexError::Connect { .. })), "{got:?}");
    // Something accepts and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mute = server_at(silent.local_addr().unwrap().port());
    let mut config = PgIndexConfig::new("silent", "r");
    config.connect_timeout = Duration::from_millis(500);
    let got = tokio::time::timeout(bounded, PgIndex::connect(mute, root.path(), config))
        .await
        .expect("connecting to a silent server hung");
    assert!(matches!(got, Err(PgIndexError::ConnectTimeout)), "{got:?}");
    // The server goes away under a working index: every call fails promptly, no text leaks.
    write(root.path(), "a.txt", b"needle\n");
    let proxy = Proxy::start().await;
    let via = server_at(proxy.port);
    let index = PgIndex::connect(via, root.path(), PgIndexConfig::new("cut", "r"))
        .await
        .unwrap();
    index.build("rev-1").await.unwrap();
    assert_eq!(hits(&index, "needle", false, None).await.len(), 1);
    proxy.cut();
    let search = tokio::time::timeout(bounded, index.search(request("needle", false, None)))
        .await
        .expect("a search against a lost server hung");
    let err = search.expect_err("a search against a lost server succeeded");
    let text = err.to_string();
    let password = std::env::var("PGPASSWORD").unwrap_or_default();
    assert!(password.is_empty() || !text.contains(&password), "{text}");
    let status = tokio::time::timeout(bounded, index.status())
        .await
        .expect("status hung");
    assert!(status.is_err());
    let update = tokio::time::timeout(bounded, index.apply(&["a.txt".into()], &[], Some("rev-2")))
        .await
        .expect("update hung");
    assert!(update.is_err());
}

async fn a_connection_lost_between_queries_is_replaced() {
    let root = tempfile::tempdir().unwrap();
    write(root.path(), "a.txt", b"needle\n");
    let mut named = server();
    named.application_name("pg-index-lost-connection");
    let index = PgIndex::connect(named, root.path(), PgIndexConfig::new("lost", "r"))
        .await
        .unwrap();
    index.build("rev-1").await.unwrap();
    let db = admin().await;
    let killed: i64 = db
        .query_one(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE application_name = 'pg-index-lost-connection') t",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(killed >= 1);
    // Let the closed sockets be noticed; the pool then opens a fresh connection.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(hits(&index, "needle", false, None).await.len(), 1);
}

/// Writes `text` at `rel` with a modification time an hour back, so that its stamp can vouch
/// for it (a file modified within the racy window is always read again).
fn write_old(root: &Path, rel: &str, text: &[u8], minutes_ago: u64) {
    write(root, rel, text);
    let f = std::fs::File::options()
        .write(true)
        .open(root.join(rel))
        .unwrap();
    f.set_modified(std::time::SystemTime::now() - Duration::from_secs(60 * minutes_ago))
        .unwrap();
}

async fn a_push_uploads_only_changed_content() {
    let tree = tempfile::tempdir().unwrap();
    let root = tree.path();
    write_old(root, "a.txt", b"needle a\n", 60);
    write_old(root, "b.txt", b"needle b\n", 60);
    write_old(root, "c/d.txt", b"needle d\n", 60);
    let index = open(root, "push", "r").await;
    let first = index.sync("h1", true).await.unwrap();
    assert_eq!((first.files, first.uploaded, first.removed), (3, 3, 0));
    assert!(first.revision.starts_with("h1+h"), "{first:?}");
    // Nothing changed: nothing read, nothing sent, the same revision.
    let again = index.sync("h1", true).await.unwrap();
    assert!(again.unchanged, "{again:?}");
    assert_eq!((again.uploaded, again.restamped), (0, 0));
    assert_eq!(again.revision, first.revision);
    // A new stamp over the same bytes costs a stamp update only.
    write_old(root, "b.txt", b"needle b\n", 30);
    let touched = index.sync("h1", true).await.unwrap();
    assert_eq!((touched.uploaded, touched.restamped), (0, 1), "{touched:?}");
    assert_eq!(touched.revision, first.revision);
    // New content is uploaded, a deleted file removed, and the revision names the new content.
    write_old(root, "a.txt", b"first\nneedle A\n", 20);
    std::fs::remove_file(root.join("c/d.txt")).unwrap();
    let edited = index.sync("h2", true).await.unwrap();
    assert_eq!(
        (
            edited.files,
            edited.uploaded,
            edited.restamped,
            edited.removed
        ),
        (2, 1, 0, 1),
        "{edited:?}"
    );
    assert_eq!(pg_index::revision_commit(&edited.revision), "h2");
    let found = index
        .search_now(&request("needle", false, None))
        .await
        .unwrap();
    assert_eq!(found.status.source_revision, Some(edited.revision.clone()));
    let got: Vec<_> = found
        .hits
        .iter()
        .map(|h| (h.path.as_str(), h.line))
        .collect();
    assert_eq!(got, [("a.txt", 2), ("b.txt", 1)]);
    // A file written just now has no stamp to trust: it is read (not sent) on every push until
    // it settles.
    write(root, "b.txt", b"needle b\n");
    let racy = index.sync("h2", true).await.unwrap();
    assert_eq!((racy.uploaded, racy.restamped), (0, 1), "{racy:?}");
    let stamps: i64 = admin()
        .await
        .query_one(
            "SELECT count(stamp) FROM repo_search.files WHERE tenant_id = 'push'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(stamps, 1, "only a.txt's stamp can vouch for it");
    // Stamps not trusted: everything is read, nothing is sent.
    let checked = index.sync("h2", false).await.unwrap();
    assert_eq!((checked.uploaded, checked.removed), (0, 0), "{checked:?}");
    assert_eq!(checked.revision, edited.revision);
}

async fn a_read_only_index_never_writes() {
    let tree = tempfile::tempdir().unwrap();
    write_old(tree.path(), "a.txt", b"needle\n", 60);
    let writer = open(tree.path(), "read-only", "r").await;
    let pushed = writer.sync("h1", true).await.unwrap();
    let mut config = PgIndexConfig::new("read-only", "r");
    config.read_only = true;
    let reader = PgIndex::connect(server(), tree.path(), config)
        .await
        .unwrap();
    write_old(tree.path(), "b.txt", b"needle\n", 60);
    assert!(matches!(
        reader.sync("h2", true).await,
        Err(PgIndexError::ReadOnly)
    ));
    assert!(matches!(
        reader.apply(&["b.txt".into()], &[], Some("h2")).await,
        Err(PgIndexError::ReadOnly)
    ));
    let found = reader
        .search_now(&request("needle", false, None))
        .await
        .unwrap();
    assert_eq!(found.status.source_revision, Some(pushed.revision));
    assert_eq!(found.hits.len(), 1);
}

/// The paths of the files holding "needle", in path order.
async fn paths(index: &PgIndex) -> Vec<String> {
    let found = index
        .search_now(&request("needle", false, None))
        .await
        .unwrap();
    found.hits.into_iter().map(|h| h.path).collect()
}

async fn two_pushers_of_one_repository_each_leave_exactly_their_selection() {
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_old(one.path(), "a.txt", b"needle one\n", 60);
    write_old(one.path(), "shared.txt", b"needle shared\n", 60);
    write_old(two.path(), "b.txt", b"needle two\n", 60);
    write_old(two.path(), "shared.txt", b"needle shared\n", 60);
    let p1 = open(one.path(), "two-pushers", "r").await;
    let p2 = open(two.path(), "two-pushers", "r").await;
    p1.sync("h", true).await.unwrap();
    assert_eq!(paths(&p1).await, ["a.txt", "shared.txt"]);
    // The other clone's equal file costs a stamp update, not an upload.
    let second = p2.sync("h", true).await.unwrap();
    assert_eq!(
        (second.uploaded, second.restamped, second.removed),
        (1, 1, 1),
        "{second:?}"
    );
    assert_eq!(paths(&p1).await, ["b.txt", "shared.txt"]);
    // The first pusher's remembered list is out of date: it reads the stored one again.
    let third = p1.sync("h", true).await.unwrap();
    assert_eq!((third.uploaded, third.removed), (1, 1), "{third:?}");
    assert_eq!(paths(&p1).await, ["a.txt", "shared.txt"]);
    assert!(p1.sync("h", true).await.unwrap().unchanged);
    // A write that sets no revision still invalidates the remembered list.
    p2.remove_paths(&["a.txt".into()], false).await.unwrap();
    let fourth = p1.sync("h", true).await.unwrap();
    assert_eq!(fourth.uploaded, 1, "{fourth:?}");
    assert_eq!(paths(&p1).await, ["a.txt", "shared.txt"]);
}

/// A regex is pre-filtered by the `LIKE` patterns every match must hold, not scanned; one
/// without a sure trigram is the bounded scan. Either way the hits are the verified first
/// matches, whatever PostgreSQL's own regex dialect would say.
async fn regexes_are_answered_through_their_trigram_plan() {
    let tree = tempfile::tempdir().unwrap();
    let root = tree.path();
    write(root, "a/kvm.c", b"int x;\nkvm_set_msr_read(v);\n");
    write(root, "a/xen.c", b"xen_get_msr_write(v);\n");
    write(root, "b/other.c", b"kvm_msr_read(v);\nxen_x_msr_flush();\n");
    write(root, "b/upper.c", b"KVM_SET_MSR_READ\n");
    // A class PostgreSQL reads differently: `\d` is ASCII digits there, Unicode digits here.
    write(root, "c/digits.txt", b"port \xd9\xa3\xd9\xa4 open\n");
    let index = open(root, "regex", "r").await;
    index.build("rev-1").await.expect("build");
    let check =
        |query: &'static str, ci: bool, full_scan: bool, expected: &'static [(&str, u64)]| {
            let index = &index;
            async move {
                let mut r = request(query, ci, None);
                r.regex = true;
                let found = index.search_now(&r).await.expect("search");
                let got: Vec<(String, u64)> =
                    found.hits.into_iter().map(|h| (h.path, h.line)).collect();
                let expected: Vec<(String, u64)> = expected
                    .iter()
                    .map(|(p, l)| ((*p).to_owned(), *l))
                    .collect();
                assert_eq!(got, expected, "{query:?} ci={ci}");
                assert_eq!(found.full_scan, full_scan, "{query:?} ci={ci}: full_scan");
            }
        };
    check(
        r"(kvm|xen)_[a-z]+_msr_(read|write)",
        false,
        false,
        &[("a/kvm.c", 2), ("a/xen.c", 1)],
    )
    .await;
    check(
        r"(kvm|xen)_[a-z]+_msr_(read|write)",
        true,
        false,
        &[("a/kvm.c", 2), ("a/xen.c", 1), ("b/upper.c", 1)],
    )
    .await;
    check(r"port \d+ open", false, false, &[("c/digits.txt", 1)]).await;
    check(
        r"\w+_msr_\w+",
        false,
        false,
        &[("a/kvm.c", 2), ("a/xen.c", 1), ("b/other.c", 1)],
    )
    .await;
    // `(v)` bounds the word `v` on both sides: ` v ` in `words` holds trigrams.
    check(
        r"[a-z]\(v\)",
        false,
        false,
        &[("a/kvm.c", 2), ("a/xen.c", 1), ("b/other.c", 1)],
    )
    .await;
    check(r"[a-z]\(\);", false, true, &[("b/other.c", 2)]).await;
}

/// A literal in most files is read in path order and stops at the cap, instead of rechecking
/// every candidate; a rare one goes through the trigram index. Both give the first hits in path
/// order.
async fn a_dense_literal_is_read_in_path_order_up_to_the_cap() {
    let tree = tempfile::tempdir().unwrap();
    let root = tree.path();
    for i in 0..400 {
        let body = if i == 333 {
            "static int rare_needle_here;\n".to_owned()
        } else {
            format!("static int value_{i};\n")
        };
        write(root, &format!("d{}/f{i:03}.c", i % 7), body.as_bytes());
    }
    let index = open(root, "dense", "r").await;
    index.build("rev-1").await.expect("build");
    let mut all = request("static int", false, None);
    let found = index.search_now(&all).await.expect("search");
    assert_eq!(found.hits.len(), 400);
    let first: Vec<String> = found.hits.iter().take(10).map(|h| h.path.clone()).collect();
    all.max_results = Some(10);
    let capped = index.search_now(&all).await.expect("capped search");
    assert!(!capped.complete, "more hits follow the cap");
    assert!(!capped.full_scan);
    let got: Vec<String> = capped.hits.into_iter().map(|h| h.path).collect();
    assert_eq!(got, first);
    let rare = hits(&index, "rare_needle_here", false, None).await;
    assert_eq!(rare, [("d4/f333.c".to_owned(), 1, 12)]);
}

/// Files that hold every word of a query but not the query pass the pre-filter on `words` and
/// fail verification. When the first batches of rows are all such files, fetching goes on, and
/// the answer is still the first hits in path order, complete only when no candidate is left.
async fn words_that_pass_the_prefilter_but_not_verification_cost_no_hit() {
    let tree = tempfile::tempdir().unwrap();
    let root = tree.path();
    for i in 0..120 {
        let body = if i % 20 == 19 {
            "fn parse_config() {}\n"
        } else {
            "fn other() {}\nparse config\n"
        };
        write(root, &format!("f{i:03}.rs"), body.as_bytes());
    }
    let index = open(root, "rounds", "r").await;
    index.build("rev-1").await.expect("build");
    let expected: Vec<String> = (0..120)
        .filter(|i| i % 20 == 19)
        .map(|i| format!("f{i:03}.rs"))
        .collect();
    for (cap, complete) in [(1, false), (3, false), (6, true), (50, true)] {
        let mut r = request("fn parse_config", false, None);
        r.max_results = Some(cap);
        let found = index.search_now(&r).await.expect("search");
        let got: Vec<String> = found.hits.into_iter().map(|h| h.path).collect();
        assert_eq!(got, expected[..cap.min(6)], "cap {cap}");
        assert_eq!(found.complete, complete, "cap {cap}");
        assert!(!found.full_scan);
    }
}

/// `search_now` is public: it refuses an undeclared option and a regex the shared profile
/// refuses itself, with the guard's error, as the facade would.
async fn search_now_refuses_what_the_backend_does_not_declare() {
    let tree = tempfile::tempdir().unwrap();
    write(tree.path(), "a.txt", b"fn main\n");
    let index = open(tree.path(), "refuse", "r").await;
    index.build("rev-1").await.expect("build");
    let mut context = request("main", false, None);
    context.context.after = 1;
    let mut bad_regex = request("fn (", false, None);
    bad_regex.regex = true;
    for (what, r, regex) in [("context", context, false), ("bad regex", bad_regex, true)] {
        match index.search_now(&r).await {
            Err(PgIndexError::Refused(e)) => {
                assert_eq!(e.code(), ErrorCode::Unsupported, "{what}");
                assert_eq!(
                    matches!(e, IndexError::InvalidRegex { .. }),
                    regex,
                    "{what}"
                );
            }
            other => panic!("{what}: {other:?}"),
        }
    }
}

/// A file whose name is not UTF-8 is stored (a text column cannot hold its walk name as it is),
/// by a build and by a push, and a match in it is counted, never served.
async fn a_matching_file_whose_name_is_not_utf8_is_stored_counted_and_never_served() {
    use std::os::unix::ffi::OsStrExt;
    let tree = tempfile::tempdir().unwrap();
    let root = tree.path();
    let raw = |name: &[u8]| root.join(std::ffi::OsStr::from_bytes(name));
    write_old(root, "a.txt", b"needle a\n", 60);
    std::fs::create_dir(root.join("sub")).unwrap();
    std::fs::write(raw(b"bad\xff.txt"), "needle bad\n").unwrap();
    std::fs::write(raw(b"sub/\xfex.txt"), "other\n").unwrap();
    let index = open(root, "names", "r").await;
    let check = |query: &'static str,
                 scope: Option<&'static str>,
                 served: &'static [&'static str],
                 non_utf8: u64| {
        let index = &index;
        async move {
            let found = index
                .search_now(&request(query, false, scope))
                .await
                .unwrap();
            let got: Vec<&str> = found.hits.iter().map(|h| h.path.as_str()).collect();
            assert_eq!(got, served, "{query} in {scope:?}");
            let skipped = found.skipped.unwrap_or_default();
            assert_eq!(skipped.non_utf8_path, non_utf8, "{query} in {scope:?}");
            assert_eq!(skipped.refused_path, 0, "{query} in {scope:?}");
            assert_eq!(found.complete, non_utf8 == 0, "{query} in {scope:?}");
        }
    };
    index.build("h1").await.unwrap();
    check("needle", None, &["a.txt"], 1).await;
    check("other", Some("sub"), &[], 1).await;
    check("other", Some("a.txt"), &[], 0).await;
    check("needle a", None, &["a.txt"], 0).await;
    let pushed = index.sync("h2", true).await.unwrap();
    assert_eq!(pushed.files, 3, "{pushed:?}");
    std::fs::remove_file(raw(b"bad\xff.txt")).unwrap();
    let pushed = index.sync("h3", true).await.unwrap();
    assert_eq!((pushed.files, pushed.removed), (2, 1), "{pushed:?}");
    check("needle", None, &["a.txt"], 0).await;
    check("other", None, &[], 1).await;
}
