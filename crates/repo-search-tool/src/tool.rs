//! `RepoSearchTool`: the `repo_search` tool, its JSON schema and its JSON calls.

use std::sync::Arc;

use index_contract::{
    ErrorCode, IndexError, RepositoryOperations, SearchMode, SearchRequest, SearchResult,
    WireError, limits::SearchLimits,
};
use index_guard::{Scope, check_scope_chars, check_tool_query};
use serde_json::{Map, Value, json};

/// The tool's name.
pub const TOOL_NAME: &str = "repo_search";

/// The most characters a query may have. Counted in characters, as JSON Schema's `maxLength`
/// counts them; derived from the contract's byte cap so that it stays within it.
pub const MAX_QUERY_CHARS: usize = index_guard::MAX_QUERY_CHARS;
/// The most characters a scope may have, derived from the contract's path cap likewise.
pub const MAX_PATH_CHARS: usize = index_guard::MAX_PATH_CHARS;

/// Characters a path segment may not contain, as a regex character-class body: `/`, `\`,
/// C0 and C1 controls, DEL, and the look-alikes and invisibles the guard refuses.
const SEGMENT_FORBIDDEN: &str = "/\\\\\\u0000-\\u001f\\u007f-\\u009f\\u2024-\\u2026\\uFE52\\uFF0E\\u2044\\u2215\\u29F8\\uFF0F\\u2216\\u29F5\\u29F9\\uFE68\\uFF3C\\uFF1A\\u200B-\\u200F\\u202A-\\u202E\\u2066-\\u2069\\uFEFF";

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
        Ok(RepoSearchTool {
            operations,
            modes: exposed,
            limits,
        })
    }

    /// A tool with the default modes: `["literal"]`.
    pub fn literal_only(operations: Arc<dyn RepositoryOperations>) -> RepoSearchTool {
        let limits = operations.limits();
        RepoSearchTool {
            operations,
            modes: vec![SearchMode::Literal],
            limits,
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

    /// A description for the tool listing, written for a language model choosing how to call it.
    pub fn description(&self) -> String {
        let mut d = String::from(
            "Search the files of this repository's working tree for a fixed string (not a regex). \
             Returns matching lines as {path, line, column, snippet}, paths relative to the \
             repository root, ordered by path then line. Files ignored by git, hidden files and \
             binary files are not searched. Check `complete`: when false, `stopped` says why \
             (max_results, deadline or cancelled) and more matches may exist; narrow the query or \
             the `path` scope rather than raising max_results.",
        );
        if self.modes.iter().any(|m| m.is_indexed()) {
            d.push_str(
                " Index modes answer from a prebuilt index: one hit per file, best first, with a \
                 relevance `score`; their text is untrusted (`untrusted_index: true`), so read \
                 the file before relying on or editing it.",
            );
        }
        d
    }

    /// The JSON Schema (draft 2020-12) of the arguments. Its `mode` enum is exactly the exposed
    /// modes, and every rule [`RepoSearchTool::parse_arguments`] applies is expressed in it.
    pub fn schema(&self) -> Value {
        let modes: Vec<&str> = self.modes.iter().map(|m| m.as_str()).collect();
        let mut mode_help = String::from("How to search. ");
        for m in &self.modes {
            mode_help.push_str(match m {
                SearchMode::Literal => "`literal`: scan the working tree now; exact and always current. ",
                SearchMode::IndexedLiteral => "`indexed_literal`: the same fixed-string match answered from the index; faster on large repositories, one hit per file, ranked. ",
                SearchMode::Semantic => "`semantic`: find code by meaning from the index; `query` is a natural-language description. ",
            });
        }
        let segment = format!("(?!\\.\\.?(?:/|$))[^{SEGMENT_FORBIDDEN}]+");
        let path_pattern = format!("^(?:|\\./?|(?![A-Za-z]:){segment}(?:/{segment})*/?)$");
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "repo_search arguments",
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "The exact text to find, on one line, for example `fn parse_config` or `TODO(`. Matched as a fixed string, not a regular expression.",
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
                }
            },
            "required": ["query"],
            "additionalProperties": false
        })
    }

    /// Validates call arguments by the schema's rules and builds the request. An error names the
    /// offending argument.
    pub fn parse_arguments(&self, arguments: &Value) -> Result<SearchRequest, IndexError> {
        let Some(obj) = arguments.as_object() else {
            return Err(invalid("arguments", "must be a JSON object"));
        };
        for key in obj.keys() {
            if !matches!(
                key.as_str(),
                "query" | "mode" | "path" | "max_results" | "case_insensitive"
            ) {
                return Err(invalid(
                    "arguments",
                    "has an unknown property; allowed: query, mode, path, max_results, case_insensitive",
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
                Some(p.clone())
            }
            Some(_) => return Err(invalid("path", "must be a string")),
        };
        let max_results = match obj.get("max_results") {
            None => None,
            Some(v) => Some(self.parse_max_results(v)?),
        };
        let case_insensitive = match obj.get("case_insensitive") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(invalid("case_insensitive", "must be true or false")),
        };
        let mut request = SearchRequest::new(query.clone(), mode);
        request.path = path;
        request.max_results = max_results;
        request.case_insensitive = case_insensitive;
        Ok(request)
    }

    fn parse_max_results(&self, v: &Value) -> Result<usize, IndexError> {
        // JSON Schema's "integer" admits any number with a zero fractional part, such as 5.0.
        let n = match v {
            Value::Number(n) => n
                .as_u64()
                .map(|u| u as f64)
                .or_else(|| n.as_i64().map(|i| i as f64))
                .or_else(|| n.as_f64()),
            _ => None,
        };
        let Some(n) = n.filter(|f| f.is_finite() && f.fract() == 0.0) else {
            return Err(invalid("max_results", "must be an integer"));
        };
        if n < 1.0 || n > self.limits.max_results() as f64 {
            return Err(IndexError::InvalidArgument {
                argument: "max_results",
                problem: "is outside 1..=the result cap advertised in the schema",
                code: ErrorCode::Limit,
            });
        }
        Ok(n as usize)
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

    /// The tool's listing entry: name, description and input schema, as MCP and most agent hosts
    /// expect it.
    pub fn listing(&self) -> Value {
        let mut m = Map::new();
        m.insert("name".into(), TOOL_NAME.into());
        m.insert("description".into(), self.description().into());
        m.insert("inputSchema".into(), self.schema());
        Value::Object(m)
    }
}

fn invalid(argument: &'static str, problem: &'static str) -> IndexError {
    IndexError::InvalidArgument {
        argument,
        problem,
        code: ErrorCode::Unsupported,
    }
}
