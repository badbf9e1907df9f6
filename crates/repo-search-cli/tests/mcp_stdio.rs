//! `repo-search mcp` driven over raw stdio, for what no SDK client sends: malformed lines and
//! wrong parameter shapes. Every line must get an answer (a client waiting for one would hang),
//! and the server must keep serving afterwards.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use index_contract::ErrorCode;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_repo-search");

/// How long a reply may take before the test calls it a hang.
const REPLY_WITHIN: Duration = Duration::from_secs(60);

/// The longest line the server reads (16 MiB), as documented in docs/cli.md.
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

struct Server {
    child: Child,
    stdin: ChildStdin,
    replies: Receiver<Value>,
    next_id: u64,
}

impl Server {
    /// Starts the server on `root` and completes the MCP handshake.
    fn start(root: &Path) -> Server {
        let mut child = Command::new(BIN)
            .args(["mcp", "--root"])
            .arg(root)
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
        let mut server = Server {
            child,
            stdin,
            replies,
            next_id: 100,
        };
        let init = server.request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": { "name": "raw-stdio-test", "version": "1" },
            }),
        );
        assert_eq!(
            init["result"]["serverInfo"]["name"], "repo-search",
            "{init}"
        );
        server.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        server
    }

    fn send(&mut self, line: &[u8]) {
        self.stdin.write_all(line).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    fn reply(&mut self) -> Value {
        match self.replies.recv_timeout(REPLY_WITHIN) {
            Ok(v) => v,
            Err(RecvTimeoutError::Timeout) => panic!("no reply: a client would hang"),
            Err(RecvTimeoutError::Disconnected) => {
                panic!("the server closed stdout: {:?}", self.child.try_wait())
            }
        }
    }

    /// Sends a well-formed request and returns its reply, which must carry its id.
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let line = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        self.send(line.to_string().as_bytes());
        let reply = self.reply();
        assert_eq!(reply["id"], id, "{reply}");
        reply
    }

    /// The server still answers a ping.
    fn assert_serving(&mut self) {
        let pong = self.request("ping", json!({}));
        assert_eq!(pong["result"], json!({}), "{pong}");
    }

    fn call(&mut self, arguments: Value) -> Value {
        let reply = self.request(
            "tools/call",
            json!({ "name": "repo_search", "arguments": arguments }),
        );
        reply["result"].clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ok = Command::new("git")
        .current_dir(dir.path())
        .args(["init", "-q"])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    std::fs::write(dir.path().join("a.txt"), "needle_for_stdio\n").unwrap();
    dir
}

/// Sends `line` and checks the reply's error code and id, then that the server still serves.
fn check(server: &mut Server, line: &[u8], code: i64, id: Value) {
    server.send(line);
    let reply = server.reply();
    assert_eq!(reply["jsonrpc"], "2.0", "{reply}");
    assert_eq!(reply["error"]["code"], code, "{reply}");
    assert_eq!(reply["id"], id, "{reply}");
    assert!(reply.get("result").is_none(), "{reply}");
    server.assert_serving();
}

#[test]
fn unparsable_lines_get_a_parse_error_and_the_server_keeps_serving() {
    let dir = repo();
    let mut server = Server::start(dir.path());
    let mut over_long = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"x\":\"".to_vec();
    over_long.resize(MAX_LINE_BYTES + 1, b'a');
    over_long.extend_from_slice(b"\"}");
    let lines: [&[u8]; 7] = [
        b"{",
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"",
        b"\xff\xfe\xfd",
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":\"\xc3\"}}",
        br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\ud800"}}"#,
        &[b'['; 100_000],
        &over_long,
    ];
    for line in lines {
        check(&mut server, line, -32700, Value::Null);
    }
}

#[test]
fn json_that_is_not_a_request_gets_invalid_request() {
    let dir = repo();
    let mut server = Server::start(dir.path());
    check(&mut server, b"[]", -32600, Value::Null);
    check(&mut server, b"42", -32600, Value::Null);
    check(
        &mut server,
        br#"{"jsonrpc":"1.0","id":9,"method":"ping"}"#,
        -32600,
        json!(9),
    );
}

#[test]
fn wrong_param_shapes_get_invalid_params_with_the_request_id() {
    let dir = repo();
    let mut server = Server::start(dir.path());
    for (id, params) in [
        (json!(1), json!(5)),
        (json!("two"), json!([])),
        (json!(3), json!("x")),
        (json!(4), json!({ "name": "repo_search", "arguments": "x" })),
        (json!(5), json!({ "name": "repo_search", "arguments": [] })),
        (json!(6), json!({ "arguments": { "query": "x" } })),
        (json!(7), json!({ "name": 7 })),
    ] {
        let line = json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params });
        check(&mut server, line.to_string().as_bytes(), -32602, id);
    }
    let line = json!({ "jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": 5 });
    check(&mut server, line.to_string().as_bytes(), -32602, json!(8));
    // An unknown tool is the right shape with the wrong name: invalid params too.
    let line =
        json!({ "jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": { "name": "nope" } });
    check(&mut server, line.to_string().as_bytes(), -32602, json!(9));
    // An unknown method is still "method not found".
    check(
        &mut server,
        br#"{"jsonrpc":"2.0","id":10,"method":"nope/nothing"}"#,
        -32601,
        json!(10),
    );
}

#[test]
fn a_failed_refresh_answers_with_its_code_and_a_fixed_message() {
    let dir = repo();
    // Git is not the judge: a damaged git index does not stop a refresh.
    std::fs::write(dir.path().join(".git/index"), b"DIRC garbage").unwrap();
    let mut server = Server::start(dir.path());
    // A directory where the index's lock file belongs makes the first build fail.
    let lock = dir.path().join(".git/repo-search/LOCK");
    std::fs::remove_file(&lock).unwrap();
    std::fs::create_dir(&lock).unwrap();
    let result = server.call(json!({ "query": "needle_for_stdio", "mode": "indexed_literal" }));
    assert_eq!(result["isError"], true, "{result}");
    let error = &result["structuredContent"];
    assert_eq!(error["code"], ErrorCode::Failed.as_str(), "{result}");
    assert_eq!(error["message"], "the index could not be refreshed");
    // The literal mode needs no index and still answers.
    let literal = server.call(json!({ "query": "needle_for_stdio", "mode": "literal" }));
    assert_eq!(literal["isError"], false, "{literal}");
}

#[test]
fn semantic_mode_is_refused_as_unsupported() {
    let dir = repo();
    let mut server = Server::start(dir.path());
    let result = server.call(json!({ "query": "needle_for_stdio", "mode": "semantic" }));
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(
        result["structuredContent"]["code"],
        ErrorCode::Unsupported.as_str()
    );
}

#[test]
fn a_missing_or_symlinked_path_gets_the_same_answer_in_both_modes() {
    let dir = repo();
    std::fs::create_dir(dir.path().join("real")).unwrap();
    std::fs::write(dir.path().join("real/b.txt"), "needle_for_stdio\n").unwrap();
    std::os::unix::fs::symlink("real", dir.path().join("link")).unwrap();
    let mut server = Server::start(dir.path());
    for (path, code) in [
        ("missing", ErrorCode::Unsupported),
        ("link", ErrorCode::Untrusted),
        ("link/b.txt", ErrorCode::Untrusted),
    ] {
        let answers: Vec<Value> = ["literal", "indexed_literal"]
            .into_iter()
            .map(|mode| {
                server.call(json!({ "query": "needle_for_stdio", "mode": mode, "path": path }))
                    ["structuredContent"]
                    .clone()
            })
            .collect();
        assert_eq!(answers[0]["code"], code.as_str(), "{path}: {answers:?}");
        assert_eq!(answers[0], answers[1], "{path}");
    }
}
