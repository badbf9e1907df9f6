//! `repo-search serve` and the `search` that asks it: a served answer is byte for byte the
//! one-shot answer, a write before a search is always seen, one server per index, and `search`
//! answers by itself whenever no server does. Every server is stopped with SIGTERM, after which
//! it reports how many requests it answered: that count proves the searches went through it.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{BIN, LIMIT, git, repo, run_bounded, write};

/// A running `repo-search serve`, killed when dropped.
struct Server {
    child: Child,
    stderr: Receiver<String>,
}

impl Server {
    /// Starts a server on `root` and waits until it listens.
    fn start(root: &Path) -> Server {
        let mut child = Command::new(BIN)
            .args(["serve", "--root"])
            .arg(root)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, stderr) = std::sync::mpsc::channel();
        let pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let server = Server { child, stderr };
        let first = server.line();
        assert!(first.starts_with("repo-search: serving "), "{first}");
        server
    }

    /// The next line the server wrote on stderr.
    fn line(&self) -> String {
        self.stderr
            .recv_timeout(LIMIT)
            .unwrap_or_else(|_| panic!("the server wrote nothing within {LIMIT:?}"))
    }

    /// Waits for the server to exit by itself, then returns how many requests it answered.
    fn wait(mut self) -> u64 {
        let started = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(started.elapsed() < LIMIT, "the server did not stop");
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(status.success(), "{status}");
        let last = self.line();
        let count = last
            .strip_prefix("repo-search: stopped ")
            .and_then(|l| l.split(" after answering ").nth(1))
            .and_then(|l| l.strip_suffix(" requests"))
            .unwrap_or_else(|| panic!("unexpected last line: {last}"));
        count.parse().unwrap()
    }

    /// Stops the server with SIGTERM and returns how many requests it answered.
    fn stop(self) -> u64 {
        let out = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .output()
            .unwrap();
        assert!(out.status.success());
        self.wait()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn socket(root: &Path) -> PathBuf {
    root.join(".git/repo-search/serve.sock")
}

/// Writes a file modified a minute ago. A file modified within the index's 2 s racy window is
/// read again by every stat-based refresh, which commits a new revision, while the watching
/// server rightly reads it again only on an event: the two answers would then name different
/// revisions of the same content.
fn write_old(root: &Path, rel: &str, text: &str) {
    write(root, rel, text);
    let minute_ago = std::time::SystemTime::now() - Duration::from_secs(60);
    let file = std::fs::File::options()
        .write(true)
        .open(root.join(rel))
        .unwrap();
    file.set_modified(minute_ago).unwrap();
}

/// A repository with a few files in three directories.
fn sample() -> tempfile::TempDir {
    let dir = repo();
    let root = dir.path();
    for i in 0..30 {
        write_old(
            root,
            &format!("src/m{}/f{i}.rs", i % 3),
            &format!("fn hello_{i}() {{ let Greeting = \"hello world\"; }}\n"),
        );
    }
    write_old(root, "docs/readme.md", "Hello, rare_token_here.\n");
    git(root, &["add", "."]);
    git(root, &["commit", "-qm", "one"]);
    dir
}

fn search(root: &Path, args: &[&str]) -> Output {
    let mut all = vec!["search"];
    all.extend_from_slice(args);
    run_bounded(root, &all, LIMIT)
}

/// The index's commit time may be re-stamped between two runs (every 5 s under a steady user),
/// which is the only part of an answer allowed to differ.
fn without_update_time(stdout: &[u8]) -> String {
    let text = String::from_utf8_lossy(stdout);
    let mut out = String::new();
    let mut rest = text.as_ref();
    while let Some(at) = rest.find("\"updated_at\":") {
        let (head, tail) = rest.split_at(at + "\"updated_at\":".len());
        out.push_str(head);
        rest = tail.trim_start_matches(|c: char| c.is_ascii_digit());
    }
    out.push_str(rest);
    out
}

/// The served answer to `args` (stdout, stderr, exit code) equals the one-shot answer.
fn check(root: &Path, args: &[&str]) {
    let served = search(root, args);
    let mut alone = args.to_vec();
    alone.push("--no-server");
    let one_shot = search(root, &alone);
    assert_eq!(served.status.code(), one_shot.status.code(), "{args:?}");
    assert_eq!(
        without_update_time(&served.stdout),
        without_update_time(&one_shot.stdout),
        "{args:?}"
    );
    assert_eq!(
        String::from_utf8_lossy(&served.stderr),
        String::from_utf8_lossy(&one_shot.stderr),
        "{args:?}"
    );
}

/// Every call `check` makes through the server.
const CHECKED: &[&[&str]] = &[
    &["hello"],
    &["hello", "--json"],
    &["greeting", "-i", "--json"],
    &["hello", "--path", "src/m1"],
    &["hello", "--max-results", "2", "--json"],
    &["rare_token_here"],
    &["no_such_text_anywhere"],
    &["no_such_text_anywhere", "--json"],
    &["hello", "--path", "missing", "--json"],
    &["hello", "--path", "../escape"],
    &["hello", "--max-results", "5000", "--json"],
    &["two\nlines", "--json"],
];

#[test]
fn search_through_a_running_server_equals_the_one_shot_answer() {
    let dir = sample();
    let root = dir.path();
    let server = Server::start(root);
    let mode = std::fs::metadata(socket(root))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "only the owner may connect");
    for args in CHECKED {
        check(root, args);
    }
    // A write before a search is seen through the server: new, changed and deleted files.
    let mut writes = 0;
    for i in 0..20 {
        let file = format!("notes/n{}.txt", i % 4);
        write(root, &file, &format!("marker_{i}\n"));
        let out = search(root, &[&format!("marker_{i}")]);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{file}:1:1:marker_{i}\n")
        );
        if i >= 4 {
            let out = search(root, &[&format!("marker_{}", i - 4)]);
            assert_eq!(out.status.code(), Some(1), "an overwritten marker is gone");
        }
        writes += if i >= 4 { 2 } else { 1 };
    }
    std::fs::remove_file(root.join("docs/readme.md")).unwrap();
    let out = search(root, &["rare_token_here"]);
    assert_eq!(out.status.code(), Some(1), "a deleted file is gone");
    assert_eq!(server.stop(), CHECKED.len() as u64 + writes + 1);
    assert!(!socket(root).exists(), "a clean exit removes the socket");
}

#[test]
fn a_second_server_on_the_same_index_is_refused() {
    let dir = sample();
    let root = dir.path();
    let server = Server::start(root);
    let second = run_bounded(root, &["serve"], LIMIT);
    assert_eq!(second.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains("ERR_PRISM_INDEX_UNSUPPORTED: another `repo-search serve` already"),
        "{stderr}"
    );
    // The first one still serves.
    assert_eq!(search(root, &["rare_token_here"]).status.code(), Some(0));
    assert_eq!(server.stop(), 1);
}

#[test]
fn a_stale_socket_from_a_killed_server_is_replaced() {
    let dir = sample();
    let root = dir.path();
    let mut killed = Server::start(root);
    killed.child.kill().unwrap();
    killed.child.wait().unwrap();
    assert!(socket(root).exists(), "kill -9 leaves the socket behind");
    let server = Server::start(root);
    check(root, &["hello", "--json"]);
    assert_eq!(server.stop(), 1);
}

#[test]
fn search_falls_back_when_the_server_is_gone() {
    let dir = sample();
    let root = dir.path();
    let expected = search(root, &["rare_token_here", "--no-server"]);
    assert_eq!(expected.status.code(), Some(0));
    let same = |out: Output| {
        assert_eq!(out.status.code(), Some(0));
        assert_eq!(out.stdout, expected.stdout);
    };
    let mut server = Server::start(root);
    same(search(root, &["rare_token_here"]));
    // Killed: its socket refuses connections.
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    same(search(root, &["rare_token_here"]));
    // Stopped cleanly: no socket at all.
    let server = Server::start(root);
    assert_eq!(server.stop(), 0);
    same(search(root, &["rare_token_here"]));
    // Something else at the socket's path.
    std::fs::write(socket(root), "not a socket").unwrap();
    same(search(root, &["rare_token_here"]));
}

#[test]
fn parallel_searches_through_one_server_never_fail() {
    let dir = sample();
    let root = dir.path();
    let server = Server::start(root);
    let expected = search(root, &["hello", "--json", "--no-server"]);
    assert_eq!(expected.status.code(), Some(0));
    let expected = without_update_time(&expected.stdout);
    let (threads, rounds) = (8, 10);
    let failures: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    (0..rounds)
                        .filter(|_| {
                            let out = search(root, &["hello", "--json"]);
                            out.status.code() != Some(0)
                                || without_update_time(&out.stdout) != expected
                        })
                        .count()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(failures, 0);
    assert_eq!(server.stop(), threads * rounds);
}

#[test]
fn a_server_stops_when_its_index_directory_goes_away() {
    let dir = sample();
    let root = dir.path();
    let server = Server::start(root);
    std::fs::remove_dir_all(root.join(".git/repo-search")).unwrap();
    assert_eq!(server.wait(), 0);
    // The next search builds a new index by itself.
    assert_eq!(search(root, &["rare_token_here"]).status.code(), Some(0));
}

#[test]
fn a_malformed_request_is_answered_and_the_connection_keeps_serving() {
    let dir = sample();
    let root = dir.path();
    let server = Server::start(root);
    let mut stream = UnixStream::connect(socket(root)).unwrap();
    stream.set_read_timeout(Some(LIMIT)).unwrap();
    let request = json!({ "arguments": { "query": "rare_token_here", "mode": "indexed_literal" } });
    let lines = format!("not json\n{{\"no\": \"arguments\"}}\n{request}\n");
    stream.write_all(lines.as_bytes()).unwrap();
    let mut replies = BufReader::new(stream.try_clone().unwrap()).lines();
    for _ in 0..2 {
        let reply: Value = serde_json::from_str(&replies.next().unwrap().unwrap()).unwrap();
        assert_eq!(
            reply["error"]["code"], "ERR_PRISM_INDEX_UNSUPPORTED",
            "{reply}"
        );
    }
    let reply: Value = serde_json::from_str(&replies.next().unwrap().unwrap()).unwrap();
    assert_eq!(reply["ok"]["hits"][0]["path"], "docs/readme.md", "{reply}");
    // A line over the bound is refused, then the connection is closed.
    // The server may close before the last bytes are read; only its reply matters.
    let _ = stream.write_all(&vec![b'x'; (1 << 20) + 10]);
    let reply: Value = serde_json::from_str(&replies.next().unwrap().unwrap()).unwrap();
    assert_eq!(
        reply["error"]["code"], "ERR_PRISM_INDEX_UNSUPPORTED",
        "{reply}"
    );
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    assert!(rest.is_empty());
    drop(stream);
    assert_eq!(server.stop(), 4);
}
