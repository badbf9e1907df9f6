//! `repo-search mcp` checked by the official TypeScript MCP SDK, the client most agents run,
//! installed by `cargo xtask tools` into `target/tools/mcp-node` (pinned by
//! `tests/node/package-lock.json`) and run by the machine's `node`. `Client.callTool` holds every
//! result with structured content to the tool's `outputSchema`, errors included, so a result it
//! does not accept comes back here as `threw`. Never skipped: a missing client is a failure with
//! instructions.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use index_contract::ErrorCode;
use serde_json::{Value, json};
use support::{git, repo, write};

const QUERY: &str = "needle_for_ts";

/// The SDK's install directory.
fn sdk_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools/mcp-node");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk/package.json")
            .is_file(),
        "the TypeScript MCP SDK is not installed in {}: run `cargo xtask tools` (or `cargo xtask ci`)",
        dir.display()
    );
    dir
}

/// Runs one scenario of `tests/mcp_client.mjs` and returns what it printed.
fn scenario(name: &str, config: Value) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.mjs");
    let mut config = config;
    config["exe"] = json!(support::BIN);
    let mut cmd = Command::new("node");
    cmd.arg(&script)
        .arg(sdk_dir())
        .arg(name)
        .arg(config.to_string());
    let out = support::output_bounded(cmd, Duration::from_secs(120));
    assert!(
        out.status.success(),
        "the TypeScript client failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "the client printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// A worktree with `QUERY` in three files, committed.
fn worktree() -> tempfile::TempDir {
    let dir = repo();
    write(
        dir.path(),
        "src/lib.rs",
        &format!("pub fn {QUERY}() {{}}\n"),
    );
    write(dir.path(), "README.md", &format!("call {QUERY}\n"));
    write(dir.path(), "docs/guide.md", &format!("{QUERY} explained\n"));
    git(dir.path(), &["add", "."]);
    git(dir.path(), &["commit", "-qm", "one"]);
    dir
}

/// The paths of a call's hits, in the answer's order.
fn paths(call: &Value) -> Vec<String> {
    call["structured"]["hits"]
        .as_array()
        .unwrap_or_else(|| panic!("no hits: {call}"))
        .iter()
        .map(|h| h["path"].as_str().unwrap().to_owned())
        .collect()
}

/// A call the SDK accepted as a valid answer.
fn assert_answer(call: &Value) {
    assert!(call.get("threw").is_none(), "the SDK refused it: {call}");
    assert_eq!(call["isError"], false, "{call}");
    assert!(call["structured"].is_object(), "{call}");
    assert_eq!(
        call["text"], call["structured"],
        "text and structured differ"
    );
}

/// A call that reached the client as a tool error with `code`, and no structured content.
fn assert_error(call: &Value, code: ErrorCode) {
    assert!(call.get("threw").is_none(), "the SDK refused it: {call}");
    assert_eq!(call["isError"], true, "{call}");
    assert_eq!(call["structured"], Value::Null, "{call}");
    assert_eq!(call["text"]["code"], code.as_str(), "{call}");
    assert!(
        call["text"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{call}"
    );
}

#[test]
fn the_typescript_sdk_accepts_every_answer_and_every_error_code() {
    let dir = worktree();
    let root = dir.path();
    let index = tempfile::tempdir().unwrap();
    let v = scenario(
        "tool",
        json!({
            "root": root,
            "indexDir": index.path(),
            "modelDir": support::model_dir(),
            "query": QUERY,
        }),
    );
    assert_eq!(v["server"], "repo-search");
    let tool = &v["tools"][0];
    assert_eq!(tool["name"], "repo_search");
    assert_eq!(tool["outputSchema"], true);
    assert_eq!(
        tool["modes"],
        json!(["literal", "indexed_literal", "semantic"])
    );
    assert_eq!(tool["root"], Value::Null, "--root takes no `root` argument");

    // A call in each exposed mode.
    for mode in ["literal", "indexed_literal", "semantic"] {
        assert_answer(&v[mode]);
        assert_eq!(v[mode]["structured"]["mode"], mode);
    }
    assert_eq!(paths(&v["literal"]).len(), 3);
    assert_eq!(paths(&v["indexed_literal"])[0], "src/lib.rs");
    assert_eq!(v["indexed_literal"]["structured"]["untrusted_index"], true);

    // Pages of one hit concatenate to the whole answer, each proven by its token.
    for mode in ["literal", "indexed_literal"] {
        let pages = v[format!("pages_{mode}")].as_array().unwrap();
        let mut paged = Vec::new();
        for page in pages {
            assert_answer(page);
            paged.extend(paths(page));
        }
        assert_eq!(paged, paths(&v[mode]), "{mode}: {pages:?}");
        assert_eq!(pages.len(), 3, "{mode}");
    }

    // Every code the tool answers with reaches the client as a tool error with that code.
    assert_error(&v["unsupported"], ErrorCode::Unsupported);
    assert!(
        v["unsupported"]["text"]["message"]
            .as_str()
            .unwrap()
            .contains("regex"),
        "{}",
        v["unsupported"]
    );
    assert_error(&v["limit"], ErrorCode::Limit);
    assert_error(&v["untrusted"], ErrorCode::Untrusted);
    assert_error(&v["stale"], ErrorCode::Stale);
    assert_error(&v["timeout"], ErrorCode::Timeout);
    assert_error(&v["failed"], ErrorCode::Failed);
    // The index failing costs only the index modes.
    assert_answer(&v["after_failed_literal"]);
}

#[test]
fn one_client_root_is_searched_without_a_root_argument() {
    let dir = worktree();
    let elsewhere = tempfile::tempdir().unwrap();
    let index = tempfile::tempdir().unwrap();
    let v = scenario(
        "roots",
        json!({
            "cwd": elsewhere.path(),
            "roots": [dir.path()],
            "indexDir": index.path(),
            "query": QUERY,
        }),
    );
    assert_eq!(v["tools"][0]["root"], Value::Null, "{v}");
    assert!(
        !v["tools"][0]["properties"]
            .as_array()
            .unwrap()
            .contains(&json!("root"))
    );
    assert_answer(&v["calls"][0]);
    assert_eq!(paths(&v["calls"][0])[0], "src/lib.rs");
    // With one root there is no `root` argument to send.
    assert_error(&v["unknown_root"], ErrorCode::Unsupported);
}

#[test]
fn several_client_roots_are_offered_as_a_required_root_argument() {
    let first = worktree();
    let second = repo();
    write(second.path(), "only/second.py", &format!("{QUERY} = 2\n"));
    let third = repo();
    write(third.path(), "third.go", &format!("// {QUERY}\n"));
    let elsewhere = tempfile::tempdir().unwrap();
    let v = scenario(
        "roots",
        json!({
            "cwd": elsewhere.path(),
            "roots": [first.path(), second.path()],
            "changeTo": [third.path()],
            "indexDir": Value::Null,
            "query": QUERY,
        }),
    );
    let tool = &v["tools"][0];
    let names = |dirs: &[&Path]| -> Value {
        dirs.iter()
            .map(|d| json!(d.display().to_string()))
            .collect()
    };
    assert_eq!(tool["root"], names(&[first.path(), second.path()]), "{v}");
    assert!(
        tool["required"]
            .as_array()
            .unwrap()
            .contains(&json!("root"))
    );
    assert_answer(&v["calls"][0]);
    assert_eq!(paths(&v["calls"][0])[0], "src/lib.rs");
    assert_answer(&v["calls"][1]);
    assert_eq!(paths(&v["calls"][1]), ["only/second.py"]);
    assert_error(&v["missing_root"], ErrorCode::Unsupported);
    assert_error(&v["unknown_root"], ErrorCode::Unsupported);
    // The client's roots changed: the server says the tool changed, and serves the new root.
    assert_eq!(v["list_changed"], true, "{v}");
    assert_eq!(v["tools_after"][0]["root"], Value::Null, "{v}");
    assert_answer(&v["after"]);
    assert_eq!(paths(&v["after"]), ["third.go"]);
}

#[test]
fn a_client_without_roots_searches_where_the_server_started() {
    let dir = worktree();
    let index = tempfile::tempdir().unwrap();
    let v = scenario(
        "no-roots",
        json!({ "cwd": dir.path(), "indexDir": index.path(), "query": QUERY }),
    );
    assert_eq!(v["tools"][0]["root"], Value::Null);
    assert_answer(&v["call"]);
    assert_eq!(paths(&v["call"])[0], "src/lib.rs");
}
