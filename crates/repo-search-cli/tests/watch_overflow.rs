//! An event-queue overflow loses events; the watching host must still answer fresh. Alone in
//! its test binary: it shrinks the kernel's inotify queue for the server it starts, and no other
//! watcher may start meanwhile.

mod support;

use serde_json::json;
use support::{McpServer, git, hit_paths, repo, write};

const QUEUE: &str = "/proc/sys/fs/inotify/max_queued_events";

#[test]
fn an_event_queue_overflow_still_gives_a_fresh_answer() {
    let dir = repo();
    let root = dir.path();
    write(root, "a.txt", "needle_overflow base\n");
    git(root, &["add", "."]);
    git(root, &["commit", "-qm", "one"]);
    // The queue size is read when the server's watcher starts: shrink it for that moment only.
    let before = std::fs::read_to_string(QUEUE).ok();
    let shrunk = std::fs::write(QUEUE, "16").is_ok();
    let mut server = McpServer::start(root);
    let warm = server.call(json!({"query": "needle_overflow", "mode": "indexed_literal"}));
    if let Some(b) = &before {
        let _ = std::fs::write(QUEUE, b.trim());
    }
    assert_eq!(hit_paths(&warm), ["a.txt"]);
    eprintln!("inotify queue shrunk to 16 events for the server: {shrunk}");
    // Far more events than the queue holds, written as fast as possible.
    for i in 0..3000 {
        write(
            root,
            &format!("storm/f{}.txt", i % 300),
            &format!("storm {i}\n"),
        );
    }
    write(root, "late.txt", "needle_overflow late\n");
    let answer = server.call(json!({"query": "needle_overflow", "mode": "indexed_literal"}));
    assert_eq!(hit_paths(&answer), ["a.txt", "late.txt"], "{answer}");
    let storm = server.call(json!({"query": "storm 2999", "mode": "indexed_literal"}));
    assert_eq!(hit_paths(&storm), ["storm/f299.txt"], "{storm}");
}
