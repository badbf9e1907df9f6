//! The one host every front end of `repo-search` shares: the CLI's `search`, its MCP server and
//! `serve`, and language bindings.
//!
//! A [`HostConfig`] says what to serve (the worktree, the index directory, which index, a long
//! life or a short one, the semantic model, the deadline); [`Host::open`] opens it, and
//! [`Host::answer`] answers one call of the `repo_search` tool: arguments checked, the index
//! brought up to date with the worktree, then the search behind the seam's freshness and trust
//! gates. Around that the host owns:
//!
//! - **freshness**: the stat-based refresh of the embedded index, and for a long-lived host the
//!   file-system watcher with its cookie sync and git-operation waits (`watch`);
//! - **backend selection**: one [`IndexChoice`] (literal only, the embedded index with or
//!   without the semantic store, or a shared index in PostgreSQL pushed to before each query,
//!   or read-only);
//! - **the semantic wiring**: the model directory ([`model_dir`]), the engine beside the
//!   embedded index, and MiniLM's vectors kept in the background;
//! - **`serve`**: a host on a Unix socket ([`served::serve`]) and the client that relays a
//!   search to it as an untrusted backend ([`served::connect`]);
//! - **typed errors** ([`HostError`]) and progress through a callback ([`Progress`]).
//!
//! It does not know clap, rmcp, indicatif or terminal output: a front end turns flags into a
//! [`HostConfig`], and [`HostError`]s and [`served::ServeEvent`]s into its own words.
//!
//! # Example
//!
//! ```no_run
//! use repo_search_host::{Host, HostConfig, Refresh};
//!
//! # async fn run() -> Result<(), repo_search_host::HostError> {
//! let host = Host::open(HostConfig::new(".")).await?;
//! let answer = host
//!     .answer(&serde_json::json!({ "query": "fn main", "mode": "indexed_literal" }), Refresh::First)
//!     .await?;
//! println!("{}", answer["hits"][0]["path"]);
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod catch_up;
mod error;
mod fresh;
mod git;
mod host;
mod locate;
mod model;
mod progress;
pub mod served;
mod shared;
mod watch;

pub use error::{HostError, ModelDamage};
pub use host::{
    Host, HostConfig, HostStatus, IndexChoice, Place, Rebuilt, Refresh, Refreshed, SemanticConfig,
    Uploaded,
};
pub use locate::{index_dir_under, locate, worktree_root};
pub use model::{MODEL_DIR_ENV, model_dir};
pub use progress::{Progress, unwatched};
pub use semantic_index::{
    BUILTIN_SHA256, KEPT_CHUNKS_LIMIT, KeptVectors, RerankPolicy, installed_file,
};
pub use shared::{BACKEND_ENV, SharedConfig};

/// What the embedded index declares (`BackendCapabilities`): what a host on it offers besides
/// `semantic`.
pub fn embedded_capabilities() -> index_contract::BackendCapabilities {
    embedded_index::EmbeddedIndex::declared_capabilities()
}
