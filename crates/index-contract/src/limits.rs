//! The limits table of the specification, as named constants and the configuration structs that
//! hold a host's chosen values.
//!
//! Every configurable value has a default and a hard cap. A configuration above a hard cap is
//! refused when it is built ([`IndexError::ConfigAboveHardCap`]); a request's own value is clamped
//! to the configured cap.

use std::time::Duration;

use crate::IndexError;

/// Default freshness window: 60 000 ms.
pub const DEFAULT_MAX_AGE_MS: u64 = 60_000;
/// Hard cap on the freshness window: 300 000 ms.
pub const HARD_MAX_AGE_MS: u64 = 300_000;
/// Default query deadline: 30 s.
pub const DEFAULT_DEADLINE_MS: u64 = 30_000;
/// Hard cap on the query deadline: 120 s.
pub const HARD_DEADLINE_MS: u64 = 120_000;
/// Default snippet cap: 4096 bytes.
pub const DEFAULT_SNIPPET_BYTES: usize = 4096;
/// Hard cap on snippets: 16 384 bytes.
pub const HARD_SNIPPET_BYTES: usize = 16_384;
/// Default number of results per query: 1000.
pub const DEFAULT_MAX_RESULTS: usize = 1000;
/// Hard cap on results per query: 10 000.
pub const HARD_MAX_RESULTS: usize = 10_000;
/// Default number of changes per update: 1000.
pub const DEFAULT_MAX_CHANGES: usize = 1000;
/// Hard cap on changes per update: 10 000.
pub const HARD_MAX_CHANGES: usize = 10_000;
/// Default bytes per update (paths, old paths, revision, ids): 16 MiB.
pub const DEFAULT_UPDATE_BYTES: usize = 16 * 1024 * 1024;
/// Hard cap on bytes per update: 64 MiB.
pub const HARD_UPDATE_BYTES: usize = 64 * 1024 * 1024;

/// Longest accepted identifier (`repository_id`, `worktree_id`, `source_revision`), in bytes.
///
/// The specification asks for bounded ids without naming a number; 256 bytes holds any git object
/// name, a UUID or a readable name with room to spare.
pub const MAX_ID_BYTES: usize = 256;
/// Longest accepted repo-relative path, in bytes (Linux's `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;
/// Longest accepted query, in bytes.
pub const MAX_QUERY_BYTES: usize = 4096;
/// Most lines of context on either side of a hit (`context_before`, `context_after`).
pub const MAX_CONTEXT_LINES: u32 = 20;
/// Deepest page: the largest `offset` a query may ask for. A page at `offset` costs the work of
/// `offset + max_results` hits, so the bound keeps a page's memory and time bounded.
pub const MAX_OFFSET: usize = 100_000;
/// Most globs, and most file types, in one query.
pub const MAX_FILE_FILTERS: usize = 32;
/// Compiled-size limit of a regular expression, in bytes: the `regex` crate's own default. ripgrep
/// allows 100 MiB; a pattern between the two compiles in `rg` and is refused here with
/// `ERR_PRISM_INDEX_LIMIT`, because a query runs inside a long-lived host whose memory must stay
/// bounded whatever a caller sends.
pub const REGEX_SIZE_LIMIT_BYTES: usize = 10 * 1024 * 1024;
/// Capacity of a regular expression's lazy DFA cache, in bytes, per searching thread. It only
/// bounds memory; a pattern that needs more runs slower, never differently.
pub const REGEX_DFA_CACHE_BYTES: usize = 16 * 1024 * 1024;
/// How far in the future an `updated_at` may lie before it is refused as stale: 5 s of clock
/// skew between the host and the backend. A timestamp beyond that would buy eternal freshness.
pub const CLOCK_SKEW_ALLOWANCE_MS: u64 = 5_000;

fn capped(setting: &'static str, value: u64, hard: u64) -> Result<(), IndexError> {
    if value > hard {
        return Err(IndexError::ConfigAboveHardCap {
            setting,
            value,
            hard_cap: hard,
        });
    }
    if value == 0 {
        return Err(IndexError::ConfigZero { setting });
    }
    Ok(())
}

/// The freshness policy (`stale: { maxAgeMs, requireSourceRevision }` in the specification).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StalePolicy {
    max_age_ms: u64,
    require_source_revision: bool,
}

impl StalePolicy {
    /// Builds a policy, refusing a window of zero or above [`HARD_MAX_AGE_MS`].
    pub fn new(max_age: Duration, require_source_revision: bool) -> Result<Self, IndexError> {
        let max_age_ms = u64::try_from(max_age.as_millis()).unwrap_or(u64::MAX);
        capped("stale.max_age_ms", max_age_ms, HARD_MAX_AGE_MS)?;
        Ok(StalePolicy {
            max_age_ms,
            require_source_revision,
        })
    }

    /// The freshness window in milliseconds.
    pub fn max_age_ms(&self) -> u64 {
        self.max_age_ms
    }

    /// Whether a query needs the index to attest a `source_revision`.
    pub fn require_source_revision(&self) -> bool {
        self.require_source_revision
    }
}

impl Default for StalePolicy {
    /// 60 s, and a revision is required: the conservative default of the specification.
    fn default() -> Self {
        StalePolicy {
            max_age_ms: DEFAULT_MAX_AGE_MS,
            require_source_revision: true,
        }
    }
}

/// Per-query caps: results, snippet bytes and the deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchLimits {
    max_results: usize,
    snippet_bytes: usize,
    deadline_ms: u64,
}

impl SearchLimits {
    /// Builds the caps, refusing zero or any value above its hard cap.
    pub fn new(
        max_results: usize,
        snippet_bytes: usize,
        deadline: Duration,
    ) -> Result<Self, IndexError> {
        capped("max_results", max_results as u64, HARD_MAX_RESULTS as u64)?;
        capped(
            "snippet_bytes",
            snippet_bytes as u64,
            HARD_SNIPPET_BYTES as u64,
        )?;
        let deadline_ms = u64::try_from(deadline.as_millis()).unwrap_or(u64::MAX);
        capped("deadline_ms", deadline_ms, HARD_DEADLINE_MS)?;
        Ok(SearchLimits {
            max_results,
            snippet_bytes,
            deadline_ms,
        })
    }

    /// The result cap.
    pub fn max_results(&self) -> usize {
        self.max_results
    }

    /// The snippet cap in bytes.
    pub fn snippet_bytes(&self) -> usize {
        self.snippet_bytes
    }

    /// The deadline cap.
    pub fn deadline(&self) -> Duration {
        Duration::from_millis(self.deadline_ms)
    }

    /// A request's `max_results`, clamped to the cap (`None` means the cap).
    pub fn clamp_max_results(&self, requested: Option<usize>) -> usize {
        requested.map_or(self.max_results, |n| n.clamp(1, self.max_results))
    }

    /// A request's deadline, clamped to the cap (`None` means the cap).
    pub fn clamp_deadline(&self, requested: Option<Duration>) -> Duration {
        requested.map_or(self.deadline(), |d| d.min(self.deadline()))
    }
}

impl Default for SearchLimits {
    fn default() -> Self {
        SearchLimits {
            max_results: DEFAULT_MAX_RESULTS,
            snippet_bytes: DEFAULT_SNIPPET_BYTES,
            deadline_ms: DEFAULT_DEADLINE_MS,
        }
    }
}

/// Per-update caps: number of changes and total request bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpdateLimits {
    max_changes: usize,
    max_bytes: usize,
}

impl UpdateLimits {
    /// Builds the caps, refusing zero or any value above its hard cap.
    pub fn new(max_changes: usize, max_bytes: usize) -> Result<Self, IndexError> {
        capped(
            "update.max_changes",
            max_changes as u64,
            HARD_MAX_CHANGES as u64,
        )?;
        capped(
            "update.max_bytes",
            max_bytes as u64,
            HARD_UPDATE_BYTES as u64,
        )?;
        Ok(UpdateLimits {
            max_changes,
            max_bytes,
        })
    }

    /// The change cap.
    pub fn max_changes(&self) -> usize {
        self.max_changes
    }

    /// The byte cap.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }
}

impl Default for UpdateLimits {
    fn default() -> Self {
        UpdateLimits {
            max_changes: DEFAULT_MAX_CHANGES,
            max_bytes: DEFAULT_UPDATE_BYTES,
        }
    }
}
