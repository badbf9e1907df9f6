//! `repo-search mcp` driven over raw stdio, for what no SDK client sends: malformed lines and
//! wrong parameter shapes. Every line must get an answer (a client waiting for one would hang),
//! and the server must keep serving afterwards.

mod support;

use index_contract::ErrorCode;
use serde_json::{Value, json};
use support::{McpServer as Server, tool_error};

/// The longest line the server reads (16 MiB), as documented in docs/cli.md.
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

fn repo() -> tempfile::TempDir {
    let dir = support::repo();
    std::fs::write(dir.path().join("a.txt"), "needle_for_stdio\n").unwrap();
    dir
}

/// Sends `line` and checks the reply's error code and id, then that the server still serves.
fn check(server: &mut Server, line: &[u8], code: i64, id: Value) {
    server.send_raw(line);
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
    let error = &tool_error(&result);
    assert_eq!(error["code"], ErrorCode::Failed.as_str(), "{result}");
    assert_eq!(error["message"], "the index could not be refreshed");
    // The literal mode needs no index and still answers.
    let literal = server.call(json!({ "query": "needle_for_stdio", "mode": "literal" }));
    assert_eq!(literal["isError"], false, "{literal}");
}

#[test]
fn semantic_mode_is_served_with_no_model_installed() {
    let dir = repo();
    let mut server = Server::start(dir.path());
    let result = server.call(json!({ "query": "needle_for_stdio", "mode": "semantic" }));
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["structuredContent"]["mode"], "semantic", "{result}");
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
                tool_error(
                    &server
                        .call(json!({ "query": "needle_for_stdio", "mode": mode, "path": path })),
                )
            })
            .collect();
        assert_eq!(answers[0]["code"], code.as_str(), "{path}: {answers:?}");
        assert_eq!(answers[0], answers[1], "{path}");
    }
}
