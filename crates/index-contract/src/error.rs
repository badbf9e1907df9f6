//! The six stable error codes and the error enum that carries them.

use serde::{Deserialize, Serialize};

use crate::{IndexState, SearchMode};

/// The stable error codes. [`ErrorCode::as_str`] is the only place the strings are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ErrorCode {
    /// A mode that is not allowed, a capability that is not declared, a disposed index, or a
    /// request the host cannot serve as given.
    #[serde(rename = "ERR_PRISM_INDEX_UNSUPPORTED")]
    Unsupported,
    /// The index is not fresh enough to be served.
    #[serde(rename = "ERR_PRISM_INDEX_STALE")]
    Stale,
    /// The index failed, its status is unreadable, or the backend errored or panicked.
    #[serde(rename = "ERR_PRISM_INDEX_FAILED")]
    Failed,
    /// A request or configuration is over a cap.
    #[serde(rename = "ERR_PRISM_INDEX_LIMIT")]
    Limit,
    /// The deadline passed or the caller cancelled.
    #[serde(rename = "ERR_PRISM_INDEX_TIMEOUT")]
    Timeout,
    /// Untrusted input (backend output, or a path or id that could escape or carry secrets).
    #[serde(rename = "ERR_PRISM_INDEX_UNTRUSTED")]
    Untrusted,
}

impl ErrorCode {
    /// Every code, in a fixed order.
    pub const ALL: [ErrorCode; 6] = [
        ErrorCode::Unsupported,
        ErrorCode::Stale,
        ErrorCode::Failed,
        ErrorCode::Limit,
        ErrorCode::Timeout,
        ErrorCode::Untrusted,
    ];

    /// The stable wire string, for example `ERR_PRISM_INDEX_STALE`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Unsupported => "ERR_PRISM_INDEX_UNSUPPORTED",
            ErrorCode::Stale => "ERR_PRISM_INDEX_STALE",
            ErrorCode::Failed => "ERR_PRISM_INDEX_FAILED",
            ErrorCode::Limit => "ERR_PRISM_INDEX_LIMIT",
            ErrorCode::Timeout => "ERR_PRISM_INDEX_TIMEOUT",
            ErrorCode::Untrusted => "ERR_PRISM_INDEX_UNTRUSTED",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a path was refused. The reason, never the path itself, appears in messages: a hostile
/// path is backend text, and backend text never reaches an error message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PathRejection {
    /// The path is empty.
    Empty,
    /// The path is longer than [`crate::limits::MAX_PATH_BYTES`].
    TooLong,
    /// The path starts with `/`.
    Absolute,
    /// The path starts with a drive prefix such as `C:`.
    DrivePrefix,
    /// The path contains a backslash (also how UNC and Windows separators are caught).
    Backslash,
    /// The path contains a NUL byte.
    Nul,
    /// The path contains a control character other than NUL.
    ControlCharacter,
    /// The path has an empty segment (`a//b`, or a trailing `/`).
    EmptySegment,
    /// The path has a `.` segment.
    DotSegment,
    /// The path has a `..` segment.
    ParentSegment,
    /// The path contains an invisible or bidirectional control character, or a look-alike of `/`,
    /// `\` or `.` that changes its structure once normalised (NFKC) or read by eye (a segment that
    /// reads as `..`, or that holds a separator): what an agent sees would differ from what it is.
    Lookalike,
    /// A segment names git's own data: `.git` in any case, or a spelling a filesystem resolves to
    /// it (`.GIT`, `.git.`, `git~1`, `.git::$INDEX_ALLOCATION`, `.g\u{200C}it`). Its files hold
    /// the repository's configuration, whose remote URLs may carry credentials.
    GitInternal,
    /// The path is not inside the requested scope.
    OutsideScope,
    /// The path passes through a symbolic link, which the search never follows.
    Symlink,
}

// The fixed messages below name these caps; they cannot drift apart silently.
const _: () = assert!(crate::limits::MAX_PATH_BYTES == 4096 && crate::limits::MAX_ID_BYTES == 256);

impl PathRejection {
    /// A fixed human description.
    pub const fn describe(self) -> &'static str {
        match self {
            PathRejection::Empty => "the path is empty",
            PathRejection::TooLong => "the path is longer than 4096 bytes",
            PathRejection::Absolute => "the path is absolute",
            PathRejection::DrivePrefix => "the path has a drive prefix",
            PathRejection::Backslash => "the path contains a backslash",
            PathRejection::Nul => "the path contains a NUL byte",
            PathRejection::ControlCharacter => "the path contains a control character",
            PathRejection::EmptySegment => "the path has an empty segment",
            PathRejection::DotSegment => "the path has a `.` segment",
            PathRejection::ParentSegment => "the path has a `..` segment",
            PathRejection::Lookalike => {
                "the path contains a look-alike separator or dot segment, or an invisible character"
            }
            PathRejection::GitInternal => {
                "the path names git's internal data (`.git` or an alias of it)"
            }
            PathRejection::OutsideScope => "the path is outside the requested scope",
            PathRejection::Symlink => "the path passes through a symbolic link",
        }
    }
}

/// Which field of a request an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    /// `repository_id`.
    RepositoryId,
    /// `worktree_id`.
    WorktreeId,
    /// `source_revision`.
    SourceRevision,
    /// A change's `path`, or a removed path.
    Path,
    /// A rename's `old_path`.
    OldPath,
    /// The search scope `path`.
    Scope,
    /// A hit's path, as returned by the backend.
    HitPath,
}

impl std::fmt::Display for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Field::RepositoryId => "repository_id",
            Field::WorktreeId => "worktree_id",
            Field::SourceRevision => "source_revision",
            Field::Path => "path",
            Field::OldPath => "old_path",
            Field::Scope => "path scope",
            Field::HitPath => "hit path",
        })
    }
}

/// Why an identifier was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdRejection {
    /// Empty.
    Empty,
    /// Longer than [`crate::limits::MAX_ID_BYTES`].
    TooLong,
    /// Contains a control character.
    ControlCharacter,
    /// Contains URL userinfo (`scheme://user:secret@host`), which is how credentials leak into ids.
    Credentials,
}

impl IdRejection {
    /// A fixed human description.
    pub const fn describe(self) -> &'static str {
        match self {
            IdRejection::Empty => "is empty",
            IdRejection::TooLong => "is longer than 256 bytes",
            IdRejection::ControlCharacter => "contains a control character",
            IdRejection::Credentials => "carries URL credentials (user info before `@`)",
        }
    }
}

/// Why a regular expression was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RegexRejection {
    /// It does not parse.
    Syntax,
    /// It uses look-around or a backreference, which ripgrep's default engine (the `regex`
    /// crate) does not have.
    Unsupported,
    /// It compiles to more than [`crate::limits::REGEX_SIZE_LIMIT_BYTES`].
    TooBig,
    /// It can match a line break, and the search is line by line (`multiline` is not set).
    LineTerminator,
}

impl RegexRejection {
    /// A fixed human description, with what to change.
    pub const fn describe(self) -> &'static str {
        match self {
            RegexRejection::Syntax => {
                "it does not parse as a regular expression (ripgrep's syntax); escape special characters such as `(`, `[`, `{`, `.`, or set `regex: false` to match the text literally"
            }
            RegexRejection::Unsupported => {
                "look-around and backreferences are not supported (as in ripgrep's default engine); rewrite the pattern without them"
            }
            RegexRejection::TooBig => {
                "it compiles to more than the size limit; use a shorter pattern or smaller repetition counts"
            }
            RegexRejection::LineTerminator => {
                "it can match a line break, and search is line by line; set `multiline: true` to match across lines, or remove `\\n` from the pattern"
            }
        }
    }
}

/// Every way a search, update or configuration can fail. Each variant maps to exactly one
/// [`ErrorCode`]; messages are fixed per variant and are built only from this crate's own values,
/// never from text a backend produced.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum IndexError {
    /// The mode is not in the host's `allowed_modes`.
    #[error("mode `{mode}` is not allowed here; allowed modes are set by the host")]
    ModeNotAllowed {
        /// The refused mode.
        mode: SearchMode,
    },
    /// `semantic` was asked of a backend that does not declare `capabilities.semantic`.
    #[error("mode `semantic` needs a backend that declares the semantic capability")]
    SemanticNotDeclared,
    /// The host configured an index mode but has no backend that can serve it.
    #[error("mode `{mode}` cannot be served by this configuration")]
    ModeUnservable {
        /// The mode.
        mode: SearchMode,
    },
    /// The index facade was disposed; index modes are gone, literal still works.
    #[error("the index has been disposed; use mode `literal` or build a new index")]
    Disposed,
    /// The index state is `empty`, `building` or `stale`.
    #[error("the index is `{state}`, not `ready`; update it and retry")]
    NotReady {
        /// The state the index reported.
        state: IndexState,
    },
    /// The index does not attest `updated_at`.
    #[error("the index does not say when it was last updated; update it and retry")]
    NoUpdatedAt,
    /// The index is older than the freshness window.
    #[error(
        "the index was updated {age_ms} ms ago, more than the {max_age_ms} ms allowed; update it and retry"
    )]
    TooOld {
        /// How old the index is.
        age_ms: u64,
        /// The window.
        max_age_ms: u64,
    },
    /// `updated_at` lies further in the future than the clock-skew allowance.
    #[error("the index claims an update time in the future; refusing it")]
    UpdatedInFuture,
    /// The policy requires a `source_revision` and the index attests none.
    #[error("the index does not attest a source revision, which this host requires")]
    NoSourceRevision,
    /// The index reports state `failed`.
    #[error("the index reports that it failed; rebuild it")]
    IndexFailed,
    /// The status could not be read or parsed (for example an unknown state).
    #[error("the index status could not be read; refusing to serve")]
    StatusUnreadable,
    /// The backend returned an error. Its text is deliberately not carried.
    #[error("the index backend failed")]
    BackendFailed,
    /// The backend panicked.
    #[error("the index backend failed unexpectedly")]
    BackendPanicked,
    /// The deadline passed.
    #[error("the search did not finish within its {deadline_ms} ms deadline")]
    DeadlineExceeded {
        /// The deadline that passed.
        deadline_ms: u64,
    },
    /// The caller cancelled.
    #[error("the search was cancelled")]
    Cancelled,
    /// An update has more changes than the cap.
    #[error("the update has {count} changes; at most {cap} are allowed per update")]
    TooManyChanges {
        /// Changes in the request.
        count: usize,
        /// The cap.
        cap: usize,
    },
    /// A remove request has more paths than the change cap.
    #[error("the removal has {count} paths; at most {cap} are allowed per request")]
    TooManyPaths {
        /// Paths in the request.
        count: usize,
        /// The cap.
        cap: usize,
    },
    /// An update's paths, old paths, revision and ids add up to more than the byte cap.
    #[error("the update carries {bytes} bytes of paths and ids; at most {cap} are allowed")]
    UpdateTooLarge {
        /// Bytes counted.
        bytes: usize,
        /// The cap.
        cap: usize,
    },
    /// An identifier was refused.
    #[error("`{field}` {}", reason.describe())]
    InvalidId {
        /// Which id.
        field: Field,
        /// Why.
        reason: IdRejection,
    },
    /// A path was refused by the containment check.
    #[error("{field} refused: {}", reason.describe())]
    UntrustedPath {
        /// Which path.
        field: Field,
        /// Why.
        reason: PathRejection,
    },
    /// A hit's score is NaN, infinite, or outside `[0, 1]`.
    #[error("the index returned a score that is not a finite number in [0, 1]")]
    UntrustedScore,
    /// A hit's line or column is zero (both are 1-based).
    #[error("the index returned a line or column of 0; both are 1-based")]
    UntrustedPosition,
    /// A hit's `count` or context lines do not fit the request: a count missing, zero or not
    /// asked for, more context lines than asked or than the file can have before the hit, or a
    /// context line holding a line break.
    #[error("the index returned a count or context lines that do not fit the request")]
    UntrustedHitDetail,
    /// The index attests a revision that is not a bounded, printable id.
    #[error("the index attests a source revision that is not a bounded printable id")]
    UntrustedRevision,
    /// A host configuration value is above its hard cap.
    #[error("`{setting}` is {value}, above its hard cap of {hard_cap}")]
    ConfigAboveHardCap {
        /// The setting.
        setting: &'static str,
        /// The value asked for.
        value: u64,
        /// The hard cap.
        hard_cap: u64,
    },
    /// A host configuration value is zero where it must be positive.
    #[error("`{setting}` must be greater than zero")]
    ConfigZero {
        /// The setting.
        setting: &'static str,
    },
    /// The request needs an option that the index backend does not declare (see
    /// `BackendCapabilities`), or that the mode does not have.
    #[error(
        "option `{option}` is not supported in mode `{mode}` here; drop it, or use mode `literal`, which supports every option"
    )]
    OptionUnsupported {
        /// The option's name as the schema spells it.
        option: &'static str,
        /// The mode asked for.
        mode: SearchMode,
    },
    /// `regex: true` with a query that is not a usable regular expression.
    #[error("argument `query` refused: {}", reason.describe())]
    InvalidRegex {
        /// Why.
        reason: RegexRejection,
    },
    /// A glob does not parse.
    #[error(
        "argument `glob`: entry {index} (0-based) is not a valid glob; globs use ripgrep's `-g` syntax, for example `*.rs`, `src/**` or `!*.md`"
    )]
    InvalidGlob {
        /// Its position in the list.
        index: usize,
    },
    /// A file type is not one ripgrep knows.
    #[error(
        "argument `type`: entry {index} (0-based) is not a ripgrep file type; use names such as `rust`, `py`, `c`, `js`, `go`, `java`, or `glob` instead"
    )]
    UnknownFileType {
        /// Its position in the list.
        index: usize,
    },
    /// `page_token` does not belong to this query's answer as it is now.
    #[error(
        "the answer changed since the previous page was taken (the worktree or index changed, or the query differs); start again without `offset` and `page_token`"
    )]
    PageChanged,
    /// A tool argument is missing, of the wrong type, or out of range.
    #[error("argument `{argument}`: {problem}")]
    InvalidArgument {
        /// The argument's name as the schema spells it.
        argument: &'static str,
        /// What is wrong, in words fixed by the tool.
        problem: &'static str,
        /// The code this problem maps to.
        code: ErrorCode,
    },
}

impl IndexError {
    /// The stable code of this error.
    pub fn code(&self) -> ErrorCode {
        use IndexError::*;
        match self {
            ModeNotAllowed { .. } | SemanticNotDeclared | ModeUnservable { .. } | Disposed => {
                ErrorCode::Unsupported
            }
            NotReady { .. } | NoUpdatedAt | TooOld { .. } | UpdatedInFuture | NoSourceRevision => {
                ErrorCode::Stale
            }
            IndexFailed | StatusUnreadable | BackendFailed | BackendPanicked => ErrorCode::Failed,
            PageChanged => ErrorCode::Stale,
            OptionUnsupported { .. } | InvalidGlob { .. } | UnknownFileType { .. } => {
                ErrorCode::Unsupported
            }
            InvalidRegex {
                reason: RegexRejection::TooBig,
            } => ErrorCode::Limit,
            InvalidRegex { .. } => ErrorCode::Unsupported,
            DeadlineExceeded { .. } | Cancelled => ErrorCode::Timeout,
            TooManyChanges { .. }
            | TooManyPaths { .. }
            | UpdateTooLarge { .. }
            | ConfigAboveHardCap { .. }
            | ConfigZero { .. } => ErrorCode::Limit,
            InvalidId {
                reason: IdRejection::TooLong,
                ..
            } => ErrorCode::Limit,
            InvalidId { .. }
            | UntrustedPath { .. }
            | UntrustedScore
            | UntrustedPosition
            | UntrustedHitDetail
            | UntrustedRevision => ErrorCode::Untrusted,
            InvalidArgument { code, .. } => *code,
        }
    }

    /// The wire form: `{ "code": "ERR_PRISM_INDEX_…", "message": "…" }`.
    pub fn to_wire(&self) -> WireError {
        WireError {
            code: self.code(),
            message: self.to_string(),
        }
    }
}

/// An [`IndexError`] as it crosses a process boundary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireError {
    /// The stable code.
    pub code: ErrorCode,
    /// The fixed message.
    pub message: String,
}
