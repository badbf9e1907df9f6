//! Snapshots pin the JSON the tool returns, byte for byte (the index timestamp, which is the one
//! value that moves, is replaced by a marker).

use std::sync::Arc;

use index_contract::SearchMode;
use index_testkit::FixtureBackend;
use literal_search::LiteralSearch;
use repo_search_tool::{IndexedOperationsConfig, IndexedRepositoryOperations, RepoSearchTool};
use serde_json::{Value, json};

fn check(args: Value, expected: &str) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(
        dir.path().join("src/lib.rs"),
        "pub fn parse(input: &str) {}\n// parse later\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("README.md"), "Call parse first.\n").unwrap();
    let ops = IndexedRepositoryOperations::new(
        dir.path(),
        Arc::new(FixtureBackend::ready([
            (
                "src/lib.rs",
                "pub fn parse(input: &str) {}\n// parse later\n",
            ),
            ("README.md", "Call parse first.\n"),
        ])),
        Arc::new(LiteralSearch::new(dir.path()).unwrap()),
        IndexedOperationsConfig::default(),
    )
    .unwrap();
    let tool = RepoSearchTool::new(
        Arc::new(ops),
        &[SearchMode::Literal, SearchMode::IndexedLiteral],
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut out = match rt.block_on(tool.call(&args)) {
        Ok(v) => v,
        Err(e) => serde_json::to_value(e).unwrap(),
    };
    if out["indexed"]["updated_at"].is_u64() {
        out["indexed"]["updated_at"] = json!("<updated_at>");
    }
    assert_eq!(serde_json::to_string_pretty(&out).unwrap(), expected.trim());
}

#[test]
fn literal_result_json() {
    check(
        json!({"query": "parse", "max_results": 2}),
        r#"
{
  "mode": "literal",
  "hits": [
    {
      "path": "README.md",
      "line": 1,
      "column": 6,
      "snippet": "Call parse first.",
      "snippet_truncated": false
    },
    {
      "path": "src/lib.rs",
      "line": 1,
      "column": 8,
      "snippet": "pub fn parse(input: &str) {}",
      "snippet_truncated": false
    }
  ],
  "complete": false,
  "stopped": "max_results",
  "stats": {
    "files_searched": 2,
    "files_skipped": {
      "binary": 0,
      "non_utf8_path": 0,
      "unreadable": 0,
      "not_reached": 0
    }
  },
  "next_offset": 2,
  "page_token": "p1-a2c86b94300d5d7d5b1f4f74f99d3260"
}"#,
    );
}

#[test]
fn indexed_result_json() {
    check(
        json!({"query": "parse", "mode": "indexed_literal", "path": "src"}),
        r#"
{
  "mode": "indexed_literal",
  "hits": [
    {
      "path": "src/lib.rs",
      "line": 1,
      "column": 8,
      "snippet": "pub fn parse(input: &str) {}",
      "snippet_truncated": false,
      "score": 1.0
    }
  ],
  "complete": true,
  "stopped": null,
  "stats": {
    "backend_hits": 1,
    "duplicates_removed": 0
  },
  "indexed": {
    "mode": "indexed_literal",
    "state": "ready",
    "source_revision": "rev-0",
    "updated_at": "<updated_at>"
  },
  "untrusted_index": true
}"#,
    );
}

#[test]
fn error_json() {
    check(
        json!({"query": "parse", "mode": "semantic"}),
        r#"
{
  "code": "ERR_PRISM_INDEX_UNSUPPORTED",
  "message": "mode `semantic` is not allowed here; allowed modes are set by the host"
}"#,
    );
    check(
        json!({"query": "parse", "path": "../secrets"}),
        r#"
{
  "code": "ERR_PRISM_INDEX_UNTRUSTED",
  "message": "path scope refused: the path has a `..` segment"
}"#,
    );
}
