//! Pure validators for the `repo_search` index seam.
//!
//! Index output is untrusted and index freshness is not assumed. This crate decides, without I/O,
//! without a clock of its own and without a runtime, whether:
//!
//! - a mode may be served ([`check_mode`]);
//! - an index status may be served at a given time ([`check_freshness`], [`parse_status`]);
//! - backend hits may be shown, and in what form ([`validate_hits`], [`stamp`]);
//! - an update or removal may reach the backend, and how it is routed ([`validate_update`],
//!   [`validate_remove`]);
//! - a path is contained in the repository and in a scope, and names no git internals
//!   ([`check_path`], [`Scope`], [`is_within`], [`is_git_internal_segment`]);
//! - a query may be searched ([`check_query`], [`check_index_query`], [`check_request_query`],
//!   [`check_tool_query`]).
//!
//! Being pure functions over `index-contract` types is what makes it fuzzable.
//!
//! # Example
//!
//! ```
//! use index_contract::{BackendHit, ErrorCode, IndexState, IndexStatus, UnixMillis, limits::StalePolicy};
//! use index_guard::{Scope, TrustContext, check_freshness, validate_hits};
//!
//! let now = UnixMillis(1_700_000_000_000);
//! let status = IndexStatus {
//!     state: IndexState::Ready,
//!     source_revision: Some("abc123".into()),
//!     updated_at: Some(UnixMillis(now.0 - 1_000)),
//! };
//! assert!(check_freshness(&status, &StalePolicy::default(), now).is_ok());
//!
//! let scope = Scope::parse(Some("src")).unwrap();
//! let ctx = TrustContext {
//!     scope: &scope, max_results: 10, snippet_bytes: 4096,
//!     output: Default::default(), context: Default::default(),
//! };
//! let hit = |path: &str| BackendHit::new(path, 1, 1, "fn main()", 0.5);
//! // A sibling that merely shares the prefix is outside the scope: the whole answer is refused.
//! let err = validate_hits(vec![hit("src/a.rs"), hit("srcx/b.rs")], &ctx).unwrap_err();
//! assert_eq!(err.code(), ErrorCode::Untrusted);
//! // Duplicates are dropped, first wins.
//! let ok = validate_hits(vec![hit("src/a.rs"), hit("src/a.rs")], &ctx).unwrap();
//! assert_eq!(ok.hits.len(), 1);
//! ```
#![deny(missing_docs)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod freshness;
mod mode;
mod options;
mod page;
mod path;
mod query;
mod snippet;
mod trust;
mod update;

pub use freshness::{check_freshness, parse_status};
pub use mode::check_mode;
pub use options::{OptionSupport, check_options};
pub use page::{Page, check_page_token, page_token, paginate};
pub use path::{
    Scope, check_field_path, check_path, is_git_internal_segment, is_lookalike_path, is_within,
};
pub use query::{
    MAX_PATH_CHARS, MAX_QUERY_CHARS, check_index_query, check_query, check_request_query,
    check_scope_chars, check_tool_query,
};
pub use snippet::{snippet_window, truncate_str};
pub use trust::{TrustContext, TrustedHits, stamp, validate_hits};
pub use update::{RoutedUpdate, check_id, update_bytes, validate_remove, validate_update};
