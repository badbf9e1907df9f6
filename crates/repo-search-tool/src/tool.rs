//! `RepoSearchTool`: a [`ToolSpec`] over the [`RepositoryOperations`] that answer its calls.

use std::sync::Arc;

use index_contract::{
    IndexError, RepositoryOperations, SearchMode, SearchRequest, SearchResult, WireError,
};
use serde_json::Value;

use crate::spec::ToolSpec;

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
    spec: ToolSpec,
}

impl std::fmt::Debug for RepoSearchTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RepoSearchTool")
            .field("spec", &self.spec)
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
        let spec = ToolSpec::of_operations(operations.as_ref(), modes)?;
        Ok(RepoSearchTool { operations, spec })
    }

    /// A tool with the default modes: `["literal"]`.
    pub fn literal_only(operations: Arc<dyn RepositoryOperations>) -> RepoSearchTool {
        let spec = ToolSpec::literal_only(operations.as_ref());
        RepoSearchTool { operations, spec }
    }

    /// What the tool exposes: its modes, caps and the index's declared capabilities.
    pub fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// The exposed modes.
    pub fn modes(&self) -> &[SearchMode] {
        self.spec.modes()
    }

    /// The mode used when a call names none: `literal` when exposed, else the first exposed mode.
    pub fn default_mode(&self) -> SearchMode {
        self.spec.default_mode()
    }

    /// A description for the tool listing ([`ToolSpec::description`]).
    pub fn description(&self) -> String {
        self.spec.description()
    }

    /// The JSON Schema of the arguments ([`ToolSpec::schema`]).
    pub fn schema(&self) -> Value {
        self.spec.schema()
    }

    /// The JSON Schema of a successful answer ([`ToolSpec::output_schema`]).
    pub fn output_schema(&self) -> Value {
        self.spec.output_schema()
    }

    /// The tool's listing entry as MCP spells it ([`ToolSpec::listing`]).
    pub fn listing(&self) -> Value {
        self.spec.listing()
    }

    /// Validates call arguments and builds the request ([`ToolSpec::parse_arguments`]).
    pub fn parse_arguments(&self, arguments: &Value) -> Result<SearchRequest, IndexError> {
        self.spec.parse_arguments(arguments)
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
        if !self.spec.modes().contains(&request.mode) {
            return Err(IndexError::ModeNotAllowed { mode: request.mode });
        }
        self.operations.search(request).await
    }
}
