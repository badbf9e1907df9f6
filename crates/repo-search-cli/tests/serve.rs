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
        Server::start_with(root, &[])
    }

    /// Starts a server on `root` with more options, and waits until it listens.
    fn start_with(root: &Path, options: &[&std::ffi::OsStr]) -> Server {
        let server = Server::spawn(root, options);
        let first = server.line();
        assert!(first.starts_with("repo-search: serving "), "{first}");
        server
    }

    /// Starts a server on `root` without waiting for it.
    fn spawn(root: &Path, options: &[&std::ffi::OsStr]) -> Server {
        let mut child = Command::new(BIN)
            .args(["serve", "--root"])
            .arg(root)
            .args(options)
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
        Server { child, stderr }
    }

    /// The next line the server wrote on stderr.
    fn line(&self) -> String {
        self.stderr
            .recv_timeout(LIMIT)
            .unwrap_or_else(|_| panic!("the server wrote nothing within {LIMIT:?}"))
    }

    /// Waits for the server to exit by itself, then returns how many searches it answered.
    fn wait(self) -> u64 {
        self.wait_report().1
    }

    /// Waits for the server to exit by itself, then returns why it says it stopped and how many
    /// searches it answered.
    fn wait_report(mut self) -> (String, u64) {
        let started = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(started.elapsed() < LIMIT, "the server did not stop");
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(status.success(), "{status}");
        stop_report(&self.line())
    }

    /// Stops the server with SIGTERM and returns how many searches it answered.
    fn stop(self) -> u64 {
        let out = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .output()
            .unwrap();
        assert!(out.status.success());
        self.wait()
    }
}

/// Why a server's last line says it stopped, and how many searches it answered.
fn stop_report(last: &str) -> (String, u64) {
    let (why, count) = last
        .strip_prefix("repo-search: stopped ")
        .and_then(|l| l.split_once(" after answering "))
        .and_then(|(why, l)| Some((why, l.strip_suffix(" searches")?)))
        .unwrap_or_else(|| panic!("unexpected last line: {last}"));
    (why.to_owned(), count.parse().unwrap())
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

/// Every call `check` makes through the server: each asks it for one search.
const CHECKED: &[&[&str]] = &[
    &["hello"],
    &["hello", "--json"],
    &["greeting", "-i", "--json"],
    &["hello", "--path", "src/m1"],
    &["hello", "--max-results", "2", "--json"],
    &["rare_token_here"],
    &["no_such_text_anywhere"],
    &["no_such_text_anywhere", "--json"],
];

/// Calls the client refuses by itself, as the one-shot path would: they never reach the server.
const REFUSED: &[&[&str]] = &[
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
    for args in CHECKED.iter().chain(REFUSED) {
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
fn a_server_starting_while_its_lock_is_asked_about_still_serves() {
    // `status`, and a search that may start a server, ask whether one serves by taking the lock
    // for an instant; a server that starts in that instant must wait it out, not give up.
    let dir = sample();
    let root = dir.path();
    assert_eq!(search(root, &["rare_token_here"]).status.code(), Some(0));
    let lock_path = root.join(".git/repo-search/serve.lock");
    let lock = std::fs::File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .unwrap();
    lock.lock().unwrap();
    let mut server = Server::spawn(root, &[]);
    // Held until the server has opened the lock file and tried it (or has already given up).
    let fds = format!("/proc/{}/fd", server.child.id());
    let started = Instant::now();
    while !std::fs::read_dir(&fds).is_ok_and(|fds| {
        fds.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .any(|link| link.ends_with("serve.lock"))
    }) {
        if server.child.try_wait().unwrap().is_some() {
            break;
        }
        assert!(
            started.elapsed() < LIMIT,
            "the server never opened its lock"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(50));
    drop(lock);
    let first = server.line();
    assert!(first.starts_with("repo-search: serving "), "{first}");
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
    let mut replies = BufReader::new(stream.try_clone().unwrap()).lines();
    let mut next = || -> Value {
        // Heartbeats are not replies.
        loop {
            let line: Value = serde_json::from_str(&replies.next().unwrap().unwrap()).unwrap();
            if line != json!({ "working": true }) {
                return line;
            }
        }
    };
    let hello = next();
    assert_eq!(hello["hello"]["protocol"], 2, "{hello}");
    assert_eq!(
        hello["hello"]["root"],
        json!(root.canonicalize().unwrap()),
        "{hello}"
    );
    let lines = "not json\n{\"arguments\": {}}\n{\"status\": {}}\n";
    stream.write_all(lines.as_bytes()).unwrap();
    for _ in 0..2 {
        let reply = next();
        assert_eq!(
            reply["error"]["code"], "ERR_PRISM_INDEX_UNSUPPORTED",
            "{reply}"
        );
    }
    let reply = next();
    assert_eq!(reply["ok"]["state"], "ready", "{reply}");
    // A line over the bound is refused, then the connection is closed.
    // The server may close before the last bytes are read; only its reply matters.
    let _ = stream.write_all(&vec![b'x'; (1 << 20) + 10]);
    let reply = next();
    assert_eq!(
        reply["error"]["code"], "ERR_PRISM_INDEX_UNSUPPORTED",
        "{reply}"
    );
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    assert!(rest.is_empty());
    drop(stream);
    assert_eq!(server.stop(), 0);
}

#[test]
fn serve_works_in_a_worktree_250_characters_deep() {
    let base = tempfile::tempdir().unwrap();
    let mut deep = base.path().to_path_buf();
    while deep.as_os_str().len() < 250 {
        deep.push("a_rather_long_directory_name_for_depth");
    }
    std::fs::create_dir_all(&deep).unwrap();
    support::git_init(&deep);
    write_old(&deep, "src/lib.rs", "fn deep_needle() {}\n");
    assert!(
        socket(&deep).as_os_str().len() > 108,
        "the socket path must be over sun_path's limit"
    );
    let server = Server::start(&deep);
    check(&deep, &["deep_needle"]);
    check(&deep, &["deep_needle", "--json"]);
    assert_eq!(server.stop(), 2, "both searches went through the server");
}

#[test]
fn a_stopped_server_costs_a_search_well_under_its_deadline() {
    let dir = sample();
    let root = dir.path();
    let expected = search(root, &["rare_token_here", "--no-server"]);
    assert_eq!(expected.status.code(), Some(0));
    let server = Server::start(root);
    let pid = server.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-STOP", &pid])
            .status()
            .unwrap()
            .success()
    );
    let started = Instant::now();
    let out = search(root, &["rare_token_here"]);
    let took = started.elapsed();
    assert!(
        Command::new("kill")
            .args(["-CONT", &pid])
            .status()
            .unwrap()
            .success()
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(out.stdout, expected.stdout, "the same answer, given here");
    // The handshake bound is 300 ms; the rest is this search's own refresh. The point is that
    // it is not the 30 s deadline, nor twice it.
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert_eq!(server.stop(), 0, "the stopped server answered nothing");
}

/// How a fake server answers one request line.
type Respond = Box<dyn Fn(&Value) -> Vec<String> + Send>;

/// A program of the test's at the socket: it sends `hello` (if any), then answers each request
/// line with the lines `respond` gives, until the client hangs up.
fn fake_server(
    root: &Path,
    hello: Option<Value>,
    respond: impl Fn(&Value) -> Vec<String> + Send + 'static,
) -> std::thread::JoinHandle<()> {
    std::fs::create_dir_all(root.join(".git/repo-search")).unwrap();
    let listener = std::os::unix::net::UnixListener::bind(socket(root)).unwrap();
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut out = stream.try_clone().unwrap();
        if let Some(hello) = hello {
            writeln!(out, "{hello}").unwrap();
        }
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { return };
            let request: Value = serde_json::from_str(&line).unwrap();
            for reply in respond(&request) {
                if writeln!(out, "{reply}").is_err() {
                    return;
                }
            }
        }
    })
}

fn hello(root: &Path) -> Value {
    json!({ "hello": {
        "protocol": 2,
        "root": root.canonicalize().unwrap(),
        "modes": ["literal", "indexed_literal"],
    } })
}

/// The replies of a server that refreshes and reports a fresh index, and answers a search with
/// `response`.
fn forging(response: Value) -> impl Fn(&Value) -> Vec<String> {
    move |request| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let status = json!({ "state": "ready", "source_revision": "forged", "updated_at": now });
        let reply = if request.get("refresh").is_some() {
            json!({ "ok": null })
        } else if request.get("status").is_some() {
            json!({ "ok": status })
        } else {
            json!({ "ok": { "status": status, "complete": true, "hits": response["hits"] } })
        };
        vec![reply.to_string()]
    }
}

#[test]
fn a_forged_served_answer_is_untrusted_and_never_printed() {
    let dir = sample();
    let root = dir.path();
    let hit = |path: &str| json!({ "path": path, "line": 1, "column": 1, "snippet": "root:x:0:0:root:/root:/bin/bash", "score": 0.5 });
    for forged in [
        hit("../../../etc/passwd"),
        hit("/etc/passwd"),
        json!({ "path": "src/m0/f0.rs", "line": 1, "column": 1, "snippet": "x", "score": 7.0 }),
    ] {
        let server = fake_server(
            root,
            Some(hello(root)),
            forging(json!({ "hits": [forged] })),
        );
        let out = search(root, &["rare_token_here"]);
        server.join().unwrap();
        std::fs::remove_file(socket(root)).unwrap();
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert!(out.stdout.is_empty(), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("ERR_PRISM_INDEX_UNTRUSTED") && !stderr.contains("root:x"),
            "{stderr}"
        );
    }
    // A hit outside the asked scope is forged too.
    let server = fake_server(
        root,
        Some(hello(root)),
        forging(json!({ "hits": [hit("docs/readme.md")] })),
    );
    let out = search(root, &["rare_token_here", "--path", "src"]);
    server.join().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("ERR_PRISM_INDEX_UNTRUSTED"));
}

#[test]
fn a_server_that_is_not_ours_or_falls_silent_is_answered_around() {
    let dir = sample();
    let root = dir.path();
    let expected = search(root, &["rare_token_here", "--no-server"]);
    assert_eq!(expected.status.code(), Some(0));
    let other = tempfile::tempdir().unwrap();
    let silent = |_: &Value| Vec::new();
    let heartbeats = |_: &Value| vec![r#"{"working":true}"#.to_owned(); 100_000];
    let cases: Vec<(&str, Option<Value>, Respond)> = vec![
        ("no hello", None, Box::new(silent)),
        (
            "silent after its hello",
            Some(hello(root)),
            Box::new(silent),
        ),
        (
            "another worktree",
            Some(json!({ "hello": { "protocol": 2, "root": other.path(), "modes": [] } })),
            Box::new(forging(json!({ "hits": [] }))),
        ),
        (
            "another protocol",
            Some(
                json!({ "hello": { "protocol": 1, "root": root.canonicalize().unwrap(), "modes": [] } }),
            ),
            Box::new(forging(json!({ "hits": [] }))),
        ),
        (
            "garbage",
            Some(hello(root)),
            Box::new(|_: &Value| vec!["<html>".to_owned()]),
        ),
        ("only heartbeats", Some(hello(root)), Box::new(heartbeats)),
    ];
    for (what, hello, respond) in cases {
        let server = fake_server(root, hello, respond);
        let started = Instant::now();
        let out = search(root, &["rare_token_here", "--deadline-ms", "500"]);
        let took = started.elapsed();
        assert_eq!(out.status.code(), Some(0), "{what}: {out:?}");
        assert_eq!(
            out.stdout, expected.stdout,
            "{what}: the same answer, given here"
        );
        assert!(took < Duration::from_secs(10), "{what}: took {took:?}");
        drop(server);
        std::fs::remove_file(socket(root)).unwrap();
    }
}

#[test]
fn semantic_through_a_running_server_equals_the_one_shot_answer() {
    let dir = sample();
    let root = dir.path();
    let model = support::model_dir();
    // `--rerank=never`: the one-shot side computes no MiniLM vectors, and a re-ranked answer
    // depends on which of them the server kept by then.
    let server = Server::start_with(
        root,
        &[
            "--model-dir".as_ref(),
            model.as_os_str(),
            "--rerank=never".as_ref(),
        ],
    );
    let model = model.to_str().unwrap();
    // Another setup than the server's is answered here: a re-rank policy the server does not
    // serve.
    let mut other = vec![
        "a friendly greeting",
        "--mode",
        "semantic",
        "--json",
        "--rerank=kept",
        "--no-server",
    ];
    other.extend(["--model-dir", model]);
    let alone = search(root, &other);
    other.pop();
    other.pop();
    other.pop();
    other.extend(["--model-dir", model]);
    assert!(
        without_update_time(&search(root, &other).stdout) == without_update_time(&alone.stdout),
        "another setup's answer differs from its one-shot answer"
    );
    for args in [
        &[
            "a friendly greeting",
            "--mode",
            "semantic",
            "--rerank=never",
        ][..],
        &[
            "a friendly greeting",
            "--mode",
            "semantic",
            "--rerank=never",
            "--json",
        ][..],
    ] {
        let mut args = args.to_vec();
        args.extend(["--model-dir", model]);
        check(root, &args);
    }
    assert_eq!(server.stop(), 2, "both went through the server");
}

/// A server whose first build of the semantic store outlasts its deadline refuses each call as
/// `building` and goes on building. A search through it waits for the build, as a search with no
/// server waits for its own, and answers what the one-shot answers.
#[test]
fn a_search_through_a_server_still_building_its_store_waits_for_the_build() {
    let dir = sample();
    let root = dir.path();
    // A build that outlasts the server's deadline of 300 ms several times, which still leaves a
    // loaded machine ample time for each refresh and search.
    support::write_handlers(root, 1000);
    let server = Server::start_with(root, &["--deadline-ms".as_ref(), "300".as_ref()]);
    let args = ["a friendly greeting", "--mode", "semantic", "--json"];
    let served = search(root, &args);
    assert!(
        served.status.success(),
        "{}",
        String::from_utf8_lossy(&served.stderr)
    );
    assert_eq!(
        server.stop(),
        1,
        "the search was not answered by the server"
    );
    // The same hits as a search without the server, which finds the store built.
    let alone = search(root, &[&args[..], &["--no-server"]].concat());
    let hits = |out: &Output| serde_json::from_slice::<Value>(&out.stdout).unwrap()["hits"].clone();
    assert_eq!(hits(&served), hits(&alone));
}

/// The log a server that a `search` started writes to.
fn serve_log(root: &Path) -> PathBuf {
    root.join(".git/repo-search/serve.log")
}

/// `search ARGS` with `REPO_SEARCH_START_SERVER` set to `env` (or unset).
fn search_with_env(root: &Path, args: &[&str], env: Option<&str>) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.current_dir(root).arg("search").args(args);
    match env {
        Some(v) => cmd.env("REPO_SEARCH_START_SERVER", v),
        None => cmd.env_remove("REPO_SEARCH_START_SERVER"),
    };
    support::output_bounded(cmd, LIMIT)
}

/// Waits until `path`'s text satisfies `done`, and returns it.
fn wait_for_text(path: &Path, done: impl Fn(&str) -> bool) -> String {
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if done(&text) {
            return text;
        }
        assert!(started.elapsed() < LIMIT, "{path:?} still holds: {text}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The first whole line of `log` (ended by a line break: a server may be writing the rest) that
/// starts with `prefix`.
fn logged_line<'a>(log: &'a str, prefix: &str) -> Option<&'a str> {
    log.split_inclusive('\n')
        .find(|l| l.starts_with(prefix) && l.ends_with('\n'))
        .map(str::trim_end)
}

/// Waits until a started server's log holds a whole line starting with `prefix`, and returns
/// the log.
fn wait_for_logged(root: &Path, prefix: &str) -> String {
    wait_for_text(&serve_log(root), |t| logged_line(t, prefix).is_some())
}

/// The pid a started server's log names.
fn logged_pid(log: &str) -> u32 {
    let line = logged_line(log, "repo-search: serving ")
        .unwrap_or_else(|| panic!("no server in the log: {log}"));
    line.rsplit_once("(pid ")
        .and_then(|(_, pid)| pid.strip_suffix(')'))
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {line}"))
}

/// Stops the started server `pid` of the worktree at `root` with SIGTERM, and returns its log
/// once it says it stopped.
fn stop_started(root: &Path, pid: u32) -> String {
    let kill = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .output()
        .unwrap();
    assert!(kill.status.success());
    wait_for_logged(root, "repo-search: stopped ")
}

fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit_once(')')
            .is_some_and(|(_, s)| s.starts_with(" Z"))
    })
}

#[test]
fn a_search_starts_a_server_that_answers_the_searches_after_it() {
    let dir = sample();
    let root = dir.path();
    // Searches at once, each answered by itself or by the server one of them started: one
    // server runs, whatever the order.
    let answers: Vec<Output> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| search_with_env(root, &["rare_token_here", "--json"], Some("always")))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for out in &answers {
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    }
    let log = wait_for_logged(root, "repo-search: serving ");
    let pid = logged_pid(&log);
    assert!(socket(root).exists());
    // It leads a session of its own, away from the searches' terminal and signals.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    assert_eq!(fields[3], pid.to_string(), "its session is its own: {stat}");
    // It serves exactly as a one-shot search answers, and it stays the only one: the lock is
    // held.
    check(root, &["hello", "--json"]);
    check(root, &["greeting", "-i"]);
    let second = run_bounded(root, &["serve"], LIMIT);
    assert_eq!(
        second.status.code(),
        Some(2),
        "a started server holds the lock"
    );
    // `status` names it.
    let status = run_bounded(root, &["status", "--json"], LIMIT);
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["server"]["pid"], json!(pid), "{status}");
    let text = String::from_utf8(run_bounded(root, &["status"], LIMIT).stdout).unwrap();
    assert!(
        text.contains(&format!("server:    repo-search serve, pid {pid}\n")),
        "{text}"
    );
    let log = std::fs::read_to_string(serve_log(root)).unwrap();
    assert_eq!(log.matches("repo-search: serving ").count(), 1, "{log}");
    let log = stop_started(root, pid);
    let last = logged_line(&log, "repo-search: stopped ").unwrap();
    // The two checked searches went through it; so did any of the first four that found it up.
    let (why, searches) = stop_report(last);
    assert_eq!(why, "on SIGTERM");
    assert!((2..=5).contains(&searches), "{log}");
    let started = Instant::now();
    while running(pid) {
        assert!(started.elapsed() < LIMIT, "the started server did not exit");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!socket(root).exists());
    let status = run_bounded(root, &["status", "--json"], LIMIT);
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["server"], Value::Null, "{status}");
    let text = String::from_utf8(run_bounded(root, &["status"], LIMIT).stdout).unwrap();
    assert!(text.contains("server:    none\n"), "{text}");
}

/// A search that finds its model directory through a relative `REPO_SEARCH_MODEL_DIR` starts a
/// server that serves its `semantic` searches: the server runs in `/`, where the variable names
/// another directory, so it gets the directory as the search resolved it.
#[test]
fn a_relative_model_directory_variable_reaches_the_started_server() {
    let dir = sample();
    let root = dir.path();
    // It exists under the worktree's own directory, so the search names it by its canonical
    // path; in `/` the same variable names a directory that is not there.
    std::fs::create_dir_all(root.join(".git/models")).unwrap();
    let semantic = |start: &str| {
        let mut cmd = Command::new(BIN);
        cmd.current_dir(root)
            .args(["search", "--mode", "semantic", "hello world", "--json"])
            .env("REPO_SEARCH_START_SERVER", start)
            .env("REPO_SEARCH_MODEL_DIR", ".git/models");
        support::output_bounded(cmd, LIMIT)
    };
    let first = semantic("always");
    assert_eq!(first.status.code(), Some(0), "{first:?}");
    let log = wait_for_logged(root, "repo-search: serving ");
    let pid = logged_pid(&log);
    let second = semantic("never");
    assert_eq!(second.status.code(), Some(0), "{second:?}");
    assert_eq!(
        without_update_time(&first.stdout),
        without_update_time(&second.stdout)
    );
    let log = stop_started(root, pid);
    let (_, searches) = stop_report(logged_line(&log, "repo-search: stopped ").unwrap());
    assert_eq!(
        searches, 1,
        "the second search went through the server: {log}"
    );
}

#[test]
fn a_search_starts_no_server_on_a_small_index_or_when_told_not_to() {
    let dir = sample();
    let root = dir.path();
    // The log is opened before a server is started: without it, none was.
    for (args, env) in [
        (&["hello"][..], None),
        (&["hello", "--start-server=large"][..], Some("always")),
        (&["hello"][..], Some("never")),
        (&["hello", "--start-server=always", "--no-server"][..], None),
        (
            &["hello", "--start-server=always", "--mode", "literal"][..],
            None,
        ),
    ] {
        let out = search_with_env(root, args, env);
        assert_eq!(out.status.code(), Some(0), "{args:?} {env:?}");
        assert!(
            !serve_log(root).exists(),
            "{args:?} {env:?} started a server"
        );
    }
    // The environment asks for one too.
    let out = search_with_env(root, &["hello"], Some("always"));
    assert_eq!(out.status.code(), Some(0));
    let log = wait_for_logged(root, "repo-search: serving ");
    let pid = logged_pid(&log);
    // The worktree's removal stops it.
    drop(dir);
    let started = Instant::now();
    while running(pid) {
        assert!(
            started.elapsed() < LIMIT,
            "the server outlived its worktree"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_server_with_an_idle_timeout_stops_when_no_search_comes() {
    let dir = sample();
    let root = dir.path();
    let server = Server::start_with(root, &["--idle-timeout".as_ref(), "3".as_ref()]);
    assert_eq!(search(root, &["rare_token_here"]).status.code(), Some(0));
    // A client that stays connected past the timeout keeps it serving.
    let client = UnixStream::connect(socket(root)).unwrap();
    std::thread::sleep(Duration::from_secs(4));
    assert!(socket(root).exists(), "it stopped with a client connected");
    let idle_from = Instant::now();
    drop(client);
    let (why, searches) = server.wait_report();
    assert!(
        idle_from.elapsed() >= Duration::from_secs(3),
        "it stopped before it was idle for its timeout"
    );
    assert_eq!(why, "because no client came for its idle timeout");
    assert_eq!(searches, 1);
    assert!(!socket(root).exists());
}

#[test]
fn a_started_server_holds_none_of_the_descriptors_its_search_inherited() {
    let dir = sample();
    let root = dir.path();
    // Canonical, as the links in `/proc/<pid>/fd` are, so that the comparison below can fail.
    let held = dir
        .path()
        .canonicalize()
        .unwrap()
        .join(".git/held-by-the-caller");
    // The shell opens fd 9 without close-on-exec, as `flock 9` scripts and jobservers do, and
    // the search inherits it.
    let mut cmd = Command::new("sh");
    cmd.current_dir(root)
        .env("REPO_SEARCH_START_SERVER", "always")
        .arg("-c")
        .arg(format!(
            "exec 9>'{}'; exec '{BIN}' search rare_token_here",
            held.display()
        ));
    let out = support::output_bounded(cmd, LIMIT);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let log = wait_for_logged(root, "repo-search: serving ");
    let pid = logged_pid(&log);
    let open: Vec<PathBuf> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .collect();
    assert!(!open.is_empty(), "the server's descriptors are readable");
    assert!(
        !open.contains(&held),
        "the server holds the caller's descriptor: {open:?}"
    );
    assert_eq!(
        std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap(),
        Path::new("/"),
        "the server keeps no directory of the caller's busy"
    );
    stop_started(root, pid);
}
