//! Helpers shared by the CLI's test files: scratch repositories, bounded runs of the binary, a
//! concurrent editor, and a raw stdio JSON-RPC client for `repo-search mcp`.

// Each test file is its own crate and uses a different subset of these helpers.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub const BIN: &str = env!("CARGO_BIN_EXE_repo-search");

/// How long one call may take before a test calls it a hang.
pub const LIMIT: Duration = Duration::from_secs(60);

pub fn git(root: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(root)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}");
}

/// Makes `dir` a fresh repository with a committer identity.
pub fn git_init(dir: &Path) {
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.email", "t@example.invalid"]);
    git(dir, &["config", "user.name", "t"]);
}

pub fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git_init(dir.path());
    dir
}

pub fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// Writes `files` Python files of 40 small functions each under `src/handlers`: a tree whose
/// semantic store takes seconds to build (about a second per 200 files here), far longer than a
/// test's short deadline, and whose files a query about greetings or connections never ranks first.
pub fn write_handlers(root: &Path, files: usize) {
    for i in 0..files {
        let text: String = (0..40)
            .map(|f| {
                format!(
                    "def handle_{i}_{f}(request, limit):\n    total = request.count * {f} + limit\n    \
                     if total > {i}:\n        return request.reply(total)\n    return None\n\n"
                )
            })
            .collect();
        write(root, &format!("src/handlers/h{i}.py"), &text);
    }
}

/// Runs the binary, killing it if it outlives `limit`: a hang is a failure, never a wait.
pub fn run_bounded(root: &Path, args: &[&str], limit: Duration) -> Output {
    let mut cmd = Command::new(BIN);
    // A test's search starts no server unless it asks: a developer's own setting must not leave
    // servers running after the tests.
    cmd.current_dir(root)
        .args(args)
        .env("REPO_SEARCH_START_SERVER", "never");
    output_bounded(cmd, limit)
}

/// Runs `cmd` with its output captured, killing it if it outlives `limit`: a hang is a failure,
/// never a wait.
pub fn output_bounded(mut cmd: Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "`{cmd:?}` hung past {limit:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `repo-search mcp` over raw stdio: lines go out as written, replies come back in order of
/// arrival, and the server is killed when dropped.
pub struct McpServer {
    child: Child,
    stdin: ChildStdin,
    replies: Receiver<Value>,
    next_id: u64,
}

impl McpServer {
    /// Starts the server on `root` without any handshake, so a test can pipeline its first lines.
    pub fn spawn(root: &Path) -> McpServer {
        let mut command = Command::new(BIN);
        command.args(["mcp", "--root"]).arg(root);
        McpServer::spawn_command(&mut command)
    }

    /// Starts `command` (the binary with `mcp` and its options, and any environment) without
    /// any handshake.
    pub fn spawn_command(command: &mut Command) -> McpServer {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, replies) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("the server wrote a line that is not JSON ({e})"));
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        McpServer {
            child,
            stdin,
            replies,
            next_id: 100,
        }
    }

    /// Starts the server on `root` and completes the MCP handshake.
    pub fn start(root: &Path) -> McpServer {
        McpServer::spawn(root).handshake()
    }

    /// Completes the MCP handshake.
    pub fn handshake(mut self) -> McpServer {
        let init = self.request("initialize", initialize_params());
        assert_eq!(
            init["result"]["serverInfo"]["name"], "repo-search",
            "{init}"
        );
        self.send(&initialized_notification());
        self
    }

    pub fn send(&mut self, line: &Value) {
        self.send_raw(line.to_string().as_bytes());
    }

    /// Sends `line` as it is (malformed JSON and invalid UTF-8 included), then a newline.
    pub fn send_raw(&mut self, line: &[u8]) {
        self.stdin.write_all(line).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The server still answers a ping.
    pub fn assert_serving(&mut self) {
        let pong = self.request("ping", json!({}));
        assert_eq!(pong["result"], json!({}), "{pong}");
    }

    /// The next reply, whichever request it answers.
    pub fn reply(&mut self) -> Value {
        match self.replies.recv_timeout(LIMIT) {
            Ok(v) => v,
            Err(RecvTimeoutError::Timeout) => {
                panic!("no reply within {LIMIT:?}: a client would hang")
            }
            Err(RecvTimeoutError::Disconnected) => {
                panic!("the server closed stdout: {:?}", self.child.try_wait())
            }
        }
    }

    /// A fresh request id.
    pub fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Sends a request and returns its reply, which must carry its id.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.id();
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        let reply = self.reply();
        assert_eq!(reply["id"], id, "{reply}");
        reply
    }

    /// Calls the `repo_search` tool and returns the call's result.
    pub fn call(&mut self, arguments: Value) -> Value {
        let reply = self.request("tools/call", tool_call_params(arguments));
        assert!(reply.get("error").is_none(), "{reply}");
        reply["result"].clone()
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn initialize_params() -> Value {
    json!({
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": { "name": "chaos-test", "version": "1" },
    })
}

pub fn initialized_notification() -> Value {
    json!({ "jsonrpc": "2.0", "method": "notifications/initialized" })
}

pub fn tool_call_params(arguments: Value) -> Value {
    json!({ "name": "repo_search", "arguments": arguments })
}

/// A tool error's `{code, message}`: the JSON of its text content. The result must be an error
/// with no structured content, which a client would hold to the tool's output schema.
pub fn tool_error(result: &Value) -> Value {
    assert_eq!(result["isError"], true, "not an error: {result}");
    assert!(
        result.get("structuredContent").is_none(),
        "an error carries no structured content: {result}"
    );
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("an error without text: {result}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("error text is not JSON ({e}): {text}"))
}

/// The sorted, distinct paths of a tool result's hits.
pub fn hit_paths(result: &Value) -> Vec<String> {
    let mut paths: Vec<String> = result["structuredContent"]["hits"]
        .as_array()
        .unwrap_or_else(|| panic!("no hits in {result}"))
        .iter()
        .map(|h| h["path"].as_str().unwrap().to_owned())
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// Rewrites files (and adds some) under `root` every 15 ms until `stop` is set: the concurrent
/// editor of the chaos tests.
pub fn edit_until(root: &Path, stop: &std::sync::atomic::AtomicBool) {
    let mut k = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        write(
            root,
            &format!("src/m{}/f{}.rs", k % 7, k % 300),
            &format!("fn g{k}() {{ needle_{} }}\n", k % 5),
        );
        if k % 10 == 0 {
            write(root, &format!("new/n{k}.rs"), "needle_0 new\n");
        }
        k += 1;
        std::thread::sleep(Duration::from_millis(15));
    }
}

/// A committed repository of 300 files under `src/m0` .. `src/m6`, each with one of the tokens
/// `needle_0` .. `needle_4`: the tree the concurrency tests search while `edit_until` rewrites it.
pub fn committed_tree() -> tempfile::TempDir {
    let dir = repo();
    let root = dir.path();
    for i in 0..300 {
        write(
            root,
            &format!("src/m{}/f{i}.rs", i % 7),
            &format!("fn f{i}() {{ needle_{} }}\n", i % 5),
        );
    }
    git(root, &["add", "."]);
    git(root, &["commit", "-qm", "one"]);
    dir
}

/// The static model `cargo xtask tools` installs (`cargo xtask ci` runs it first): the one the
/// binary finds through `REPO_SEARCH_MODEL_DIR` or `--model-dir` in the semantic tests.
pub fn model_dir() -> std::path::PathBuf {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/tools/models/all-minilm-l6-v2");
    assert!(
        dir.join("static-256.bin").is_file(),
        "no static model in {}: run `cargo xtask tools` then `cargo xtask model static`",
        dir.display()
    );
    dir
}
