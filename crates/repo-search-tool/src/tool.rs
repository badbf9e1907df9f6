//! `RepoSearchTool`: the `repo_search` tool, its JSON schema and its JSON calls.

use std::sync::Arc;

use index_contract::{
    BackendCapabilities, ErrorCode, Field, IndexError, OutputMode, PathRejection,
    RepositoryOperations, SearchMode, SearchRequest, SearchResult, WireError,
    limits::{MAX_CONTEXT_LINES, MAX_FILE_FILTERS, MAX_OFFSET, SearchLimits},
};
use index_guard::{
    OptionSupport, Scope, check_options, check_page_token, check_scope_chars, check_tool_query,
};
use serde_json::{Map, Value, json};

/// The tool's name.
pub const TOOL_NAME: &str = "repo_search";
/// The tool's human-readable title.
pub const TOOL_TITLE: &str = "Search the repository";

/// The most characters a query may have. Counted in characters, as JSON Schema's `maxLength`
/// counts them; derived from the contract's byte cap so that it stays within it.
pub const MAX_QUERY_CHARS: usize = index_guard::MAX_QUERY_CHARS;
/// The most characters a scope may have, derived from the contract's path cap likewise.
pub const MAX_PATH_CHARS: usize = index_guard::MAX_PATH_CHARS;

/// Characters a `path` may not contain besides `/` between segments, as inclusive ranges: `\`,
/// C0 and C1 controls, DEL, and the look-alikes and invisibles the guard refuses. The schema's
/// pattern is written from this list ([`segment_forbidden_class`]) and the tool refuses the same
/// characters, so that it accepts exactly the `path` the schema accepts; the guard alone lets a
/// dot look-alike or an ellipsis through inside a name (`Loading….md`), which a pattern cannot
/// tell from one that reads as `..` (`every_path_the_tool_accepts_its_schema_accepts`).
const PATH_FORBIDDEN: &[(char, char)] = &[
    ('\\', '\\'),
    ('\u{0000}', '\u{001f}'),
    ('\u{007f}', '\u{009f}'),
    ('\u{2024}', '\u{2026}'),
    ('\u{FE52}', '\u{FE52}'),
    ('\u{FF0E}', '\u{FF0E}'),
    ('\u{2044}', '\u{2044}'),
    ('\u{2215}', '\u{2215}'),
    ('\u{29F8}', '\u{29F8}'),
    ('\u{FF0F}', '\u{FF0F}'),
    ('\u{2216}', '\u{2216}'),
    ('\u{29F5}', '\u{29F5}'),
    ('\u{29F9}', '\u{29F9}'),
    ('\u{FE68}', '\u{FE68}'),
    ('\u{FF3C}', '\u{FF3C}'),
    ('\u{FF1A}', '\u{FF1A}'),
    ('\u{200B}', '\u{200F}'),
    ('\u{202A}', '\u{202E}'),
    ('\u{2066}', '\u{2069}'),
    ('\u{FEFF}', '\u{FEFF}'),
];

fn path_forbids(c: char) -> bool {
    PATH_FORBIDDEN
        .iter()
        .any(|&(lo, hi)| (lo..=hi).contains(&c))
}

/// The characters a path segment may not contain, as a regex character-class body: `/` and
/// [`PATH_FORBIDDEN`], each as a `\u` escape (`\` as `\\`).
fn segment_forbidden_class() -> String {
    let escape = |c: char| match c {
        '\\' => "\\\\".to_owned(),
        c => format!("\\u{:04X}", u32::from(c)),
    };
    let mut class = String::from("/");
    for &(lo, hi) in PATH_FORBIDDEN {
        class.push_str(&escape(lo));
        if hi != lo {
            class.push('-');
            class.push_str(&escape(hi));
        }
    }
    class
}

/// The `repo_search` tool over some [`RepositoryOperations`], exposing a fixed list of modes.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use literal_search::LiteralSearch;
/// use repo_search_tool::RepoSearchTool;
///
/// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
/// # rt.block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("a.rs"), "fn main() {}\n").unwrap();
/// let tool = RepoSearchTool::literal_only(Arc::new(LiteralSearch::new(dir.path()).unwrap()));
/// assert_eq!(tool.schema()["properties"]["mode"]["enum"], serde_json::json!(["literal"]));
///
/// let out = tool.call(&serde_json::json!({ "query": "main" })).await.unwrap();
/// assert_eq!(out["hits"][0]["path"], "a.rs");
///
/// let err = tool.call(&serde_json::json!({ "query": "main", "mode": "semantic" })).await.unwrap_err();
/// assert_eq!(err.code, index_contract::ErrorCode::Unsupported);
/// # });
/// ```
#[derive(Clone)]
pub struct RepoSearchTool {
    operations: Arc<dyn RepositoryOperations>,
    modes: Vec<SearchMode>,
    limits: SearchLimits,
    capabilities: BackendCapabilities,
}

impl std::fmt::Debug for RepoSearchTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RepoSearchTool")
            .field("modes", &self.modes)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl RepoSearchTool {
    /// A tool exposing exactly `modes` (in that order, duplicates dropped). Refuses an empty list
    /// and any mode the operations do not allow: the schema never advertises what does not work.
    pub fn new(
        operations: Arc<dyn RepositoryOperations>,
        modes: &[SearchMode],
    ) -> Result<RepoSearchTool, IndexError> {
        let allowed = operations.modes();
        let mut exposed = Vec::new();
        for &m in modes {
            if !allowed.contains(&m) {
                return Err(IndexError::ModeUnservable { mode: m });
            }
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
        let limits = operations.limits();
        let capabilities = operations.index_capabilities();
        Ok(RepoSearchTool {
            operations,
            modes: exposed,
            limits,
            capabilities,
        })
    }

    /// A tool with the default modes: `["literal"]`.
    pub fn literal_only(operations: Arc<dyn RepositoryOperations>) -> RepoSearchTool {
        let limits = operations.limits();
        let capabilities = operations.index_capabilities();
        RepoSearchTool {
            operations,
            modes: vec![SearchMode::Literal],
            limits,
            capabilities,
        }
    }

    /// The exposed modes.
    pub fn modes(&self) -> &[SearchMode] {
        &self.modes
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
    fn support(&self, mode: SearchMode) -> OptionSupport {
        match mode {
            SearchMode::Literal => OptionSupport::Literal,
            _ => OptionSupport::Backend(self.capabilities),
        }
    }

    /// The options `mode` honours, as the guard decides: each option is tried alone through
    /// [`check_options`], so the schema cannot drift from the checks a call goes through.
    fn options_for(&self, mode: SearchMode) -> Vec<ToolOption> {
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
    fn offered_options(&self) -> Vec<ToolOption> {
        ToolOption::ALL
            .into_iter()
            .filter(|o| self.modes.iter().any(|&m| self.options_for(m).contains(o)))
            .collect()
    }

    /// A description for the tool listing, written for a language model choosing how to call it.
    pub fn description(&self) -> String {
        let offered = self.offered_options();
        let has = |o: ToolOption| offered.contains(&o);
        let mut d = String::from(
            "Search the files of this repository's working tree, like ripgrep. `query` is a fixed \
             string",
        );
        if has(ToolOption::Regex) {
            d.push_str(", or a regular expression (ripgrep's syntax) with `regex: true`");
        }
        d.push_str(
            ". Returns matching lines as {path, line, column, snippet}, paths relative to the \
             repository root, ordered by path then line. Files ignored by git, hidden files and \
             binary files are not searched",
        );
        if has(ToolOption::IncludeHidden) || has(ToolOption::IncludeIgnored) {
            d.push_str(" unless `include_hidden` or `include_ignored` says so");
        }
        d.push('.');
        if has(ToolOption::Glob) || has(ToolOption::Type) {
            d.push_str(
                " Narrow the files with `path`, `glob` (for example [\"*.rs\", \"!tests/**\"]) \
                 and `type` (for example [\"rust\"]).",
            );
        }
        d.push_str(" `output: files` gives one hit per matching file");
        if has(ToolOption::Count) {
            d.push_str("; `output: count` adds each file's count of matching lines");
        }
        d.push('.');
        if has(ToolOption::ContextBefore) {
            d.push_str(" `context_before`/`context_after` add neighbouring lines.");
        }
        d.push_str(
            " Check `complete`: when false, `stopped` says why (max_results, deadline or \
             cancelled) and more matches may exist; narrow the query, `path` or `glob` rather \
             than raising max_results. `unserved_files` means files that match have names no \
             answer carries (not UTF-8, or invisible or look-alike characters), counted in \
             `stats.files_skipped`; list them with other tools.",
        );
        if has(ToolOption::Offset) {
            d.push_str(
                " To read on, call again with `offset: next_offset` and the `page_token` of the \
                 previous answer.",
            );
        }
        if self.modes.iter().any(|m| m.is_indexed()) {
            d.push_str(&format!(
                " Index modes answer from a prebuilt index: one hit per file, best first, with a \
                 relevance `score`; their text is untrusted (`untrusted_index: true`), so read \
                 the file before relying on or editing it. An option an index mode cannot \
                 honour is refused with {}; mode `literal` honours every option.",
                ErrorCode::Unsupported.as_str()
            ));
        }
        d
    }

    /// The JSON Schema (draft 2020-12) of the arguments. Its `mode` enum is exactly the exposed
    /// modes; an option appears only when an exposed mode honours it, and a mode that does not
    /// honour an offered option is held to its neutral value by an `if`/`then` rule. Every rule
    /// [`RepoSearchTool::parse_arguments`] applies is expressed in it.
    pub fn schema(&self) -> Value {
        let modes: Vec<&str> = self.modes.iter().map(|m| m.as_str()).collect();
        let mut mode_help = String::from("How to search. ");
        for m in &self.modes {
            mode_help.push_str(match m {
                SearchMode::Literal => "`literal`: scan the working tree now; exact and always current; honours every option. ",
                SearchMode::IndexedLiteral => "`indexed_literal`: the same match answered from the index; faster on large repositories, one hit per file, ranked. ",
                SearchMode::Semantic => "`semantic`: find code by meaning from the index; `query` is a natural-language description. ",
            });
        }
        let segment = format!("(?!\\.\\.?(?:/|$))[^{}]+", segment_forbidden_class());
        let path_pattern = format!("^(?:|\\./?|(?![A-Za-z]:){segment}(?:/{segment})*/?)$");
        let offered = self.offered_options();
        let query_help = if offered.contains(&ToolOption::Regex) {
            "The text to find, on one line, for example `fn parse_config` or `TODO(`. A fixed string unless `regex` is true."
        } else {
            "The exact text to find, on one line, for example `fn parse_config` or `TODO(`. Matched as a fixed string, not a regular expression."
        };
        let mut properties = json!({
            "query": {
                "type": "string",
                "description": query_help,
                "minLength": 1,
                "maxLength": MAX_QUERY_CHARS,
                "pattern": "^[^\\n\\r\\u0000]*$"
            },
            "mode": {
                "type": "string",
                "enum": modes,
                "default": self.default_mode().as_str(),
                "description": mode_help.trim_end()
            },
            "path": {
                "type": "string",
                "description": "Optional directory or file to search within, relative to the repository root, with `/` separators, for example `src` or `src/main.rs`. No leading `/`, no `..`.",
                "maxLength": MAX_PATH_CHARS,
                "pattern": path_pattern
            },
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "maximum": self.limits.max_results(),
                "default": self.limits.max_results(),
                "description": "The most hits to return. Keep it small (for example 50) to save context; `complete: false` tells you when there were more."
            },
            "case_insensitive": {
                "type": "boolean",
                "default": false,
                "description": "Match regardless of case (Unicode simple case folding). Default: case-sensitive."
            },
            "output": {
                "type": "string",
                "enum": self.outputs(&self.modes),
                "default": "content",
                "description": "`content`: one hit per matching line (index modes: per file). `files`: one hit per matching file, at its first match. `count`: as `files`, with `count`, the file's number of matching lines."
            }
        });
        let props = properties.as_object_mut().expect("a JSON object literal");
        for option in offered.iter().filter(|o| **o != ToolOption::Count) {
            props.insert(option.name().into(), option.schema());
        }
        let mut rules = vec![json!({
            "if": {
                "anyOf": [
                    { "required": ["context_before"], "properties": { "context_before": { "minimum": 1 } } },
                    { "required": ["context_after"], "properties": { "context_after": { "minimum": 1 } } }
                ]
            },
            "then": { "properties": { "output": { "const": "content" } } }
        })];
        for &mode in &self.modes {
            let honoured = self.options_for(mode);
            let mut restrict = Map::new();
            for option in offered.iter().filter(|o| !honoured.contains(o)) {
                let (key, neutral) = match option {
                    // A mode that takes only excluding globs: every entry starts with `!`.
                    ToolOption::Glob if honoured.contains(&ToolOption::ExcludeGlob) => {
                        ("glob", json!({ "items": { "pattern": "^!" } }))
                    }
                    // Held to no globs by the include rule, or allowed some by the exclude rule.
                    ToolOption::ExcludeGlob => continue,
                    _ => option.neutral(),
                };
                restrict.insert(key.into(), neutral);
            }
            let outputs = self.outputs(&[mode]);
            if outputs.len() < self.outputs(&self.modes).len() {
                restrict.insert("output".into(), json!({ "enum": outputs }));
            }
            if restrict.is_empty() {
                continue;
            }
            let named = json!({ "required": ["mode"], "properties": { "mode": { "const": mode.as_str() } } });
            let condition = if mode == self.default_mode() {
                json!({ "anyOf": [named, { "not": { "required": ["mode"] } }] })
            } else {
                named
            };
            rules.push(json!({ "if": condition, "then": { "properties": restrict } }));
        }
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "repo_search arguments",
            "type": "object",
            "properties": properties,
            "required": ["query"],
            "additionalProperties": false,
            "allOf": rules
        })
    }

    /// The `output` values some mode of `modes` honours.
    fn outputs(&self, modes: &[SearchMode]) -> Vec<&'static str> {
        let count = modes
            .iter()
            .any(|&m| self.options_for(m).contains(&ToolOption::Count));
        let mut v = vec![OutputMode::Content.as_str(), OutputMode::Files.as_str()];
        if count {
            v.push(OutputMode::Count.as_str());
        }
        v
    }

    /// The JSON Schema of a successful answer (MCP's `outputSchema`): what `call` returns.
    pub fn output_schema(&self) -> Value {
        let modes: Vec<&str> = self.modes.iter().map(|m| m.as_str()).collect();
        let lines = json!({ "type": "array", "items": { "type": "string" } });
        let counts = json!({ "type": "integer", "minimum": 0 });
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "repo_search answer",
            "type": "object",
            "properties": {
                "mode": { "type": "string", "enum": modes },
                "hits": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "path": { "type": "string" },
                            "line": { "type": "integer", "minimum": 1 },
                            "column": { "type": "integer", "minimum": 1 },
                            "snippet": { "type": "string" },
                            "snippet_truncated": { "type": "boolean" },
                            "score": { "type": "number", "minimum": 0, "maximum": 1 },
                            "count": { "type": "integer", "minimum": 1 },
                            "before": lines,
                            "after": lines
                        },
                        "required": ["path", "line", "column", "snippet", "snippet_truncated"]
                    }
                },
                "complete": { "type": "boolean" },
                "stopped": {
                    "description": "Why `complete` is false: `max_results` (more hits follow: \
                        page on), `deadline`, `cancelled`, or `unserved_files` (matching files \
                        whose names no answer carries, counted in `stats.files_skipped`).",
                    "type": ["string", "null"],
                    "enum": ["max_results", "deadline", "cancelled", "unserved_files", null]
                },
                "stats": {
                    "type": "object",
                    "properties": {
                        "files_searched": counts,
                        "files_skipped": {
                            "type": "object",
                            "properties": {
                                "binary": counts,
                                "non_utf8_path": {
                                    "description": "Matching files whose names are not UTF-8.",
                                    "type": "integer",
                                    "minimum": 0
                                },
                                "unreadable": counts,
                                "not_reached": counts,
                                "refused_path": {
                                    "description": "Matching files whose names the trust gate \
                                        refuses (invisible, bidi or look-alike characters).",
                                    "type": "integer",
                                    "minimum": 0
                                }
                            },
                            "additionalProperties": counts
                        },
                        "backend_hits": counts,
                        "duplicates_removed": counts,
                        "full_scan": { "type": "boolean" }
                    }
                },
                "indexed": {
                    "type": "object",
                    "properties": {
                        "mode": { "type": "string" },
                        "state": { "type": "string" },
                        "source_revision": { "type": ["string", "null"] },
                        "updated_at": { "type": ["integer", "null"] }
                    }
                },
                "untrusted_index": { "type": "boolean" },
                "next_offset": { "type": "integer", "minimum": 1 },
                "page_token": { "type": "string" }
            },
            "required": ["mode", "hits", "complete", "stopped", "stats"]
        })
    }

    /// Validates call arguments by the schema's rules and builds the request. An error names the
    /// offending argument. The syntax of a regex, a glob or a type name, which no schema can
    /// express, is checked when the call runs.
    pub fn parse_arguments(&self, arguments: &Value) -> Result<SearchRequest, IndexError> {
        let Some(obj) = arguments.as_object() else {
            return Err(invalid("arguments", "must be a JSON object"));
        };
        let offered = self.offered_options();
        for key in obj.keys() {
            let base = matches!(
                key.as_str(),
                "query" | "mode" | "path" | "max_results" | "case_insensitive" | "output"
            );
            if !base && !offered.iter().any(|o| o.name() == key) {
                return Err(invalid(
                    "arguments",
                    "has a property this tool does not take; the schema's `properties` lists them",
                ));
            }
        }
        let query = match obj.get("query") {
            None => return Err(invalid("query", "is required")),
            Some(Value::String(s)) => s,
            Some(_) => return Err(invalid("query", "must be a string")),
        };
        check_tool_query(query)?;
        let mode = match obj.get("mode") {
            None => self.default_mode(),
            Some(Value::String(s)) => match SearchMode::parse(s) {
                Some(m) if self.modes.contains(&m) => m,
                Some(m) => return Err(IndexError::ModeNotAllowed { mode: m }),
                None => return Err(invalid("mode", "is not one of the modes this tool offers")),
            },
            Some(_) => return Err(invalid("mode", "must be a string")),
        };
        let path = match obj.get("path") {
            None => None,
            Some(Value::String(p)) => {
                check_scope_chars(p)?;
                // The guard's containment rules: an escaping scope is refused, never searched.
                Scope::parse(Some(p))?;
                if p.chars().any(path_forbids) {
                    return Err(IndexError::UntrustedPath {
                        field: Field::Scope,
                        reason: PathRejection::Lookalike,
                    });
                }
                Some(p.clone())
            }
            Some(_) => return Err(invalid("path", "must be a string")),
        };
        let max_results = match obj.get("max_results") {
            None => None,
            Some(v) => {
                let n = integer(v, "max_results")?;
                if n < 1 || n > self.limits.max_results() as u64 {
                    return Err(IndexError::InvalidArgument {
                        argument: "max_results",
                        problem: "is outside 1..=the result cap advertised in the schema",
                        code: ErrorCode::Limit,
                    });
                }
                Some(n as usize)
            }
        };
        let mut request = SearchRequest::new(query.clone(), mode);
        request.path = path;
        request.max_results = max_results;
        request.case_insensitive = boolean(obj, "case_insensitive")?;
        request.regex = boolean(obj, "regex")?;
        request.files.include_hidden = boolean(obj, "include_hidden")?;
        request.files.include_ignored = boolean(obj, "include_ignored")?;
        request.files.globs = strings(obj, "glob")?;
        request.files.types = strings(obj, "type")?;
        request.output = match obj.get("output") {
            None => OutputMode::Content,
            Some(Value::String(s)) => OutputMode::parse(s)
                .ok_or_else(|| invalid("output", "must be `content`, `files` or `count`"))?,
            Some(_) => return Err(invalid("output", "must be a string")),
        };
        request.context.before =
            bounded(obj, "context_before", u64::from(MAX_CONTEXT_LINES))? as u32;
        request.context.after = bounded(obj, "context_after", u64::from(MAX_CONTEXT_LINES))? as u32;
        request.offset = bounded(obj, "offset", MAX_OFFSET as u64)? as usize;
        request.page_token = match obj.get("page_token") {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(invalid("page_token", "must be a string")),
        };
        check_options(&request, self.support(mode))?;
        if let Some(token) = &request.page_token {
            check_page_token(token)?;
        }
        Ok(request)
    }

    /// Runs a call: validate, search, and return the result object as JSON, or `{code, message}`.
    ///
    /// # Cancellation
    ///
    /// Dropping the future abandons the search. To cancel and still get an answer, use
    /// [`RepoSearchTool::call_request`] with a request whose signal you keep.
    pub async fn call(&self, arguments: &Value) -> Result<Value, WireError> {
        let request = self.parse_arguments(arguments).map_err(|e| e.to_wire())?;
        let result = self.call_request(request).await.map_err(|e| e.to_wire())?;
        serde_json::to_value(&result).map_err(|_| IndexError::BackendFailed.to_wire())
    }

    /// Runs an already-built request through the operations, refusing modes this tool does not
    /// expose.
    pub async fn call_request(&self, request: SearchRequest) -> Result<SearchResult, IndexError> {
        if !self.modes.contains(&request.mode) {
            return Err(IndexError::ModeNotAllowed { mode: request.mode });
        }
        self.operations.search(request).await
    }

    /// The tool's listing entry as MCP spells it: name, title, description, input and output
    /// schemas, and the annotations (read-only, closed world).
    pub fn listing(&self) -> Value {
        let mut m = Map::new();
        m.insert("name".into(), TOOL_NAME.into());
        m.insert("title".into(), TOOL_TITLE.into());
        m.insert("description".into(), self.description().into());
        m.insert("inputSchema".into(), self.schema());
        m.insert("outputSchema".into(), self.output_schema());
        m.insert(
            "annotations".into(),
            json!({
                "title": TOOL_TITLE,
                "readOnlyHint": true,
                "destructiveHint": false,
                "idempotentHint": true,
                "openWorldHint": false
            }),
        );
        Value::Object(m)
    }
}

/// An option beyond the query, scope, cap and case: offered in the schema only when an exposed
/// mode honours it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ToolOption {
    Regex,
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
    const ALL: [ToolOption; 11] = [
        ToolOption::Regex,
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
    fn name(self) -> &'static str {
        match self {
            ToolOption::Regex => "regex",
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

    /// The schema's restriction for a mode that does not honour the option: its neutral value.
    fn neutral(self) -> (&'static str, Value) {
        let v = match self {
            ToolOption::Regex | ToolOption::IncludeHidden | ToolOption::IncludeIgnored => {
                json!({ "const": false })
            }
            ToolOption::ExcludeGlob | ToolOption::Glob | ToolOption::Type => {
                json!({ "maxItems": 0 })
            }
            ToolOption::Count => json!({ "enum": ["content", "files"] }),
            ToolOption::ContextBefore | ToolOption::ContextAfter | ToolOption::Offset => {
                json!({ "maximum": 0 })
            }
            ToolOption::PageToken => json!(false),
        };
        (self.name(), v)
    }

    /// The option's property schema.
    fn schema(self) -> Value {
        let list = |what: &str| {
            json!({
                "type": "array",
                "maxItems": MAX_FILE_FILTERS,
                "items": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_PATH_CHARS,
                    "pattern": "^[^\\u0000]*$"
                },
                "description": what
            })
        };
        let context = |side: &str| {
            json!({
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_CONTEXT_LINES,
                "default": 0,
                "description": format!("Lines of context {side} each matching line (ripgrep's -{}), for `output: content`.", if side == "before" { "B" } else { "A" })
            })
        };
        match self {
            ToolOption::Regex => json!({
                "type": "boolean",
                "default": false,
                "description": "Treat `query` as a regular expression in ripgrep's syntax (the Rust regex crate: no look-around or backreferences). Default: a fixed string."
            }),
            ToolOption::ExcludeGlob | ToolOption::Glob => list(
                "ripgrep -g globs on repository-relative paths: a file must match an include glob when there is one; a glob starting with `!` excludes; later globs win. For example [\"*.rs\"] or [\"src/**\", \"!**/*_test.go\"].",
            ),
            ToolOption::Type => list(
                "ripgrep file types (-t): a file must be of one of them, for example [\"rust\"], [\"py\"], [\"c\", \"cpp\"], [\"js\", \"ts\"], [\"go\"], [\"java\"].",
            ),
            ToolOption::IncludeHidden => json!({
                "type": "boolean",
                "default": false,
                "description": "Also search hidden files and directories (ripgrep's --hidden)."
            }),
            ToolOption::IncludeIgnored => json!({
                "type": "boolean",
                "default": false,
                "description": "Also search files that .gitignore and other ignore rules exclude (ripgrep's --no-ignore)."
            }),
            // `output` is always in the schema; `count` only widens its enum.
            ToolOption::Count => json!({ "type": "string" }),
            ToolOption::ContextBefore => context("before"),
            ToolOption::ContextAfter => context("after"),
            ToolOption::Offset => json!({
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_OFFSET,
                "default": 0,
                "description": "Skip this many hits: pass the previous answer's `next_offset` (with its `page_token`) to read the next page."
            }),
            ToolOption::PageToken => json!({
                "type": "string",
                "pattern": "^p1-[0-9a-f]{32}$",
                "description": format!("The previous answer's `page_token`, sent with `offset: next_offset`. If the results changed since that page, the call fails with {} instead of returning a shifted page: start again from offset 0.", ErrorCode::Stale.as_str())
            }),
        }
    }
}

/// A JSON integer (JSON Schema's "integer" admits any number with a zero fractional part, such as
/// 5.0); a negative one is refused here, the upper bound is the caller's to check.
fn integer(v: &Value, argument: &'static str) -> Result<u64, IndexError> {
    let n = match v {
        Value::Number(n) => n
            .as_u64()
            .map(|u| u as f64)
            .or_else(|| n.as_i64().map(|i| i as f64))
            .or_else(|| n.as_f64()),
        _ => None,
    };
    let Some(n) = n.filter(|f| f.is_finite() && f.fract() == 0.0) else {
        return Err(invalid(argument, "must be an integer"));
    };
    if n < 0.0 {
        // Below every minimum the schema sets.
        return Err(IndexError::InvalidArgument {
            argument,
            problem: "is below the minimum the schema advertises",
            code: ErrorCode::Limit,
        });
    }
    Ok(if n >= u64::MAX as f64 {
        u64::MAX
    } else {
        n as u64
    })
}

/// An optional integer argument in `0..=max`, 0 when absent.
fn bounded(obj: &Map<String, Value>, argument: &'static str, max: u64) -> Result<u64, IndexError> {
    let Some(v) = obj.get(argument) else {
        return Ok(0);
    };
    let n = integer(v, argument)?;
    if n > max {
        return Err(IndexError::InvalidArgument {
            argument,
            problem: "is above the maximum the schema advertises",
            code: ErrorCode::Limit,
        });
    }
    Ok(n)
}

/// An optional boolean argument, false when absent.
fn boolean(obj: &Map<String, Value>, argument: &'static str) -> Result<bool, IndexError> {
    match obj.get(argument) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(invalid(argument, "must be true or false")),
    }
}

/// An optional array of non-empty strings without NUL, each within [`MAX_PATH_CHARS`], at most
/// [`MAX_FILE_FILTERS`] of them.
fn strings(obj: &Map<String, Value>, argument: &'static str) -> Result<Vec<String>, IndexError> {
    let Some(v) = obj.get(argument) else {
        return Ok(Vec::new());
    };
    let Value::Array(items) = v else {
        return Err(invalid(argument, "must be an array of strings"));
    };
    if items.len() > MAX_FILE_FILTERS {
        return Err(IndexError::InvalidArgument {
            argument,
            problem: "has more entries than the schema's maxItems",
            code: ErrorCode::Limit,
        });
    }
    items
        .iter()
        .map(|item| match item {
            Value::String(s) if s.is_empty() || s.contains('\0') => Err(invalid(
                argument,
                "has an empty entry or one with a NUL byte",
            )),
            Value::String(s) if s.chars().count() > MAX_PATH_CHARS => {
                Err(IndexError::InvalidArgument {
                    argument,
                    problem: "has an entry longer than the schema's maxLength",
                    code: ErrorCode::Limit,
                })
            }
            Value::String(s) => Ok(s.clone()),
            _ => Err(invalid(argument, "must be an array of strings")),
        })
        .collect()
}

fn invalid(argument: &'static str, problem: &'static str) -> IndexError {
    IndexError::InvalidArgument {
        argument,
        problem,
        code: ErrorCode::Unsupported,
    }
}
