//! The wire types of the seam. Everything here is serde-serializable with snake_case names.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::CancelSignal;

/// How a query is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchMode {
    /// Native bounded substring search over the worktree; identical with or without an index.
    Literal,
    /// The host index's hits, with relevance scores.
    IndexedLiteral,
    /// The host index's semantic hits; only from a backend that declares the capability.
    Semantic,
}

impl SearchMode {
    /// Every mode, in a fixed order.
    pub const ALL: [SearchMode; 3] = [
        SearchMode::Literal,
        SearchMode::IndexedLiteral,
        SearchMode::Semantic,
    ];

    /// The wire name: `literal`, `indexed_literal` or `semantic`.
    pub const fn as_str(self) -> &'static str {
        match self {
            SearchMode::Literal => "literal",
            SearchMode::IndexedLiteral => "indexed_literal",
            SearchMode::Semantic => "semantic",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<SearchMode> {
        SearchMode::ALL.into_iter().find(|m| m.as_str() == s)
    }

    /// Whether this mode is served by an index backend (and so its output is untrusted).
    pub const fn is_indexed(self) -> bool {
        !matches!(self, SearchMode::Literal)
    }
}

impl std::fmt::Display for SearchMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The frozen index state machine: exactly these five states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IndexState {
    /// Nothing indexed yet.
    Empty,
    /// A build or update is under way and nothing committed can be served.
    Building,
    /// Committed and servable, subject to the freshness policy.
    Ready,
    /// The backend itself knows it is behind the worktree.
    Stale,
    /// The backend cannot serve (corrupt, or a build failed).
    Failed,
}

impl IndexState {
    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            IndexState::Empty => "empty",
            IndexState::Building => "building",
            IndexState::Ready => "ready",
            IndexState::Stale => "stale",
            IndexState::Failed => "failed",
        }
    }
}

impl std::fmt::Display for IndexState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A point in time: whole milliseconds since the Unix epoch, on the wire as an integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct UnixMillis(pub u64);

impl UnixMillis {
    /// Converts a `SystemTime`; times before the epoch become 0.
    pub fn from_system_time(t: SystemTime) -> UnixMillis {
        let ms = t
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_millis();
        UnixMillis(u64::try_from(ms).unwrap_or(u64::MAX))
    }

    /// The current wall-clock time. (Reading the clock is the only thing here that touches the
    /// outside world; the guard never calls it, it is handed `now`.)
    pub fn now() -> UnixMillis {
        UnixMillis::from_system_time(SystemTime::now())
    }
}

/// What a backend says about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexStatus {
    /// The state.
    pub state: IndexState,
    /// The revision of the worktree the index attests to, if any.
    #[serde(default)]
    pub source_revision: Option<String>,
    /// When the index was last committed, if known.
    #[serde(default)]
    pub updated_at: Option<UnixMillis>,
}

impl IndexStatus {
    /// A status with no revision and no timestamp.
    pub fn new(state: IndexState) -> IndexStatus {
        IndexStatus {
            state,
            source_revision: None,
            updated_at: None,
        }
    }
}

/// What a backend declares it can do. Declared, never inferred: a request that needs a capability
/// the backend does not declare is refused with `ERR_PRISM_INDEX_UNSUPPORTED` before the backend
/// sees it, never served with the option ignored.
///
/// Every option but `semantic` is about the fixed-string and regex modes; `semantic` queries take
/// the scope, the file filters and paging only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BackendCapabilities {
    /// Whether the backend serves `semantic` queries.
    pub semantic: bool,
    /// Whether `indexed_literal` takes a regular expression (`regex: true`).
    pub regex: bool,
    /// Whether the backend honours every [`FileFilter::globs`] and [`FileFilter::types`] with
    /// ripgrep's precedence, where an include glob selects a matching file even when it is hidden
    /// or ignored, and a type selects matching hidden files. A backend that holds only ripgrep's
    /// default selection cannot honour them.
    pub file_filters: bool,
    /// Whether the backend honours globs that all exclude (`!` globs), which only narrow the
    /// selection. Implied by `file_filters`.
    pub exclude_globs: bool,
    /// Whether the backend answers [`OutputMode::Count`].
    pub count: bool,
    /// Whether the backend returns context lines ([`ContextLines`]).
    pub context: bool,
    /// Whether the backend's hits, for a given committed version, are always the first
    /// `max_results` of one deterministic order, so that the facade can page them with `offset`.
    pub paging: bool,
    /// Whether the index holds hidden files ([`FileFilter::include_hidden`]).
    pub hidden_files: bool,
    /// Whether the index holds files that ignore rules exclude ([`FileFilter::include_ignored`]).
    pub ignored_files: bool,
    /// Whether the backend answers [`SearchRequest::multiline`] queries, whose matches may span
    /// lines.
    pub multiline: bool,
}

/// What each hit of an answer stands for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    /// Each hit is one matching line (in the index modes, the first matching line of its file).
    #[default]
    Content,
    /// Each hit is one matching file, at its first match (ripgrep's `-l`).
    Files,
    /// As `files`, and each hit carries `count`, the number of matching lines in its file
    /// (ripgrep's `-c`).
    Count,
}

impl OutputMode {
    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            OutputMode::Content => "content",
            OutputMode::Files => "files",
            OutputMode::Count => "count",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<OutputMode> {
        [OutputMode::Content, OutputMode::Files, OutputMode::Count]
            .into_iter()
            .find(|m| m.as_str() == s)
    }
}

/// Which files a query searches, besides its scope: ripgrep's `-g`, `-t`, `--hidden` and
/// `--no-ignore`, with ripgrep's meaning.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FileFilter {
    /// Globs matched on repo-relative paths, as ripgrep's `-g`: a file must match an include glob
    /// (when there is one), and a glob starting with `!` excludes. Later globs win.
    #[serde(rename = "glob", skip_serializing_if = "Vec::is_empty")]
    pub globs: Vec<String>,
    /// ripgrep file type names (`rust`, `py`, `c`, ...): a file must be of one of them.
    #[serde(rename = "type", skip_serializing_if = "Vec::is_empty")]
    pub types: Vec<String>,
    /// Search hidden files and directories too (`--hidden`).
    #[serde(skip_serializing_if = "is_false")]
    pub include_hidden: bool,
    /// Search files that ignore rules exclude too (`--no-ignore`).
    #[serde(skip_serializing_if = "is_false")]
    pub include_ignored: bool,
}

impl FileFilter {
    /// Whether globs or types narrow the selection.
    pub fn narrows(&self) -> bool {
        !self.globs.is_empty() || !self.types.is_empty()
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Lines of context around each content hit (ripgrep's `-B` and `-A`), each at most
/// [`crate::limits::MAX_CONTEXT_LINES`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ContextLines {
    /// Lines before the hit's line.
    #[serde(rename = "context_before")]
    pub before: u32,
    /// Lines after the hit's line.
    #[serde(rename = "context_after")]
    pub after: u32,
}

impl ContextLines {
    /// Whether any context is asked for.
    pub fn any(&self) -> bool {
        self.before > 0 || self.after > 0
    }
}

/// One change to the worktree, as a host reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Change {
    /// A new file.
    Add {
        /// Repo-relative path.
        path: String,
    },
    /// A changed file.
    Edit {
        /// Repo-relative path.
        path: String,
    },
    /// A moved file. Routed as a removal of `old_path` plus an add of `path`.
    Rename {
        /// The path it had.
        old_path: String,
        /// The path it has now.
        path: String,
    },
    /// A removed file. Routed to the backend's `remove`.
    Delete {
        /// Repo-relative path.
        path: String,
    },
}

impl Change {
    /// The path the change leaves behind (for `delete`, the path removed).
    pub fn path(&self) -> &str {
        match self {
            Change::Add { path }
            | Change::Edit { path }
            | Change::Rename { path, .. }
            | Change::Delete { path } => path,
        }
    }
}

/// An update: changes plus the identity and revision they bring the index to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateRequest {
    /// Which repository.
    pub repository_id: String,
    /// Which worktree of it.
    pub worktree_id: String,
    /// The revision the index attests once this update commits.
    pub source_revision: String,
    /// The changes. After routing by the facade a backend only sees `add` and `edit`.
    pub changes: Vec<Change>,
}

impl UpdateRequest {
    /// The paths of the `add` and `edit` changes, in order: what a backend (re-)reads, since the
    /// facade has routed renames and deletes to `remove` before the update reaches it.
    pub fn upserted_paths(&self) -> Vec<String> {
        self.changes
            .iter()
            .filter_map(|c| match c {
                Change::Add { path } | Change::Edit { path } => Some(path.clone()),
                Change::Rename { .. } | Change::Delete { .. } => None,
            })
            .collect()
    }
}

/// Paths to drop from the index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveRequest {
    /// Repo-relative paths.
    pub paths: Vec<String>,
    /// Set by the facade when this removal is the first half of an update (the deletes and the old
    /// sides of renames, routed here before the update's adds and edits). From this commit until
    /// the update's own commit the index matches no revision, so the backend must report
    /// [`IndexState::Building`] in between, which the freshness gate refuses: a reader is never
    /// served the old revision's name over a tree that lacks its files. A backend whose update
    /// never comes stays `building` until the next update, refused rather than wrong.
    #[serde(default, skip_serializing_if = "is_false")]
    pub update_follows: bool,
}

impl RemoveRequest {
    /// A removal of `paths` on its own: the index keeps attesting its revision.
    pub fn new(paths: Vec<String>) -> RemoveRequest {
        RemoveRequest {
            paths,
            update_follows: false,
        }
    }
}

/// A query, as the operations and the backend receive it.
///
/// A backend never sees `offset` or `page_token`: the facade asks it for the first
/// `offset + max_results` hits and pages them itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SearchRequest {
    /// The text to look for: a fixed string in the literal modes, unless `regex` is set.
    pub query: String,
    /// `query` is a regular expression in ripgrep's syntax (the `regex` crate's), not a fixed
    /// string.
    #[serde(default)]
    pub regex: bool,
    /// How to answer.
    pub mode: SearchMode,
    /// Optional repo-relative directory or file to search within.
    #[serde(default)]
    pub path: Option<String>,
    /// Most hits wanted; clamped to the configured cap. `None` means the cap.
    #[serde(default)]
    pub max_results: Option<usize>,
    /// Case-insensitive matching (Unicode simple case folding).
    #[serde(default)]
    pub case_insensitive: bool,
    /// Matches may span lines (ripgrep's `-U`): a regex may match `\n` (`a\nb`, `[\s\S]`), and a
    /// fixed string may hold line breaks. `.` still stops at a line break. A hit is one match,
    /// at the line where it starts; `output: count` counts matches when the query can match a
    /// line break, as `rg -c -U` does.
    #[serde(default)]
    pub multiline: bool,
    /// How long the query may take; clamped to the configured cap. `None` means the cap.
    #[serde(default, with = "opt_millis", rename = "deadline_ms")]
    pub deadline: Option<Duration>,
    /// Which files to search, besides the scope.
    #[serde(flatten)]
    pub files: FileFilter,
    /// What each hit stands for.
    #[serde(default)]
    pub output: OutputMode,
    /// Lines of context around each content hit.
    #[serde(flatten)]
    pub context: ContextLines,
    /// Hits of the deterministic order to skip: a later page starts at the previous answer's
    /// `next_offset`.
    #[serde(default)]
    pub offset: usize,
    /// The previous page's `page_token`. With it, a page whose earlier hits are no longer the
    /// hits the previous pages returned (the worktree or the index changed, or the query is not
    /// the same) fails with `ERR_PRISM_INDEX_STALE` instead of returning a shifted list.
    #[serde(default)]
    pub page_token: Option<String>,
    /// Cancels the query when fired. Not serialized: it lives in one process.
    #[serde(skip)]
    pub signal: CancelSignal,
}

impl SearchRequest {
    /// A request with defaults for everything but the query and mode.
    pub fn new(query: impl Into<String>, mode: SearchMode) -> SearchRequest {
        SearchRequest {
            query: query.into(),
            mode,
            path: None,
            max_results: None,
            case_insensitive: false,
            multiline: false,
            deadline: None,
            regex: false,
            files: FileFilter::default(),
            output: OutputMode::Content,
            context: ContextLines::default(),
            offset: 0,
            page_token: None,
            signal: CancelSignal::new(),
        }
    }
}

mod opt_millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(crate) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        d.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_millis))
    }
}

/// A hit as a backend returns it: untrusted until the guard has checked it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackendHit {
    /// Repo-relative path, `/`-separated.
    pub path: String,
    /// 1-based line.
    pub line: u64,
    /// 1-based byte column.
    pub column: u64,
    /// Text around the match.
    pub snippet: String,
    /// Relevance in `[0, 1]`.
    pub score: f64,
    /// Count output: the file's matching lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// Context: the lines before `line`, nearest last.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub before: Vec<String>,
    /// Context: the lines after `line`, nearest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
}

impl BackendHit {
    /// A hit with no count and no context.
    pub fn new(
        path: impl Into<String>,
        line: u64,
        column: u64,
        snippet: impl Into<String>,
        score: f64,
    ) -> BackendHit {
        BackendHit {
            path: path.into(),
            line,
            column,
            snippet: snippet.into(),
            score,
            count: None,
            before: Vec::new(),
            after: Vec::new(),
        }
    }
}

/// A backend's answer: the hits, whether it stopped early, and the status of the committed
/// version the hits were read from (so the provenance cannot be made a lie by a concurrent update).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackendSearchResponse {
    /// The status of the version searched.
    pub status: IndexStatus,
    /// Hits, best first.
    pub hits: Vec<BackendHit>,
    /// `false` when the backend knows there were more hits than it returned, or that a file it
    /// could not serve may hold a match.
    pub complete: bool,
    /// Files the backend passed over, by reason, when it counts them. Counts only: they carry no
    /// backend text, and the facade passes them on as the answer's `stats.files_skipped`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<SkippedFiles>,
    /// `true` when the backend could not narrow the candidates (a regex without a usable
    /// trigram, for example) and verified every file; passed on as `stats.full_scan`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub full_scan: bool,
}

/// Why an answer is incomplete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The result cap was reached.
    MaxResults,
    /// The deadline passed (literal mode returns what it found by then).
    Deadline,
    /// The caller cancelled (literal mode returns what it found by then).
    Cancelled,
    /// A file holds a match but its name cannot be served (not UTF-8, or refused as the trust
    /// gate refuses it: `stats.files_skipped` counts them), so the hits are not all the matches
    /// there are. Paging on would not bring them.
    UnservedFiles,
}

/// One hit, as the caller sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchHit {
    /// Repo-relative path, `/`-separated.
    pub path: String,
    /// 1-based line.
    pub line: u64,
    /// 1-based byte column of the first match on the line.
    pub column: u64,
    /// The line, or a window of it around the match when it is over the snippet cap.
    pub snippet: String,
    /// Whether `snippet` was cut.
    pub snippet_truncated: bool,
    /// Relevance in `[0, 1]`; index modes only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// `count` output: the number of matching lines in the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// With context asked for: the lines before `line` (nearest last), each cut to the snippet
    /// cap. Fewer at the start of a file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Vec<String>>,
    /// With context asked for: the lines after `line` (nearest first), each cut to the snippet
    /// cap. Fewer at the end of a file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Vec<String>>,
}

/// Files passed over, by reason. The literal search counts every reason; an index backend counts
/// only what it met while verifying candidates (`unreadable`, `non_utf8_path`, `refused_path`),
/// so its other counts are 0.
///
/// `non_utf8_path` and `refused_path` count files that match (in `semantic` mode, that are in
/// scope, since every file is a candidate there) but whose names no answer carries: a file is
/// never left out silently, and an answer with one of them is incomplete
/// ([`StopReason::UnservedFiles`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedFiles {
    /// Binary files (a NUL byte), as ripgrep decides.
    pub binary: u64,
    /// Matching files whose names are not UTF-8, which a JSON string cannot carry.
    pub non_utf8_path: u64,
    /// Files that could not be opened or read.
    pub unreadable: u64,
    /// Files the walk handed over after the search had stopped (deadline or cancel), so never
    /// searched. The walk quits at once, so files it had not listed yet are not counted.
    pub not_reached: u64,
    /// Matching files whose names the trust gate refuses (for example a bidi control in a file
    /// name). The literal search withholds the names the gate refuses as look-alikes
    /// (`index_guard::is_lookalike_path`); an index withholds every name the gate refuses.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub refused_path: u64,
}

impl SkippedFiles {
    /// Files that hold a match but whose names no answer may carry: `non_utf8_path` plus
    /// `refused_path`. An answer with any is incomplete ([`StopReason::UnservedFiles`]).
    pub fn unserved(&self) -> u64 {
        self.non_utf8_path.saturating_add(self.refused_path)
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// How much work an answer reflects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchStats {
    /// Files searched to the end or until they produced enough hits (literal mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files_searched: Option<u64>,
    /// Files skipped, by reason (literal mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files_skipped: Option<SkippedFiles>,
    /// Hits the backend returned before the trust gate (index modes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_hits: Option<u64>,
    /// Hits dropped because their path had been seen already (index modes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicates_removed: Option<u64>,
    /// Index modes: `true` when the index could not narrow the candidates (a regex without a
    /// usable trigram) and every file in scope was verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_scan: Option<bool>,
}

/// Where index hits came from: the state of the version that was searched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// The mode that served the hits.
    pub mode: SearchMode,
    /// The state of the version searched (always `ready` once the gate has passed it).
    pub state: IndexState,
    /// The revision the index attested.
    pub source_revision: Option<String>,
    /// When that version was committed.
    pub updated_at: Option<UnixMillis>,
}

/// An answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResult {
    /// The mode that answered.
    pub mode: SearchMode,
    /// The hits: by path, line, column in literal mode; best first in the index modes.
    pub hits: Vec<SearchHit>,
    /// Whether every hit there is was returned.
    pub complete: bool,
    /// Why not, when `complete` is false.
    pub stopped: Option<StopReason>,
    /// How much work the answer reflects.
    pub stats: SearchStats,
    /// Index provenance (index modes only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub indexed: Option<Provenance>,
    /// Always `true` in the index modes: index text is not fact, and a mutation needs a fresh read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub untrusted_index: Option<bool>,
    /// When the answer stopped at `max_results`: the `offset` of the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<u64>,
    /// With `next_offset`: the token to send with the next page, which proves that page follows
    /// this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_token: Option<String>,
}
