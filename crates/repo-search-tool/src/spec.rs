//! `ToolSpec`: what a `repo_search` tool exposes, and the options each exposed mode honours.
//!
//! The spec decides the schema (`schema.rs`), the listing (`listing.rs`) and how arguments are
//! parsed (`arguments.rs`), and holds no operations object, so that a client can parse arguments
//! and check answers without owning a backend.

use index_contract::{
    BackendCapabilities, ErrorCode, IndexError, OutputMode, RepositoryOperations, SearchMode,
    SearchRequest, limits::SearchLimits,
};
use index_guard::{OptionSupport, check_options};

/// The most characters a query may have. Counted in characters, as JSON Schema's `maxLength`
/// counts them; derived from the contract's byte cap so that it stays within it.
pub const MAX_QUERY_CHARS: usize = index_guard::MAX_QUERY_CHARS;
/// The most characters a scope may have, derived from the contract's path cap likewise.
pub const MAX_PATH_CHARS: usize = index_guard::MAX_PATH_CHARS;

/// What a `repo_search` tool exposes: its modes (in order), the caps it applies and the
/// capabilities its index declared. These decide the argument schema, the output schema, the
/// description and how arguments are parsed, all of which are methods of the spec.
///
/// # Example
///
/// ```
/// use index_contract::{BackendCapabilities, SearchMode, limits::SearchLimits};
/// use repo_search_tool::ToolSpec;
///
/// let spec = ToolSpec::new(
///     &[SearchMode::IndexedLiteral, SearchMode::Literal],
///     SearchLimits::default(),
///     BackendCapabilities::default(),
/// )
/// .unwrap();
/// assert_eq!(spec.default_mode(), SearchMode::Literal);
///
/// // The index declared no regex: `indexed_literal` is held to `regex: false`.
/// let args = serde_json::json!({ "query": "a.b", "mode": "indexed_literal", "regex": true });
/// let err = spec.parse_arguments(&args).unwrap_err();
/// assert_eq!(err.code(), index_contract::ErrorCode::Unsupported);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSpec {
    modes: Vec<SearchMode>,
    limits: SearchLimits,
    capabilities: BackendCapabilities,
}

impl ToolSpec {
    /// A spec exposing exactly `modes` (in that order, duplicates dropped), under `limits`, for
    /// an index that declares `capabilities`. Refuses an empty list.
    pub fn new(
        modes: &[SearchMode],
        limits: SearchLimits,
        capabilities: BackendCapabilities,
    ) -> Result<ToolSpec, IndexError> {
        let mut exposed = Vec::new();
        for &m in modes {
            if !exposed.contains(&m) {
                exposed.push(m);
            }
        }
        if exposed.is_empty() {
            return Err(IndexError::InvalidArgument {
                argument: "modes",
                problem: "must list at least one mode",
                code: ErrorCode::Unsupported,
            });
        }
        Ok(ToolSpec {
            modes: exposed,
            limits,
            capabilities,
        })
    }

    /// The spec of `operations` exposing `modes`: its caps and declared capabilities. Refuses
    /// any mode the operations do not allow, so that the schema never advertises what does not
    /// work, and an empty list.
    pub fn of_operations(
        operations: &dyn RepositoryOperations,
        modes: &[SearchMode],
    ) -> Result<ToolSpec, IndexError> {
        let allowed = operations.modes();
        if let Some(&mode) = modes.iter().find(|m| !allowed.contains(m)) {
            return Err(IndexError::ModeUnservable { mode });
        }
        ToolSpec::new(modes, operations.limits(), operations.index_capabilities())
    }

    /// The spec of `operations` exposing `literal` alone, which every operations object serves.
    pub(crate) fn literal_only(operations: &dyn RepositoryOperations) -> ToolSpec {
        ToolSpec {
            modes: vec![SearchMode::Literal],
            limits: operations.limits(),
            capabilities: operations.index_capabilities(),
        }
    }

    /// The exposed modes.
    pub fn modes(&self) -> &[SearchMode] {
        &self.modes
    }

    /// The caps: `max_results` is bounded by their result cap.
    pub fn limits(&self) -> SearchLimits {
        self.limits
    }

    /// What the index declared it honours.
    pub fn capabilities(&self) -> BackendCapabilities {
        self.capabilities
    }

    /// The mode used when a call names none: `literal` when exposed, else the first exposed mode.
    pub fn default_mode(&self) -> SearchMode {
        if self.modes.contains(&SearchMode::Literal) {
            SearchMode::Literal
        } else {
            self.modes[0]
        }
    }

    /// What `mode` honours: `literal` every option, the index modes what the backend declared.
    pub(crate) fn support(&self, mode: SearchMode) -> OptionSupport {
        match mode {
            SearchMode::Literal => OptionSupport::Literal,
            _ => OptionSupport::Backend(self.capabilities),
        }
    }

    /// The options `mode` honours, as the guard decides: each option is tried alone through
    /// [`check_options`], so the schema cannot drift from the checks a call goes through.
    pub(crate) fn options_for(&self, mode: SearchMode) -> Vec<ToolOption> {
        let support = self.support(mode);
        ToolOption::ALL
            .into_iter()
            .filter(|o| {
                let mut probe = SearchRequest::new("x", mode);
                o.set(&mut probe);
                check_options(&probe, support).is_ok()
            })
            .collect()
    }

    /// The options at least one exposed mode honours: the schema's optional properties.
    pub(crate) fn offered_options(&self) -> Vec<ToolOption> {
        ToolOption::ALL
            .into_iter()
            .filter(|o| self.modes.iter().any(|&m| self.options_for(m).contains(o)))
            .collect()
    }

    /// The `output` values some mode of `modes` honours.
    pub(crate) fn outputs(&self, modes: &[SearchMode]) -> Vec<&'static str> {
        let count = modes
            .iter()
            .any(|&m| self.options_for(m).contains(&ToolOption::Count));
        let mut v = vec![OutputMode::Content.as_str(), OutputMode::Files.as_str()];
        if count {
            v.push(OutputMode::Count.as_str());
        }
        v
    }
}

/// An option beyond the query, scope, cap and case: offered in the schema only when an exposed
/// mode honours it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ToolOption {
    Regex,
    /// Matches that span lines (`rg -U`).
    Multiline,
    /// Globs that all exclude (`!`), which only narrow the selection.
    ExcludeGlob,
    /// Any glob, includes too.
    Glob,
    Type,
    IncludeHidden,
    IncludeIgnored,
    Count,
    ContextBefore,
    ContextAfter,
    Offset,
    PageToken,
}

impl ToolOption {
    pub(crate) const ALL: [ToolOption; 12] = [
        ToolOption::Regex,
        ToolOption::Multiline,
        ToolOption::ExcludeGlob,
        ToolOption::Glob,
        ToolOption::Type,
        ToolOption::IncludeHidden,
        ToolOption::IncludeIgnored,
        ToolOption::Count,
        ToolOption::ContextBefore,
        ToolOption::ContextAfter,
        ToolOption::Offset,
        ToolOption::PageToken,
    ];

    /// The argument's name. `Count` is a value of `output`, which is always offered.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ToolOption::Regex => "regex",
            ToolOption::Multiline => "multiline",
            ToolOption::ExcludeGlob | ToolOption::Glob => "glob",
            ToolOption::Type => "type",
            ToolOption::IncludeHidden => "include_hidden",
            ToolOption::IncludeIgnored => "include_ignored",
            ToolOption::Count => "output",
            ToolOption::ContextBefore => "context_before",
            ToolOption::ContextAfter => "context_after",
            ToolOption::Offset => "offset",
            ToolOption::PageToken => "page_token",
        }
    }

    /// Sets the option on a probe request.
    fn set(self, r: &mut SearchRequest) {
        match self {
            ToolOption::Regex => r.regex = true,
            ToolOption::Multiline => r.multiline = true,
            ToolOption::ExcludeGlob => r.files.globs = vec!["!*".into()],
            ToolOption::Glob => r.files.globs = vec!["*".into()],
            ToolOption::Type => r.files.types = vec!["rust".into()],
            ToolOption::IncludeHidden => r.files.include_hidden = true,
            ToolOption::IncludeIgnored => r.files.include_ignored = true,
            ToolOption::Count => r.output = OutputMode::Count,
            ToolOption::ContextBefore => r.context.before = 1,
            ToolOption::ContextAfter => r.context.after = 1,
            ToolOption::Offset => r.offset = 1,
            ToolOption::PageToken => r.page_token = Some(String::new()),
        }
    }
}
