//! Scale evidence and benchmarks for repo-search.
//!
//! - [`scale`]: the specification's check (a 100 000-file metadata fixture behind the full
//!   facade), run by `cargo test` (`tests/scale_check.rs`) and printed by `cargo xtask bench`.
//! - [`fixture`]: that metadata fixture.
//! - [`tree`]: a generated source tree for literal benchmarks.
//! - [`alloc`]: a counting global allocator for heap figures.
//! - [`mcp`]: a minimal MCP client over stdio, for the probes that time `repo-search mcp`.
//!
//! # Example
//!
//! ```
//! use repo_search_benches::scale::{ScaleConfig, run};
//!
//! let small = ScaleConfig { files: 1_000, queries: 20, literal_files: 20, literal_runs: 3 };
//! let report = run(&small).unwrap();
//! assert!(report.literal_identical);
//! assert_eq!(report.semantic_flood_hits, 1000);
//! ```
#![deny(missing_docs)]

pub mod alloc;
pub mod fixture;
pub mod mcp;
pub mod scale;
pub mod tree;
