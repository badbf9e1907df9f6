//! `repo-search mcp` checked by a real MCP client the project did not write: the official Python
//! SDK, installed by `cargo xtask tools` into `target/tools/mcp-venv`. Never skipped: a missing
//! client is a failure with instructions.

use std::path::Path;
use std::process::Command;

use index_contract::ErrorCode;
use serde_json::Value;

#[test]
fn a_real_mcp_client_lists_and_calls_repo_search() {
    let python =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools/mcp-venv/bin/python");
    assert!(
        python.exists(),
        "the Python MCP SDK is not installed at {}: run `cargo xtask tools` (or `cargo xtask ci`)",
        python.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let git = |args: &[&str]| {
        assert!(
            Command::new("git")
                .current_dir(root)
                .args(args)
                .status()
                .unwrap()
                .success()
        )
    };
    git(&["init", "-q"]);
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(
        root.join("src/lib.rs"),
        "pub fn needle_for_mcp() {}\n// needle_for_mcp again\n",
    )
    .unwrap();
    std::fs::write(root.join("README.md"), "call needle_for_mcp\n").unwrap();

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_repo-search"))
        .arg(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();

    assert_eq!(v["server"], "repo-search");
    assert_eq!(v["tools"].as_array().unwrap().len(), 1);
    assert_eq!(v["tools"][0]["name"], "repo_search");
    assert_eq!(
        v["tools"][0]["modes"],
        serde_json::json!(["literal", "indexed_literal", "semantic"])
    );
    assert_eq!(v["tools"][0]["additionalProperties"], false);

    let tool = &v["tools"][0];
    assert_eq!(tool["title"], repo_search_tool::TOOL_TITLE);
    assert_eq!(tool["outputSchema"], true);
    assert_eq!(tool["annotations"]["readOnlyHint"], true);
    assert_eq!(tool["annotations"]["openWorldHint"], false);
    for option in [
        "regex",
        "glob",
        "type",
        "context_after",
        "offset",
        "page_token",
    ] {
        assert!(
            tool["options"]
                .as_array()
                .unwrap()
                .iter()
                .any(|o| o == option),
            "{option} is not offered: {tool}"
        );
    }

    // A regex, a glob and context, in literal mode: the definition line, and the line after it.
    let grep = &v["grep"];
    assert_eq!(grep["isError"], false, "{grep}");
    let hits = grep["structured"]["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 1, "{grep}");
    assert_eq!(hits[0]["path"], "src/lib.rs");
    assert_eq!(
        hits[0]["after"],
        serde_json::json!(["// needle_for_mcp again"])
    );

    // Pages of one hit concatenate to the whole answer: three hits, each page proven.
    let pages = v["pages"].as_array().unwrap();
    assert_eq!(pages.len(), 3, "{pages:?}");
    let paged: Vec<(String, u64)> = pages
        .iter()
        .map(|p| {
            let h = &p["hits"][0];
            (
                h["path"].as_str().unwrap().to_owned(),
                h["line"].as_u64().unwrap(),
            )
        })
        .collect();
    let whole: Vec<(String, u64)> = v["literal"]["structured"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["path"].as_str().unwrap().to_owned(),
                h["line"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(paged, whole);

    // A bad regex is a tool error that says what to change.
    let bad = &v["bad_regex"];
    assert_eq!(bad["isError"], true);
    assert_eq!(bad["error"]["code"], ErrorCode::Unsupported.as_str());
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains("escape special characters"),
        "{bad}"
    );

    let literal = &v["literal"];
    assert_eq!(literal["isError"], false);
    assert_eq!(literal["structured"]["mode"], "literal");
    assert_eq!(literal["structured"]["hits"].as_array().unwrap().len(), 3);
    // Text content carries the same result as the structured content.
    let text: Value = serde_json::from_str(literal["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, literal["structured"]);

    let indexed = &v["indexed_literal"];
    assert_eq!(indexed["isError"], false);
    assert_eq!(indexed["structured"]["untrusted_index"], true);
    assert_eq!(indexed["structured"]["indexed"]["state"], "ready");
    let paths: Vec<&str> = indexed["structured"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        ["src/lib.rs", "README.md"],
        "one hit per file, the definition first"
    );

    assert_eq!(v["error"]["isError"], true);
    assert_eq!(v["error"]["error"]["code"], ErrorCode::Untrusted.as_str());
    // `semantic` is served with no model installed (the static model is built in), and its
    // answer passed the SDK's check against the output schema.
    assert_eq!(v["semantic"]["isError"], false, "{}", v["semantic"]);
    assert_eq!(v["semantic"]["structured"]["mode"], "semantic");
    // The SDK sees a mode the tool does not offer refused as a tool error, not a protocol error.
    assert_eq!(v["unknown_mode"]["isError"], true);
    assert_eq!(
        v["unknown_mode"]["error"]["code"],
        ErrorCode::Unsupported.as_str()
    );
    // An error is not an answer: it carries no structured content, which a client would hold to
    // the tool's output schema.
    for error in [&v["error"], &v["unknown_mode"], bad] {
        assert_eq!(error["structured"], Value::Null, "{error}");
    }
}
