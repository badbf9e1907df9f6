//! The PostgreSQL backend on a large tree: `pg_probe ROOT [--rg RG] [--clients-secs N]`.
//!
//! Against the server named by the `PG*` variables (`cargo xtask bench --corpus linux --backend
//! postgres` runs it inside a throwaway `pg_virtualenv` cluster), through `PgIndex` only: loads
//! the tree, reads the table and index sizes, times the rare, common and regex queries of the
//! embedded index's benchmark (`index-bench`), applies 1000 files unchanged and then 1000 files
//! whose stored rows differ, runs 8 concurrent clients on the rare queries, and, given `--rg`,
//! checks the hits of the rare and regex queries against ripgrep's first match per file. Prints
//! one flat JSON object.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use index_contract::{SearchMode, SearchRequest};
use index_testkit::linux_queries::{COMMON, RARE, REGEX};
use index_testkit::percentile;
use index_testkit::rg::rg_first_lines;
use pg_index::{PgIndex, PgIndexConfig};

const CLIENTS: usize = 8;

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

fn request(q: &str, regex: bool, cap: usize) -> SearchRequest {
    let mut r = SearchRequest::new(q, SearchMode::IndexedLiteral);
    r.regex = regex;
    r.max_results = Some(cap);
    r
}

/// CPU seconds (user and system) of a process, from `/proc`.
fn cpu_of(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// CPU seconds so far of the server (the postmaster and its live children) and of this process:
/// figures that the machine's other load does not inflate, unlike wall time.
fn cpu(postmaster: u32) -> (f64, f64) {
    let mut server = cpu_of(postmaster).unwrap_or(0.0);
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        if parent_of(pid) == Some(postmaster) {
            server += cpu_of(pid).unwrap_or(0.0);
        }
    }
    (server, cpu_of(std::process::id()).unwrap_or(0.0))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = Path::new(args.first().expect("usage: pg_probe ROOT [--rg RG]")).to_owned();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    // Absolute: rg runs in the tree.
    let rg = flag("--rg").map(|p| {
        std::fs::canonicalize(&p)
            .expect("the --rg path")
            .to_string_lossy()
            .into_owned()
    });
    let clients_secs: u64 = flag("--clients-secs")
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let mut out: Vec<(String, f64)> = Vec::new();
    // Each figure also goes to stderr as it is taken, to follow a long run.
    let mut put = |k: &str, v: f64| {
        eprintln!("pg_probe: {k} = {v}");
        out.push((k.to_owned(), v));
    };

    let (admin, connection) = PgIndex::config_from_env()
        .connect(tokio_postgres::NoTls)
        .await
        .expect("admin connection");
    tokio::spawn(connection);
    let index = PgIndex::connect(
        PgIndex::config_from_env(),
        &root,
        PgIndexConfig::new("bench", "linux"),
    )
    .await
    .expect("connect");
    let index = Arc::new(index);

    let backend: i32 = admin
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .expect("pid")
        .get(0);
    let postmaster = parent_of(backend.unsigned_abs()).unwrap_or(0);
    let (s0, c0) = cpu(postmaster);
    let t = Instant::now();
    let built = index.build("bench-1").await.expect("build");
    put("load_ms", ms(t));
    let (s1, c1) = cpu(postmaster);
    put("load_server_cpu_s", s1 - s0);
    put("load_client_cpu_s", c1 - c0);
    put("files", built.files as f64);
    put("corpus_bytes", built.bytes as f64);
    let t = Instant::now();
    admin
        .batch_execute("ANALYZE repo_search.files")
        .await
        .expect("analyze");
    put("analyze_ms", ms(t));
    let sizes = admin
        .query_one(
            "SELECT pg_relation_size('repo_search.files'),
                    pg_table_size('repo_search.files'),
                    pg_relation_size('repo_search.files_words_trgm'),
                    pg_total_relation_size('repo_search.files')",
            &[],
        )
        .await
        .expect("sizes");
    for (i, name) in ["heap_bytes", "table_bytes", "gin_bytes", "total_bytes"]
        .iter()
        .enumerate()
    {
        put(name, sizes.get::<_, i64>(i) as f64);
    }

    // Warm-up: one pass over every query, untimed, as a server that has served before.
    for q in RARE.iter().chain(&COMMON) {
        let _ = index.search_now(&request(q, false, 1000)).await;
    }
    let (s0, c0) = cpu(postmaster);
    let mut rare = Vec::new();
    for _ in 0..10 {
        for q in RARE {
            let t = Instant::now();
            index
                .search_now(&request(q, false, 1000))
                .await
                .expect("rare");
            rare.push(ms(t));
        }
    }
    let (s1, c1) = cpu(postmaster);
    // CPU per query, server and client: the latency on an idle machine, roughly.
    put(
        "rare_cpu_ms_per_query",
        (s1 - s0 + c1 - c0) * 1000.0 / rare.len() as f64,
    );
    put("rare_p50_ms", percentile(rare.clone(), 0.5));
    put("rare_p95_ms", percentile(rare, 0.95));
    let (mut common, mut common_hits, mut common_full) = (Vec::new(), 0usize, 0usize);
    let (s0, c0) = cpu(postmaster);
    for _ in 0..10 {
        for q in COMMON {
            let t = Instant::now();
            let r = index
                .search_now(&request(q, false, 1000))
                .await
                .expect("common");
            common.push(ms(t));
            common_hits = common_hits.max(r.hits.len());
            common_full += usize::from(r.full_scan);
        }
    }
    let (s1, c1) = cpu(postmaster);
    put(
        "common_cpu_ms_per_query",
        (s1 - s0 + c1 - c0) * 1000.0 / common.len() as f64,
    );
    put("common_p50_ms", percentile(common.clone(), 0.5));
    put("common_p95_ms", percentile(common, 0.95));
    put("common_hits", common_hits as f64);
    put("common_full_scans", common_full as f64);
    let (mut regex, mut regex_all, mut regex_full, mut regex_errors) =
        (Vec::new(), Vec::new(), 0usize, 0usize);
    for _ in 0..10 {
        for (i, q) in REGEX.iter().enumerate() {
            let t = Instant::now();
            match index.search_now(&request(q, true, 1000)).await {
                Ok(r) => {
                    let took = ms(t);
                    if i == 0 {
                        regex.push(took);
                    }
                    regex_all.push(took);
                    regex_full += usize::from(r.full_scan);
                }
                Err(_) => regex_errors += 1,
            }
        }
    }
    put("regex_p50_ms", percentile(regex.clone(), 0.5));
    put("regex_p95_ms", percentile(regex, 0.95));
    put("regex_all_p95_ms", percentile(regex_all, 0.95));
    put("regex_full_scans", regex_full as f64);
    put("regex_errors", regex_errors as f64);

    // 1000 files: first re-read unchanged (the embedded benchmark's figure), then with their
    // stored rows made different beforehand, so the update rewrites 1000 rows and their index
    // entries. The worktree is shared and never written.
    let changed: Vec<String> = admin
        .query(
            "SELECT path FROM repo_search.files
              WHERE tenant_id = 'bench' AND repo_id = 'linux' AND path LIKE '%.c'
              ORDER BY sort_key LIMIT 1000",
            &[],
        )
        .await
        .expect("paths")
        .iter()
        .map(|r| r.get(0))
        .collect();
    let t = Instant::now();
    index
        .apply(&changed, &[], Some("bench-2"))
        .await
        .expect("apply unchanged");
    put("apply_1000_unchanged_ms", ms(t));
    admin
        .execute(
            "UPDATE repo_search.files SET content = content || E'\\n'
              WHERE tenant_id = 'bench' AND repo_id = 'linux' AND path = ANY($1)",
            &[&changed],
        )
        .await
        .expect("alter rows");
    let (s0, _) = cpu(postmaster);
    let t = Instant::now();
    let applied = index
        .apply(&changed, &[], Some("bench-3"))
        .await
        .expect("apply changed");
    put("apply_1000_ms", ms(t));
    put("apply_1000_server_cpu_s", cpu(postmaster).0 - s0);
    put("apply_1000_files", applied.files as f64);

    // Concurrent clients: each loops over the rare queries until the time is up.
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let mut latencies = Vec::new();
    let until = Instant::now() + Duration::from_secs(clients_secs);
    let started = Instant::now();
    let (s0, c0) = cpu(postmaster);
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let (index, done, failed) = (index.clone(), done.clone(), failed.clone());
        let linux = built.files > 50_000;
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            let mut k = c;
            while Instant::now() < until {
                let t = Instant::now();
                match index
                    .search_now(&request(RARE[k % RARE.len()], false, 1000))
                    .await
                {
                    // On the Linux tree every rare query has hits: none is a failure too.
                    Ok(r) if !r.hits.is_empty() || !linux => {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
                mine.push(ms(t));
                k += 1;
            }
            mine
        }));
    }
    for task in tasks {
        latencies.extend(task.await.expect("client"));
    }
    let secs = started.elapsed().as_secs_f64();
    let (s1, c1) = cpu(postmaster);
    // Queries per CPU second, server and client together: what 2 idle cores would serve.
    put(
        "clients_queries_per_cpu_s",
        done.load(Ordering::Relaxed) as f64 / (s1 - s0 + c1 - c0).max(1e-9),
    );
    put(
        "clients_qps",
        done.load(Ordering::Relaxed) as f64 / secs.max(1e-9),
    );
    put("clients_failures", failed.load(Ordering::Relaxed) as f64);
    put("clients_p50_ms", percentile(latencies.clone(), 0.5));
    put("clients_p95_ms", percentile(latencies, 0.95));

    if let Some(rg) = &rg {
        let (mut checked, mut differing) = (0, 0);
        let fixed = RARE.iter().map(|q| (q, false));
        for (q, is_regex) in fixed.chain(REGEX.iter().map(|q| (q, true))) {
            let Ok(r) = index.search_now(&request(q, is_regex, 10_000)).await else {
                continue;
            };
            let ours: BTreeMap<String, u64> =
                r.hits.iter().map(|h| (h.path.clone(), h.line)).collect();
            checked += 1;
            if ours != rg_first_lines(Path::new(rg), &root, q, is_regex) {
                differing += 1;
                eprintln!("pg_probe: hits differ from rg's for {q:?}");
            }
        }
        put("rg_checked_queries", f64::from(checked));
        put("rg_differing_queries", f64::from(differing));
    }
    let fields: Vec<String> = out.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
    println!("{{{}}}", fields.join(","));
}
