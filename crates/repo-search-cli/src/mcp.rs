//! `repo-search mcp`: the `repo_search` tool over MCP on stdio, with `rmcp`.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;

use crate::failure::Failure;
use crate::host::Host;

struct Server {
    host: Arc<Host>,
}

impl Server {
    fn tool(&self) -> Tool {
        let schema = match self.host.tool.schema() {
            Value::Object(m) => m,
            _ => serde_json::Map::new(),
        };
        let output = match self.host.tool.output_schema() {
            Value::Object(m) => m,
            _ => serde_json::Map::new(),
        };
        // Hints for the client: the tool only reads the worktree, and sees nothing beyond it.
        let annotations = ToolAnnotations::with_title(repo_search_tool::TOOL_TITLE)
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(false);
        Tool::new(
            repo_search_tool::TOOL_NAME,
            self.host.tool.description(),
            Arc::new(schema),
        )
        .with_title(repo_search_tool::TOOL_TITLE)
        .with_raw_output_schema(Arc::new(output))
        .with_annotations(annotations)
    }

    /// Runs a call. Index queries refresh the index first, as the CLI does; a refresh that fails
    /// answers with the failure's own code and a fixed message.
    async fn call(&self, arguments: Value) -> CallToolResult {
        match crate::answer(&self.host, &arguments).await {
            Ok(v) => CallToolResult::structured(v),
            Err(failure) => CallToolResult::structured_error(failure.to_json()),
        }
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "repo-search",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "repo_search searches this repository like ripgrep: fixed strings or regexes, \
                 narrowed by path, glob and file type. Use mode indexed_literal for fast ranked \
                 file hits, literal for every matching line; page with offset and page_token.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![self.tool()]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != repo_search_tool::TOOL_NAME {
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{}`", request.name),
                None,
            ));
        }
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        Ok(self.call(arguments).await.into())
    }
}

/// Serves until the client closes stdin. Lines go through [`crate::stdio`], which answers the
/// ones `rmcp` would drop.
pub(crate) async fn serve(host: Host) -> Result<(), Failure> {
    let server = Server {
        host: Arc::new(host),
    };
    let (transport, stdio) = crate::stdio::start();
    let served = match server.serve(transport).await {
        Ok(running) => running.waiting().await.map(drop).map_err(|_| Failure::Mcp),
        Err(_) => Err(Failure::Mcp),
    };
    stdio.finish();
    served
}
