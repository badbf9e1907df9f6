//! The `repo_search` facade and tool.
//!
//! - [`IndexedRepositoryOperations`] composes a host's index backend, the `index-guard` gates and
//!   a literal fallback into one [`RepositoryOperations`](index_contract::RepositoryOperations):
//!   `literal` is routed to the fallback unchanged; `indexed_literal` and `semantic` are served
//!   only by the backend, only when allowed, declared, fresh and trustworthy. Its
//!   [`index()`](IndexedRepositoryOperations::index) facade validates updates before the backend
//!   sees them.
//! - [`ToolSpec`] is what the agent-facing tool exposes (its modes, caps and the index's declared
//!   capabilities) and everything decided by that alone: a JSON Schema whose `mode` enum is
//!   exactly the exposed modes, the output schema and listing, and argument validation by the
//!   schema's rules. It needs no operations object.
//! - [`RepoSearchTool`] is the tool: a spec over the operations that answer its calls, with JSON
//!   results or `{code, message}` errors.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use index_contract::{ErrorCode, SearchMode};
//! use index_testkit::FixtureBackend;
//! use literal_search::LiteralSearch;
//! use repo_search_tool::{IndexedOperationsConfig, IndexedRepositoryOperations, RepoSearchTool};
//!
//! # let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
//! # rt.block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(dir.path().join("lib.rs"), "pub fn parse() {}\n").unwrap();
//! let ops = Arc::new(IndexedRepositoryOperations::new(
//!     dir.path(),
//!     Arc::new(FixtureBackend::ready([("lib.rs", "pub fn parse() {}\n")])),
//!     Arc::new(LiteralSearch::new(dir.path()).unwrap()),
//!     IndexedOperationsConfig::default(),
//! ).unwrap());
//! let tool = RepoSearchTool::new(ops, &[SearchMode::Literal, SearchMode::IndexedLiteral]).unwrap();
//!
//! let out = tool.call(&serde_json::json!({"query": "parse", "mode": "indexed_literal"})).await.unwrap();
//! assert_eq!(out["untrusted_index"], true);
//! assert_eq!(out["indexed"]["state"], "ready");
//!
//! // Asking for a mode the tool does not expose is a stable error, never a silent fallback.
//! let err = tool.call(&serde_json::json!({"query": "parse", "mode": "semantic"})).await.unwrap_err();
//! assert_eq!(err.code, ErrorCode::Unsupported);
//! # });
//! ```
#![deny(missing_docs)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod arguments;
mod facade;
mod listing;
mod path;
mod schema;
mod spec;
mod tool;

pub use facade::{IndexFacade, IndexedOperationsConfig, IndexedRepositoryOperations};
pub use listing::{TOOL_NAME, TOOL_TITLE};
pub use spec::{MAX_PATH_CHARS, MAX_QUERY_CHARS, ToolSpec};
pub use tool::RepoSearchTool;
