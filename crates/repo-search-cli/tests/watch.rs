//! The watching host (the MCP server): a write that completed before a query started is always
//! reflected in that query, whatever else happens (a checkout running, an event storm).

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{McpServer, git, hit_paths, repo, write};

fn indexed(server: &mut McpServer, query: &str) -> Value {
    let result =
        server.call(json!({ "query": query, "mode": "indexed_literal", "max_results": 1000 }));
    assert_eq!(result["isError"], false, "{result}");
    result["structuredContent"].clone()
}

#[test]
fn a_write_before_a_query_is_always_seen_by_the_watching_host() {
    let dir = repo();
    let root = dir.path();
    for i in 0..50 {
        write(root, &format!("src/m{}/f{i}.rs", i % 5), "fn base() {}\n");
    }
    write(root, "README.md", "readme\n");
    git(root, &["add", "."]);
    git(root, &["commit", "-qm", "one"]);
    git(root, &["checkout", "-q", "-b", "other"]);
    for i in 0..50 {
        write(
            root,
            &format!("src/m{}/f{i}.rs", i % 5),
            "fn other_branch() {}\n",
        );
    }
    git(root, &["commit", "-qam", "two"]);
    git(root, &["checkout", "-q", "main"]);

    let mut server = McpServer::start(root);
    indexed(&mut server, "base");
    let mut misses = Vec::new();
    let mut latencies = Vec::new();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let checkout = std::thread::scope(|s| {
        // Branch switches in the background: each rewrites 50 files while the writes and
        // queries below go on.
        let switcher = s.spawn(|| {
            for k in 0..10 {
                let branch = if k % 2 == 0 { "other" } else { "main" };
                git(root, &["checkout", "-q", branch]);
                std::thread::sleep(Duration::from_millis(30));
            }
            git(root, &["checkout", "-q", "main"]);
        });
        for i in 0..1000u64 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let file = format!("notes/n{}.txt", i % 13);
            write(root, &file, &format!("marker_{i} written\n"));
            if seed.is_multiple_of(4) {
                std::thread::sleep(Duration::from_micros(seed % 3000));
            }
            let started = Instant::now();
            let answer = indexed(&mut server, &format!("marker_{i} "));
            latencies.push(started.elapsed());
            if hit_paths(&json!({ "structuredContent": answer })) != [file.clone()] {
                misses.push(format!("{i}: {answer}"));
            }
        }
        switcher.join()
    });
    assert!(checkout.is_ok());
    latencies.sort();
    eprintln!(
        "watching host: 1000 write-then-query rounds, {} misses, p50 {:?}, p95 {:?}, max {:?}",
        misses.len(),
        latencies[500],
        latencies[950],
        latencies[999]
    );
    assert!(misses.is_empty(), "{misses:#?}");
    // Quiet again: every answer equals the literal scan's, file for file.
    for q in ["base", "other_branch", "written"] {
        let indexed = hit_paths(&json!({ "structuredContent": indexed(&mut server, q) }));
        let literal = server.call(json!({ "query": q, "mode": "literal", "max_results": 1000 }));
        let mut literal = hit_paths(&literal);
        literal.dedup();
        let mut indexed = indexed;
        indexed.sort();
        assert_eq!(indexed, literal, "{q}");
    }
}

/// A checkout that rewrites more files than a targeted refresh takes is one batch refresh of the
/// whole selection: every rewritten file is seen, and a write after it too.
#[test]
fn a_checkout_of_thousands_of_files_is_seen_in_one_refresh() {
    let dir = repo();
    let root = dir.path();
    let files = 2100;
    for i in 0..files {
        write(root, &format!("src/m{}/f{i}.rs", i % 7), "fn base() {}\n");
    }
    git(root, &["add", "."]);
    git(root, &["commit", "-qm", "one"]);
    git(root, &["checkout", "-q", "-b", "other"]);
    for i in 0..files {
        write(
            root,
            &format!("src/m{}/f{i}.rs", i % 7),
            "fn switched() {}\n",
        );
    }
    git(root, &["commit", "-qam", "two"]);
    git(root, &["checkout", "-q", "main"]);

    let mut server = McpServer::start(root);
    let paths = |server: &mut McpServer, q: &str| {
        hit_paths(&json!({ "structuredContent": indexed(server, q) }))
    };
    assert_eq!(paths(&mut server, "base").len(), 1000);
    git(root, &["checkout", "-q", "other"]);
    // Every rewritten file was read again: none still holds the old text.
    assert_eq!(paths(&mut server, "base"), Vec::<String>::new());
    assert_eq!(paths(&mut server, "switched").len(), 1000);
    write(root, "src/m0/f0.rs", "fn written_after() {}\n");
    assert_eq!(paths(&mut server, "written_after"), ["src/m0/f0.rs"]);
}
