//! A rare literal on a generated corpus: the PostgreSQL backend against `rg`.
//!
//! Run it against a server named by the `PG*` variables, for example a throwaway one:
//! `LANG=C.UTF-8 pg_virtualenv -t cargo run --release -p pg-index --example rare_literal -- 5000`.
//! The argument is the number of files (about 8 KiB each). It prints the build time, the table's
//! sizes and the median and worst of 21 searches, with the same for `rg` over the same tree.

use std::process::Command;
use std::time::{Duration, Instant};

use index_contract::{SearchMode, SearchRequest};
use index_testkit::tree::{Rng, WORDS, write};
use pg_index::{PgIndex, PgIndexConfig};

const NEEDLE: &str = "zebra_quokka_42";

fn median_and_max(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    (ms(v[v.len() / 2]), ms(v[v.len() - 1]))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let files: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(5000);
    let tree = tempfile::tempdir().expect("tree");
    let mut rng = Rng::new(42);
    for i in 0..files {
        let mut text = String::new();
        while text.len() < 8 * 1024 {
            let n = 1 + rng.below(12);
            let line: Vec<&str> = (0..n).map(|_| *rng.pick(WORDS)).collect();
            text.push_str(&line.join(" "));
            text.push('\n');
        }
        if i == files / 2 {
            text.push_str(&format!("let x = {NEEDLE};\n"));
        }
        write(
            tree.path(),
            &format!("d{}/f{i}.rs", i % 64),
            text.as_bytes(),
        );
    }
    let index = PgIndex::connect(
        PgIndex::config_from_env(),
        tree.path(),
        PgIndexConfig::new("measure", "generated"),
    )
    .await
    .expect("connect");
    let started = Instant::now();
    let built = index.build("rev-1").await.expect("build");
    println!(
        "build: {} files, {:.1} MiB in {:.2} s",
        built.files,
        built.bytes as f64 / 1048576.0,
        started.elapsed().as_secs_f64()
    );
    let (client, connection) = PgIndex::config_from_env()
        .connect(tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    client
        .batch_execute("VACUUM ANALYZE repo_search.files")
        .await
        .expect("analyze");
    let row = client
        .query_one(
            "SELECT pg_table_size('repo_search.files'),
                    pg_relation_size('repo_search.files_words_trgm')",
            &[],
        )
        .await
        .expect("sizes");
    let (table, gin): (i64, i64) = (row.get(0), row.get(1));
    println!(
        "table with toast: {:.1} MiB, trigram index: {:.1} MiB ({:.2} x corpus)",
        table as f64 / 1048576.0,
        gin as f64 / 1048576.0,
        gin as f64 / built.bytes as f64
    );
    let mut pg = Vec::new();
    for _ in 0..21 {
        let t = Instant::now();
        let found = index
            .search_now(&SearchRequest::new(NEEDLE, SearchMode::IndexedLiteral))
            .await
            .expect("search");
        pg.push(t.elapsed());
        assert_eq!(found.hits.len(), 1);
    }
    let mut rg = Vec::new();
    for _ in 0..21 {
        let t = Instant::now();
        let out = Command::new(index_testkit::rg::rg())
            .current_dir(tree.path())
            .args(["--no-config", "--fixed-strings", "--count", NEEDLE])
            .output()
            .expect("rg");
        rg.push(t.elapsed());
        assert!(out.status.success());
    }
    let (p50, worst) = median_and_max(pg);
    let (r50, rworst) = median_and_max(rg);
    println!("pg-index: p50 {p50:.1} ms, max {worst:.1} ms");
    println!("rg:       p50 {r50:.1} ms, max {rworst:.1} ms");
}
