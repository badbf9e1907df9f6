//! Times `repo-search mcp` as an agent sees it: `tools/call` latencies over stdio on one
//! worktree, for `cargo xtask bench --corpus linux`.
//!
//! `mcp-probe REPO_SEARCH ROOT INDEX_DIR RARE_QUERY [RG]` prints one JSON object:
//! - `unchanged_p50_ms`, `unchanged_p95_ms`: `indexed_literal` calls with nothing changed;
//! - `after_write_p50_ms`, `after_write_p95_ms`: a file written just before each call, whose
//!   marker the call must find (`after_write_misses` counts the calls that did not);
//! - `literal_p50_ms`: `literal` calls of the rare query (11);
//! - with `RG`: `rg_l_p50_ms` and `rg_n_p50_ms`, `rg -F -l` and `rg -F -n` processes for the same
//!   query, run in turn with the `literal` calls (alternating the order) so that the machine's
//!   load falls on all three alike.
//!
//! The probe writes one scratch file at the root and removes it at the end.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use index_testkit::percentile;
use repo_search_benches::mcp::Server;
use serde_json::json;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (bin, root, index_dir, rare, rg) = match &args[..] {
        [b, r, i, q] => (b, r, i, q, None),
        [b, r, i, q, rg] => (b, r, i, q, Some(rg)),
        _ => {
            eprintln!("usage: mcp-probe REPO_SEARCH ROOT INDEX_DIR RARE_QUERY [RG]");
            std::process::exit(2);
        }
    };
    let mut cmd = Command::new(bin);
    cmd.args(["mcp", "--root", root, "--index-dir", index_dir]);
    let mut server = Server::start(cmd, "mcp-probe");
    let indexed = |q: &str| json!({"query": q, "mode": "indexed_literal", "max_results": 100});
    // Warm up: the first call may build or walk.
    for _ in 0..3 {
        server.call(indexed(rare));
    }
    let unchanged: Vec<f64> = (0..31).map(|_| server.call(indexed(rare)).0).collect();
    let scratch = Path::new(root).join("repo-search-probe-scratch.txt");
    let mut after_write = Vec::new();
    let mut misses = 0;
    for i in 0..31 {
        // Trigrams rare in source code, so the query itself costs little: the figure is the
        // refresh after a write.
        let marker = format!("zqxjv{i}wkq{}", std::process::id());
        std::fs::write(&scratch, format!("{marker}\n")).expect("write the scratch file");
        let (ms, v) = server.call(indexed(&marker));
        let hits = v["result"]["structuredContent"]["hits"]
            .as_array()
            .map_or(0, Vec::len);
        if hits != 1 {
            misses += 1;
        }
        after_write.push(ms);
    }
    let _ = std::fs::remove_file(&scratch);
    let rg_run = |flag: &str| -> f64 {
        let Some(rg) = rg else { return f64::NAN };
        let started = Instant::now();
        let status = Command::new(rg)
            .args(["--no-config", "-F", flag, "--", rare])
            .current_dir(root)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .expect("run rg");
        assert!(status.code() == Some(0), "rg {flag} found nothing");
        started.elapsed().as_secs_f64() * 1000.0
    };
    let (mut literal, mut rg_l, mut rg_n) = (Vec::new(), Vec::new(), Vec::new());
    // One warm-up of each, then 11 rounds; every other round runs the peers first.
    for round in 0..12 {
        let mut ours = || {
            let (ms, v) =
                server.call(json!({"query": rare, "mode": "literal", "max_results": 100}));
            let hits = v["result"]["structuredContent"]["hits"]
                .as_array()
                .map_or(0, Vec::len);
            assert!(hits > 0, "the literal call found nothing");
            ms
        };
        let (o, l, n) = if round % 2 == 0 {
            (ours(), rg_run("-l"), rg_run("-n"))
        } else {
            let (n, l) = (rg_run("-n"), rg_run("-l"));
            (ours(), l, n)
        };
        if round > 0 {
            literal.push(o);
            rg_l.push(l);
            rg_n.push(n);
        }
    }
    server.stop();
    println!(
        "{}",
        json!({
            "unchanged_p50_ms": percentile(unchanged.clone(), 0.5),
            "unchanged_p95_ms": percentile(unchanged, 0.95),
            "after_write_p50_ms": percentile(after_write.clone(), 0.5),
            "after_write_p95_ms": percentile(after_write, 0.95),
            "after_write_misses": misses,
            "literal_p50_ms": percentile(literal, 0.5),
            "rg_l_p50_ms": percentile(rg_l, 0.5),
            "rg_n_p50_ms": percentile(rg_n, 0.5),
        })
    );
}
