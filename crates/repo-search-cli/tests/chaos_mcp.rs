//! The chaos suite's MCP half: a long-lived `repo-search mcp` server whose index directory or
//! whole repository disappears under it, early calls pipelined before the first index exists, and
//! one server working next to CLI runs and an editor on the same worktree. A failed call is a
//! failure; so is a call that never answers.
//!
//! Bounded: well under a minute each. `cargo xtask chaos --minutes N` runs them for longer.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

mod support;

use support::{
    LIMIT, McpServer, git, git_init, hit_paths, initialize_params, initialized_notification, repo,
    run_bounded, tool_call_params, write,
};

/// Both modes answer `query` with hits in exactly `expected` (sorted paths), with no error.
fn check(server: &mut McpServer, query: &str, expected: &[&str]) {
    for mode in ["indexed_literal", "literal"] {
        let result = server.call(json!({ "query": query, "mode": mode }));
        assert_eq!(result["isError"], false, "{mode} {query}: {result}");
        assert_eq!(hit_paths(&result), expected, "{mode} {query}: {result}");
        assert_eq!(
            result["structuredContent"]["complete"], true,
            "{mode} {query}: {result}"
        );
    }
}

#[test]
fn an_mcp_server_recovers_when_its_index_directory_is_deleted() {
    let dir = repo();
    let root = dir.path();
    write(root, "a.txt", "needle_old in a\n");
    let mut server = McpServer::start(root);
    check(&mut server, "needle_old", &["a.txt"]);
    let index = root.join(".git/repo-search");
    assert!(
        index.join("MANIFEST").is_file(),
        "the first call built no index"
    );

    // `rm -rf .git/repo-search` while the server runs, then new content.
    std::fs::remove_dir_all(&index).unwrap();
    write(root, "b.txt", "needle_new in b\n");
    check(&mut server, "needle_new", &["b.txt"]);
    check(&mut server, "needle_old", &["a.txt"]);
    assert!(
        index.join("MANIFEST").is_file(),
        "the index was not rebuilt"
    );

    // Deleted again with nothing else changed: the answer must not come from memory alone.
    std::fs::remove_dir_all(&index).unwrap();
    check(&mut server, "needle_", &["a.txt", "b.txt"]);
    assert!(
        index.join("MANIFEST").is_file(),
        "the index was not rebuilt"
    );
}

#[test]
fn an_mcp_server_recovers_when_its_repository_is_recloned_at_the_same_path() {
    let dir = repo();
    let root = dir.path();
    write(root, "a.txt", "needle_old in a\n");
    write(root, "keep/c.txt", "needle_kept, old text\n");
    git(root, &["add", "."]);
    git(root, &["commit", "-qm", "old"]);
    let mut server = McpServer::start(root);
    check(&mut server, "needle_old", &["a.txt"]);
    check(&mut server, "needle_kept", &["keep/c.txt"]);

    // The repository is deleted and cloned again at the same path, with other content.
    std::fs::remove_dir_all(root).unwrap();
    std::fs::create_dir(root).unwrap();
    git_init(root);
    write(root, "b.txt", "needle_new in b\n");
    write(root, "keep/c.txt", "needle_kept, new text\n");
    git(root, &["add", "."]);
    git(root, &["commit", "-qm", "new"]);
    check(&mut server, "needle_new", &["b.txt"]);
    check(&mut server, "needle_old", &[]);
    check(&mut server, "new text", &["keep/c.txt"]);
    assert!(
        root.join(".git/repo-search/MANIFEST").is_file(),
        "no index in the new repository"
    );
}

#[test]
fn early_pipelined_calls_on_a_fresh_repo_never_fail() {
    let started = Instant::now();
    let mut failures = Vec::new();
    for round in 0..40 {
        let dir = repo();
        let root = dir.path();
        for i in 0..20 {
            write(root, &format!("d{}/f{i}.txt", i % 3), "needle_early\n");
        }
        let mut server = McpServer::spawn(root);
        // Everything is written before any reply is read: the calls race the first build.
        server.send(&json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize_params()
        }));
        server.send(&initialized_notification());
        let calls = [
            (2, "indexed_literal"),
            (3, "indexed_literal"),
            (4, "literal"),
        ];
        for (id, mode) in calls {
            let arguments = json!({ "query": "needle_early", "mode": mode, "max_results": 100 });
            server.send(&json!({
                "jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": tool_call_params(arguments)
            }));
        }
        let mut replies = BTreeMap::new();
        for _ in 0..=calls.len() {
            let reply = server.reply();
            replies.insert(reply["id"].as_u64().unwrap(), reply);
        }
        assert_eq!(
            replies[&1]["result"]["serverInfo"]["name"], "repo-search",
            "{}",
            replies[&1]
        );
        for (id, mode) in calls {
            let result = &replies[&id]["result"];
            if result["isError"] != false || hit_paths(result).len() != 20 {
                failures.push(format!("round {round}, {mode}: {}", replies[&id]));
            }
        }
    }
    eprintln!(
        "early pipelined calls: 40 fresh servers, {} failures, {:?}",
        failures.len(),
        started.elapsed()
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn mcp_and_cli_in_parallel_on_one_repo_never_fail() {
    let dir = support::committed_tree();
    let root = dir.path().to_path_buf();
    let calls = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    let longest = Mutex::new(Duration::ZERO);
    let stop = AtomicBool::new(false);
    let record = |what: String, took: Duration, failed: Option<String>| {
        calls.fetch_add(1, Ordering::Relaxed);
        let mut l = longest.lock().unwrap();
        *l = (*l).max(took);
        if let Some(why) = failed {
            failures.lock().unwrap().push(format!("{what}: {why}"));
        }
    };
    std::thread::scope(|s| {
        // An editor, rewriting files (and adding some) while the calls run.
        s.spawn(|| support::edit_until(&root, &stop));
        let mut workers = Vec::new();
        workers.push(s.spawn(|| {
            let mut server = McpServer::start(&root);
            for i in 0..30 {
                let started = Instant::now();
                let result = server.call(json!({ "query": "needle_0", "mode": "indexed_literal" }));
                let failed = (result["isError"] != false).then(|| result.to_string());
                record(format!("mcp call {i}"), started.elapsed(), failed);
            }
        }));
        for w in 0..3 {
            let (root, record) = (&root, &record);
            workers.push(s.spawn(move || {
                for i in 0..10 {
                    let started = Instant::now();
                    let out = run_bounded(root, &["search", "needle_0", "--json"], LIMIT);
                    let ok = matches!(out.status.code(), Some(0 | 1));
                    let failed = (!ok).then(|| {
                        format!(
                            "{:?} {} {}",
                            out.status.code(),
                            String::from_utf8_lossy(&out.stdout),
                            String::from_utf8_lossy(&out.stderr)
                        )
                    });
                    record(format!("cli {w} run {i}"), started.elapsed(), failed);
                }
            }));
        }
        for w in workers {
            w.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
    let failures = failures.into_inner().unwrap();
    eprintln!(
        "mcp + cli: {} calls, {} failures, longest {:?}",
        calls.load(Ordering::Relaxed),
        failures.len(),
        longest.into_inner().unwrap()
    );
    assert_eq!(calls.load(Ordering::Relaxed), 60);
    assert!(failures.is_empty(), "{failures:#?}");
    // Once quiet, the server's answer equals the literal scan's.
    let mut server = McpServer::start(&root);
    let answer = |server: &mut McpServer, mode| {
        let result = server.call(json!({ "query": "needle_0", "mode": mode, "max_results": 1000 }));
        assert_eq!(result["isError"], false, "{mode}: {result}");
        hit_paths(&result)
    };
    let indexed = answer(&mut server, "indexed_literal");
    assert_eq!(indexed, answer(&mut server, "literal"));
    assert!(!indexed.is_empty());
}
