//! Times `repo-search mcp` as an agent sees it: `tools/call` latencies over stdio on one
//! worktree, for `cargo xtask bench --corpus linux`.
//!
//! `mcp-probe REPO_SEARCH ROOT INDEX_DIR RARE_QUERY [RG]` prints one JSON object:
//! - `unchanged_p50_ms`, `unchanged_p95_ms`: `indexed_literal` calls with nothing changed;
//! - `after_write_p50_ms`, `after_write_p95_ms`: a file written just before each call, whose
//!   marker the call must find (`after_write_misses` counts the calls that did not);
//! - `mixed_p50_ms`, `mixed_p95_ms`: the same after each of 99 mixed writes (an append, a new
//!   file, a rename of that file, in turn), each found at its current path (`mixed_misses`
//!   counts the calls that did not), and the p95 of each kind (`append_p95_ms`,
//!   `create_p95_ms`, `rename_p95_ms`);
//! - `literal_p50_ms`: `literal` calls of the rare query (11);
//! - with `RG`: `rg_l_p50_ms` and `rg_n_p50_ms`, `rg -F -l` and `rg -F -n` processes for the same
//!   query, run in turn with the `literal` calls (alternating the order) so that the machine's
//!   load falls on all three alike.
//!
//! The probe writes scratch files at the root (`repo-search-probe-*`) and removes them at the end.

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
    // 99 mixed writes, as an agent's edits come: an append to a file, a new file, and a rename of
    // that new file, in turn. Each call must find the marker, at the file's current path.
    let mut mixed: [Vec<f64>; 3] = Default::default();
    let mut mixed_misses = 0;
    let mut created: Option<std::path::PathBuf> = None;
    for i in 0..99 {
        let marker = format!("zqxjv{i}wkm{}", std::process::id());
        let kind = i % 3;
        let expect = match kind {
            0 => {
                let mut text = std::fs::read_to_string(&scratch).unwrap_or_default();
                text.push_str(&format!("{marker}\n"));
                std::fs::write(&scratch, text).expect("append to the scratch file");
                (marker.clone(), scratch.clone())
            }
            1 => {
                let path = Path::new(root).join(format!("repo-search-probe-new-{i}.txt"));
                std::fs::write(&path, format!("{marker}\n")).expect("create a file");
                created = Some(path.clone());
                (marker.clone(), path)
            }
            _ => {
                let from = created.take().expect("a file created the step before");
                let to = Path::new(root).join(format!("repo-search-probe-moved-{i}.txt"));
                std::fs::rename(&from, &to).expect("rename the new file");
                let text = std::fs::read_to_string(&to).expect("read the moved file");
                (text.trim().to_owned(), to)
            }
        };
        let (ms, v) = server.call(indexed(&expect.0));
        let hits = v["result"]["structuredContent"]["hits"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let want = expect
            .1
            .strip_prefix(root)
            .ok()
            .and_then(|p| p.to_str())
            .unwrap_or_default()
            .to_owned();
        if hits.len() != 1 || hits[0]["path"].as_str() != Some(want.as_str()) {
            mixed_misses += 1;
        }
        mixed[kind].push(ms);
    }
    let _ = std::fs::remove_file(&scratch);
    for e in std::fs::read_dir(root).expect("list the root").flatten() {
        if e.file_name()
            .to_str()
            .is_some_and(|n| n.starts_with("repo-search-probe-"))
        {
            let _ = std::fs::remove_file(e.path());
        }
    }
    let all: Vec<f64> = mixed.iter().flatten().copied().collect();
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
            "mixed_p50_ms": percentile(all.clone(), 0.5),
            "mixed_p95_ms": percentile(all, 0.95),
            "mixed_misses": mixed_misses,
            "append_p95_ms": percentile(mixed[0].clone(), 0.95),
            "create_p95_ms": percentile(mixed[1].clone(), 0.95),
            "rename_p95_ms": percentile(mixed[2].clone(), 0.95),
            "literal_p50_ms": percentile(literal, 0.5),
            "rg_l_p50_ms": percentile(rg_l, 0.5),
            "rg_n_p50_ms": percentile(rg_n, 0.5),
        })
    );
}
