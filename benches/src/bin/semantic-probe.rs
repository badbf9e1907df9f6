//! Times `semantic` calls of `repo-search mcp` as an agent sees them, beside `indexed_literal`
//! calls in the same server, for `cargo xtask bench --corpus linux --semantic`.
//!
//! `semantic-probe REPO_SEARCH ROOT INDEX_DIR MODEL_DIR` prints one JSON object:
//! - `first_call_ms`: the first `semantic` call (it maps and checks every segment);
//! - `semantic_p50_ms`, `semantic_p95_ms`: warm `semantic` calls, 20 descriptions twice over, as
//!   the server ranks them by default (re-ranked by MiniLM when the index keeps every chunk's
//!   vector);
//! - `hybrid_p50_ms`, `hybrid_p95_ms`: the same calls to a server with `--rerank=never`;
//! - `indexed_p50_ms`, `indexed_p95_ms`: warm `indexed_literal` calls of 20 common identifiers
//!   twice over, interleaved with the `semantic` calls so that the machine's load falls on both;
//! - `after_write_p50_ms`, `after_write_max_ms`: a `semantic` call just after a file is written
//!   (the call refreshes both indexes first), 7 times; `after_write_misses` counts the calls
//!   whose answer did not hold the file written;
//! - `rerank_cold_p50_ms`, `rerank_cold_max_ms`, `rerank_cached_p50_ms`: a second server with
//!   `--rerank` answers the 20 descriptions once with its chunk-vector cache cold, then again
//!   with their chunks cached; `rerank_kept_p50_ms`: a third server, started after the second
//!   stopped, answers them with the chunk vectors the second kept in the index directory (the
//!   probe removes that file first, so that the cold pass is cold).
//!
//! Every call must answer without an error. The probe writes one scratch file at the root and
//! removes it at the end.

use std::path::Path;
use std::process::Command;

use index_testkit::percentile;
use repo_search_benches::mcp::Server;
use serde_json::{Value, json};

/// Descriptions of what kernel code does, in an agent's words.
const DESCRIPTIONS: [&str; 20] = [
    "allocate pages for the page cache",
    "pick the next task to run on a cpu runqueue",
    "copy data from user space into a kernel buffer",
    "free an inode when its last link is removed",
    "parse a kernel command line parameter",
    "handle a page fault in user memory",
    "register a network device with the stack",
    "compute a crc32 checksum over a buffer",
    "wait for a completion with a timeout",
    "lock a mutex so that a signal can interrupt the wait",
    "look up a block in an ext4 extent tree",
    "send a signal to every process in a group",
    "map a physical address range into kernel virtual memory",
    "flush the tlb entries for a range of addresses",
    "start a kernel thread bound to one cpu",
    "drop a reference count and free the object at zero",
    "convert a string to an unsigned integer with overflow checks",
    "allocate a coherent buffer for dma",
    "arm a timer that fires after a delay",
    "read the entries of a directory",
];

/// Identifiers common in the kernel: dense `indexed_literal` answers.
const IDENTIFIERS: [&str; 20] = [
    "mutex_lock",
    "kmalloc",
    "spin_lock_irqsave",
    "copy_from_user",
    "list_for_each_entry",
    "kfree",
    "memcpy",
    "EXPORT_SYMBOL",
    "pr_err",
    "rcu_read_lock",
    "atomic_inc",
    "dev_err",
    "container_of",
    "GFP_KERNEL",
    "unlikely",
    "WARN_ON",
    "struct device",
    "init_waitqueue_head",
    "schedule_work",
    "module_init",
];

/// One `repo_search` call: its latency and its hits' paths. An error answer ends the probe.
fn call(server: &mut Server, arguments: Value) -> (f64, Vec<String>) {
    let (ms, v) = server.call(arguments.clone());
    let result = &v["result"];
    assert!(
        result["isError"] != json!(true) && v.get("error").is_none(),
        "{arguments} failed: {v}"
    );
    let paths = result["structuredContent"]["hits"]
        .as_array()
        .map(|hits| {
            hits.iter()
                .filter_map(|h| h["path"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    (ms, paths)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [bin, root, index_dir, model_dir] = &args[..] else {
        eprintln!("usage: semantic-probe REPO_SEARCH ROOT INDEX_DIR MODEL_DIR");
        std::process::exit(2);
    };
    let mut cmd = Command::new(bin);
    cmd.args(["mcp", "--root", root, "--index-dir", index_dir])
        .args(["--model-dir", model_dir]);
    let mut server = Server::start(cmd, "semantic-probe");
    let semantic = |q: &str| json!({"query": q, "mode": "semantic", "max_results": 10});
    let indexed = |q: &str| json!({"query": q, "mode": "indexed_literal", "max_results": 10});
    let (first_call_ms, _) = call(&mut server, semantic(DESCRIPTIONS[0]));
    call(&mut server, indexed(IDENTIFIERS[0]));
    let (mut sem, mut idx) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        for (d, i) in DESCRIPTIONS.iter().zip(IDENTIFIERS) {
            let (ms, paths) = call(&mut server, semantic(d));
            assert!(!paths.is_empty(), "no semantic hit for {d:?}");
            sem.push(ms);
            idx.push(call(&mut server, indexed(i)).0);
        }
    }
    let scratch = Path::new(root).join("repo_search_probe_scratch.c");
    let mut after_write = Vec::new();
    let mut misses = 0;
    for i in 0..7 {
        // A function no kernel file has, so that the call can be checked to see the write.
        let name = format!("zqxjv_marmalade_quokka_{i}_{}", std::process::id());
        std::fs::write(
            &scratch,
            format!(
                "/* Spread marmalade on the quokka's toast, round {i}. */\n\
                 int {name}(int toast)\n{{\n\treturn toast + {i};\n}}\n"
            ),
        )
        .expect("write the scratch file");
        let (ms, paths) = call(
            &mut server,
            semantic(&format!("spread marmalade on the quokka toast {name}")),
        );
        if !paths.iter().any(|p| p == "repo_search_probe_scratch.c") {
            misses += 1;
        }
        after_write.push(ms);
    }
    let _ = std::fs::remove_file(&scratch);
    server.stop();
    let mut cmd = Command::new(bin);
    cmd.args(["mcp", "--root", root, "--index-dir", index_dir])
        .args(["--model-dir", model_dir, "--rerank=never"]);
    let mut hybrid_server = Server::start(cmd, "semantic-probe --rerank=never");
    call(&mut hybrid_server, semantic(DESCRIPTIONS[0]));
    let mut hybrid = Vec::new();
    for _ in 0..2 {
        for d in DESCRIPTIONS {
            let (ms, paths) = call(&mut hybrid_server, semantic(d));
            assert!(!paths.is_empty(), "no hybrid hit for {d:?}");
            hybrid.push(ms);
        }
    }
    hybrid_server.stop();
    // The chunk vectors an earlier run kept would make the cold pass warm.
    let kept = Path::new(index_dir).join("semantic-rerank.vectors");
    match std::fs::remove_file(&kept) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("{}: {e}", kept.display()),
    }
    let rerank_server = || {
        let mut cmd = Command::new(bin);
        cmd.args(["mcp", "--root", root, "--index-dir", index_dir])
            .args(["--model-dir", model_dir, "--rerank"]);
        Server::start(cmd, "semantic-probe --rerank")
    };
    let ask_all = |server: &mut Server, pass: &mut Vec<f64>| {
        for d in DESCRIPTIONS {
            let (ms, paths) = call(server, semantic(d));
            assert!(!paths.is_empty(), "no re-ranked hit for {d:?}");
            pass.push(ms);
        }
    };
    let mut reranking = rerank_server();
    let [mut cold, mut cached, mut kept_pass] = [Vec::new(), Vec::new(), Vec::new()];
    ask_all(&mut reranking, &mut cold);
    ask_all(&mut reranking, &mut cached);
    reranking.stop();
    // A new server starts with the vectors the first one kept in the index directory.
    let mut next = rerank_server();
    ask_all(&mut next, &mut kept_pass);
    next.stop();
    println!(
        "{}",
        json!({
            "first_call_ms": first_call_ms,
            "semantic_p50_ms": percentile(sem.clone(), 0.5),
            "semantic_p95_ms": percentile(sem, 0.95),
            "hybrid_p50_ms": percentile(hybrid.clone(), 0.5),
            "hybrid_p95_ms": percentile(hybrid, 0.95),
            "indexed_p50_ms": percentile(idx.clone(), 0.5),
            "indexed_p95_ms": percentile(idx, 0.95),
            "after_write_p50_ms": percentile(after_write.clone(), 0.5),
            "after_write_max_ms": percentile(after_write, 1.0),
            "after_write_misses": misses,
            "rerank_cold_p50_ms": percentile(cold.clone(), 0.5),
            "rerank_cold_max_ms": percentile(cold, 1.0),
            "rerank_cached_p50_ms": percentile(cached, 0.5),
            "rerank_kept_p50_ms": percentile(kept_pass, 0.5),
        })
    );
}
