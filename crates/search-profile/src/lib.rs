//! The one ripgrep profile that every `repo_search` searcher shares.
//!
//! The literal search, the embedded index and every backend still to come must agree on these
//! things, or their answers drift apart. Each lives here, once:
//!
//! - **Selection** ([`Selection`]): which files are searched. ripgrep's defaults, spelled out:
//!   `.gitignore`, `.git/info/exclude`, `.ignore`, `.rgignore` and the global git excludes are
//!   respected, hidden files are skipped, symlinks are never followed, and nothing git refuses to
//!   check out (`.git` in any spelling, `index_guard::is_git_internal_segment`) is entered. The
//!   request's file filter (`-g`, `-t`, `--hidden`, `--no-ignore`) narrows or widens it
//!   ([`Selection::filter`]); [`PathFilter`] decides globs and types for paths a backend already
//!   holds, exactly as the walk does.
//! - **Opening** ([`RootDir`]): a repo-relative path is opened beneath the root without following
//!   any symlink on the way (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` on Linux,
//!   `O_NOFOLLOW` per component elsewhere), without blocking, and only if it is a regular file.
//! - **Matching** ([`query_matcher`], [`FileSearcher`]): ripgrep's matcher (fixed string or
//!   regex) and searcher configuration, context lines ([`ContextConfig`], `-B`/`-A`) and the count
//!   of matching lines (`-c`), the fresh-searcher rule that keeps binary detection deterministic,
//!   and a bounded-memory stream for files with lines longer than the heap limit. A planner reads
//!   a query's syntax as the matcher parses it ([`query_hir`]: one regex configuration for both).
//! - **Stopping** ([`QueryControl`]): a query stops at its deadline or on its cancel signal,
//!   checked on every read.
//! - **Ranking** ([`rank`]): a hit's score from its path's prior and its match's shape, the same
//!   in every backend.
//! - **Order** ([`PathKey`]): paths ordered component by component, as a sorted walk lists them.
//! - **Names** ([`walk_name`]): every selected file has a walk name, a file whose name is not
//!   UTF-8 too (escaped, so that it is never lost and never served).
//!
//! # Example
//!
//! ```
//! use search_profile::{FileSearcher, RootDir, Selection, matcher};
//!
//! let dir = tempfile::tempdir()?;
//! std::fs::write(dir.path().join("main.rs"), "fn main() {\n    parse();\n}\n")?;
//! let files = Selection::new(dir.path()).files();
//! assert_eq!(files, ["main.rs"]);
//!
//! let root = RootDir::open(dir.path())?;
//! let m = matcher("parse", false)?;
//! let mut searcher = FileSearcher::default();
//! let mut lines = Vec::new();
//! let file = root.open_file("main.rs")?;
//! searcher.search(&m, file, &search_profile::NeverStop, |found| {
//!     lines.push(found.line_number);
//!     true
//! })?;
//! assert_eq!(lines, [2]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod control;
mod filter;
mod matcher;
mod name;
mod open;
mod order;
mod pattern;
pub mod rank;
mod search;
mod select;
mod stream;
mod syntax;

pub use control::{NeverStop, QueryControl, SearchControl};
pub use filter::PathFilter;
pub use matcher::{LineMatch, QueryMatcher, matcher, query_matcher, request_matcher};
pub use name::{count_unserved, is_non_utf8_name, name_bytes, name_path, walk_name};
pub use open::{
    CHUNK_BYTES, EntryStat, LastDir, OpenError, Prefetch, RootDir, open_or_create_appending,
    open_or_create_regular, open_regular, read_bounded, read_full, read_in_chunks, read_regular,
};
pub use order::PathKey;
pub use pattern::{check_file_filter, check_patterns};
pub use search::{
    ContextConfig, FileOutcome, FileSearcher, MULTI_LINE_HEAP_LIMIT, SearchFileError,
};
pub use select::{
    FileEntry, HiddenRules, IGNORE_FILES, Prune, Selection, global_excludes_file,
    has_hidden_component, has_include_glob, relative_path, selects_beyond_held,
};
pub use syntax::query_hir;

/// The most bytes a searcher holds for one line before it switches to the bounded stream.
pub const DEFAULT_HEAP_LIMIT: usize = 4 * 1024 * 1024;
