//! The contract of the `repo_search` index seam.
//!
//! This crate holds every type and trait the seam is made of and does no I/O: the three
//! [`SearchMode`]s, the frozen five-state [`IndexState`] machine, [`IndexStatus`] and
//! [`BackendCapabilities`], update/remove/search requests, hits and results with their
//! [`Provenance`], the [`RepositoryIndexBackend`] and [`RepositoryOperations`] traits, the six
//! stable error codes ([`ErrorCode`]) carried by [`IndexError`], and the [`limits`] table.
//!
//! Validation lives in `index-guard`; the facade that wires a backend, the guard and the literal
//! fallback together lives in `repo-search-tool`.
//!
//! # Example
//!
//! ```
//! use index_contract::{ErrorCode, IndexError, IndexState, SearchMode, SearchRequest, limits};
//!
//! // Modes and states have fixed wire names.
//! assert_eq!(SearchMode::parse("indexed_literal"), Some(SearchMode::IndexedLiteral));
//! assert_eq!(IndexState::Building.as_str(), "building");
//!
//! // Every error maps to one of six stable codes, with a message that carries no backend text.
//! let err = IndexError::NotReady { state: IndexState::Building };
//! assert_eq!(err.code(), ErrorCode::Stale);
//! assert_eq!(err.code().as_str(), "ERR_PRISM_INDEX_STALE");
//!
//! // A host's configuration above a hard cap is refused.
//! let too_long = std::time::Duration::from_millis(limits::HARD_MAX_AGE_MS + 1);
//! let refused = limits::StalePolicy::new(too_long, true).unwrap_err();
//! assert_eq!(refused.code(), ErrorCode::Limit);
//!
//! // Requests serialize with snake_case names.
//! let req = SearchRequest::new("fn main", SearchMode::Literal);
//! let json = serde_json::to_value(&req).unwrap();
//! assert_eq!(json["mode"], "literal");
//! ```
#![deny(missing_docs)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod error;
pub mod limits;
mod signal;
mod traits;
mod types;

pub use error::{
    ErrorCode, Field, IdRejection, IndexError, PathRejection, RegexRejection, WireError,
};
pub use signal::{CancelSignal, Cancelled};
pub use traits::{BackendError, BoxFuture, RepositoryIndexBackend, RepositoryOperations};
pub use types::{
    BackendCapabilities, BackendHit, BackendSearchResponse, Change, ContextLines, FileFilter,
    IndexState, IndexStatus, OutputMode, Provenance, RemoveRequest, SearchHit, SearchMode,
    SearchRequest, SearchResult, SearchStats, SkippedFiles, StopReason, UnixMillis, UpdateRequest,
};
